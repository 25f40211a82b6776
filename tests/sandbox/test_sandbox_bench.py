"""`bat bench sandbox` prints process vs bwrap overhead side by side."""

from __future__ import annotations

import argparse
import json

import pytest

from bat.perf import sandbox as bench
from bat.sandbox import bwrap_available


def _args(**kw: object) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    ns = parser.parse_args([])
    for key, value in kw.items():
        setattr(ns, key, value)
    return ns


def test_bench_reports_medians_and_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    if not bwrap_available():
        pytest.skip("bubblewrap not usable here")
    assert bench.run(_args(calls=2, no_episodes=True, json=True)) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["modes"]) == {"process", "bwrap", "process+warm", "bwrap+warm"}
    for cells in result["modes"].values():
        assert cells["tool_call_ms"] > 0 and cells["bash_true_ms"] > 0
    assert set(result["ratios"]) == {"bwrap/process", "process cold/warm", "bwrap cold/warm"}
    # a ratio is reported, never asserted: timings on a shared 2-core machine swing several-fold
    assert result["ratios"]["bwrap cold/warm"]["tool_call_ms"] > 0
    assert result["bare_toolhost_ms"] > 0 and result["episodes"] == {}


def test_bench_rejects_unknown_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.run(_args(runtimes="process,docker")) == 2
    assert "valid: process, bwrap" in capsys.readouterr().err
