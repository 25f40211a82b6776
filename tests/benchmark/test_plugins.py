"""The staged-benchmark interface: the registry, `bat benchmark list/check`, the shipped plug-ins and a broken one."""

from __future__ import annotations

import ast
import json
import re
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from bat.benchmark.conformance import check
from bat.benchmarks.sqlqa import SqlQA
from bat.cli.main import main
from bat.config.root import BatConfig
from bat.staged import registry
from bat.staged.interface import Score, Step, play

ROOT = Path(__file__).resolve().parents[2]


def test_list_json_shows_both_shapes(capsys):
    assert main(["benchmark", "list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["builtin"]["stages"] == ["S1", "S2", "S3", "S4", "S5"]
    assert len(rows["builtin"]["tracks"]) == 7
    assert rows["sqlqa"]["stages"] == ["inspect", "draft", "validate", "submit"]
    assert rows["sqlqa"]["tracks"] == ["count", "total", "join"]


@pytest.mark.parametrize("args", [["sqlqa"], ["builtin", "--runtime", "inprocess"]])
def test_check_passes_on_the_shipped_benchmarks(args, capsys):
    assert main(["benchmark", "check", *args]) == 0
    assert "conforms" in capsys.readouterr().out


class BrokenSqlQA(SqlQA):
    """Held-out tasks ignore the secret (so they equal practice tasks), a call with no stage, and grading that pays
    a run that did nothing."""

    name = "broken"

    def tasks(self, split, *, seed, count=None, secret=None):
        return [
            type(t)(t.task_id, t.track, split, t.seed, t.fingerprint, t.repeat, t.data)
            for t in super().tasks("practice", seed=seed, count=count)
        ]

    def open(self, task, workdir, *, state=None):
        env = super().open(task, workdir, state=state)
        step, score = env.step, env.score

        def off_stage(action):
            out = step(action)
            return Step(out.observation, "S9" if out.stage == "inspect" else out.stage, out.ok, out.done, out.info)

        def generous():
            s = score()
            return Score({**s.stages, "inspect": 1.0}, s.items, s.task, s.agentic, 0.15 + (s.overall or 0.0))

        env.step, env.score = off_stage, generous
        return env


def test_check_names_every_failure_of_a_broken_benchmark(capsys):
    registry.register("broken", BrokenSqlQA)
    try:
        assert main(["benchmark", "check", "broken"]) == 2
    finally:
        registry.unregister("broken")
    lines = capsys.readouterr().err.strip().splitlines()
    assert all(line.startswith("bat benchmark check broken: ") for line in lines)
    text = "\n".join(lines)
    assert "do not depend on the secret" in text
    assert "equal practice tasks" in text
    assert "turns attributed to ['S9']" in text
    assert "a no-op agent (no call) scores Overall 0.15" in text


def test_check_reports_a_benchmark_that_raises(capsys):
    class Raising(SqlQA):
        def tools(self):
            raise RuntimeError("tool table missing")

    registry.register("raising", Raising)
    try:
        assert main(["benchmark", "check", "raising"]) == 2
    finally:
        registry.unregister("raising")
    assert "raised RuntimeError: tool table missing" in capsys.readouterr().err


def test_registry_finds_entry_points_and_lists_valid_names(monkeypatch):
    ep = EntryPoint(name="viaep", value="bat.benchmarks.sqlqa:SqlQA", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [ep] if group == registry.ENTRY_POINT_GROUP else [])
    assert "viaep" in registry.names()
    assert isinstance(registry.load("viaep"), SqlQA)
    with pytest.raises(registry.UnknownBenchmarkError, match=r"valid: \['builtin', 'sqlqa', 'viaep'\]"):
        registry.load("nope")


def test_pyproject_declares_the_shipped_benchmarks_as_entry_points():
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split('[project.entry-points."bat.benchmarks"]\n', 1)[1].split("\n[", 1)[0]
    declared = dict(re.findall(r'^(\w+) = "([^"]+)"$', section, re.MULTILINE))
    assert declared == registry.SHIPPED


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
    return names


def test_shipped_plugins_import_only_the_interface():
    files = sorted((ROOT / "bat" / "benchmarks").rglob("*.py"))
    assert len(files) >= 4
    for path in files:
        for name in _imports(path):
            top = name.split(".")[0]
            own = name.startswith("bat.benchmarks")
            allowed = own or name == "bat.staged.interface" or top in sys.stdlib_module_names or top == "__future__"
            assert allowed, f"{path.relative_to(ROOT)} imports {name}; a plug-in may import only the interface"


def test_config_selects_a_benchmark_by_name():
    cfg = BatConfig.model_validate({"benchmark": {"name": "sqlqa", "tracks": ["count", "join"]}})
    assert registry.from_config(cfg).name == "sqlqa"
    assert cfg.stage_keys == ("inspect", "draft", "validate", "submit")
    assert cfg.curriculum.gate.late_stages == ("validate", "submit")
    assert BatConfig.model_validate({"benchmark": {"name": "sqlqa"}}).benchmark.tracks == ("count", "total", "join")
    with pytest.raises(ValueError, match=r"unknown benchmark 'nope'; valid: \['builtin', 'sqlqa'\]"):
        BatConfig.model_validate({"benchmark": {"name": "nope"}})
    with pytest.raises(ValueError, match=r"unknown tracks \['count'\]"):
        BatConfig.model_validate({"benchmark": {"tracks": ["count"]}})


def test_builtin_plugin_gives_the_same_instances_and_scores(fast_config, tmp_path):
    """Same seeds, same instances and the same RunScore as the code under it (so bank digests and scores hold)."""
    from bat.benchmark import heldout_suite, practice_instance, practice_seed, suite_instance
    from bat.benchmark.episode import run_instance
    from bat.benchmark.plugin import BuiltinBenchmark
    from bat.benchmark.secret import HeldoutSecret

    bench, bcfg = BuiltinBenchmark(fast_config), fast_config.benchmark
    practice = bench.tasks("practice", seed=bcfg.practice_seed, count=2)
    assert [t.task_id for t in practice] == [
        practice_instance(tr, practice_seed(tr, i, fast_config), fast_config).instance_id
        for tr in bcfg.tracks
        for i in range(2)
    ]
    secret = HeldoutSecret("ab" * 32)
    heldout = bench.tasks("final", seed=bcfg.heldout_seed, secret=secret.key)
    assert [t.task_id for t in heldout] == [
        suite_instance(r, fast_config).instance_id for r in heldout_suite(fast_config, "final", secret=secret)
    ]
    task = practice[2]
    with bench.open(task, tmp_path / "plugin") as env:
        play(env, bench.agent(task, "recovery"))
        score = env.score()
    direct = run_instance(task.data, "recovery", tmp_path / "direct", fast_config, run_id=task.task_id)
    assert score.details["run_score"].model_dump() == direct.score.model_dump()
    assert score.overall == direct.score.overall


def test_sqlqa_expert_is_short_and_a_restored_state_continues(tmp_path):
    bench = SqlQA()
    tasks = bench.tasks("practice", seed=11, count=3)
    for task in tasks:
        with bench.open(task, tmp_path / task.task_id) as env:
            steps = play(env, bench.agent(task))
            assert len(steps) <= 8 and env.score().overall == 1.0
    task = next(t for t in tasks if t.track == "join")
    with bench.open(task, tmp_path / "prefix") as env:
        agent = bench.agent(task)
        play(env, agent, 4)
        state = env.snapshot()
    assert state.stage == "draft" and "draft.sql" in state.files
    with bench.open(task, tmp_path / "restored", state=state) as env:
        observation = env.reset()
        while (action := agent(observation)) is not None:
            observation = env.step(action).observation
        assert env.score().stages == {"inspect": 1.0, "draft": 1.0, "validate": 1.0, "submit": 1.0}


def test_sqlqa_heldout_tasks_come_from_the_secret_and_are_fingerprinted():
    bench = SqlQA()
    a = bench.tasks("controller", seed=1, secret="aa" * 32)
    b = bench.tasks("controller", seed=1, secret="bb" * 32)
    practice = bench.tasks("practice", seed=1)
    assert {t.fingerprint for t in a}.isdisjoint({t.fingerprint for t in b} | {t.fingerprint for t in practice})
    words = {w for t in practice for w in t.data["full_sql"].split()}
    assert not {"patients", "stations"} & words, "practice databases use only the practice vocabulary"
    values = {e["value"] for e in bench.fingerprints("aa" * 32, seed=1)}
    assert {t.task_id for t in a} <= values
    assert {t.data["question"] for t in a} <= values


def test_sqlqa_bad_calls_are_error_observations(tmp_path):
    bench = SqlQA()
    task = bench.tasks("practice", seed=2, count=1)[0]
    with bench.open(task, tmp_path) as env:
        env.reset()
        for action in (
            {"name": "run_query", "arguments": {"sql": "DROP TABLE x"}},
            {"name": "run_query", "arguments": {}},
            {"name": "describe_table", "arguments": {"table": "nope"}},
            {"invalid": True, "reason": "no_call"},
        ):
            step = env.step(action)
            assert not step.ok and step.observation.startswith("Error") and step.stage in ("inspect", "validate")
    assert check(bench, tmp_path / "check", seed=3) == []


def test_heldout_runs_through_the_interface_equal_run_suite_on_the_builtin(fast_config):
    from bat.benchmark import aggregate, run_suite
    from bat.benchmark.heldout_runs import run_heldout
    from bat.benchmark.plugin import BuiltinBenchmark
    from bat.benchmark.secret import HeldoutSecret

    secret = HeldoutSecret("cd" * 32)
    tracks = ("detection", "vqa")
    direct = run_suite("skip-validate", fast_config, secret=secret, split="final", tracks=tracks)
    bench, seed = BuiltinBenchmark(fast_config), fast_config.benchmark.heldout_seed
    through = run_heldout(bench, "skip-validate", split="final", seed=seed, secret=secret.key, tracks=tracks)
    assert [r.run_id for r in through] == [s.run_id for s in direct]
    assert [r.score.details["run_score"].stages for r in through] == [s.stages for s in direct]
    assert aggregate(through) == aggregate(direct)


def test_cli_runs_and_fingerprints_a_plugin_benchmark(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path))
    args = ["benchmark", "run", "--benchmark", "sqlqa", "--split", "test", "--json"]
    assert main([*args, "--agent", "expert"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["benchmark"] == "sqlqa" and out["runs"] == 15 and out["mean"]["overall"] == 100.0
    assert set(out["tracks"]) == {"count", "total", "join"}
    assert main([*args, "--agent", "failure"]) == 0
    assert json.loads(capsys.readouterr().out)["mean"]["overall"] < 100.0
    assert main(["benchmark", "run", "--benchmark", "sqlqa", "--agent", "skip-validate"]) == 2
    assert "valid: ['expert', 'noop', 'recovery', 'failure']" in capsys.readouterr().err
    out_file = tmp_path / "fp.jsonl"
    assert main(["benchmark", "fingerprints", "--out", str(out_file), "--set", "benchmark.name=sqlqa"]) == 0
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert len(rows) == 3 * 3 * 15 and {r["kind"] for r in rows} == {"identifier", "text", "answer"}


def test_sft_rows_from_a_plugin_benchmarks_expert(tmp_path, capsys):
    out = tmp_path / "rows"
    assert main(["benchmark", "sft-rows", "sqlqa", "--out", str(out), "--count", "3", "--seed", "4"]) == 0
    rows = [
        json.loads(line)
        for split in ("train", "validation")
        for line in (out / f"{split}.jsonl").read_text().split("\n")
        if line
    ]
    assert {r["stage"] for r in rows} == {"inspect", "draft", "validate", "submit"}
    assert all(r["target"].startswith("<tool_call>") and r["outcome"] == "success" for r in rows)
    assert {r["split"] for r in rows} == {"train", "validation"} and len({r["trajectory_id"] for r in rows}) == 9
    first = next(r for r in rows if r["turn"] == 0)
    assert "## Stage validate (Validate)" in first["messages"][0]["content"]  # every stage's skill, as evaluation
    assert main(["benchmark", "sft-rows", "sqlqa", "--out", str(out)]) == 2
    assert "never overwritten" in capsys.readouterr().err
