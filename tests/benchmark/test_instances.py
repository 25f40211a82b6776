import pytest

from bat.benchmark import (
    fingerprint_entries,
    generate_instance,
    heldout_suite,
    instance_identifiers,
    materialize,
    practice_instance,
    practice_seed,
    suite_instance,
)
from bat.benchmark.secret import HeldoutSecret
from bat.benchmark.suite import suite_run_track
from bat.benchmark.tracks import TRACKS

SECRET = HeldoutSecret.from_text("tests")


def test_generation_is_deterministic_and_seed_sensitive():
    a = generate_instance("segmentation", "heldout", 11)
    b = generate_instance("segmentation", "heldout", 11)
    c = generate_instance("segmentation", "heldout", 12)
    assert a.files == b.files and a.pitfalls == b.pitfalls
    assert a.files != c.files


def test_heldout_and_practice_share_no_identifiers(fast_config):
    heldout = set()
    for split in ("controller", "final", "test"):
        for run in heldout_suite(fast_config, split, secret=SECRET):
            heldout |= instance_identifiers(suite_instance(run, fast_config))
    practice = set()
    for track in TRACKS:
        for i in range(8):
            practice |= instance_identifiers(
                practice_instance(track, practice_seed(track, i, fast_config), fast_config)
            )
    assert len(heldout) > 100 and len(practice) > 100
    assert heldout.isdisjoint(practice)


def test_a_suite_run_id_names_its_track(fast_config):
    for split in ("controller", "final", "test"):
        for run in heldout_suite(fast_config, split, secret=SECRET):
            assert suite_run_track(run.run_id) == run.track
    for bad in ("final-r00", "train-vqa-r00", "final-vqa-rx", "final-vqa"):
        with pytest.raises(ValueError, match="<split>-<track>-rNN"):
            suite_run_track(bad)


def test_splits_are_disjoint_runs(fast_config):
    controller = {r.instance_seed for r in heldout_suite(fast_config, "controller", secret=SECRET)}
    final = {r.instance_seed for r in heldout_suite(fast_config, "final", secret=SECRET)}
    assert len(controller) == 7 * 3 and controller.isdisjoint(final)
    with pytest.raises(ValueError, match="valid"):
        heldout_suite(fast_config, "train", secret=SECRET)


def test_grader_dir_must_lie_outside_workspace(tmp_path):
    inst = generate_instance("vqa", "practice", 3)
    with pytest.raises(ValueError, match="outside the workspace"):
        materialize(inst, tmp_path / "ws", tmp_path / "ws" / "grader")
    ws, gd = materialize(inst, tmp_path / "ws", tmp_path / "grader")
    assert (ws / "task" / "spec.json").exists() and (gd / "truth.json").exists()
    assert not any("truth" in p.name for p in ws.rglob("*"))


def test_fingerprint_entries_cover_heldout_only(fast_config):
    entries = fingerprint_entries(fast_config, secret=SECRET)
    kinds = {e["kind"] for e in entries}
    assert kinds == {"identifier", "path", "answer", "text", "field"}
    values = {e["value"] for e in entries}
    inst = suite_instance(heldout_suite(fast_config, "controller", secret=SECRET)[0], fast_config)
    assert set(inst.case_ids) <= values
    practice = practice_instance("vqa", practice_seed("vqa", 0, fast_config), fast_config)
    assert not (set(practice.case_ids) | set(practice.candidates)) & values


def test_practice_teacher_rows_scan_clean_against_the_heldout_index(fast_config, tmp_path):
    from bat.benchmark import run_instance
    from bat.leakage import Scanner, build_index

    scanner = Scanner(build_index(fingerprint_entries(fast_config, secret=SECRET), fast_config.leakage))
    practice = practice_instance("vqa", practice_seed("vqa", 1, fast_config), fast_config)
    ep = run_instance(practice, "recovery", tmp_path / "p", fast_config)
    row = {
        "brief": practice.files["task/README.md"].decode(),
        "turns": [{"thought": t.thought, "call": t.call, "observation": t.observation} for t in ep.trajectory.turns],
    }
    assert scanner.scan_row(row).findings == []
    heldout = suite_instance(heldout_suite(fast_config, "controller", secret=SECRET)[0], fast_config)
    assert scanner.scan_row({"brief": heldout.files["task/README.md"].decode()}).findings


def test_split_repeats_size_each_split_and_keep_the_common_runs(fast_config):
    from bat.config.load import load_config

    sized = load_config(None, ["benchmark.tracks=[classification, vqa]", "benchmark.repeats=2"])
    sized = sized.model_copy(
        update={"benchmark": sized.benchmark.model_copy(update={"split_repeats": {"final": 5, "test": 3}})}
    )
    runs = {s: heldout_suite(sized, s, secret=SECRET) for s in ("controller", "final", "test")}
    assert [len(runs[s]) for s in ("controller", "final", "test")] == [4, 10, 6]
    plain = load_config(None, ["benchmark.tracks=[classification, vqa]", "benchmark.repeats=2"])
    assert [r.instance_seed for r in heldout_suite(plain, "final", secret=SECRET)] == [
        r.instance_seed for r in runs["final"] if r.repeat < 2
    ]
    with pytest.raises(ValueError, match="split_repeats must be 1-1000"):
        load_config(None, ["benchmark.split_repeats={final: 0}"])
