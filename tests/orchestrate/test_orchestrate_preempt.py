"""Signal handling of phase jobs: USR2 checkpoints once, SIGTERM flushes and exits, flush hooks run."""

import os
import signal

import pytest

from bat.orchestrate import preempt


class FakeSubmititHandler:
    """Stands in for submitit's SignalHandler (only its two methods are used)."""

    def __init__(self, timed_out=False):
        self.calls = []
        self.timed_out = timed_out

    def checkpoint_and_try_requeue(self, signum, frame=None):
        self.calls.append(signum)

    def has_timed_out(self):
        return self.timed_out


@pytest.fixture
def restore_signals(monkeypatch):
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGUSR2, signal.SIGTERM)}
    monkeypatch.setattr(preempt, "_HANDLER", None)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)
    preempt._FLUSH_HOOKS.clear()


def test_usr2_checkpoints_once_even_if_signalled_twice(restore_signals):
    fake = FakeSubmititHandler()
    signal.signal(signal.SIGUSR2, fake.checkpoint_and_try_requeue)
    assert preempt.install_signal_handlers(sigterm_flush=True)
    os.kill(os.getpid(), signal.SIGUSR2)
    os.kill(os.getpid(), signal.SIGUSR2)
    os.kill(os.getpid(), signal.SIGTERM)  # the SIGTERM of the same preemption is ignored too
    assert fake.calls == [signal.SIGUSR2]
    assert preempt.interruption_kind() == "preemption"
    fake.timed_out = True
    assert preempt.interruption_kind() == "timeout"


def test_sigterm_runs_flush_hooks_and_exits_without_requeue(restore_signals):
    fake = FakeSubmititHandler()
    signal.signal(signal.SIGUSR2, fake.checkpoint_and_try_requeue)
    flushed, reported = [], []
    preempt.on_interrupt(lambda: flushed.append("step checkpoint"))
    assert preempt.install_signal_handlers(sigterm_flush=True, on_sigterm=reported.append)
    with pytest.raises(SystemExit) as info:
        os.kill(os.getpid(), signal.SIGTERM)
    assert info.value.code == 128 + signal.SIGTERM
    assert flushed == ["step checkpoint"] and reported == [1] and fake.calls == []
    assert preempt.run_flush_hooks() == 0  # hooks run once


def test_outside_a_submitit_job_nothing_is_installed(restore_signals):
    signal.signal(signal.SIGUSR2, signal.SIG_DFL)
    before = signal.getsignal(signal.SIGTERM)
    assert preempt.install_signal_handlers(sigterm_flush=True) is False
    assert signal.getsignal(signal.SIGTERM) is before and signal.getsignal(signal.SIGUSR2) is signal.SIG_DFL
    assert preempt.interruption_kind() == "preemption"
