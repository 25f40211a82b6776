"""The failure breakdown: every turn kind, the stalled stage, counts over runs and the rendered tables."""

from bat.rollout.breakdown import analyse_run, format_summary, format_transcript, summarise, transcript_of
from bat.schemas.breakdown import FINISHED
from bat.schemas.rollout import TurnRecord

STAGES = ["S1", "S2", "S3", "S4", "S5"]
SEEN = "Candidate models (cards in models/): ember-kestrel-2, basalt-otter-3. Read task/README.md, task/spec.json."


def _turn(index, name=None, args=None, *, stage="S1", ok=True, obs="fine", invalid=None, error=None, tool=None):
    record = None
    if name is not None or invalid is not None:
        record = {"stage": stage, "ok": ok, "tool": tool or f"bat.benchmark.tools:{name}", "error": error}
    return TurnRecord(
        index=index,
        response_text="text",
        generated_tokens=5,
        finish="stop",
        call={"name": name, "arguments": args or {}} if name is not None else None,
        invalid={"invalid": True, "reason": invalid, "raw": "x"} if invalid else None,
        observation=obs if record is not None else None,
        record=record,
    )


def _kinds(breakdown):
    return [(v.kind, v.detail) for v in breakdown.turns]


def test_each_kind_of_turn_is_named():
    turns = [
        _turn(0, "read_file", {"path": "task/README.md"}, obs="case ids: hc01 hc02"),
        _turn(1, invalid="bad_json", obs="Error: invalid action"),
        _turn(2, invalid="unknown_tool", obs="Error: unknown tool"),
        _turn(
            3,
            "load_model",
            {"model": 3},
            stage="S1",
            ok=False,
            error="invalid arguments for load_model",
            tool="<invalid>",
        ),
        _turn(4, "load_model", {"model": "ember-kestrel-9"}, stage="S2", ok=False, error="no such model"),
        _turn(5, "read_file", {"path": "task/README.md"}, obs="case ids: hc01 hc02"),
        _turn(6, "run_model", {"cases": ["hc01"]}, stage="S3", ok=True, obs="ran"),
        _turn(7, "write_plan", {"text": "p"}, stage="S1", ok=False, error="plan too short"),
        _turn(8),
    ]
    b = analyse_run("r", turns, "no_tool_call", SEEN, STAGES)
    assert _kinds(b) == [
        ("ok", ""),
        ("malformed", "bad_json"),
        ("unknown_tool", "unknown_tool"),
        ("invalid_arguments", "invalid arguments for load_model"),
        ("unseen_name", "ember-kestrel-9"),
        ("repeat", ""),
        ("too_early", "S3 after nothing"),
        ("tool_error", "plan too short"),
        ("no_call", "text"),
    ]
    assert b.first_failure == 1 and b.stalled == "S1"  # no stage call of S1 (write_plan) ever succeeded


def test_copied_names_from_observations_count_as_seen_and_the_run_finishes():
    turns = [
        _turn(0, "read_file", {"path": "task/spec.json"}, obs='{"cases": ["hc01", "hc02"]}'),
        _turn(1, "write_plan", {"text": "plan"}, stage="S1"),
        _turn(2, "load_model", {"model": "ember-kestrel-2"}, stage="S2"),
        _turn(3, "run_model", {"cases": ["hc01"]}, stage="S3"),
        _turn(4, "check_outputs", {"cases": ["hc01"]}, stage="S3", obs="problem"),
        _turn(5, "run_model", {"cases": ["hc01"], "normalize": "unit_range"}, stage="S3"),
        _turn(6, "check_outputs", {"cases": ["hc01"]}, stage="S3", obs="clean"),  # same call, new answer: no repeat
        _turn(7, "run_model", {"cases": ["all"]}, stage="S4"),
        _turn(8, "submit", {}, stage="S5"),
    ]
    b = analyse_run("r", turns, "done", SEEN, STAGES)
    assert all(v.kind == "ok" for v in b.turns) and b.first_failure is None and b.stalled == FINISHED


def test_a_stage_row_opens_in_its_stage():
    turns = [_turn(0, "run_model", {"cases": ["all"]}, stage="S4")]
    assert _kinds(analyse_run("r", turns, "max_turns", "all", STAGES, start_stage="S4"))[0][0] == "ok"
    assert _kinds(analyse_run("r", turns, "max_turns", "all", STAGES))[0][0] == "too_early"


def test_a_loop_of_the_same_calls_is_a_repeat():
    loop = [
        _turn(i, name, {"model": "ember-kestrel-2"}, stage="S2", obs="loaded")
        for i, name in enumerate(["load_model", "load_model", "load_model"])
    ]
    assert [v.kind for v in analyse_run("r", loop, "max_turns", SEEN, STAGES).turns] == [
        "too_early",
        "repeat",
        "repeat",
    ]


def test_summary_counts_and_tables():
    runs = [
        analyse_run("a", [_turn(0, invalid="bad_json"), _turn(1)], "no_tool_call", SEEN, STAGES, track="vqa"),
        analyse_run(
            "b", [_turn(0, "write_plan", {"text": "p"}), _turn(1, invalid="bad_json")], "max_turns", SEEN, STAGES
        ),
    ]
    s = summarise(runs)
    assert s.runs == 2 and s.turns == 4
    assert s.end_reasons == {"max_turns": 1, "no_tool_call": 1}
    assert s.stalled == {"S1": 1, "S2": 1}
    assert s.turn_kinds == {"malformed:bad_json": 2, "no_call": 1, "ok": 1}
    assert s.runs_with["malformed:bad_json"] == 2 and s.first_failures == {"malformed:bad_json": 2}
    table = format_summary(s, "t")
    assert "| malformed:bad_json | 2 | 50.0 % | 2 | 2 |" in table and "| S2 | 1 |" in table


def test_transcript_keeps_opening_and_turns_and_renders_them():
    opening = [{"role": "system", "content": "sys"}, {"role": "user", "content": SEEN}]
    turns = [_turn(0, "load_model", {"model": "ember-kestrel-2"}, stage="S2", obs="loaded ember-kestrel-2")]
    t = transcript_of("run-1", "vqa", "max_turns", opening, turns, STAGES)
    assert t.breakdown.turns[0].kind == "too_early" and t.opening[1]["content"] == SEEN
    text = format_transcript(t)
    assert "# Run run-1 (vqa): ended by max_turns, stalled at S1" in text
    assert "## turn 0 [S2] too_early (S2 after nothing)" in text and "loaded ember-kestrel-2" in text
