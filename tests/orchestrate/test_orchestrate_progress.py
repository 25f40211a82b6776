"""The local driver's step progress: one line per new training step, silent on missing or torn files."""

from __future__ import annotations

from bat.orchestrate.jobwait import StepProgress


def test_prints_each_new_step_once_and_ignores_torn_lines(tmp_path, capsys):
    metrics = tmp_path / "metrics.jsonl"
    progress = StepProgress(metrics, "[round 0] sft")
    progress.report()  # no file yet
    metrics.write_text('{"step": 0, "val_loss": 1.07}\n{"step": 1, "loss": 0.8171, "tokens_per_s": 43.5}\n')
    progress.report()
    progress.report()  # unchanged file: nothing new
    with metrics.open("a") as handle:
        handle.write('{"step": 2, "lo')  # torn last line while the job writes
    progress.report()
    with metrics.open("a") as handle:
        handle.write('ss": 0.9}\n')
    progress.report()
    assert capsys.readouterr().out.splitlines() == [
        "[round 0] sft: step 1: loss 0.8171, tokens_per_s 43.5",
        "[round 0] sft: step 2: loss 0.9",
    ]
