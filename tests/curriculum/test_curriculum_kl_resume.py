"""The route's KL check keeps each chunk of probe prompts as it finishes: a check interrupted after two chunks
continues with the third and ends with the number an uninterrupted check (and `estimate_kl`) gives; a chunk measured
for other checkpoints or another seed is not reused; the interval across chunks is reported."""

import pytest
from curriculum_helpers import make_bank, perturbed_copy

from bat.config.root import BatConfig
from bat.curriculum.kl_chunks import CHUNK, chunked_kl, ratio_interval
from bat.phase.context import PhaseContext
from bat.state.layout import RunLayout

PROMPTS = [[1 + i, 7, 11 + i % 5, 3, 9 + i % 3] for i in range(20)]  # token ids: 3 chunks (8 + 8 + 4)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    from bat.policy.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("models")
    base = build_tiny_model(root / "base", BatConfig().model.tiny, 3)
    return str(base), str(perturbed_copy(base, root / "moved", 0.5))


class Preempted(Exception):
    pass


def _check(folder, candidate, reference, seed=5, log=lambda _: None):
    return chunked_kl(
        lambda i: folder / f"chunk_{i:04d}.json",
        candidate,
        reference,
        PROMPTS,
        seed=seed,
        new_tokens=6,
        dtype="float32",
        log=log,
    )


def test_an_interrupted_check_resumes_with_the_next_chunk(tmp_path, checkpoints, monkeypatch):
    from bat.train.kl_estimate import estimate_kl

    base, moved = checkpoints
    whole = _check(tmp_path / "whole", moved, base)
    assert (whole.chunks, whole.resumed, whole.prompts) == (3, 0, 20)
    assert whole.mean == estimate_kl(moved, base, PROMPTS, max_new_tokens=6, seed=5, batch_size=CHUNK)
    assert whole.half_width is not None and whole.half_width > 0

    seen = []

    def preempt_after_two(line):
        seen.append(line)
        if len(seen) == 2:
            raise Preempted(line)

    with pytest.raises(Preempted):
        _check(tmp_path / "cut", moved, base, log=preempt_after_two)
    assert sorted(p.name for p in (tmp_path / "cut").iterdir()) == ["chunk_0000.json", "chunk_0001.json"]

    import bat.train.kl_estimate as kl_estimate

    scored = []
    real = kl_estimate._kl_batch
    monkeypatch.setattr(kl_estimate, "_kl_batch", lambda *a, **k: scored.append(1) or real(*a, **k))
    resumed = _check(tmp_path / "cut", moved, base)
    assert (resumed.resumed, len(scored)) == (2, 1)  # only the third chunk is scored again
    assert resumed.mean == whole.mean and resumed.half_width == whole.half_width

    assert _check(tmp_path / "cut", moved, base).resumed == 3  # a finished check scores nothing
    other_seed = _check(tmp_path / "cut", moved, base, seed=6)
    assert other_seed.resumed == 0 and other_seed.mean != whole.mean


def test_the_route_keeps_its_chunks_under_route_kl(tmp_path, checkpoints):
    from bat.curriculum.kl import measure_kl
    from bat.schemas.routing import BestCheckpoint

    base, moved = checkpoints
    layout = make_bank(RunLayout(tmp_path / "run").ensure(), per_stage=4)
    cfg = BatConfig.model_validate({"curriculum": {"fallback": {"kl_prompts": 4, "kl_new_tokens": 4}}})
    ctx = PhaseContext(config=cfg, layout=layout, round=1, phase="route")
    kl = measure_kl(ctx, moved, BestCheckpoint.model_construct(checkpoint=base))
    assert kl > 0 and layout.round(1).kl_chunk(0).is_file()
    assert layout.round(1).kl_chunk(0).parent == layout.phase_dir(1, "route") / "kl"
    assert measure_kl(ctx, moved, BestCheckpoint.model_construct(checkpoint=base)) == kl
    log = (layout.root / "round_01" / "events.log").read_text()
    assert "1 of 1 chunks from an earlier attempt" in log


def test_ratio_interval():
    assert ratio_interval([1.0], [10]) is None
    assert ratio_interval([1.0, 1.0], [10, 10]) == 0.0
    assert ratio_interval([1.0, 3.0, 2.0], [10, 10, 10]) == pytest.approx(0.2484, abs=1e-3)


@pytest.mark.parametrize(("config", "tool"), [(None, "write_plan"), ("configs/sqlqa.yaml", "run_query")])
def test_the_route_renders_the_configured_benchmarks_tool_list(tmp_path, monkeypatch, config, tool):
    """The KL probe's prompts carry the tool list the policy saw in its rollouts: the configured benchmark's tools in
    `sft.tool_format`, a plug-in's own rather than the built-in ones."""
    from types import SimpleNamespace

    from bat.config.load import load_config
    from bat.curriculum import kl
    from bat.curriculum.kl_chunks import KlEstimate
    from bat.policy.tools import config_tools

    cfg = load_config(config)
    handed = []

    def record_tools(*args, tools, **kwargs):
        handed.append(tools)
        return KlEstimate(mean=0.5, half_width=None, prompts=1, tokens=4, chunks=1, resumed=0)

    monkeypatch.setattr(kl, "probe_prompts", lambda layout, config: [[{"role": "user", "content": "q"}]])
    monkeypatch.setattr("bat.curriculum.kl_chunks.chunked_kl", record_tools)
    for name in ("cand", "best"):
        (tmp_path / name).mkdir()
    ctx = PhaseContext(config=cfg, layout=RunLayout(tmp_path / "run"), round=1, phase="route")
    assert kl.measure_kl(ctx, str(tmp_path / "cand"), SimpleNamespace(checkpoint=str(tmp_path / "best"))) == 0.5
    names = [t["name"] for t in handed[0]]
    assert tool in names and names == config_tools(cfg)[0]
    assert handed == [config_tools(cfg)[1]]
