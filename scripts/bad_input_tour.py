"""Damage a finished smoke run in every way a user might and print what bat answers (exit code, first stderr line).

    .venv/bin/python scripts/bad_input_tour.py [--work DIR]

Runs `bat run --config configs/smoke.yaml` once (a few minutes on 2 cores) into DIR/base, then for each case copies
that run, damages one file (or passes one bad argument), runs one bat command and prints a table row. Every row
should read exit 2 with one line naming the file and what to do (130 for an interrupt); a traceback is a bug.
Writes: DIR only (default: a fresh temp dir); the finished run is never modified (each case works on a copy).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BAT = [str(Path(sys.executable).parent / "bat")]
SMOKE = str(REPO / "configs" / "smoke.yaml")


def bat(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([*BAT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: max(1, len(data) // 2)])


def first_export(run: Path) -> Path:
    return next(p.parent for p in sorted(run.glob("checkpoints/**/model.safetensors")))


Case = tuple[str, Callable[[Path, Path], None], Callable[[Path, Path], list[str]]]


def cases() -> list[Case]:
    def run_args(run: Path, _: Path) -> list[str]:
        return ["run", "--config", SMOKE, "--state", str(run)]

    def status_args(run: Path, _: Path) -> list[str]:
        return ["status", "--state", str(run)]

    def nothing(run: Path, work: Path) -> None:
        return None

    return [
        (
            "empty config file (config check)",
            lambda r, w: (w / "empty.yaml").write_text(""),
            lambda r, w: ["config", "check", str(w / "empty.yaml")],
        ),
        (
            "empty config file (run)",
            lambda r, w: (w / "empty.yaml").write_text(""),
            lambda r, w: ["run", "--config", str(w / "empty.yaml"), "--state", str(r)],
        ),
        (
            "non-UTF-8 config file (run)",
            lambda r, w: (w / "latin1.yaml").write_bytes(b"run:\n  name: caf\xe9\n"),
            lambda r, w: ["run", "--config", str(w / "latin1.yaml"), "--state", str(r)],
        ),
        ("changed config on a finished run", nothing, lambda r, w: [*run_args(r, w), "--set", "grpo.lr=0.001"]),
        (
            "evaluation into a finished round",
            nothing,
            lambda r, w: ["evaluate", "run", "--config", SMOKE, "--state", str(r), "--agent", "noop"],
        ),
        (
            "truncated round_00/sft/DONE.json (run)",
            lambda r, w: truncate(r / "round_00" / "sft" / "DONE.json"),
            run_args,
        ),
        (
            "truncated round_00/sft/DONE.json (status)",
            lambda r, w: truncate(r / "round_00" / "sft" / "DONE.json"),
            status_args,
        ),
        ("DONE.json holding {}", lambda r, w: (r / "round_00" / "sft" / "DONE.json").write_text("{}"), run_args),
        ("truncated run.json", lambda r, w: truncate(r / "run.json"), run_args),
        (
            "truncated model.safetensors (evaluate)",
            lambda r, w: truncate(first_export(r) / "model.safetensors"),
            lambda r, w: [
                "evaluate",
                "run",
                "--config",
                SMOKE,
                "--state",
                str(r),
                "--round",
                "5",
                "--checkpoint",
                str(first_export(r)),
            ],
        ),
        (
            "checkpoint without config.json (evaluate)",
            lambda r, w: (first_export(r) / "config.json").unlink(),
            lambda r, w: [
                "evaluate",
                "run",
                "--config",
                SMOKE,
                "--state",
                str(r),
                "--round",
                "5",
                "--checkpoint",
                str(first_export(r)),
            ],
        ),
        (
            "torn bank rows.jsonl (bank show)",
            lambda r, w: truncate(next(r.glob("bank/v*/rl/rows.jsonl"))),
            lambda r, w: ["bank", "show", "--config", SMOKE, "--state", str(r)],
        ),
        (
            "non-JSON bank rows.jsonl (bank show)",
            lambda r, w: next(r.glob("bank/v*/rl/rows.jsonl")).write_text("not json\n"),
            lambda r, w: ["bank", "show", "--config", SMOKE, "--state", str(r)],
        ),
        (
            "damaged held-out secret (evaluate)",
            lambda r, w: (r / "heldout" / "SECRET").write_text("xyz\n"),
            lambda r, w: ["evaluate", "run", "--config", SMOKE, "--state", str(r), "--round", "5", "--agent", "noop"],
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="", help="working directory (default: a new temp dir)")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bat-bad-input-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    base = work / "base"
    if not (base / "run.json").exists():
        print(f"building a finished smoke run in {base} ...", flush=True)
        done = bat("run", "--config", SMOKE, "--state", str(base), cwd=REPO)
        if done.returncode != 0:
            print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
            return 1
    rows = []
    for index, (name, damage, command) in enumerate(cases()):
        run, scratch = work / f"case_{index:02d}" / "run", work / f"case_{index:02d}"
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(base, run, symlinks=True)
        damage(run, scratch)
        argv = command(run, scratch)
        result = bat(*argv, cwd=REPO)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        traceback = any(line.startswith("Traceback") for line in lines)
        message = lines[-1] if lines else (result.stdout.strip().splitlines() or [""])[-1]
        rows.append(
            {
                "case": name,
                "command": "bat " + " ".join(argv),
                "exit": result.returncode,
                "traceback": traceback,
                "stderr_lines": len(lines),
                "message": message.replace(str(work), "<work>"),
            }
        )
        print(f"[{result.returncode}] {name}: {rows[-1]['message']}", flush=True)
    (work / "tour.json").write_text(json.dumps(rows, indent=2) + "\n")
    bad = [r for r in rows if r["exit"] != 2 or r["traceback"]]
    print(f"{len(rows) - len(bad)} of {len(rows)} cases exit 2 without a traceback; results in {work / 'tour.json'}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
