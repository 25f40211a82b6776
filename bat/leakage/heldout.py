"""Collect the held-out side's fingerprints from `bat.benchmark` (its only export to the training side).

The benchmark publishes `fingerprint_entries(config, *, secret) -> [{"kind", "value", "source"}]` (ids, paths,
answers, texts, eval-derived field names); this module validates them into `Entry` records. A benchmark other than
the built-in one (`benchmark.name`) publishes them through `Benchmark.fingerprints(secret, seed=heldout_seed)`
(`bat.staged.interface`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bat.leakage.index import Entry, to_entry

if TYPE_CHECKING:
    from bat.benchmark.secret import HeldoutSecret
    from bat.config.root import BatConfig


def collect_heldout_entries(config: BatConfig, secret: HeldoutSecret) -> list[Entry]:
    """Fingerprint entries of the held-out suite of `config` under `secret` (raises when the benchmark exports none)."""
    import bat.benchmark as benchmark

    if config.benchmark.name != "builtin":
        from bat.staged.registry import from_config

        items = from_config(config).fingerprints(secret.key, seed=config.benchmark.heldout_seed)
        entries = [to_entry(item, position) for position, item in enumerate(items)]
        if not entries:
            raise RuntimeError(f"benchmark {config.benchmark.name!r} exports no fingerprints; refusing an empty index")
        return entries
    export = getattr(benchmark, "fingerprint_entries", None)
    if export is None:
        raise RuntimeError(
            "bat.benchmark does not export fingerprint_entries(config); the leakage index cannot be built "
            "(set leakage.index_path to an exported index directory instead)"
        )
    entries = [to_entry(item, position) for position, item in enumerate(export(config, secret=secret))]
    if not entries:
        raise RuntimeError("bat.benchmark.fingerprint_entries returned no entries; refusing an empty index")
    return entries
