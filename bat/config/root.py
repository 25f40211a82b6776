"""`BatConfig`: the whole typed configuration, one section per module; cross-section checks live here."""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, model_validator

from bat.config.bank import BankConfig
from bat.config.base import Section
from bat.config.benchmark import BenchmarkConfig, plugin_stage_defaults, plugin_stage_problems
from bat.config.curriculum import CurriculumConfig, GateConfig
from bat.config.deepspeed import training_precision
from bat.config.evaluate import EvaluateConfig
from bat.config.grpo import GrpoConfig
from bat.config.leakage import LeakageConfig
from bat.config.model import ModelConfig
from bat.config.orchestrate import OrchestrateConfig
from bat.config.rollout import RolloutConfig
from bat.config.run import RunConfig
from bat.config.sandbox import SandboxConfig
from bat.config.sft import SftConfig
from bat.config.stages import StageSpec, builtin_stages
from bat.config.verify import VerifyConfig


class BatConfig(Section):
    """Every knob of a bat run. Load with `bat.config.load_config`; dump with `resolved_json`."""

    run: RunConfig = Field(default_factory=RunConfig)
    """Run name, seed, round budget."""
    stages: tuple[StageSpec, ...] = Field(default_factory=builtin_stages)
    """Ordered stages of the staged benchmark with their Agentic weights (sum to 1); default: those of the benchmark
    `benchmark.name` names."""
    benchmark: BenchmarkConfig = Field(default_factory=BenchmarkConfig)
    """The staged benchmark used for evaluation and as the practice-task source."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """Isolation runtime and limits for tool execution."""
    bank: BankConfig = Field(default_factory=BankConfig)
    """Stage Bank synthesis."""
    leakage: LeakageConfig = Field(default_factory=LeakageConfig)
    """Leakage preflight scanner."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    """Base policy model (local HF path or the offline tiny builder)."""
    sft: SftConfig = Field(default_factory=SftConfig)
    """Cold-start supervised fine-tuning."""
    grpo: GrpoConfig = Field(default_factory=GrpoConfig)
    """GRPO block and its DeepSpeed engine."""
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    """Multi-turn rollout engine and budgets."""
    verify: VerifyConfig = Field(default_factory=VerifyConfig)
    """Rubric verifier and optional LLM judge."""
    evaluate: EvaluateConfig = Field(default_factory=EvaluateConfig)
    """Held-out controller/final evaluation."""
    curriculum: CurriculumConfig = Field(default_factory=CurriculumConfig)
    """Router, mixture, promotion gate, fallback, baseline arm."""
    orchestrate: OrchestrateConfig = Field(default_factory=OrchestrateConfig)
    """Executors, per-phase resources, containers, preemption."""

    @model_validator(mode="before")
    @classmethod
    def _plugin_stages(cls, data: Any) -> Any:
        return plugin_stage_defaults(data)

    @model_validator(mode="after")
    def _check_stages(self) -> BatConfig:
        keys = [stage.key for stage in self.stages]
        if not keys:
            raise ValueError("stages: at least one stage is required")
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise ValueError(f"stages: duplicate stage keys {duplicates}; keys must be unique, got {keys}")
        total = sum(stage.weight for stage in self.stages)
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            weights = {stage.key: stage.weight for stage in self.stages}
            raise ValueError(f"stages: weights must sum to 1.0, got {total:.6g} from {weights}")
        pinned = self.curriculum.target_stage
        if pinned is not None and pinned not in keys:
            raise ValueError(f"curriculum.target_stage: unknown stage {pinned!r}; valid: {keys} (or null: the router)")
        late = [k for k in self.curriculum.gate.late_stages if k not in keys]
        if late and self.curriculum.gate.late_stages != GateConfig().late_stages:
            # the default names the built-in benchmark's late stages; under other stage keys it bounds none of them
            raise ValueError(f"curriculum.gate.late_stages: unknown stages {late}; valid: {keys}")
        if self.benchmark.name != "builtin":
            problem = plugin_stage_problems(self.benchmark, keys)
            if problem:
                raise ValueError(problem)
            return self
        defined = list(self.benchmark.contract.stages)
        missing = [k for k in keys if k not in defined]
        if missing:
            raise ValueError(
                f"stages {missing} have no contract (rubric items, evidence); define them under "
                f"benchmark.contract.stages; defined: {defined}"
            )
        unknown = sorted(set(self.bank.skills) - set(keys))
        if unknown:
            raise ValueError(f"bank.skills has stage keys {unknown} that are not configured; valid keys: {keys}")
        return self

    @model_validator(mode="after")
    def _check_lengths(self) -> BatConfig:
        positions = self.model.positions()
        if positions is None:
            return self
        source = (
            f"model.pretrained {self.model.pretrained!r}" if self.model.pretrained else f"model.path {self.model.path}"
        )
        limits = {
            "sft.max_seq_len": self.sft.max_seq_len,
            "grpo.max_seq_len": self.grpo.max_seq_len,
            "rollout.budgets.max_context_tokens": self.rollout.budgets.max_context_tokens,
        }
        over = [f"{key}={value}" for key, value in limits.items() if value > positions]
        if over:
            raise ValueError(
                f"{', '.join(over)} exceed the {positions} positions of {source}; set each to at most {positions}"
            )
        return self

    @model_validator(mode="after")
    def _check_precision(self) -> BatConfig:
        for where, section in (("sft.deepspeed", self.sft.deepspeed), ("grpo.deepspeed", self.grpo.deepspeed)):
            training_precision(section, self.model.dtype, where)
        return self

    @property
    def stage_keys(self) -> tuple[str, ...]:
        return tuple(stage.key for stage in self.stages)

    @property
    def stage_weights(self) -> dict[str, float]:
        return {stage.key: stage.weight for stage in self.stages}
