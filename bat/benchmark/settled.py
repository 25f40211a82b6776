"""Settled rubric verdicts: when no further call of an episode can change them (a stage row's stage exit).

A stage row's reward (Eq. 4 over the row's items c_s and evidence G_s; paper Eq. 11: "the row rubric scores only
the work of stage s") reads nothing but the verdicts of its own rubric items and evidence ids. An id is *settled* at
a point of an episode when no continuation of at most `horizon` further calls, whatever those calls are, can change
its verdict or whether it applies. Once every id a row reads is settled, ending the rollout there gives the same
reward as every continuation would (`bat.rollout` ends it with `stage_exit`).

Rules of the built-in grader (`bat.benchmark.grader`; `RULES` holds them). Markers: *run* = an ok run_model exists
(`grader.first_run`), *batch* = an ok run_model tagged S4 exists (`grader.first_batch`); v = the verdict now;
h = the most further calls; *code* = `execute_code` is offered (it can rewrite or delete any workspace file).

* S1 `s1a_plan_md` (final plan.md >= 20 chars and a write_plan before the first run): settled only once it is False
  for good, i.e. run and no ok write_plan before it; otherwise a later write_plan can rewrite plan.md.
  `s1b_plan_pipeline`, `s1c_<track>_model`: read the final plan.md, which write_plan can rewrite at any stage:
  never settled while a call remains. `s1d_researched_3`, `e1_plan_record`, `e1_research_records` (events before
  the first run): settled when run, or when v is True (they only grow until then). `e1_plan_artifact` (plan.md
  exists): settled when True and not code (no typed tool deletes or empties it).
* S2 `s2a_checkpoint_downloaded` (an ok load_model of the fitting model, any time): settled when True.
  `s2b_compatibility_check`, `s2c_env_setup_success` (the model loaded last before the first run was checked / is
  the fitting one): settled when run (a later load before the first run can change either way).
  `s2e_model_loaded`, `e2_model_loaded` (some ok load_model before the first run): settled when run or True.
  `s2d_env_fail_within_5` (the right model loaded before the first run and at most `setup_fail_limit` failed setup
  calls over the whole run): settled when the failures already exceed the limit, or when run and either the loaded
  model is wrong or the failures plus h cannot exceed the limit. `e2_setup_records` (any setup call): when True.
* S3 `s3a_pilot_before_batch`, `s3b_output_checked`, `e3_pilot_record`, `e3_check_record` (events before the
  batch): settled when batch, or when True. `s3c_failure_fixed` (applies only after a failing pilot; its value
  moves with every later pilot): settled when batch.
* S4 `s4a_all_cases_run`, `e4_outputs` (persisted outputs in outputs/): settled when True and not code (typed tools
  never delete an output). `s4b_format_valid` (every persisted output valid): a later run_model can rewrite any
  output, so never settled while a call remains. `e4_batch_record`: settled when True.
* S5 `s5a_has_valid_results`, `s5b_format_valid`: decided by a successful submit, which ends the episode itself:
  never settled while a call remains. `e5_submit_record`: when True; `e5_submission`: when True and not code.

So an S3 row settles at its first batch run; an S2 row only once s2a holds and s2d is decided (in practice near the
end of the budget); S1, S4 and S5 rows never settle before the episode ends (their items read plan.md, outputs/ or
the submission as they are at the end). With h = 0 everything is settled.

Outside the rubric: an id decided by the LLM judge (`judged`; the judge reads every turn) is never settled, and an
id the built-in grader does not know has no rule, so it is never settled either. The sandbox-breach rule (a breach
zeroes the reward) is not an item: a continuation may always still breach, so the reward of a cut rollout equals
that of every continuation *that does not breach the sandbox*; a cut rollout is not charged for a breach it never
made.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.benchmark import grader as G
from bat.config.contract import TRACK_PLACEHOLDER


@dataclass(frozen=True)
class Facts:
    """What the rules read besides an id's own verdict (all from the events, the workspace and the budget)."""

    ran: bool
    """An ok run_model exists (S1/S2 items read only the events before the first one)."""
    batch: bool
    """An ok run_model tagged S4 exists (S3 items read only the events before the first one)."""
    wrote: bool
    """An ok write_plan came before the first run (s1a's record half, `e1_plan_record`)."""
    right: bool
    """The model loaded last before the first run is the fitting one (s2c's verdict)."""
    failures: int
    """Failed setup calls so far (s2d's count)."""
    fail_limit: int
    """`benchmark.setup_fail_limit`."""
    horizon: int
    """The most calls that can still follow."""
    code: bool
    """`execute_code` is offered: any workspace file may still change."""


