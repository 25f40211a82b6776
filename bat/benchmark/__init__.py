"""The staged benchmark: S1-S5 rubric contract + the built-in offline benchmark (7 synthetic tracks).

Public API (import from `bat.benchmark`):

Contract (reusable by the verifier so reward and evaluation cannot drift):
* `TRACKS` — ("classification", "detection", "enhancement", "report", "segmentation", "synthesis", "vqa").
  `bat.benchmarks.builtin_spec` declares them (plain data; `bat.benchmark.builtin_spec` as config types) with `STAGES` (S1-S5: keys, names, weights), `CONTRACT` and
  `LATE_STAGES`: the one place these names are spelled (config defaults read it; everything else reads the config).
* `rubric(stage_key, track, contract=None) -> list[RubricItem]` — binary items from `benchmark.contract` (default:
  the built-in one, ids mirror AutoMedBench sub-criteria, e.g. `s1a_plan_md`, `s1c_<track>_model`,
  `s2b_compatibility_check`, `s3a_pilot_before_batch`);
  `RubricItem(id, stage, text, evidence: tuple[str, ...], judgment: bool, proxy: str)`.
  `evidence_requirements(stage_key, contract=None) -> list[EvidenceSpec(id, stage, text)]`;
  `stage_formula(stage_key, contract=None)`. `STAGE_SKILLS[key]` = kappa text.
* `stage_score(key, verdicts, measures, formula=None) -> float | None` (built-in formulas: S3 ladder {0, .5, 1};
  S4 = .5 completion + .5 format; S5 = .5 valid + .5 format; others mean of applicable items); `agentic(stage_scores, stages) -> float | None`
  (not-applicable stages dropped, weights renormalised; any null stage -> None, never 0);
  `overall(task, agentic) = 0.5 * task + 0.5 * agentic` from unrounded values (0-1 scale inside, x100 to report).
* `RunScore` (pydantic, schema_version): run_id, track, instance_id, repeat, stages {key: float|None},
  items {key: {item_id: bool|None}}, evidence {key: {evidence_id: bool}}, eta {key: float}, task, task_metrics,
  agentic, overall, breach, breach_reasons, valid, null_reasons.

Instances (seeded numpy/scipy generation; held-out and practice spaces share no identifiers):
* `generate_instance(track, space: "heldout"|"practice", seed, *, n_cases=None, config=None, params=None,
  input_fraction=1.0) -> Instance`
  (`Instance.instance_id, .track, .space, .seed, .pitfalls, .case_ids, .fitting_model, ...`).
* `heldout_suite(config, split="controller"|"final"|"test", *, secret) -> list[SuiteRun]` (tracks x repeats;
  `SuiteRun(run_id, track, repeat, instance_seed, sampling_seed)`; `suite_instance(run, config) -> Instance`).
  `secret` is a `HeldoutSecret` (`bat.benchmark.secret`: `load_or_create_secret(path)`, a run's is
  `RunLayout.heldout_secret`): without it the held-out instances cannot be rebuilt.
* `practice_seed(track, index, config) -> int`, `practice_instance(track, seed, config=None, *, n_cases=None,
  params=None, input_fraction=1.0) -> Instance`; `params` is an `InstanceParams(modality, pitfalls, distractors)`
  that sets those instead of the seed's draws (practice space only; `params_problems(track, params)` lists what is
  invalid); `input_fraction` (lambda_input of Eq. 12, practice space only) caps every case's input at that fraction
  of its size in elements (`Track.case_shape`; valid from the track's `min_input_fraction` to 1.0; 1.0 is the
  full-size instance byte for byte).
* `materialize(instance, workspace_dir, grader_dir)` — inputs/cards/brief in the workspace, hidden truth in a
  grader dir that must lie outside it.
* `fingerprint_entries(config, *, secret) -> list[dict(kind, value, source)]` — held-out ids/paths/answers/texts for the
  leakage index (kinds: identifier, path, answer, text, field); nothing else leaves the held-out side.

Environment and tools:
* `TOOL_SPECS` — list of {"name", "description", "parameters" (JSON schema)} for the chat template;
  `TOOL_NAMES`. Tools: list_files, read_file, write_plan, check_compatibility, install, load_model,
  run_model, check_outputs, submit (+ execute_code when `benchmark.execute_code`).
* `StagedEnv(instance, workspace_dir, grader_dir, config=None)`: `reset() -> str` (brief),
  `step(call) -> Observation(text, record, done)` where call is `{"name", "arguments"}` or an invalid-action
  dict `{"invalid": True, "reason", ...}` (-> error observation, never an exception); `score() -> RunScore`;
  `.records` (list of `bat.sandbox.ExecutionRecord`, each with a stage tag);
  `settlement(ids, horizon, judged=()) -> Settlement(pending)`: which rubric item / evidence ids could still change
  within `horizon` more calls (`bat.benchmark.settled`: the settled rule of every built-in id; a stage row's
  rollout ends once none is pending).
* `grade(workspace_dir, grader_dir, records, config=None, *, run_id="", repeat=0, judge=None, judge_name="")
  -> RunScore`; `judge(item: RubricItem, plan_text: str) -> bool | None` decides judgment items (None = null);
  without a judge the documented proxies decide (see `bat.benchmark.grader`). `StagedEnv.score(judge=...)` too;
  `config_judge(config) -> (judge | None, identity)` builds it from `verify.judge` (used by `run_episode`).

Agents (scripted, through the same tools):
* `AGENTS` = ("expert", "noop", "skip-validate", "recovery", "failure");
  `run_agent(env, instance, agent) -> Trajectory(turns=[Turn(thought, call, observation, stage)], outcome)`.
* `run_episode(track, agent="expert", *, space="heldout", seed=0, workdir, config=None) -> Episode(score,
  trajectory, seconds)` — one full episode (used by `bat bench sandbox`).
* `run_suite(agent, config, *, secret, split=, tracks=) -> list[RunScore]`, `aggregate(scores)` (track means, then mean).
* External evaluator: `run_external(checkpoint, workdir, config) -> list[RunScore]` runs
  `benchmark.external.command` (whole-argv placeholders {checkpoint} {request} {output}, no shell) and
  validates its cells strictly (`parse_cells`, `ExternalError`).
* Tool calls run through `bat.sandbox.Sandbox` (runtime from the `sandbox` section) or, with
  `benchmark.runtime = "inprocess"`, directly in this process (`bat/benchmark/runtime.py`, one place).

Any staged benchmark (`bat.staged.interface`, docs/byo-benchmark.md): `Benchmark` (stages with criteria, tracks,
tools, tasks per split, `open(task, workdir, state=None) -> Environment`, scripted agents, fingerprints) and
`Environment` (reset/step/state/snapshot/score). `bat.staged.registry.load(name, config)` finds one by name
(entry points `bat.benchmarks`); `bat.benchmark.plugin.BuiltinBenchmark` is this benchmark behind it;
`bat.benchmark.conformance.check(bench, workdir)` lists what does not conform.

CLI: `bat benchmark run --agent expert|noop|skip-validate [--track T] [--json] [--config FILE] [--benchmark NAME]`;
`bat benchmark fingerprints --out FILE` (held-out fingerprint entries as JSONL); `bat benchmark list [--json]`;
`bat benchmark check NAME`.
"""

