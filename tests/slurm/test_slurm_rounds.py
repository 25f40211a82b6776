"""On the real local Slurm: a smoke round via `sbatch run_round.sh`; every phase interrupted once (USR2 via
scancel, SIGTERM + Slurm requeue, SIGKILL + resubmission) finishing with identical outputs; a bad config
refused before queueing; concurrent drivers not double-queueing."""

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import toy_phases
import yaml

from bat.config import resolved_dict
from bat.orchestrate import driver, jobwait
from bat.orchestrate.jobrecords import job_active, read_job_record, slurm_job_state
from bat.state.layout import RunLayout

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slurm


def _config_file(tmp_path, name, rounds=1, extra=()):
    cfg = toy_phases.toy_config("slurm", rounds=rounds, extra=[f"run.name={name}", *extra])
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(resolved_dict(cfg)))
    return cfg, path


def _env(config_path, state):
    return {**os.environ, "BAT_CONFIG": str(config_path), "BAT_STATE": str(state)}


def _sbatch(config_path, state, tmp_path):
    out = subprocess.run(
        ["sbatch", "--parsable", "--mem=500M", "-o", str(tmp_path / "driver-%j.out"), "run_round.sh"],
        cwd=REPO,
        env=_env(config_path, state),
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip().split(";")[0]


def _wait_finished(cfg, layout, timeout_s=150.0):
    """Poll until every round is DONE; fail early when no job of the run is alive any more."""
    deadline = time.monotonic() + timeout_s
    idle_since = None
    while driver.next_round(cfg, layout) is not None:
        alive = any(job_active(read_job_record(layout, r, p)) for r in (0, 1) for p in toy_phases.UPSTREAM)
        idle_since = None if alive else (idle_since or time.monotonic())
        if time.monotonic() > deadline or (idle_since and time.monotonic() - idle_since > 8):
            log = (layout.root / "events.log").read_text() if (layout.root / "events.log").exists() else ""
            raise AssertionError(f"run not finished (alive={alive}); events:\n{log[-3000:]}")
        time.sleep(0.3)


def _sacct_names(name):
    out = subprocess.run(
        [
            "sacct",
            "-n",
            "-X",
            "-P",
            "-S",
            "now-1hour",
            "-o",
            "JobName%60,State",
            "--name",
            ",".join(f"{name}.r{r:02d}.{p}" for r in (0, 1) for p in toy_phases.UPSTREAM),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [tuple(line.split("|")) for line in out.splitlines() if line]


def _wait_jobs_ended(name, expected, timeout_s=60.0):
    """sacct rows of the run's phase jobs once `expected` of them are recorded and none is pending/running.

    slurmdbd records jobs asynchronously, so right after the run finishes sacct may list fewer
    jobs than ran (on a loaded machine, none): wait for the count rather than trust the first answer.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        jobs = _sacct_names(name)
        ended = all(state in ("COMPLETED", "FAILED", "CANCELLED") or state.startswith("CANCELLED") for _, state in jobs)
        if ended and len(jobs) >= expected:
            return jobs
        if time.monotonic() > deadline:
            raise AssertionError(f"expected {expected} ended jobs within {timeout_s}s; sacct lists: {jobs}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("reference")
    assert driver.run(toy_phases.toy_config("debug"), RunLayout(root)) == 0
    return toy_phases.output_digests(root)


def test_smoke_rounds_through_sbatch_run_round(slurm_cluster, tmp_path, reference):
    name = f"smoke{os.getpid()}"
    cfg, path = _config_file(tmp_path, name)
    layout = RunLayout(tmp_path / "state")
    _sbatch(path, layout.root, tmp_path)
    _wait_finished(cfg, layout)
    assert toy_phases.output_digests(layout.root) == reference
    jobs = _wait_jobs_ended(name, expected=10)
    assert len(jobs) == 10 and all(state == "COMPLETED" for _, state in jobs)
    log = (layout.root / "events.log").read_text()
    assert "r00 route: job running" in log and "r01 driver: lease taken by slurm-job-" in log
    assert "r01 route: round budget run.rounds=1 reached" in log


def _when_midway(layout, r, phase, timeout_s=60.0):
    """(job id, pid) of the phase's process once it wrote its first shard and is not DONE."""
    deadline = time.monotonic() + timeout_s
    phase_dir = layout.phase_dir(r, phase)
    while time.monotonic() < deadline:
        record = read_job_record(layout, r, phase)
        pid = toy_phases.event_pid(layout.root, r, phase)
        if record and pid and (phase_dir / "shard_000.jsonl").exists() and not (phase_dir / "DONE.json").exists():
            return record["job_id"], pid
        time.sleep(0.05)
    raise AssertionError(f"round {r} {phase} never got mid-way")


@pytest.mark.slow
def test_interrupted_phases_finish_with_identical_outputs(slurm_cluster, tmp_path, reference, monkeypatch):
    monkeypatch.setenv("BAT_TOY_SLEEP", "0.3")
    name = f"intr{os.getpid()}"
    cfg, path = _config_file(tmp_path, name)
    layout = RunLayout(tmp_path / "state")
    _sbatch(path, layout.root, tmp_path)
    # each of the eight phases once: round 0's own three, then all five of round 1
    plan = [(0, "synthesize"), (0, "scan"), (0, "sft")] + [
        (1, p) for p in ("rollout", "verify", "grpo", "evaluate", "route")
    ]
    for r, phase in plan:
        job_id, pid = _when_midway(layout, r, phase)
        if (r, phase) == (1, "verify"):  # hard kill of the phase process: the job fails, dependents are cancelled
            os.kill(pid, signal.SIGKILL)
            for _ in range(100):
                if slurm_job_state(job_id) not in (None, "RUNNING", "COMPLETING"):
                    break
                time.sleep(0.1)
            assert slurm_job_state(job_id) == "FAILED"
            _sbatch(path, layout.root, tmp_path)  # resubmitting queues only the unfinished phases
        elif (r, phase) == (1, "evaluate"):  # preemption on a SIGTERM-only cluster: SIGTERM, Slurm requeues
            subprocess.run(["scontrol", "requeue", job_id], check=True)
        else:  # what Slurm sends before a preemption or the time limit
            subprocess.run(["scancel", "--signal=USR2", job_id], check=True)
    _wait_finished(cfg, layout, timeout_s=200)
    assert toy_phases.output_digests(layout.root) == reference
    assert toy_phases.row_count(layout.root) == 10 * 12
    log = (layout.root / "events.log").read_text()
    assert log.count("interrupted (preemption)") == 6
    assert "r01 evaluate: SIGTERM: flushed 0 hook(s), exiting" in log
    assert log.count("r00 synthesize: DONE") == 1 and log.count("r01 verify: start") == 2


def test_bad_config_is_refused_before_any_job_is_queued(slurm_cluster, tmp_path):
    name = f"bad{os.getpid()}"
    _, path = _config_file(tmp_path, name, extra=["orchestrate.resources.sft.partition=gpu-a100"])
    layout = RunLayout(tmp_path / "state")
    out = subprocess.run(["./run_round.sh"], cwd=REPO, env=_env(path, layout.root), capture_output=True, text=True)
    assert out.returncode == 2
    assert "orchestrate.resources.sft.partition='gpu-a100' does not exist; valid: ['debug']" in out.stderr
    bad_value = tmp_path / "bad_value.yaml"
    bad_value.write_text("orchestrate: {executor: slurm, signal_delay_s: -5}\n")
    out = subprocess.run(["./run_round.sh"], cwd=REPO, env=_env(bad_value, layout.root), capture_output=True, text=True)
    assert out.returncode == 2 and "orchestrate.signal_delay_s" in out.stderr
    assert _sacct_names(name) == []
    assert not list(layout.root.glob("jobs/round_*/*.job.json"))


def test_concurrent_drivers_do_not_double_queue(slurm_cluster, tmp_path):
    name = f"dq{os.getpid()}"
    cfg, path = _config_file(tmp_path, name, rounds=0)
    layout = RunLayout(tmp_path / "state")
    results = []

    def drive():
        results.append(
            subprocess.run(["./run_round.sh"], cwd=REPO, env=_env(path, layout.root), capture_output=True, text=True)
        )

    threads = [threading.Thread(target=drive) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert [r.returncode for r in results] == [0, 0, 0], [r.stderr for r in results]
    _wait_finished(cfg, layout, timeout_s=90)
    jobs = _wait_jobs_ended(name, expected=5)
    assert sorted(n for n, _ in jobs) == sorted(
        f"{name}.r00.{p}" for p in ("synthesize", "scan", "sft", "evaluate", "route")
    )
    outputs = " ".join(r.stdout for r in results)
    assert "queued on Slurm" in outputs
    log = (layout.root / "events.log").read_text()
    assert outputs.count("held by") + log.count("not queueing again") >= 1  # the others were turned away


PRODUCT_TIMEOUT_S = float(os.environ.get("BAT_SLURM_PRODUCT_TIMEOUT", "1200"))


def _product_config(tmp_path):
    from bat.config import load_config

    cfg = load_config(REPO / "configs" / "smoke.yaml", ["orchestrate.executor=slurm"])
    path = tmp_path / "smoke.yaml"
    path.write_text(yaml.safe_dump(resolved_dict(cfg)))
    return cfg, path


def _product_digests(root: Path) -> dict[str, str]:
    """What a real round produced, path-free: weight digests of the SFT and round-1 exports, the content of every
    rollout and reward shard (minus the state-dir paths they name), and every evaluation aggregate's scores."""
    import hashlib
    import json

    from bat.state.jsonl import read_jsonl

    out = {}
    for export in ("checkpoints/sft/export", "checkpoints/round_01/export"):
        out[export] = hashlib.sha256((root / export / "model.safetensors").read_bytes()).hexdigest()
    for shard in sorted(root.glob("round_*/rollout/shard_*/rollouts.jsonl")) + sorted(
        root.glob("round_*/verify/shard_*/rewards.jsonl")
    ):
        rows = [{k: v for k, v in row.items() if k not in ("checkpoint", "evidence_dir")} for row in read_jsonl(shard)]
        out[str(shard.relative_to(root))] = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()
    for agg in sorted(root.glob("round_*/*/aggregate_*.json")):
        data = json.loads(agg.read_text())
        out[str(agg.relative_to(root))] = json.dumps(
            {k: data[k] for k in ("overall", "task", "stages", "n_runs")}, sort_keys=True
        )
    return out


@pytest.fixture(scope="module")
def product_run(slurm_cluster, tmp_path_factory):
    """The real phases (configs/smoke.yaml, tiny model) through `sbatch run_round.sh`, uninterrupted."""
    tmp_path = tmp_path_factory.mktemp("product")
    cfg, path = _product_config(tmp_path)
    layout = RunLayout(tmp_path / "state")
    _sbatch(path, layout.root, tmp_path)
    _wait_finished(cfg, layout, timeout_s=PRODUCT_TIMEOUT_S)
    return layout


@pytest.mark.slow
def test_product_smoke_round_through_sbatch(product_run):
    """The real phases (configs/smoke.yaml, tiny model) through `sbatch run_round.sh` on Slurm."""
    layout = product_run
    done = sorted(str(p.relative_to(layout.root)) for p in layout.root.glob("round_*/*/DONE.json"))
    assert done == sorted(
        f"round_00/{p}/DONE.json" for p in ("synthesize", "scan", "sft", "evaluate", "route")
    ) + sorted(f"round_01/{p}/DONE.json" for p in ("rollout", "verify", "grpo", "evaluate", "route"))
    assert (layout.phase_dir(1, "evaluate") / "aggregate_controller.json").exists()


@pytest.mark.slow
def test_a_round_on_a_plugin_benchmark_through_sbatch(slurm_cluster, tmp_path, plugin_smoke):
    """The real phases on the second shipped benchmark (`sqlqa`, configs/smoke.yaml's sizes, tiny model) through
    `sbatch run_round.sh`: the bootstrap and round 1 finish, evaluated on the benchmark's own stages."""
    import json

    cfg = plugin_smoke("slurm")
    path = tmp_path / "sqlqa.yaml"
    path.write_text(yaml.safe_dump(resolved_dict(cfg)))
    layout = RunLayout(tmp_path / "state")
    _sbatch(path, layout.root, tmp_path)
    _wait_finished(cfg, layout, timeout_s=PRODUCT_TIMEOUT_S)
    done = sorted(str(p.relative_to(layout.root)) for p in layout.root.glob("round_*/*/DONE.json"))
    assert done == sorted(
        f"round_00/{p}/DONE.json" for p in ("synthesize", "scan", "sft", "evaluate", "route")
    ) + sorted(f"round_01/{p}/DONE.json" for p in ("rollout", "verify", "grpo", "evaluate", "route"))
    agg = json.loads((layout.phase_dir(1, "evaluate") / "aggregate_controller.json").read_text())
    assert sorted(agg["stages"]) == ["draft", "inspect", "submit", "validate"]


def _wait_for(condition, what: str, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened within {timeout_s:.0f}s: {what}")
        time.sleep(0.05)


def _has_entries(folder: Path) -> bool:
    try:
        return any(folder.iterdir())
    except FileNotFoundError:  # not made yet, or removed at the shard's end
        return False


@pytest.mark.slow
def test_real_phases_preempted_on_slurm_finish_with_identical_outputs(product_run, tmp_path):
    """USR2 (preemption notice) to the real SFT job once it has saved a checkpoint, SIGKILL of the real rollout
    process mid-shard then resubmission: the round finishes with the uninterrupted run's weights, rollouts,
    rewards and aggregates."""
    cfg, path = _product_config(tmp_path)
    layout = RunLayout(tmp_path / "state")
    layout.heldout_dir.mkdir(parents=True)  # the same held-out suite as the uninterrupted run
    shutil.copy2(product_run.heldout_secret, layout.heldout_secret)
    _sbatch(path, layout.root, tmp_path)

    sft = layout.phase_dir(0, "sft")
    _wait_for(
        lambda: (layout.sft_checkpoints / "step_000002").is_dir() and not (sft / "DONE.json").exists(),
        "SFT saved step 2 and is still training",
        PRODUCT_TIMEOUT_S,
    )
    sft_job = read_job_record(layout, 0, "sft")["job_id"]
    subprocess.run(["scancel", "--signal=USR2", sft_job], check=True)

    shard = layout.phase_dir(1, "rollout") / "shard_0000"
    # The shard's sandbox workspaces appear once the policy is loaded and its environments are open, i.e. while it
    # generates; its own files land only at its end. Killing then is mid-shard on a fast or a loaded machine alike.
    workspaces = layout.phase_scratch(1, "rollout") / "shard_0000"
    _wait_for(
        lambda: _has_entries(workspaces) or (shard / "DONE.json").exists(),
        "the rollout opened its shard's environments",
        PRODUCT_TIMEOUT_S,
    )
    assert not (shard / "DONE.json").exists(), "the rollout shard finished before it could be killed"
    rollout_job = read_job_record(layout, 1, "rollout")["job_id"]
    os.kill(toy_phases.event_pid(layout.root, 1, "rollout"), signal.SIGKILL)
    _wait_for(lambda: slurm_job_state(rollout_job) not in (None, "RUNNING", "COMPLETING"), "the rollout job ended", 60)
    assert slurm_job_state(rollout_job) == "FAILED"
    _sbatch(path, layout.root, tmp_path)  # resubmitting queues only the unfinished phases

    _wait_finished(cfg, layout, timeout_s=PRODUCT_TIMEOUT_S)
    log = (layout.root / "events.log").read_text()
    assert "r00 sft: interrupted (preemption)" in log
    assert log.count("r00 sft: start") == 2 and log.count("r01 rollout: start") == 2
    assert log.count("r00 synthesize: DONE") == 1
    reference, resumed = _product_digests(product_run.root), _product_digests(layout.root)
    assert {
        "round_01/rollout/shard_0000/rollouts.jsonl",
        "round_01/verify/shard_0000/rewards.jsonl",
        "round_01/evaluate/aggregate_controller.json",
        "checkpoints/round_01/export",
    } <= set(reference)
    assert resumed == reference


def test_slurm_up_is_a_noop_when_the_cluster_is_up(slurm_cluster):
    started = time.monotonic()
    out = subprocess.run([str(REPO / "scripts" / "slurm_up.sh")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "already up" in out.stderr and "sbatch run_round.sh" in out.stdout
    assert time.monotonic() - started < 10


def test_the_driver_flags_from_config_are_accepted_by_real_sbatch(slurm_cluster, tmp_path):
    """`sbatch $(bat config sbatch CONFIG) run_round.sh`: the driver's resources come from the config."""
    from bat.config import load_config
    from bat.orchestrate.executors import driver_sbatch_flags

    cfg = load_config(None, ["orchestrate.resources.driver.time_min=7", "orchestrate.resources.driver.mem_gb=0.5"])
    flags = driver_sbatch_flags(cfg)
    assert "--mem=512M" in flags and "--time=7" in flags
    out = subprocess.run(
        ["sbatch", "--test-only", *flags, "-o", str(tmp_path / "x.out"), "run_round.sh"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and "to start at" in out.stderr, out.stderr


def test_run_callable_runs_as_a_slurm_job_and_names_its_log_when_it_fails(slurm_cluster, tmp_path):
    """An extra job (the experiment's wide evaluation) is a Slurm job under a phase's resources, waited for."""
    import functools

    cfg, _ = _config_file(tmp_path, "extra")
    layout = RunLayout(tmp_path / "state")
    job_id = jobwait.run_callable(cfg, layout, 1, "final_test", functools.partial(os.getenv, "SLURM_JOB_ID"), "extra")
    assert job_id and (layout.submitit_dir(1, "final_test") / job_id).is_dir()  # ran inside that Slurm job
    assert f"extra: job {job_id} on slurm" in layout.events_log.read_text()
    with pytest.raises(jobwait.PhaseFailed, match=r"extra failed \(job \d+\): ValueError.*traceback in .*_log\.err"):
        jobwait.run_callable(cfg, layout, 1, "final_test", functools.partial(int, "not a number"), "extra")
