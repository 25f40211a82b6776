"""The built-in benchmark's bank is unchanged by the staged-benchmark interface: a small bank built with the same
config and seed has the fingerprint and file digests the code made before plug-in banks existed (commit bdd01f8)."""

import hashlib
import json

from bat.bank.synthesize import synthesize
from bat.config import load_config
from bat.state.layout import RunLayout

SMALL = [
    "benchmark.runtime=inprocess",
    "benchmark.tracks=[classification,detection]",
    "bank.tracks=[classification,detection]",
    "bank.tasks_per_track=1",
    "bank.e2e_per_track=1",
    "leakage.enabled=false",
    "benchmark.cases_per_instance=4",
]
PINNED_FINGERPRINT = "3da309db37c3fd41759ad363689f4a7ae80220bdc5e01c13199625d8b8f20cc3"
PINNED_FILES = "e4950217e7cf624f65404ff81d136d307ae8dca014d00ecdc987e18d92af1118"
"""sha256 of the manifest's `digests` (every file of the version) as canonical JSON, at bdd01f8."""


def test_the_builtin_bank_keeps_its_pre_interface_digests(tmp_path):
    bank, reused = synthesize(load_config(None, SMALL), RunLayout(tmp_path / "run").ensure())
    manifest = bank.manifest()
    assert not reused and manifest.counts["rl_total"] == 18 and manifest.counts["sft"]["train"] == 71
    assert manifest.fingerprint == PINNED_FINGERPRINT
    assert hashlib.sha256(json.dumps(manifest.digests, sort_keys=True).encode()).hexdigest() == PINNED_FILES
