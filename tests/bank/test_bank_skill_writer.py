"""LLM stage-skill writer (paper §2.3) over a real local OpenAI-compatible server: rewrites from aggregates only,
versioned with the bank, validated replies with counted fallbacks, the static default untouched."""

import json

import pytest
from fake_openai import ChatServer, chat_reply

from bat.bank.skill_writer import FALLBACK_REASONS, parse_reply
from bat.bank.synthesize import fingerprint, refreshed_config, synthesize
from bat.benchmark import STAGE_SKILLS, prompts
from bat.config import load_config
from bat.config.load import ConfigError
from bat.evaluate.store import write_aggregate
from bat.schemas.evaluation import EvalAggregate, NullCell, TrackAggregate
from bat.state.layout import RunLayout

SMALL = [
    "bank.tracks=[classification]",
    "bank.tasks_per_track=1",
    "bank.e2e_per_track=0",
    "bank.outcomes=[success]",
    "benchmark.runtime=inprocess",
    "leakage.enabled=false",
]
KEYS = ["S1", "S2", "S3", "S4", "S5"]
PLANTED = ("ckpt-planted-name", "sha256:planted-manifest", "planted-null-reason", "planted-suite")
"""Non-numeric aggregate fields that must never reach the endpoint."""


def _aggregate(layout: RunLayout) -> None:
    stages = {"S1": 0.9, "S2": 0.8, "S3": 0.2, "S4": 0.7, "S5": 0.6}
    track = TrackAggregate(
        track="classification", n_runs=2, n_null=1, stages=stages, task=0.4, agentic=0.5, overall=0.45
    )
    agg = EvalAggregate(
        round=0, split="controller", checkpoint=PLANTED[0], checkpoint_digest="d", suite_version=PLANTED[3],
        harness_version="h", manifest_digest=PLANTED[1], stage_keys=KEYS, stages=stages, task=0.4, agentic=0.5,
        overall=0.45, half_widths={}, tracks={"classification": track}, n_runs=2, routable=True,
        null_cells=[NullCell(track="classification", repeat=1, field="S2", reason=PLANTED[2])],
    )  # fmt: skip
    write_aggregate(layout, agg)


def _reply(stage: str, skill: str) -> dict:
    return chat_reply(json.dumps({"stage": stage, "skill": skill}))


def _llm(server: ChatServer, *extra: str):
    return load_config(None, [*SMALL, "bank.skill_writer=llm", f"bank.skill_llm.base_url={server.url}", *extra])


def test_refresh_with_aggregates_carries_rewritten_skills_in_rows_file_and_manifest(tmp_path):
    layout = RunLayout(tmp_path / "run").ensure()
    _aggregate(layout)
    rewritten = {k: f"Rewritten {k}: pilot first, check the output, fix and pilot again." for k in KEYS}
    server = ChatServer([_reply(k, f"  {rewritten[k]}\n") for k in KEYS])
    try:
        cfg = _llm(server)
        bank, reused = synthesize(cfg, layout, refresh=1)
        again, reused_again = synthesize(cfg, layout, refresh=1)  # the same request is answered by the version
    finally:
        server.close()
    assert not reused and reused_again and again.version == bank.version
    assert len(server.requests) == len(KEYS)
    names = {s.key: s.name for s in cfg.stages}
    rows = {r.stage: r for r in bank.rows()}
    for key in KEYS:
        assert rows[key].skill == prompts.skill_text(key, rewritten, names)
        assert rows[key].prompt[0].content.endswith(rewritten[key])
    assert all(
        rewritten[r.stage] in r.messages[0].content for r in bank.sft_rows("train") + bank.sft_rows("validation")
    )
    stored = json.loads(bank.files.skills.read_text())
    assert stored["stages"] == {k: {"text": rewritten[k], "source": "rewritten"} for k in KEYS}
    manifest = bank.manifest()
    assert "skills.json" in manifest.digests
    record = manifest.config["skills"]
    assert record["writer"] == "llm" and record["source_round"] == 0
    assert record["rewritten"] == KEYS and record["fallbacks_by_reason"] == {}
    assert record["stages"]["S3"] == {"source": "llm", "reason": None}
    assert manifest.config["bank"]["skills"] == rewritten
    assert manifest.fingerprint != fingerprint(refreshed_config(load_config(None, SMALL), 1))


def test_requests_carry_aggregate_numbers_only(tmp_path):
    layout = RunLayout(tmp_path / "run").ensure()
    _aggregate(layout)
    server = ChatServer([_reply(k, f"Rewritten {k}.") for k in KEYS])
    try:
        bank, _ = synthesize(_llm(server), layout, refresh=1)
    finally:
        server.close()
    held_or_task = [*PLANTED, *(t.task_id for t in bank.tasks()), *(t.brief[:60] for t in bank.trajectories())]
    for request, key in zip(server.requests, KEYS):
        raw = json.dumps(request.body)
        assert not [s for s in held_or_task if s in raw]
        system, user = request.body["messages"]
        assert system["role"] == "system" and user["role"] == "user"
        body = json.loads(user["content"])
        assert set(body) == {"stage", "stage_name", "stage_order", "current_skill", "max_chars", "scores"}
        assert body["stage"] == key and body["current_skill"] == STAGE_SKILLS[key]  # the public text it rewrites
        scores = body["scores"]
        assert scores["stages"]["S3"] == 0.2 and scores["tracks"]["classification"]["n_null"] == 1

        def leaves(value):
            if isinstance(value, dict):
                return [x for v in value.values() for x in leaves(v)]
            return [value]

        assert all(v is None or isinstance(v, (int, float)) for v in leaves(scores))
        assert set(scores["tracks"]) == {"classification"}