@dataclass(frozen=True)
class Rule:
    """When one id's verdict is settled: `test(v, facts)`, v = its verdict now (False where it does not apply)."""

    when: str
    test: Callable[[bool, Facts], bool]


def _never(_v: bool, _f: Facts) -> bool:
    return False


def _when_true(v: bool, _f: Facts) -> bool:
    return v


def _true_and_no_code(v: bool, f: Facts) -> bool:
    return v and not f.code


def _ran_or_true(v: bool, f: Facts) -> bool:
    return f.ran or v


def _ran(_v: bool, f: Facts) -> bool:
    return f.ran


def _batch_or_true(v: bool, f: Facts) -> bool:
    return f.batch or v


def _batch(_v: bool, f: Facts) -> bool:
    return f.batch


def _s2d(_v: bool, f: Facts) -> bool:
    return f.failures > f.fail_limit or (f.ran and (not f.right or f.failures + f.horizon <= f.fail_limit))


_RUN_OR_TRUE = "after the first ok run_model, or once True"
_FINAL_FILE = "never while a call remains: it reads {what} as it is at the end, and a later {tool} can change it"
RULES: dict[str, Rule] = {
    "s1a_plan_md": Rule(
        "once False for good: an ok run_model with no ok write_plan before it (else write_plan can rewrite plan.md)",
        lambda _v, f: f.ran and not f.wrote,
    ),
    "s1b_plan_pipeline": Rule(_FINAL_FILE.format(what="plan.md", tool="write_plan"), _never),
    f"s1c_{TRACK_PLACEHOLDER}_model": Rule(_FINAL_FILE.format(what="plan.md", tool="write_plan"), _never),
    "s1d_researched_3": Rule(_RUN_OR_TRUE, _ran_or_true),
    "e1_plan_artifact": Rule("once True, unless execute_code is offered", _true_and_no_code),
    "e1_plan_record": Rule(_RUN_OR_TRUE, _ran_or_true),
    "e1_research_records": Rule(_RUN_OR_TRUE, _ran_or_true),
    "s2a_checkpoint_downloaded": Rule(
        "once True (a later load_model of the fitting model can still pass it)", _when_true
    ),
    "s2b_compatibility_check": Rule("after the first ok run_model", _ran),
    "s2c_env_setup_success": Rule("after the first ok run_model", _ran),
    "s2d_env_fail_within_5": Rule(
        "when failed setup calls exceed the limit, or after the first ok run_model when the loaded model is wrong "
        "or the failures plus the calls left cannot exceed the limit",
        _s2d,
    ),
    "s2e_model_loaded": Rule(_RUN_OR_TRUE, _ran_or_true),
    "e2_setup_records": Rule("once True", _when_true),
    "e2_model_loaded": Rule(_RUN_OR_TRUE, _ran_or_true),
    "s3a_pilot_before_batch": Rule("after the first ok batch run_model (S4), or once True", _batch_or_true),
    "s3b_output_checked": Rule("after the first ok batch run_model (S4), or once True", _batch_or_true),
    "s3c_failure_fixed": Rule("after the first ok batch run_model (S4): a later pilot can still change it", _batch),
    "e3_pilot_record": Rule("after the first ok batch run_model (S4), or once True", _batch_or_true),
    "e3_check_record": Rule("after the first ok batch run_model (S4), or once True", _batch_or_true),
    "s4a_all_cases_run": Rule("once True, unless execute_code is offered", _true_and_no_code),
    "s4b_format_valid": Rule(_FINAL_FILE.format(what="outputs/", tool="run_model"), _never),
    "e4_batch_record": Rule("once True", _when_true),
    "e4_outputs": Rule("once True, unless execute_code is offered", _true_and_no_code),
    "s5a_has_valid_results": Rule("only by the submit that ends the episode", _never),
    "s5b_format_valid": Rule("only by the submit that ends the episode", _never),
    "e5_submit_record": Rule("once True", _when_true),
    "e5_submission": Rule("once True, unless execute_code is offered", _true_and_no_code),
}
"""Settled rule of every item and evidence id the built-in grader computes (`{track}` = any track)."""


