"""BenchmarkConfig: which staged benchmark evaluates, its suite shape, seed spaces and grading knobs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from bat.config.base import Section
from bat.config.contract import ContractConfig
from bat.config.stages import builtin_declared


def builtin_tracks() -> tuple[str, ...]:
    """The built-in benchmark's tracks (declared by that plug-in, `bat.benchmarks.builtin_spec`)."""
    return tuple(builtin_declared().TRACKS)


def __getattr__(name: str) -> Any:
    """`ALL_TRACKS`: the built-in benchmark's tracks, read from the plug-in on first use."""
    if name == "ALL_TRACKS":
        return builtin_tracks()
    raise AttributeError(f"module 'bat.config.benchmark' has no attribute {name!r}")


class ExternalEvaluatorConfig(Section):
    """An external evaluator run as a command (no shell) that writes per-run cells as JSON."""

    command: tuple[str, ...] = ()
    """argv template; whole-argument placeholders `{checkpoint}`, `{request}`, `{output}` are substituted."""
    timeout_s: float = Field(3600.0, gt=0.0)
    """Wall-clock limit of one evaluator invocation."""


class BenchmarkConfig(Section):
    """The staged benchmark: built-in offline suite (default) or an external evaluator adapter."""

    kind: Literal["builtin", "external"] = "builtin"
    """`builtin` = the offline synthetic suite in `bat.benchmark`; `external` = `external.command`."""
    name: str = Field("builtin", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """The staged benchmark (plug-in of `bat.staged.interface`) found by this name in the registry
    (`bat benchmark list`: the shipped `builtin` and `sqlqa`, and installed `bat.benchmarks` entry points)."""
    tracks: tuple[str, ...] = Field(default_factory=builtin_tracks)
    """Tracks of the held-out suite (and of practice generation): tracks of the benchmark `name` names (default: all
    of them; `bat benchmark list` shows them); with `kind: external` the evaluator names its own."""
    repeats: int = Field(10, ge=1, le=1000)
    """Runs per track in the held-out suite (each its own fixed instance and sampling seed)."""
    split_repeats: dict[Literal["controller", "final", "test"], int] = Field(default_factory=dict)
    """Runs per track of the named held-out splits of the built-in suite, overriding `repeats` there (e.g.
    `{final: 5, test: 5}`: a small controller split to route on, larger final and test splits whose half-widths
    mean something). Splits not named use `repeats`. An external evaluator's request carries the split's count."""
    heldout_seed: int = Field(1009, ge=0)
    """Root seed of the held-out space; instances derive from (heldout_seed, split, track, repeat)."""
    practice_seed: int = Field(2027, ge=0)
    """Root seed of the practice space (Stage Bank tasks); must differ from `heldout_seed`."""
    tier: Literal["lite", "standard"] = "lite"
    """`lite`: the brief names the model to use and gives stage hints; `standard`: the agent must choose."""
    cases_per_instance: int = Field(6, ge=3, le=64)
    """Cases in one instance (kept tiny so a scripted run takes well under a second of compute)."""
    pitfall_probability: float = Field(0.5, ge=0.0, le=1.0)
    """Probability of each pitfall (normalisation, layout, dependency, corrupt case) per instance."""
    candidate_models: int = Field(3, ge=1, le=3)
    """Model cards in `models/` (each track has 3 modality profiles); exactly one fits the instance's modality."""
    pilot_max_cases: int = Field(2, ge=1, le=8)
    """A run_model call on at most this many cases is a pilot (S3); more is batch inference (S4)."""
    setup_fail_limit: int = Field(5, ge=0, le=100)
    """s2d: at most this many failed setup calls (install/load/check) still pass."""
    max_tool_calls: int = Field(40, ge=1, le=1000)
    """Tool calls per episode; the episode ends after this many."""
    max_observation_chars: int = Field(2048, ge=64, le=1_000_000)
    """Characters of one tool result shown to the agent (reference: 2,048)."""
    execute_code: bool = False
    """Offer the `execute_code` tool (python/bash inside the sandbox) to LLM agents."""
    runtime: Literal["sandbox", "inprocess"] = "sandbox"
    """`sandbox`: tool calls go through `bat.sandbox` (runtime from the `sandbox` section);
    `inprocess`: call tool functions directly (fast; no isolation; for tests and benches)."""
    external: ExternalEvaluatorConfig = ExternalEvaluatorConfig()
    """External evaluator adapter (used when kind = external)."""
    contract: ContractConfig = Field(default_factory=ContractConfig)
    """Rubric items, evidence requirements and score formula per stage (default: the built-in contract). With
    `kind: builtin` only the built-in grader's ids are valid (texts may change, items may be dropped)."""

    @model_validator(mode="after")
    def _check(self) -> BenchmarkConfig:
        if self.heldout_seed == self.practice_seed:
            raise ValueError(f"benchmark.heldout_seed and practice_seed must differ, both are {self.heldout_seed}")
        valid = self.valid_tracks()
        if len(set(self.tracks)) != len(self.tracks) or not self.tracks:
            raise ValueError(
                f"benchmark.tracks must be non-empty and unique, got {list(self.tracks)}; valid: {list(valid or ())}"
            )
        unknown = [t for t in self.tracks if valid is not None and t not in valid]
        if unknown:
            raise ValueError(f"benchmark.tracks: unknown tracks {unknown} of {self.name}; valid: {list(valid or ())}")
        if self.kind == "external" and not self.external.command:
            raise ValueError("benchmark.kind = 'external' needs benchmark.external.command (an argv list)")
        if self.name == "builtin" and self.kind == "builtin":
            self.contract.check_builtin()
        bad = {split: n for split, n in self.split_repeats.items() if not 1 <= n <= 1000}
        if bad:
            raise ValueError(f"benchmark.split_repeats must be 1-1000 runs per track, got {bad}")
        return self

    def valid_tracks(self) -> tuple[str, ...] | None:
        """The tracks `benchmark.tracks` may name: those of the benchmark `name` (UnknownBenchmark: a ValueError
        listing the valid names), or None with `kind: external` and the built-in name (the evaluator names its own)."""
        if self.name == "builtin":
            return None if self.kind == "external" else builtin_tracks()
        from bat.staged.registry import load, names

        if self.name not in names():
            raise ValueError(f"benchmark.name: unknown benchmark {self.name!r}; valid: {names()}")
        return tuple(load(self.name).tracks())

    def repeats_for(self, split: str) -> int:
        """Runs per track of held-out `split`: `split_repeats[split]`, else `repeats`."""
        return self.split_repeats.get(split, self.repeats)  # type: ignore[call-overload]


def plugin_stage_defaults(data: Any) -> Any:
    """Raw config `data` completed from the benchmark `benchmark.name` names when that is not the built-in one: its
    stages (keys, names, weights) when `stages` is not given, its tracks when `benchmark.tracks` is not given, and
    the promotion gate's late stages (every stage after the first two, the built-in benchmark's rule too) when
    `curriculum.gate.late_stages` is not given."""
    bench = data.get("benchmark") if isinstance(data, dict) else None
    if not isinstance(bench, dict) or bench.get("name", "builtin") == "builtin":
        return data
    from bat.staged.registry import UnknownBenchmarkError, load

    try:
        plugin = load(bench["name"])
    except UnknownBenchmarkError:
        return data  # BenchmarkConfig's check names the valid benchmarks
    out = {**data, "benchmark": {"tracks": list(plugin.tracks()), **bench}}
    out.setdefault("stages", [{"key": s.key, "name": s.name, "weight": s.weight} for s in plugin.stages()])
    keys = [s["key"] if isinstance(s, dict) else s.key for s in out["stages"]]
    curriculum = out.get("curriculum") if isinstance(out.get("curriculum"), dict) else {}
    gate = curriculum.get("gate") if isinstance(curriculum.get("gate"), dict) else {}
    if "curriculum" not in out or isinstance(out["curriculum"], dict):
        out["curriculum"] = {**curriculum, "gate": {"late_stages": keys[2:] or keys[-1:], **gate}}
    return out


def plugin_stage_problems(benchmark: BenchmarkConfig, keys: list[str]) -> str:
    """Why configured stage `keys` do not fit the plug-in benchmark `benchmark.name` (empty: they do)."""
    from bat.staged.registry import load

    own = [s.key for s in load(benchmark.name).stages()]
    if keys != own:
        return (
            f"stages {keys} are not those of benchmark {benchmark.name!r}; use its stages {own} (or leave stages out)"
        )
    return ""
