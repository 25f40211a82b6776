"""Scripted agents that act only through `StagedEnv.step`: the teacher (expert) and its outcome variants.

* `expert`: reads brief, spec and every card, plans, checks compatibility, installs, loads, pilots on two
  cases with the card's settings, checks, runs all cases, checks, submits (clean success).
* `noop`: lists the workspace, tries to submit, stops.
* `skip-validate`: plans and sets up like the expert, then runs every case once with the tool defaults
  (normalize="none", fill_nan=false, match_contract=false) and submits — no pilot, no check (skips S3).
* `recovery`: pilots with the defaults on the first case (+ the corrupt case, if any), checks, sees the
  problem, re-reads the card, fixes the settings, re-pilots cleanly, then continues like the expert.
* `failure`: pilots with the defaults and checks, but leaves the reported problem uncorrected and runs
  and submits with the broken settings (a realistic uncorrected mistake).
Teacher variants use the instance's privileged metadata to choose pilot cases; their calls and the
observations they see are what the Stage Bank records.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from bat.benchmark import workspace_files as wf
from bat.benchmark.env import Observation, StagedEnv
from bat.benchmark.instance import Instance

AGENTS = ("expert", "noop", "skip-validate", "recovery", "failure")
Script = Generator[tuple[str, dict[str, Any]], Observation, None]


@dataclass
class Turn:
    """One agent turn: its short rationale, the call, the observation text and the call's stage tag."""

    thought: str
    call: dict[str, Any]
    observation: str
    stage: str | None
    ok: bool


@dataclass
class Trajectory:
    agent: str
    instance_id: str
    turns: list[Turn] = field(default_factory=list)
    outcome: str = ""
    """success | recovery | failure (from the graded run; see `outcome_of`)."""


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _good_settings(inst: Instance) -> dict[str, Any]:
    return {"normalize": "unit_range", "fill_nan": True, "match_contract": bool(inst.pitfalls["layout"])}


DEFAULTS = {"normalize": "none", "fill_nan": False, "match_contract": False}


def _plan(inst: Instance) -> str:
    return (
        f"# Plan\n\nTask: {inst.track} on {len(inst.case_ids)} {inst.modality} cases.\n"
        f"Model: {inst.fitting_model} (its card's modality matches the task).\n"
        "1. Setup: check compatibility, install the packages the card requires, load the model.\n"
        "2. Pilot: run the model on two cases and check the outputs (shape, range, non-degenerate).\n"
        "3. Inference: run all cases with the validated settings and check every output.\n"
        "4. Submit the outputs.\n"
    )


def _research_and_setup(inst: Instance) -> Script:
    yield "Read the brief first.", _call("read_file", path=wf.BRIEF)
    yield "Read the output contract and the case list.", _call("read_file", path=wf.SPEC)
    for name in inst.candidates:
        yield f"Research candidate model {name}.", _call("read_file", path=wf.model_file(name, wf.MODEL_CARD))
    yield "Write the plan naming the fitting model and the pipeline.", _call("write_plan", text=_plan(inst))
    yield "Check that the chosen model fits the task.", _call("check_compatibility", model=inst.fitting_model)
    if inst.required_package:
        yield "The card lists a required package; install it.", _call("install", package=inst.required_package)
    yield "Load the chosen model.", _call("load_model", model=inst.fitting_model)


def _pilot_cases(inst: Instance) -> list[str]:
    corrupt = inst.pitfalls["corrupt_case"]
    return [inst.case_ids[0], corrupt] if corrupt else inst.case_ids[:2]


def _finish(settings: dict[str, Any]) -> Script:
    yield "The pilot is clean; run every case with the same settings.", _call("run_model", cases=["all"], **settings)
    yield "Check every output before submitting.", _call("check_outputs", cases=["all"])
    yield "All outputs are valid; submit.", _call("submit")


def expert(inst: Instance) -> Script:
    yield from _research_and_setup(inst)
    settings = _good_settings(inst)
    yield "Pilot on two cases with the card's settings.", _call("run_model", cases=inst.case_ids[:2], **settings)
    yield "Check the pilot outputs.", _call("check_outputs", cases=inst.case_ids[:2])
    yield from _finish(settings)


def noop(inst: Instance) -> Script:
    yield "Look around.", _call("list_files", path=".")
    yield "Submit whatever is there.", _call("submit")


def skip_validate(inst: Instance) -> Script:
    yield from _research_and_setup(inst)
    yield "Run every case straight away with the default settings.", _call("run_model", cases=["all"], **DEFAULTS)
    yield "Submit.", _call("submit")


def _naive_pilot(inst: Instance) -> Script:
    cases = _pilot_cases(inst)
    obs = yield "Pilot with the default settings.", _call("run_model", cases=cases, **DEFAULTS)
    obs = yield "Check the pilot outputs.", _call("check_outputs", cases=cases)
    return obs


def recovery(inst: Instance) -> Script:
    yield from _research_and_setup(inst)
    obs = yield from _naive_pilot(inst)
    settings = dict(DEFAULTS)
    if obs is not None and "all checked outputs match the contract" not in obs.text:
        yield (
            "The check reports a problem; re-read the model card to diagnose it.",
            _call("read_file", path=wf.model_file(inst.fitting_model, wf.MODEL_CARD)),
        )
        settings = _good_settings(inst)
        cases = _pilot_cases(inst)
        yield (
            "Fix normalisation, NaN handling and layout as the card says; re-pilot the same cases.",
            _call("run_model", cases=cases, **settings),
        )
        yield "Check the re-pilot.", _call("check_outputs", cases=cases)
    yield from _finish(settings)


def failure(inst: Instance) -> Script:
    yield from _research_and_setup(inst)
    yield from _naive_pilot(inst)
    yield "Proceed with the same settings.", _call("run_model", cases=["all"], **DEFAULTS)
    yield "Submit.", _call("submit")


SCRIPTS: dict[str, Callable[[Instance], Script]] = {
    "expert": expert,
    "noop": noop,
    "skip-validate": skip_validate,
    "recovery": recovery,
    "failure": failure,
}


def outcome_of(score: Any) -> str:
    """success: no failing pilot and Overall >= 0.9; recovery: a failing pilot was fixed (s3c); else failure."""
    s3 = score.items.get("S3", {})
    if s3.get("s3c_failure_fixed"):
        return "recovery"
    if not score.details.get("pilot_failed") and (score.overall or 0.0) >= 0.9:
        return "success"
    return "failure"


def run_agent(env: StagedEnv, instance: Instance, agent: str) -> Trajectory:
    """Drive `agent` through `env` (already reset) until its script ends or the episode is done."""
    if agent not in SCRIPTS:
        raise ValueError(f"unknown agent {agent!r}; valid: {list(AGENTS)}")
    traj = Trajectory(agent=agent, instance_id=instance.instance_id)
    script = SCRIPTS[agent](instance)
    obs: Observation | None = None
    while not env.done:
        try:
            thought, call = script.send(obs) if obs is not None else next(script)
        except StopIteration:
            break
        obs = env.step(call)
        traj.turns.append(Turn(thought, call, obs.text, obs.record.stage, obs.record.ok))
    return traj
