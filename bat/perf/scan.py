"""`bat bench scan`: leakage-scan throughput (rows/s) of the fingerprint scanner vs a naive substring loop.

Synthetic, deterministic data: a fingerprint index of ~100,000 held-out entries (identifiers, paths, answers,
eval field names, held-out briefs) and a bank of ~20,000 rows shaped like RL/SFT rows, with leaks of every
kind planted in 1% of the rows. The naive baseline is the reference release's method: for each row, every
index value is tested with `value in row_text`. It is far slower, so it runs on a subset of rows and its
total is extrapolated (the output says so). Both run in this one process, side by side; rates use CPU time
of the process (the wall clock of the scanner is printed too), so other load on a shared machine skews less.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

from bat.config.benchmark import builtin_tracks
from bat.config.stages import builtin_stages

HELP = "leakage scan throughput: Aho-Corasick + MinHash scanner vs naive per-pattern substring loop"
TRACKS = builtin_tracks()
STAGE_KEYS = tuple(s.key for s in builtin_stages())
"""The synthetic data's tracks and stage keys: the built-in benchmark's."""
COMMON = [
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "on",
    "for",
    "with",
    "before",
    "after",
    "then",
    "each",
    "case",
    "model",
    "input",
    "output",
    "run",
    "check",
    "pilot",
    "batch",
    "submit",
    "plan",
    "setup",
    "validate",
    "inference",
    "shape",
    "range",
    "value",
    "file",
    "contract",
    "card",
    "track",
    "stage",
    "first",
    "full",
    "small",
    "one",
    "result",
    "results",
    "format",
    "json",
    "array",
    "image",
    "volume",
    "slice",
    "normalise",
    "intensity",
]
PLANT_KINDS = ("identifier", "path", "answer", "near_duplicate", "eval_field", "credential", "machine_path")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=20_000, help="bank rows to scan (default 20000)")
    parser.add_argument("--entries", type=int, default=100_000, help="fingerprint index entries (default 100000)")
    parser.add_argument("--texts", type=int, default=1_000, help="held-out texts among the entries (default 1000)")
    parser.add_argument("--naive-rows", type=int, default=100, help="rows the naive loop really scans (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="data seed (default 0)")


class _Words:
    """Deterministic pseudo-word vocabularies: disjoint held-out and practice words plus shared common words."""

    def __init__(self, rng: Any) -> None:
        syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "qu", "dra", "fen", "gor", "hal", "jis"]
        pool = sorted({"".join(rng.choice(syllables, size=int(rng.integers(2, 4)))) for _ in range(6000)})
        rng.shuffle(pool)
        half = len(pool) // 2
        self.heldout, self.practice, self.rng = pool[:half], pool[half:], rng

    def text(self, vocab: list[str], n: int) -> str:
        choice = self.rng.random(n) < 0.45
        own = self.rng.choice(vocab, size=n)
        common = self.rng.choice(COMMON, size=n)
        return " ".join(str(c if pick else o) for pick, c, o in zip(choice, common, own))


def make_entries(words: _Words, n_entries: int, n_texts: int) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(kind, value, source) entries and the held-out texts among them."""
    rng = words.rng
    texts = [words.text(words.heldout, int(rng.integers(60, 140))) for _ in range(n_texts)]
    entries = [("text", t, f"heldout:text:{i}") for i, t in enumerate(texts)]
    entries += [("field", f"heldout_{w}_score", f"heldout:field:{i}") for i, w in enumerate(words.heldout[:200])]
    rest = n_entries - len(entries)
    for i in range(rest):
        track = TRACKS[i % len(TRACKS)]
        if i % 4 < 2:
            entries.append(("identifier", f"hx-{track[:3]}-{i:06d}", f"heldout:{track}:id"))
        elif i % 4 == 2:
            entries.append(("path", f"heldout/{track}/hx-{i:06d}/case_{i % 97:03d}.npy", f"heldout:{track}:path"))
        else:
            answer = " ".join(rng.choice(words.heldout, size=3))
            entries.append(("answer", f"{answer} {i}", f"heldout:{track}:answer"))
    return entries, texts


def _paraphrase(words: _Words, text: str) -> str:
    tokens = text.split()
    keep = words.rng.random(len(tokens)) > 0.15
    return " ".join(t for t, k in zip(tokens, keep) if k)