@dataclass(frozen=True)
class Settlement:
    """Which ids of a row are not settled yet, each with the condition it waits for."""

    pending: dict[str, str]

    @property
    def settled(self) -> bool:
        """True when every id is settled: nothing that follows can change the row's reward."""
        return not self.pending


def rule_for(item_id: str, track: str) -> Rule | None:
    """The settled rule of a concrete id (`s1c_vqa_model` finds `s1c_{track}_model`), or None when there is none."""
    return next((r for key, r in RULES.items() if key.replace(TRACK_PLACEHOLDER, track) == item_id), None)


def _verdicts_and_facts(
    records: Sequence[Any], workspace: Path, meta: dict[str, Any], config: Any, horizon: int, code: bool
) -> tuple[dict[str, bool], Facts]:
    """Every item and evidence verdict the grader computes now (flat, None read as False) and the rules' facts."""
    ev = G.events_of(list(records))
    computed, confirmed, _completion, _preds = G._stage_checks(ev, workspace, meta, meta["track"], config, None)
    values = {i: bool(v) for stage in (*computed.values(), *confirmed.values()) for i, v in stage.items()}
    facts = Facts(
        ran=G.first_run(ev) < len(ev),
        batch=G.first_batch(ev) < len(ev),
        wrote=values.get("e1_plan_record", False),
        right=values.get("s2c_env_setup_success", False),
        failures=G.setup_failures(ev),
        fail_limit=config.benchmark.setup_fail_limit,
        horizon=horizon,
        code=code,
    )
    return values, facts


def settlement(
    records: Sequence[Any],
    workspace: str | Path,
    meta: dict[str, Any],
    ids: Sequence[str],
    config: Any,
    horizon: int,
    *,
    judged: Collection[str] = (),
    execute_code: bool = False,
) -> Settlement:
    """Which of `ids` (a row's rubric item and evidence ids) are not settled after `records` (prefix and episode, in
    order) with `workspace` as it stands now, when at most `horizon` further calls can follow.

    Reads the records, the workspace artifacts and `meta` (the grader side's instance metadata); writes nothing.
    `judged` ids are decided by the LLM judge over the whole transcript and are never settled; an id without a rule
    (see `RULES`) is never settled; with `horizon` <= 0 nothing can change any more.
    """
    if horizon <= 0:
        return Settlement({})
    values, facts = _verdicts_and_facts(records, Path(workspace), meta, config, horizon, execute_code)
    pending: dict[str, str] = {}
    for item_id in ids:
        rule = rule_for(item_id, meta["track"])
        if item_id in judged:
            pending[item_id] = "decided by the LLM judge, which reads every turn"
        elif rule is None:
            pending[item_id] = f"no settled rule for it; ids with one: {sorted(RULES)}"
        elif not rule.test(values.get(item_id, False), facts):
            pending[item_id] = rule.when
    return Settlement(pending)
