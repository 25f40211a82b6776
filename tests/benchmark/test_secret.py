"""The held-out secret: created once per run (0600, atomically), read back, refused when damaged or when a run's
held-out results predate it; different secrets give disjoint held-out suites whose ids do not reveal their seeds."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest

from bat.benchmark import generate_instance, heldout_suite, suite_instance
from bat.benchmark.secret import HeldoutSecret, install_secret, load_or_create_secret, read_secret, run_secret
from bat.config.root import BatConfig
from bat.state.errors import StateFileError
from bat.state.layout import RunLayout

CFG = BatConfig.model_validate({"benchmark": {"tracks": ["vqa", "detection"], "repeats": 2}})


def test_created_private_once_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "heldout" / "SECRET"
    first = load_or_create_secret(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_secret(path) == first == read_secret(path)
    assert first.key not in repr(first) and first.fingerprint in repr(first)
    assert HeldoutSecret.generate() != first


def test_concurrent_creators_agree(tmp_path: Path) -> None:
    path = tmp_path / "SECRET"
    got: list[HeldoutSecret] = []
    threads = [threading.Thread(target=lambda: got.append(load_or_create_secret(path))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and len(set(got)) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["SECRET"]  # no temp files left behind


@pytest.mark.parametrize("content", [b"", b"abc\n", b"\xff\xfe" * 40, b"G" * 64])
def test_damaged_secret_names_the_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "SECRET"
    path.write_bytes(content)
    with pytest.raises(StateFileError, match=str(path)):
        load_or_create_secret(path)


def test_run_secret_refuses_a_run_evaluated_without_one(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "run").ensure()
    layout.heldout_runs(0, "controller").mkdir(parents=True)
    with pytest.raises(StateFileError, match="already has held-out evaluations"):
        run_secret(layout)
    assert not layout.heldout_secret.exists()


def test_install_gives_the_source_secret_and_refuses_another(tmp_path: Path) -> None:
    source, target, other = tmp_path / "a" / "S", tmp_path / "b" / "S", tmp_path / "c" / "S"
    installed = install_secret(source, target)
    assert read_secret(source) == read_secret(target) == installed
    assert install_secret(source, target) == installed
    load_or_create_secret(other)
    with pytest.raises(StateFileError, match="different held-out secret"):
        install_secret(source, other)


def test_suites_follow_the_secret_and_hide_their_seeds() -> None:
    one, two = HeldoutSecret.from_text("one"), HeldoutSecret.from_text("two")
    a = heldout_suite(CFG, "final", secret=one)
    assert [r.instance_seed for r in a] == [r.instance_seed for r in heldout_suite(CFG, "final", secret=one)]
    b = heldout_suite(CFG, "final", secret=two)
    assert {r.run_id for r in a} == {r.run_id for r in b}
    assert not {r.instance_seed for r in a} & {r.instance_seed for r in b}
    assert all(r.instance_seed.bit_length() > 64 for r in a + b)  # no exhaustive search over the seed space
    inst_a, inst_b = suite_instance(a[0], CFG), suite_instance(b[0], CFG)
    assert inst_a.instance_id != inst_b.instance_id and inst_a.case_ids != inst_b.case_ids
    assert f"{inst_a.seed:x}" not in inst_a.instance_id


def test_practice_instances_are_unchanged_by_the_secret() -> None:
    """Practice tasks are public and keep their seed-named ids (existing banks stay valid)."""
    inst = generate_instance("vqa", "practice", 12345)
    assert inst.instance_id.endswith(f"{12345:08x}")
    assert generate_instance("vqa", "practice", 12345).case_ids == inst.case_ids
