"""Phase graph, executors (submitit slurm/local/debug), Apptainer wrapping, preemption, launcher.

Contract for phase authors
----------------------------------------
* A phase function is `def run_<phase>(ctx: PhaseContext) -> PhaseResult` (the contract lives below the phases,
  in `bat.phase`). Its package's `phase.py` declares a `bat.phase.spec.PhaseSpec` next to it (function, the
  layout files it reads and writes, resources key); `bat.orchestrate.graph.PHASES` lists those specs in the order
  of `bat.phase.order`, and `bat phases` prints them (copy in `docs/PHASES.md`, checked by the tests). Adding a
  phase: its module with function and spec, its name in `bat.phase.order`, its spec in the graph's list.
* The runner checks a product phase's declared writes when its function returns: a declared file it did not
  write fails the phase (`runner.PhaseOutputMissing`) before DONE.json. Declare conditional products with
  `bat.phase.spec.Maybe`. Consumers find products at their layout paths (e.g. `layout.candidate_model(r)`), never
  in DONE.json extra keys.
* Write outputs under `ctx.phase_dir` (or the layout paths your phase owns), atomically, and resume
  from partial outputs found there: a phase may be killed (SIGKILL) or interrupted (USR2 ->
  requeue) at any moment and is then simply called again with the same context; the rerun must
  produce the same outputs. Do not write DONE.json yourself: the runner writes it last from your
  `PhaseResult` (inputs/outputs digested, counts, extra).
* Optional: register a flush hook with `bat.orchestrate.preempt.on_interrupt(fn)` to persist
  in-memory progress (e.g. a step checkpoint) when the job is interrupted; it runs before requeue.
* `route` writes its decision record (`round_NN/route/decision.json`); `next_round: null` there ends the run,
  otherwise the orchestrator queues round r+1 while r+1 <= `config.run.rounds`.
* Async bank refresh beside round r >= 1 runs synthesize -> scan with `ctx.round == r`
  (outputs recorded under `round_NN/synthesize|scan/`, the bank version itself under `bank/vNNNN/`).
* Multi-GPU phases: with `resources.<phase>.launcher == "tasks"` the function runs once per task
  (one per GPU) under srun; read ranks from `submitit.JobEnvironment()`; only rank 0's result is
  recorded.

Public API (for the CLI, jobs/ and tests)
-----------------------------------------
* `graph.PHASES: dict[str, PhaseSpec]` (name, run, reads, writes, resources key; rows in data-flow
  order), `graph.round_phases(r)`; the orders themselves are `bat.phase.order`;
  `graph.resolve_table(config)` (applies `orchestrate.phase_overrides`), `graph.load_phase_fn(target)`.
* `runner.run_phase(config, layout, round, phase) -> PhaseResult | None` (None: already DONE); writes
  DONE.json last with `extra.compute_s`.
* `driver.run(config, layout, *, wait=False) -> int` (what `bat run` and `jobs/launch.py` call),
  `driver.queue_round(config, layout, round, owner=None) -> list[job id]` (lease + afterok chain),
  `driver.next_round(config, layout) -> int | None`, `driver.wait_slurm(config, layout, timeout_s)`.
* `jobwait.run_callable(config, layout, round, phase, fn, label) -> result`: one extra job (not a phase) under a
  phase's executor and resources, waited for (the experiment's wide evaluations run so, never in its own process);
  `jobwait.await_job` (how the driver waits for local/debug phase jobs), `jobwait.PhaseFailed`.
* `preflight.preflight(config, round)` raises `PreflightError` (a `ConfigError`) before anything is queued.
* `executors.make_executor(config, layout, round, phase, dependency=None) -> submitit.AutoExecutor`;
  `executors.executor_kind(config)` resolves `auto`.
* `driver.PhaseJob` (the Checkpointable submitted per phase), `preempt.on_interrupt(fn)` flush hooks.
* `container.apptainer_argv(container_cfg, state_root, command, scratch=None, paths=()) -> list[str]`,
  `container.submitit_python(config, layout) -> str` (submitit's `python=` hook through the wrapper
  `container_exec`, which relays Slurm commands to the job's host side), `container_paths.configured_paths(config)`
  and `container_paths.container_problems(config)` (relative or missing paths, checked by preflight).
* `status.collect_status(layout) -> dict` (what `bat status --json` prints).
* `bat.phase.events.log_event(layout, round, phase, message)`: one line in `events.log` and `round_NN/events.log`.
"""
