"""Whole rounds through submitit's local executor: resume, USR2/SIGTERM requeue, timeouts, SIGKILL, lease."""

import os
import signal
import threading
import time

import pytest
import toy_phases

from bat.orchestrate import driver, jobwait
from bat.orchestrate.driver import PhaseFailed
from bat.state.layout import RunLayout
from bat.state.lease import Lease

ALL_PHASES = [f"round_00/{p}" for p in ("evaluate", "route", "scan", "sft", "synthesize")] + [
    f"round_01/{p}" for p in ("evaluate", "grpo", "rollout", "route", "verify")
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Digests of an uninterrupted 2-round run (debug executor: in-process, same outputs)."""
    root = tmp_path_factory.mktemp("reference")
    assert driver.run(toy_phases.toy_config("debug"), RunLayout(root)) == 0
    digests = toy_phases.output_digests(root)
    assert sorted(digests) == ALL_PHASES
    return digests


def _background_run(config, layout):
    box = {}

    def target():
        try:
            box["rc"] = driver.run(config, layout)
        except Exception as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def _signal_mid_phase(layout, r, phase, sig, timeout=60.0):
    """Wait until (r, phase) has written its first shard but no DONE, then send `sig` to its process."""
    deadline = time.monotonic() + timeout
    phase_dir = layout.phase_dir(r, phase)
    while time.monotonic() < deadline:
        pid = toy_phases.event_pid(layout.root, r, phase)
        if pid and (phase_dir / "shard_000.jsonl").exists() and not (phase_dir / "DONE.json").exists():
            os.kill(pid, sig)
            return pid
        time.sleep(0.05)
    raise AssertionError(f"{phase} of round {r} never got mid-way")


def test_usr2_requeues_and_output_is_identical(tmp_path, reference, monkeypatch):
    monkeypatch.setenv("BAT_TOY_SLEEP", "0.3")
    monkeypatch.setenv("BAT_TOY_SLOW", "0:sft")
    layout = RunLayout(tmp_path / "run")
    thread, box = _background_run(toy_phases.toy_config("local", rounds=0), layout)
    first = _signal_mid_phase(layout, 0, "sft", signal.SIGUSR2)
    thread.join(120)
    assert box == {"rc": 0}
    assert toy_phases.output_digests(layout.root) == {k: v for k, v in reference.items() if k.startswith("round_00")}
    log = (layout.root / "events.log").read_text()
    assert "r00 sft: interrupted (preemption), flushed 0 hook(s), requeueing" in log
    assert toy_phases.event_pid(layout.root, 0, "sft") != first  # a new process finished it
    assert toy_phases.row_count(layout.root) == 5 * 12


def test_sigterm_flushes_and_exits_without_requeue_then_rerun_resumes(tmp_path, reference, monkeypatch):
    monkeypatch.setenv("BAT_TOY_SLEEP", "0.3")
    monkeypatch.setenv("BAT_TOY_SLOW", "0:scan")
    layout = RunLayout(tmp_path / "run")
    cfg = toy_phases.toy_config("local", rounds=0)
    thread, box = _background_run(cfg, layout)
    _signal_mid_phase(layout, 0, "scan", signal.SIGTERM)
    thread.join(120)
    assert isinstance(box.get("error"), PhaseFailed)  # scancel/SIGTERM: no self-requeue
    assert "r00 scan: SIGTERM: flushed 0 hook(s), exiting" in (layout.root / "events.log").read_text()
    assert driver.run(cfg, layout) == 0
    assert toy_phases.output_digests(layout.root) == {k: v for k, v in reference.items() if k.startswith("round_00")}


def test_interrupt_near_short_time_limit_counts_as_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("BAT_TOY_SLEEP", "0.3")
    monkeypatch.setenv("BAT_TOY_SLOW", "0:scan")
    layout = RunLayout(tmp_path / "run")
    cfg = toy_phases.toy_config(
        "local", rounds=0, extra=["orchestrate.resources.scan.time_min=5", "orchestrate.max_timeouts=0"]
    )
    thread, box = _background_run(cfg, layout)
    _signal_mid_phase(layout, 0, "scan", signal.SIGUSR2)
    thread.join(120)
    assert isinstance(box.get("error"), PhaseFailed) and "round 0 phase scan failed" in str(box["error"])
    assert "r00 scan: interrupted (timeout)" in (layout.root / "events.log").read_text()
    assert not (layout.phase_dir(0, "scan") / "DONE.json").exists()


def test_sigkill_then_resubmit_resumes_to_identical_outputs(tmp_path, reference, monkeypatch):
    monkeypatch.setenv("BAT_TOY_SLEEP", "0.3")
    monkeypatch.setenv("BAT_TOY_SLOW", "1:verify")
    layout = RunLayout(tmp_path / "run")
    cfg = toy_phases.toy_config("local")
    thread, box = _background_run(cfg, layout)
    _signal_mid_phase(layout, 1, "verify", signal.SIGKILL)
    thread.join(120)
    assert isinstance(box.get("error"), PhaseFailed)
    partial = sorted(p.name for p in layout.phase_dir(1, "verify").glob("shard_*"))
    assert 1 <= len(partial) < 4
    assert driver.run(cfg, layout) == 0  # resubmission: only unfinished phases run
    assert toy_phases.output_digests(layout.root) == reference
    assert toy_phases.row_count(layout.root) == 10 * 12
    log = (layout.root / "events.log").read_text()
    assert log.count("r00 synthesize: start") == 1 and log.count("r01 verify: start") == 2
    assert driver.next_round(cfg, layout) is None
    records = sorted(p.read_text() for p in layout.jobs_dir.glob("round_*/*.job.json"))
    assert len(records) == 10
    assert driver.run(cfg, layout) == 0  # everything DONE: nothing queued again
    assert sorted(p.read_text() for p in layout.jobs_dir.glob("round_*/*.job.json")) == records


def test_lease_blocks_a_second_driver(tmp_path, capsys):
    layout = RunLayout(tmp_path / "run")
    cfg = toy_phases.toy_config("local")
    with Lease(layout.lease("round_00"), "other-driver", ttl_s=60):
        assert driver.run(cfg, layout) == 0
    assert "held by other-driver" in capsys.readouterr().out
    assert not layout.jobs_dir.exists() or not list(layout.jobs_dir.glob("round_*/*.job.json"))


def test_damaged_state_file_in_a_job_is_an_input_error_naming_it(tmp_path, monkeypatch, capsys):
    from bat.orchestrate.driver import PhaseInputError

    layout = RunLayout(tmp_path / "run")
    torn = layout.phase_dir(0, "synthesize") / "shard_001.jsonl"
    torn.parent.mkdir(parents=True)
    torn.write_bytes(b'{"phase": "synthesize", "ro')  # a torn partial output left by a crash
    with pytest.raises(PhaseInputError) as info:
        driver.run(toy_phases.toy_config("local", rounds=0), layout)
    message = str(info.value)
    assert f"{torn}:1: truncated line" in message and "Traceback" not in message
    assert not (layout.phase_dir(0, "synthesize") / "DONE.json").exists()
    assert "refused a damaged input" in (layout.root / "events.log").read_text()


def test_job_failure_keeps_the_last_line_and_ctrl_c_is_an_interrupt():
    text = 'Traceback (most recent call last):\n  File "x.py", line 1\n    boom()\nValueError: boom happened\n'
    assert jobwait.last_line(RuntimeError(text)) == "ValueError: boom happened"
    assert jobwait.last_line(RuntimeError("")) == "RuntimeError"


def test_a_real_job_failure_keeps_the_error_not_the_log_paths(tmp_path):
    """submitit's failure text ends with the job's log paths; the line kept is the job's own error."""
    import submitit

    job = submitit.AutoExecutor(folder=tmp_path / "%j", cluster="local").submit(int, "not a number")
    error = job.exception()
    assert str(error).rstrip().endswith(str(job.paths.stdout))  # the paths come last
    assert jobwait.last_line(error) == "ValueError: invalid literal for int() with base 10: 'not a number'"
    # a job whose own output holds rules (torchrun's failure report) keeps its last line too
    report = f"{'-' * 55}\nRoot Cause\n{'=' * 55}\nChildFailedError: rank 1 exited -6"
    wrapped = str(error).replace("ValueError: invalid literal for int() with base 10: 'not a number'", report)
    assert jobwait.last_line(RuntimeError(wrapped)) == "ChildFailedError: rank 1 exited -6"


def test_ctrl_c_of_bat_run_exits_130_with_one_line_and_resumes(tmp_path):
    import subprocess
    import sys

    state = tmp_path / "run"
    sets = [a for o in toy_phases.overrides() for a in ("--set", o)]
    cmd = [
        sys.executable,
        "-m",
        "bat.cli.main",
        "run",
        "--state",
        str(state),
        "--rounds",
        "0",
        "--set",
        "orchestrate.executor=local",
        "--set",
        "orchestrate.poll_s=0.5",
        "--set",
        "evaluate.test_split=false",
        *sets,
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]),
        "BAT_TOY_SLEEP": "0.5",
        "BAT_TOY_SLOW": "0:sft",
    }
    proc = subprocess.Popen(  # SIGINT as at a terminal, even when the suite itself runs with it ignored (`cmd &`)
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    shard = RunLayout(state).phase_dir(0, "sft") / "shard_000.jsonl"
    deadline = time.monotonic() + 120
    while not shard.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert shard.exists(), proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole foreground group
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "bat: interrupted" in err and "Traceback" not in out + err
    assert not (RunLayout(state).phase_dir(0, "sft") / "DONE.json").exists()
    rerun = subprocess.run(cmd, env={**env, "BAT_TOY_SLEEP": "0"}, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert (RunLayout(state).phase_dir(0, "route") / "DONE.json").exists()


def test_a_ctrl_c_while_a_job_is_started_is_raised_after_the_start_not_lost():
    import subprocess
    import sys

    interrupted, before = False, signal.getsignal(signal.SIGINT)
    try:
        with jobwait.children_ignore_sigint(True):
            os.kill(os.getpid(), signal.SIGINT)  # arrives while children are being started
            child = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import signal; print(signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))",
                ],
                capture_output=True,
                text=True,
                check=True,
            )
    except KeyboardInterrupt:
        interrupted = True
    assert child.stdout.strip() == "True"  # Ctrl-C never reaches the started process
    assert interrupted  # and the driver still sees it, once the start is over
    assert signal.getsignal(signal.SIGINT) == before