from __future__ import annotations

import importlib
from typing import Any

SUITE_VERSION = "builtin-2"
"""Version of the built-in held-out suite (instance generation + tracks); bump when its content changes.
builtin-2: held-out instances derive from the run's held-out secret (128-bit seeds, ids that hide the seed)."""
HARNESS_VERSION = "builtin-grader-1"
"""Version of the grader (rubric items, proxies, stage formulas)."""
GENERATOR_VERSION = "builtin-1"
"""Version of practice instance generation (the Stage Bank's tasks); unchanged by builtin-2 of the held-out suite."""

_EXPORTS = {
    "bat.benchmark.agents": ("AGENTS", "Trajectory", "Turn", "outcome_of", "run_agent"),
    "bat.benchmark.contract": (
        "BUILTIN_STAGE_KEYS",
        "STAGE_SKILLS",
        "EvidenceSpec",
        "RubricItem",
        "agentic",
        "evidence_requirements",
        "overall",
        "rubric",
        "stage_formula",
        "stage_score",
        "to_percent",
    ),
    "bat.benchmark.env": ("Observation", "StagedEnv"),
    "bat.benchmark.episode": ("Episode", "run_episode", "run_instance"),
    "bat.benchmark.external": ("ExternalCell", "ExternalError", "parse_cells", "run_external"),
    "bat.benchmark.grader": ("grade",),
    "bat.benchmark.judging": ("config_judge",),
    "bat.benchmark.instance": (
        "PILOT_REVEALED",
        "PITFALLS",
        "Instance",
        "InstanceParams",
        "generate_instance",
        "load_grader",
        "materialize",
        "params_problems",
    ),
    "bat.benchmark.score": ("RunScore",),
    "bat.benchmark.secret": ("HeldoutSecret", "load_or_create_secret", "run_secret"),
    "bat.benchmark.suite": (
        "SPLITS",
        "SuiteRun",
        "aggregate",
        "fingerprint_entries",
        "heldout_suite",
        "instance_identifiers",
        "practice_instance",
        "practice_seed",
        "run_suite",
        "suite_instance",
    ),
    "bat.benchmark.tools.specs": ("TOOL_NAMES", "TOOL_SPECS", "tool_specs"),
    "bat.benchmark.tracks": ("TRACKS",),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted([*_WHERE, "GENERATOR_VERSION", "HARNESS_VERSION", "SUITE_VERSION"])


def __getattr__(name: str) -> Any:
    """Lazy exports: tool functions run inside the sandbox import only their own module."""
    if name not in _WHERE:
        raise AttributeError(f"module 'bat.benchmark' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)


def __dir__() -> list[str]:
    return __all__
