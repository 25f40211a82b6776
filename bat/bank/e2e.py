"""E2E surrogates (Eq. 12-15): the teacher runs the reduced task R_lambda(xi); the surrogate is accepted only when
the sandbox boots from its package, the trajectory fits the rollout limit H, every stage check passes, the
validation passes stay within lambda_validate, and the leakage scan of the row is clean.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.schemas.bank import BankRow, Reduction, TrajectoryTurn

if TYPE_CHECKING:
    from bat.config.root import BatConfig


@dataclass
class Acceptance:
    """Outcome of Eq. 15 for one candidate: each indicator and the reasons for a rejection."""

    boot: bool = False
    fits_h: bool = False
    stage_checks: dict[str, bool] = field(default_factory=dict)
    validate_ok: bool = False
    leak_clean: bool | None = None
    """None when the leakage preflight is disabled (the version-level scan then decides)."""
    reasons: list[str] = field(default_factory=list)
    """`<kind>: <detail>` with kind in boot, limit_h, stage_check, breach, validate, leak."""

    @property
    def accepted(self) -> bool:
        return not self.reasons

    def as_dict(self) -> dict[str, Any]:
        return {
            "boot": self.boot,
            "fits_h": self.fits_h,
            "stage_checks": self.stage_checks,
            "validate_ok": self.validate_ok,
            "leak_clean": self.leak_clean,
            "reasons": self.reasons,
        }


def rollout_limit(config: BatConfig) -> int:
    """H: `bank.rollout_limit_h`, or the rollout budgets' turn/tool-call limit when unset."""
    if config.bank.rollout_limit_h is not None:
        return config.bank.rollout_limit_h
    budgets = config.rollout.budgets
    return min(budgets.max_assistant_turns, budgets.max_tool_calls)


def validation_passes(turns: Sequence[TrajectoryTurn]) -> int:
    """Pilot runs (the built-in pilot stage's `run_model` calls) of a trajectory: the passes lambda_validate bounds."""
    from bat.benchmark.bank_side import PILOT_STAGE, PILOT_TOOL

    return sum(
        1 for t in turns if t.stage == PILOT_STAGE and isinstance(t.call, dict) and t.call.get("name") == PILOT_TOOL
    )


def boots(state_dir: Path, workdir: Path, config: BatConfig) -> tuple[bool, str]:
    """Boot(p): materialise the package into a fresh workspace (digest-checked), open the env and read the brief."""
    from bat.bank.states import materialize
    from bat.benchmark.bank_side import open_instance

    try:
        workspace = materialize(state_dir, Path(workdir) / "boot_ws")
        grader = Path(workdir) / "boot_grader"
        grader.mkdir(parents=True, exist_ok=True)
        brief = open_instance(None, workspace, grader, config).reset()
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(Path(workdir) / "boot_ws", ignore_errors=True)
    return (bool(brief.strip()), "" if brief.strip() else "the booted workspace has an empty brief")


def accept(
    *,
    state_dir: Path,
    turns: Sequence[TrajectoryTurn],
    score: Any,
    reduction: Reduction,
    workdir: Path,
    config: BatConfig,
) -> Acceptance:
    """Evaluate Eq. 15 except the leak term (see `check_leak`), plus lambda_validate, for one E2E candidate."""
    result = Acceptance()
    result.boot, why = boots(state_dir, workdir, config)
    if not result.boot:
        result.reasons.append(f"boot: {why}")
    h = rollout_limit(config)
    result.fits_h = len(turns) <= h
    if not result.fits_h:
        result.reasons.append(f"limit_h: trajectory has {len(turns)} turns > H={h}")
    for stage in (s.key for s in config.stages):
        value = score.stages.get(stage)
        result.stage_checks[stage] = stage in score.not_applicable or value == 1.0
        if not result.stage_checks[stage]:
            result.reasons.append(f"stage_check: {stage} scored {value}")
    if score.breach:
        result.reasons.append(f"breach: {score.breach_reasons}")
    passes = validation_passes(turns)
    result.validate_ok = passes <= reduction.validate_passes
    if not result.validate_ok:
        result.reasons.append(f"validate: {passes} validation passes > lambda_validate={reduction.validate_passes}")
    return result


def check_leak(result: Acceptance, row: BankRow, scanner: Any) -> Acceptance:
    """Leak(z) = 0 of Eq. 15: scan the row with the leakage scanner (RL rules on); updates `result`."""
    findings = scanner.scan_row(row.model_dump(mode="json"), rl_row=True).findings
    result.leak_clean = not findings
    if findings:
        kinds = sorted({f.kind for f in findings})
        result.reasons.append(f"leak: {len(findings)} findings ({', '.join(kinds)})")
    return result