def make_rows(words: _Words, n_rows: int, entries: list, texts: list[str]) -> tuple[list[dict], dict[int, str]]:
    """Bank-shaped rows; every 100th row carries one planted leak (kinds cycle through PLANT_KINDS)."""
    rng = words.rng
    by_kind = {k: [e[1] for e in entries if e[0] == k] for k in ("identifier", "path", "answer", "field")}
    skills = [words.text(words.practice, 50) for _ in range(5)]
    rows, planted = [], {}
    for i in range(n_rows):
        track = TRACKS[i % len(TRACKS)]
        brief = words.text(words.practice, int(rng.integers(80, 160)))
        note = words.text(words.practice, 30)
        row: dict[str, Any] = {
            "state_id": f"st-{i:06d}",
            "stage": STAGE_KEYS[i % len(STAGE_KEYS)],
            "track": track,
            "outcome": "success",
            "task": {"task_id": f"prac-{track[:3]}-{i:06d}", "seed": i, "variant": "expert"},
            "prompt": [{"role": "system", "content": skills[i % 5]}, {"role": "user", "content": brief}],
            "rubric": [{"id": f"s{i % 5 + 1}a_item", "text": note}],
            "provenance": {"source": f"practice:{track}", "trajectory_id": f"traj-{i:06d}", "seeds": {"task": i}},
        }
        if i % 100 == 50:
            kind = PLANT_KINDS[(i // 100) % len(PLANT_KINDS)]
            planted[i] = kind
            pick = int(rng.integers(0, 10**9))
            if kind == "near_duplicate":
                row["prompt"][1]["content"] = _paraphrase(words, texts[pick % len(texts)])
            elif kind == "eval_field":
                row["provenance"][by_kind["field"][pick % len(by_kind["field"])]] = 0.5
            elif kind == "credential":
                row["provenance"]["note"] = "export HF_TOKEN=hf_" + "".join(rng.choice(list("abcdefgh123"), size=34))
            elif kind == "machine_path":
                row["rubric"][0]["text"] += f" see /home/user{i}/bat/out.log"
            else:
                row["prompt"][1]["content"] += f" compare {by_kind[kind][pick % len(by_kind[kind])]} now"
        rows.append(row)
    return rows, planted


def naive_scan(rows: list[dict], patterns: list[str]) -> tuple[set[int], float]:
    """Reference-release method: every pattern tested with `in` against each row's text; (flagged, CPU s)."""
    from bat.leakage.scanner import walk

    flagged: set[int] = set()
    start = time.process_time()
    for i, row in enumerate(rows):
        haystack = "\n".join(text for _, text, _, _ in walk(row)).lower()
        for pattern in patterns:
            if pattern in haystack:
                flagged.add(i)
    return flagged, time.process_time() - start


def run(args: argparse.Namespace) -> int:
    """Build the synthetic index and bank, time the scanner on every row and the naive loop on a subset, print
    the figures and the audits; 0 when every planted leak is caught and no clean row is flagged."""
    import numpy as np

    from bat.config.leakage import LeakageConfig
    from bat.leakage.index import build_index
    from bat.leakage.scanner import Scanner
    from bat.seeds import derive_seed

    if min(args.rows, args.entries, args.texts, args.naive_rows) < 1 or args.texts >= args.entries:
        print("error: --rows, --entries, --texts, --naive-rows must be >= 1 and --texts < --entries")
        return 2
    words = _Words(np.random.default_rng(derive_seed(args.seed, "bench", "scan")))
    entries, texts = make_entries(words, args.entries, args.texts)
    rows, planted = make_rows(words, args.rows, entries, texts)
    config = LeakageConfig()
    t0 = time.process_time()
    index = build_index(entries, config)
    build_s = time.process_time() - t0
    scanner = Scanner(index)
    t0, w0 = time.process_time(), time.perf_counter()
    scans = [scanner.scan_row(row, rl_row=True) for row in rows]
    scan_s, scan_wall = time.process_time() - t0, time.perf_counter() - w0
    flagged = {i for i, s in enumerate(scans) if s.findings}
    caught = {kind: sum(1 for i, k in planted.items() if k == kind and i in flagged) for kind in PLANT_KINDS}
    wanted = {kind: sum(1 for k in planted.values() if k == kind) for kind in PLANT_KINDS}
    naive = _naive_run(rows, planted, entries, args.naive_rows)
    naive_rate = len(naive.subset_ids) / naive.seconds
    fast_rate = len(rows) / scan_s

    print(f"fingerprint index: {len(index.entries)} entries {index.counts()}; built in {build_s:.2f} CPU s")
    print(f"bank: {len(rows)} rows, {len(planted)} with a planted leak")
    print("times are CPU seconds of this process (robust to other load on the machine)")
    print(f"{'method':<34}{'rows':>8}{'CPU s':>12}{'rows/s':>12}")
    print(f"{'scanner (Aho-Corasick + MinHash)':<34}{len(rows):>8}{scan_s:>12.2f}{fast_rate:>12.1f}")
    print(
        f"{'naive per-pattern substring loop':<34}{len(naive.subset_ids):>8}{naive.seconds:>12.2f}{naive_rate:>12.1f}"
    )
    print(f"scanner wall clock: {scan_wall:.2f} s ({len(rows) / scan_wall:.1f} rows/s)")
    if args.naive_rows < len(rows):
        print(
            f"naive loop measured on {len(naive.subset_ids)} rows; extrapolated to {len(rows)} rows: "
            f"{len(rows) / naive_rate:.0f} CPU s"
        )
    print(f"speed-up: {fast_rate / naive_rate:.0f}x rows/s")
    print("planted leaks caught by the scanner: " + ", ".join(f"{k} {caught[k]}/{wanted[k]}" for k in PLANT_KINDS))
    _print_naive_agreement(naive, planted, flagged)
    _print_similarity(scans, config.jaccard_threshold)
    missed = sum(wanted.values()) - sum(caught.values())
    false_flags = len(flagged - set(planted))
    print(f"missed planted leaks: {missed}; clean rows flagged: {false_flags}")
    return 0 if missed == 0 and false_flags == 0 else 1


@dataclass
class _NaiveRun:
    """The naive loop on a subset of the bank: which rows it read (planted and clean), which it flagged, CPU s."""

    planted_ids: list[int]
    clean_ids: list[int]
    subset_ids: list[int]
    flagged: set[int]
    seconds: float


def _naive_run(rows: list[dict], planted: dict[int, str], entries: list, naive_rows: int) -> _NaiveRun:
    """Time `naive_scan` over every entry value on `naive_rows` rows: up to half planted, the rest clean."""
    planted_ids = sorted(planted)[: naive_rows // 2]
    clean_ids = [i for i in range(len(rows)) if i not in planted][: naive_rows - len(planted_ids)]
    subset_ids = sorted(planted_ids + clean_ids)
    patterns = [value.lower() for _, value, _ in entries]
    hits, seconds = naive_scan([rows[i] for i in subset_ids], patterns)
    return _NaiveRun(planted_ids, clean_ids, subset_ids, {subset_ids[j] for j in hits}, seconds)


def _print_naive_agreement(naive: _NaiveRun, planted: dict[int, str], flagged: set[int]) -> None:
    """Print how many rows of the naive subset each method flagged, and the planted leaks the naive loop caught."""
    caught = {k: sum(1 for i in naive.planted_ids if planted[i] == k and i in naive.flagged) for k in PLANT_KINDS}
    wanted = {k: sum(1 for i in naive.planted_ids if planted[i] == k) for k in PLANT_KINDS}
    print(
        f"on the naive subset ({len(naive.planted_ids)} planted + {len(naive.clean_ids)} clean rows): scanner flagged "
        f"{len(flagged & set(naive.subset_ids))}, naive flagged {len(naive.flagged)}; naive caught "
        + ", ".join(f"{k} {caught[k]}/{wanted[k]}" for k in PLANT_KINDS)
    )


def _print_similarity(scans: list[Any], threshold: float) -> None:
    """Print the near-duplicate audit: quantiles of the max Jaccard similarity over the rows that had text."""
    import numpy as np

    sims = np.array([s.max_similarity for s in scans if s.texts_checked])
    print(
        f"near-duplicate audit: rows with text {sims.size}, max Jaccard p50 {np.quantile(sims, 0.5):.3f} "
        f"p99 {np.quantile(sims, 0.99):.3f} max {sims.max():.3f} (threshold {threshold})"
    )
