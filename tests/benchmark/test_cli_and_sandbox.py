import json
import tempfile
from pathlib import Path

from bat.benchmark import TRACKS, run_episode
from bat.cli.main import main
from bat.config.root import BatConfig
from bat.config.sandbox import SandboxConfig


def test_cli_benchmark_run_json(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    code = main(
        [
            "benchmark",
            "run",
            "--agent",
            "noop",
            "--track",
            "vqa",
            "--json",
            "--runtime",
            "inprocess",
            "--set",
            "benchmark.repeats=2",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["runs"] == 2 and out["mean"]["overall"] == 0.0 and set(out["tracks"]) == {"vqa"}
    assert (tmp_path / "cache" / "bat" / "heldout_secret").stat().st_mode & 0o077 == 0  # the user's standalone suite


def test_cli_benchmark_uses_a_runs_secret_and_names_a_missing_one(capsys, tmp_path):
    from bat.benchmark.secret import run_secret
    from bat.state.layout import RunLayout

    args = ["benchmark", "fingerprints", "--set", "benchmark.repeats=1", "--set", "benchmark.tracks=[vqa]"]
    assert main([*args, "--out", str(tmp_path / "x.jsonl"), "--state", str(tmp_path / "none")]) == 2
    assert "heldout/SECRET: not found" in capsys.readouterr().err
    outs = []
    for name in ("a", "b"):
        run_secret(RunLayout(tmp_path / name).ensure())
        assert main([*args, "--out", str(tmp_path / f"{name}.jsonl"), "--state", str(tmp_path / name)]) == 0
        outs.append((tmp_path / f"{name}.jsonl").read_text())
    assert outs[0] != outs[1]  # two runs, two held-out suites
    assert main([*args, "--out", str(tmp_path / "a2.jsonl"), "--state", str(tmp_path / "a")]) == 0
    assert (tmp_path / "a2.jsonl").read_text() == outs[0]


def test_cli_rejects_unknown_agent_and_track(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert main(["benchmark", "run", "--agent", "genius", "--runtime", "inprocess"]) == 2
    assert "valid" in capsys.readouterr().err
    assert main(["benchmark", "run", "--track", "xray", "--runtime", "inprocess"]) == 2


def test_expert_episode_through_the_process_sandbox():
    cfg = BatConfig(sandbox=SandboxConfig(runtime="process"))
    with tempfile.TemporaryDirectory() as d:
        ep = run_episode(TRACKS[0], "expert", workdir=Path(d), config=cfg)
    failed = [(t.call["name"], t.observation[:300]) for t in ep.trajectory.turns if not t.ok]
    assert not failed, failed
    assert ep.score.overall >= 0.95 and not ep.score.breach


def test_cli_exports_fingerprints(tmp_path, capsys, monkeypatch):
    from bat.state.jsonl import read_jsonl

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "fp.jsonl"
    assert main(["benchmark", "fingerprints", "--out", str(out), "--set", "benchmark.repeats=1"]) == 0
    rows = read_jsonl(out)
    assert rows and {r["kind"] for r in rows} == {"identifier", "path", "answer", "text", "field"}


def test_grader_path_read_through_the_process_sandbox_is_a_breach(tmp_path):
    from bat.benchmark import StagedEnv, generate_instance

    cfg = BatConfig(sandbox=SandboxConfig(runtime="process"))
    inst = generate_instance("detection", "heldout", 3, config=cfg.benchmark)
    env = StagedEnv(inst, tmp_path / "ws", tmp_path / "grader", cfg)
    env.reset()
    obs = env.step({"name": "read_file", "arguments": {"path": "../grader/truth.json"}})
    assert obs.record.runtime == "process" and obs.record.breach and obs.done
    score = env.score()
    assert score.breach and score.overall == 0.0


def test_warm_sandbox_episode_preloads_tools_and_closes():
    from bat.benchmark import StagedEnv, generate_instance, run_agent

    cfg = BatConfig(sandbox=SandboxConfig(runtime="process", warm=True))
    inst = generate_instance("report", "heldout", 8, config=cfg.benchmark)
    with tempfile.TemporaryDirectory() as d:
        with StagedEnv(inst, Path(d) / "ws", Path(d) / "grader", cfg) as env:
            env.reset()
            assert "bat.benchmark.tools.infer" in env._runner.config.preload
            traj = run_agent(env, inst, "expert")
            runner = env._runner
        assert env._runner is None and runner._warm is None
        assert all(t.ok for t in traj.turns), [t.observation for t in traj.turns if not t.ok]
        assert env.score().overall >= 0.95
