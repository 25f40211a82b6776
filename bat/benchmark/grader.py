"""Grade a finished run from its execution records, the workspace artifacts and the hidden grader side.

Deterministic proxies for judgment items (used unless a judge callable is given):
* s1b_plan_pipeline: plan.md mentions >= 3 of the step groups {setup|install|load}, {pilot|validat|check},
  {inference|batch|all cases|run}, {submit}.
* s1c_<track>_model: plan.md contains the fitting model's exact name and no other candidate's name.
A breach flag on any record zeroes every stage, Task, Agentic and Overall (verdicts are still kept).

When each item's verdict can no longer change (a stage row's stage exit) is declared beside it in
`bat.benchmark.settled`, from the markers below (`first_run`, `first_batch`, `setup_failures`): change an item here
and its settled rule there together (tests/rollout/test_stage_exit.py replays agents to check they agree).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.benchmark import workspace_files as wf
from bat.benchmark.contract import (
    RubricItem,
    agentic,
    check_stage_keys,
    evidence_requirements,
    overall,
    rubric,
    stage_formula,
    stage_score,
)
from bat.benchmark.instance import load_grader
from bat.benchmark.score import RunScore
from bat.benchmark.tools.common import load_output, output_path
from bat.benchmark.tools.infer import inspect_outputs
from bat.benchmark.tools.specs import TOOL_BY_NAME, TOOL_BY_REF
from bat.benchmark.tracks import get_track
from bat.sandbox.record import ExecutionRecord

Judge = Callable[[RubricItem, str], "bool | None"]
PLAN_GROUPS = (
    ("setup", "install", "load"),
    ("pilot", "validat", "check"),
    ("inference", "batch", "all cases", "run"),
    ("submit",),
)


@dataclass
class Event:
    """A record reduced to what grading needs."""

    index: int
    name: str
    args: dict[str, Any]
    ok: bool
    stage: str | None
    meta: dict[str, Any]
    written: tuple[str, ...] = ()
    """Workspace paths the call added or modified (from the record's files_changed)."""


def events_of(records: list[ExecutionRecord]) -> list[Event]:
    """Records -> events (tool short name, args, ok, stage, tool meta)."""
    out = []
    for i, r in enumerate(records):
        tool = TOOL_BY_REF.get(r.tool) or TOOL_BY_NAME.get(r.tool)
        meta = r.result.get("meta", {}) if isinstance(r.result, dict) else {}
        written = (*r.files_changed.added, *r.files_changed.modified)
        out.append(Event(i, tool.name if tool else r.tool, dict(r.args), bool(r.ok), r.stage, meta, written))
    return out


def _first(events: list[Event], pred: Callable[[Event], bool], default: int) -> int:
    return next((e.index for e in events if pred(e)), default)


SETUP_TOOLS = ("install", "load_model", "check_compatibility")
"""Tools whose calls count as setup (S2): their failures count against `benchmark.setup_fail_limit`."""


def first_run(ev: list[Event]) -> int:
    """Index of the first ok run_model event (len(ev) + 1 when none): S1/S2 items read only the events before it."""
    return _first(ev, lambda e: e.name == "run_model" and e.ok, len(ev) + 1)


def first_batch(ev: list[Event]) -> int:
    """Index of the first ok run_model tagged S4, the batch (len(ev) + 1 when none): S3 reads only events before it."""
    return _first(ev, lambda e: e.name == "run_model" and e.ok and e.stage == "S4", len(ev) + 1)


def setup_failures(ev: list[Event]) -> int:
    """Failed setup calls (`SETUP_TOOLS`) over every event of the run (s2d's count)."""
    return sum(1 for e in ev if e.name in SETUP_TOOLS and not e.ok)


def _researched_model(e: Event) -> str | None:
    """The model a call researched: check_compatibility(model) or read_file("models/<name>/...")."""
    if e.name == "check_compatibility":
        return str(e.args.get("model"))
    parts = str(e.args.get("path", "")).split("/")
    return parts[1] if e.name == "read_file" and len(parts) >= 3 and parts[0] == wf.MODELS_DIR else None


def _s1(
    ev: list[Event],
    ws: Path,
    meta: dict[str, Any],
    first_run: int,
    track: str,
    items: dict[str, RubricItem],
    judge: Judge | None,
) -> tuple[dict[str, bool | None], dict[str, bool]]:
    """S1 verdicts of every item the grader knows (judgment items only when configured, in `items`) and evidence."""
    plan_path = ws / wf.PLAN
    plan = plan_path.read_text(errors="replace") if plan_path.is_file() else ""
    low = plan.lower()
    wrote = any(e.name == "write_plan" and e.ok and e.index < first_run for e in ev)
    researched = {m for e in ev if e.ok and e.index < first_run for m in [_researched_model(e)] if m}
    need = min(3, len(meta["candidates"]))
    others = [c for c in meta["candidates"] if c != meta["fitting_model"]]
    v: dict[str, bool | None] = {
        "s1a_plan_md": bool(len(plan.strip()) >= 20 and wrote),
        "s1d_researched_3": len(researched & set(meta["candidates"])) >= need,
    }
    proxies = {
        "s1b_plan_pipeline": sum(any(k in low for k in group) for group in PLAN_GROUPS) >= 3,
        f"s1c_{track}_model": meta["fitting_model"] in plan and not any(o in plan for o in others),
    }
    for item_id, proxy in proxies.items():
        if item_id not in items:  # dropped from the configured contract
            continue
        v[item_id] = judge(items[item_id], plan) if (judge is not None and plan) else (bool(proxy) if plan else False)
    evidence = {"e1_plan_artifact": bool(plan), "e1_plan_record": wrote, "e1_research_records": bool(researched)}
    return v, evidence


def _configured(
    computed: dict[str, bool | None], evidence: dict[str, bool], items: list[RubricItem], required: list[str]
) -> tuple[dict[str, bool | None], dict[str, bool]]:
    """The verdicts of the configured items (an item the grader left out does not apply to this run) and the
    configured evidence, in contract order."""
    return (
        {i.id: computed[i.id] for i in items if i.id in computed},
        {e: evidence[e] for e in required},
    )


def _s2(
    ev: list[Event], meta: dict[str, Any], first_run: int, fail_limit: int
) -> tuple[dict[str, bool | None], dict[str, bool]]:
    pre = [e for e in ev if e.index < first_run]
    loads = [e for e in pre if e.name == "load_model" and e.ok]
    loaded = loads[-1].args.get("model") if loads else None
    checked = {e.args.get("model") for e in pre if e.name == "check_compatibility" and e.ok}
    setup = [e for e in ev if e.name in SETUP_TOOLS]
    failures = setup_failures(ev)
    right = loaded == meta["fitting_model"]
    v = {
        "s2a_checkpoint_downloaded": any(
            e.name == "load_model" and e.ok and e.args.get("model") == meta["fitting_model"] for e in ev
        ),
        "s2b_compatibility_check": loaded is not None and loaded in checked,
        "s2c_env_setup_success": right,
        "s2d_env_fail_within_5": right and failures <= fail_limit,
        "s2e_model_loaded": loaded is not None,
    }
    return v, {"e2_setup_records": bool(setup), "e2_model_loaded": bool(loads)}


def _bad(e: Event) -> bool:
    return bool(e.meta.get("issues") or e.meta.get("degenerate"))


def _s3(ev: list[Event]) -> tuple[dict[str, bool | None], dict[str, bool]]:
    batch = first_batch(ev)
    pilots = [e for e in ev if e.name == "run_model" and e.ok and e.stage == "S3" and e.index < batch]
    checks = [e for e in ev if e.name == "check_outputs" and e.ok and e.index < batch]
    v: dict[str, bool | None] = {
        "s3a_pilot_before_batch": bool(pilots),
        "s3b_output_checked": bool(pilots) and any(c.index > pilots[0].index for c in checks),
    }
    failing = [p for p in pilots if _bad(p)]
    if failing:
        last_fail = failing[-1]
        clean_after = [p for p in pilots if p.index > last_fail.index and not _bad(p)]
        covered = {c for p in clean_after for c in p.meta.get("cases", [])}
        diagnosed = any(failing[0].index < c.index < (clean_after[-1].index if clean_after else -1) for c in checks)
        v["s3c_failure_fixed"] = bool(clean_after) and diagnosed and set(last_fail.meta.get("cases", [])) <= covered
    return v, {"e3_pilot_record": bool(pilots), "e3_check_record": bool(checks)}


def _outputs(ws: Path, ev: list[Event], cases: list[str]) -> tuple[float, bool, bool]:
    """(completion rate, format valid, batch record present) of outputs/: a case counts when its output exists
    and an ok run_model (or execute_code) record wrote it."""
    spec = json.loads((ws / wf.SPEC).read_text())
    ran = {c for e in ev if e.name == "run_model" and e.ok for c in e.meta.get("cases", [])}
    written = {p for e in ev if e.ok and e.name in ("run_model", "execute_code") for p in e.written}
    ran |= {c for c in cases if output_path(ws, spec, c).relative_to(ws).as_posix() in written}
    done = [c for c in cases if c in ran and output_path(ws, spec, c).exists()]
    issues, degenerate, _ = inspect_outputs(ws, spec, done) if done else ({}, None, [])
    batch = any(e.name == "run_model" and e.ok and e.stage == "S4" for e in ev)
    return len(done) / max(1, len(cases)), bool(done) and not issues and not degenerate, batch


def _submission(ws: Path, cases: list[str]) -> tuple[dict[str, Any], bool]:
    """(predictions read from submission/, format valid) — only cases listed in the manifest with a file."""
    manifest_path = ws / wf.SUBMISSION_MANIFEST
    if not manifest_path.is_file():
        return {}, False
    spec = json.loads((ws / wf.SPEC).read_text())
    listed = json.loads(manifest_path.read_text()).get("cases", {})
    present = [c for c in cases if c in listed and output_path(ws, spec, c, wf.SUBMISSION_DIR).exists()]
    issues, degenerate, _ = inspect_outputs(ws, spec, present, wf.SUBMISSION_DIR) if present else ({}, None, [])
    preds = {c: load_output(output_path(ws, spec, c, wf.SUBMISSION_DIR)) for c in present}
    return preds, bool(present) and not issues and not degenerate


def _s4(ws: Path, ev: list[Event], cases: list[str]) -> tuple[dict[str, bool | None], dict[str, bool], float]:
    """S4 verdicts, evidence and the completion rate of outputs/ (`_outputs`)."""
    completion, fmt_ok, batch = _outputs(ws, ev, cases)
    v: dict[str, bool | None] = {"s4a_all_cases_run": completion >= 1.0, "s4b_format_valid": fmt_ok}
    return v, {"e4_batch_record": batch, "e4_outputs": completion > 0}, completion


def _s5(ws: Path, ev: list[Event], cases: list[str]) -> tuple[dict[str, bool | None], dict[str, bool], dict[str, Any]]:
    """S5 verdicts, evidence and the submitted predictions (empty without an ok submit record); the run's
    results are complete when `s5a_has_valid_results` holds (submitted, every case predicted)."""
    submitted = any(e.name == "submit" and e.ok for e in ev)
    preds, sub_fmt = _submission(ws, cases) if submitted else ({}, False)
    v: dict[str, bool | None] = {
        "s5a_has_valid_results": submitted and set(preds) == set(cases),
        "s5b_format_valid": sub_fmt,
    }
    evidence = {"e5_submit_record": submitted, "e5_submission": (ws / wf.SUBMISSION_MANIFEST).is_file()}
    return v, evidence, preds


def _stage_checks(
    ev: list[Event], ws: Path, meta: dict[str, Any], track: str, cfg: Any, judge: Judge | None
) -> tuple[dict[str, dict[str, bool | None]], dict[str, dict[str, bool]], float, dict[str, Any]]:
    """(verdicts by stage, evidence by stage, completion rate, submitted predictions) of every item the grader
    knows, from the events and the workspace artifacts."""
    cases = list(meta["case_ids"])
    run = first_run(ev)
    contract = cfg.benchmark.contract
    computed: dict[str, dict[str, bool | None]] = {}
    confirmed: dict[str, dict[str, bool]] = {}
    s1_items = {i.id: i for i in rubric("S1", track, contract)} if "S1" in contract.stages else {}
    computed["S1"], confirmed["S1"] = _s1(ev, ws, meta, run, track, s1_items, judge)
    computed["S2"], confirmed["S2"] = _s2(ev, meta, run, cfg.benchmark.setup_fail_limit)
    computed["S3"], confirmed["S3"] = _s3(ev)
    computed["S4"], confirmed["S4"], completion = _s4(ws, ev, cases)
    computed["S5"], confirmed["S5"], preds = _s5(ws, ev, cases)
    return computed, confirmed, completion, preds


def _configured_stages(
    cfg: Any, computed: dict[str, dict[str, bool | None]], confirmed: dict[str, dict[str, bool]], track: str
) -> tuple[dict[str, dict[str, bool | None]], dict[str, dict[str, bool]]]:
    """(verdicts, evidence) of every configured stage, keyed by stage: `_configured` against its rubric."""
    contract = cfg.benchmark.contract
    items: dict[str, dict[str, bool | None]] = {}
    evidence: dict[str, dict[str, bool]] = {}
    for s in cfg.stages:
        required = [e.id for e in evidence_requirements(s.key, contract)]
        items[s.key], evidence[s.key] = _configured(
            computed[s.key], confirmed[s.key], rubric(s.key, track, contract), required
        )
    return items, evidence


def _breach_reasons(records: list[ExecutionRecord]) -> list[str]:
    """`call <i>: <tool>: <flags>` of every record that breached isolation, naming the breach flags it raised."""
    return [
        f"call {i}: {r.tool}: {', '.join(n for n in r.flags.raised() if n in ('access_outside', 'network', 'symlink_escape'))}"
        for i, r in enumerate(records)
        if r.breach
    ]


def grade(
    workspace_dir: str | Path,
    grader_dir: str | Path,
    records: list[ExecutionRecord],
    config: Any = None,
    *,
    run_id: str = "",
    repeat: int = 0,
    judge: Judge | None = None,
    judge_name: str = "",
) -> RunScore:
    """Score a run: stage items from records + artifacts, Task from hidden truth; breach zeroes the run."""
    from bat.config.root import BatConfig

    cfg = config or BatConfig()
    check_stage_keys(cfg.stages, cfg.benchmark.contract)
    ws = Path(workspace_dir)
    meta, truths = load_grader(grader_dir)
    track = get_track(meta["track"])
    ev = events_of(records)
    computed, confirmed, completion, preds = _stage_checks(ev, ws, meta, track.name, cfg, judge)
    complete = computed["S5"]["s5a_has_valid_results"]
    items, evidence = _configured_stages(cfg, computed, confirmed, track.name)
    keys = [s.key for s in cfg.stages]
    not_applicable = [k for k in keys if not items[k]]
    keys = [k for k in keys if k not in not_applicable]
    formulas = {k: stage_formula(k, cfg.benchmark.contract) for k in keys}
    stages = {k: stage_score(k, items[k], {"completion_rate": completion}, formulas[k]) for k in keys}
    task, metrics = track.score(preds, truths, meta.get("extras", {})) if complete else (0.0, {})
    breach_reasons = _breach_reasons(records)
    nulls = [f"{k}: null item(s) {[i for i, v in items[k].items() if v is None]}" for k in keys if stages[k] is None]
    if breach_reasons:
        stages, task = dict.fromkeys(keys, 0.0), 0.0
    ag = agentic(stages, cfg.stages, not_applicable)
    eta = {k: sum(evidence[k].values()) / len(evidence[k]) if evidence[k] else 1.0 for k in keys}
    return RunScore(
        run_id=run_id,
        track=track.name,
        instance_id=meta["instance_id"],
        repeat=repeat,
        stages=stages,
        not_applicable=not_applicable,
        items={k: items[k] for k in keys},
        evidence={k: evidence[k] for k in keys},
        eta=eta,
        measures={"completion_rate": completion},
        task=task,
        task_metrics=metrics,
        agentic=ag,
        overall=overall(task, ag),
        breach=bool(breach_reasons),
        breach_reasons=breach_reasons,
        valid=not nulls,
        null_reasons=nulls,
        judge=judge_name or ("judge" if judge else "proxy"),
        details={
            "pilot_failed": any(_bad(e) for e in ev if e.name == "run_model" and e.stage == "S3"),
            "calls": len(records),
        },
    )