def test_unusable_replies_keep_the_static_text_and_count_the_reason(tmp_path):
    layout = RunLayout(tmp_path / "run").ensure()
    _aggregate(layout)
    replies = [
        chat_reply("Here is a better skill: pilot first."),  # S1 not_json
        _reply("S9", "A skill for a stage that does not exist."),  # S2 unknown_stage
        _reply("S3", "   "),  # S3 empty
        _reply("S4", "x" * 101),  # S4 too_long (cap 100)
        b"not a completion",  # S5 endpoint_error (no retries)
    ]
    server = ChatServer(replies)
    try:
        cfg = _llm(server, "bank.skill_llm.max_chars=100", "bank.skill_llm.retries=0")
        bank, _ = synthesize(cfg, layout, refresh=1)
    finally:
        server.close()
    record = bank.manifest().config["skills"]
    assert record["fallbacks_by_reason"] == {
        "empty": 1,
        "endpoint_error": 1,
        "not_json": 1,
        "too_long": 1,
        "unknown_stage": 1,
    }
    assert record["rewritten"] == [] and record["stages"]["S4"] == {"source": "static", "reason": "too_long"}
    names = {s.key: s.name for s in cfg.stages}
    assert {r.stage: r.skill for r in bank.rows()} == {k: prompts.skill_text(k, STAGE_SKILLS, names) for k in KEYS}
    assert not bank.files.skills.exists()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"skill": "Pilot first."}', "missing_field"),
        ('{"stage": "S3", "skill": 3}', "missing_field"),
        ('["S3", "Pilot first."]', "not_json"),
        ('{"stage": "S2", "skill": "Pilot first."}', "stage_mismatch"),
        ('{"stage": "E2E", "skill": "Pilot first."}', "unknown_stage"),
    ],
)
def test_parse_reply_names_the_reason(text, reason):
    assert parse_reply(text, "S3", KEYS, 100) == (None, reason)
    assert reason in FALLBACK_REASONS


def test_parse_reply_accepts_a_fenced_json_object():
    text = '```json\n{"stage": "S3", "skill": " Pilot first. "}\n```'
    assert parse_reply(text, "S3", KEYS, 100) == ("Pilot first.", None)


def test_without_aggregates_the_llm_writer_keeps_static_skills_and_asks_nothing(tmp_path):
    layout = RunLayout(tmp_path / "run").ensure()
    server = ChatServer([])
    try:
        cfg = _llm(server)
        boot, _ = synthesize(cfg, layout, refresh=0)
        refresh, _ = synthesize(cfg, layout, refresh=1)  # no controller aggregate written yet
    finally:
        server.close()
    assert server.requests == []
    for bank in (boot, refresh):
        assert bank.manifest().config["skills"] == {
            "writer": "llm",
            "source_round": None,
            "kept_static": "no_aggregates",
        }
        assert not bank.files.skills.exists()
    static = load_config(None, SMALL)
    assert boot.manifest().fingerprint == fingerprint(static)
    assert refresh.manifest().fingerprint == fingerprint(refreshed_config(static, 1))


def test_static_default_leaves_fingerprint_rows_and_files_as_they_were(tmp_path):
    static = load_config(None, SMALL)
    assert static.bank.skill_writer == "static" and static.bank.skills == {}
    other_endpoint = load_config(None, [*SMALL, "bank.skill_llm.model=other", "bank.skill_llm.max_chars=99"])
    assert fingerprint(other_endpoint) == fingerprint(static)  # endpoint knobs act only through bank.skills
    layout = RunLayout(tmp_path / "run").ensure()
    _aggregate(layout)
    bank, _ = synthesize(static, layout, refresh=1)
    assert "skills" not in bank.manifest().config and not bank.files.skills.exists()
    names = {s.key: s.name for s in static.stages}
    assert {r.stage: r.skill for r in bank.rows()} == {k: prompts.skill_text(k, STAGE_SKILLS, names) for k in KEYS}
    with_skills = load_config(None, [*SMALL, "bank.skills={S3: Pilot first.}"])
    assert fingerprint(with_skills) != fingerprint(static)


def test_bank_skills_must_name_configured_stages():
    with pytest.raises(ConfigError, match=r"bank.skills has stage keys \['S9'\].*valid keys: \['S1'"):
        load_config(None, ["bank.skills={S9: Pilot first.}"])


def test_a_rewritten_skill_copying_heldout_content_gets_the_version_rejected(tmp_path):
    from bat.config.leakage import LeakageConfig
    from bat.leakage import LeakageRejected, is_admitted, read_report, save_index
    from bat.leakage.index import build_index
    from bat.leakage.phase import run_scan
    from bat.phase.context import PhaseContext

    layout = RunLayout(tmp_path / "run").ensure()
    save_index(
        build_index([("identifier", "orion-det-0042", "heldout:detection:0")], LeakageConfig()),
        layout.fingerprint_index,
    )
    _aggregate(layout)
    replies = [
        _reply(k, f"Rewritten {k}." + (" Reuse the layout of orion-det-0042." if k == "S3" else "")) for k in KEYS
    ]
    server = ChatServer(replies)
    try:
        bank, _ = synthesize(_llm(server), layout, refresh=1)
    finally:
        server.close()
    assert "orion-det-0042" in bank.files.skills.read_text()
    scan = PhaseContext(config=load_config(None, SMALL[:-1]), layout=layout, round=1, phase="scan")
    with pytest.raises(LeakageRejected):
        run_scan(scan)
    assert not is_admitted(bank.path)
    assert "skills.json" in {row.file for row in read_report(bank.path).findings}
