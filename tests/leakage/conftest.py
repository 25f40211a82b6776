"""pytest fixtures of the leakage tests (data lives in `leakage_fixtures`)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from leakage_fixtures import CLEAN_BRIEF, HELDOUT_ENTRIES, rl_row, sft_row

from bat.config.leakage import LeakageConfig
from bat.leakage.index import build_index
from bat.state.atomic import atomic_write_json
from bat.state.jsonl import write_jsonl


@pytest.fixture
def config() -> LeakageConfig:
    return LeakageConfig()


@pytest.fixture
def index(config: LeakageConfig):
    return build_index(HELDOUT_ENTRIES, config)


@pytest.fixture
def make_bank(tmp_path: Path) -> Callable[..., Path]:
    """Write a bank version dir: `make_bank(version, mutate=None)`; `mutate(files)` edits the file map first."""

    def make(
        version: int = 1, mutate: Callable[[dict[str, Any]], None] | None = None, root: Path | None = None
    ) -> Path:
        bank = (root or tmp_path / "state" / "run" / "bank") / f"v{version:04d}"
        files: dict[str, Any] = {
            "tasks.jsonl": [
                {
                    "schema_version": 1,
                    "task_id": "prac-det-0007",
                    "track": "detection",
                    "seed": 7,
                    "variant": "recovery",
                    "reduction": None,
                }
            ],
            "rl/rows.jsonl": [rl_row("st-0001"), rl_row("st-0002")],
            "sft/train.jsonl": [sft_row("sft-0001"), sft_row("sft-0002")],
            "rl/index.json": {
                "schema_version": 1,
                "by_track": {"detection": ["st-0001", "st-0002"]},
                "by_stage": {"S3": ["st-0001", "st-0002"]},
                "by_outcome": {},
                "by_reward_source": {},
            },
            "states/st-0001/files/task/README.md": CLEAN_BRIEF,
            "states/st-0001/files/data/case_01.npy": b"\x93NUMPY\x01\x00\x00\x00binary",
        }
        files = copy.deepcopy(files)
        if mutate is not None:
            mutate(files)
        for rel, content in files.items():
            path = bank / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if rel.endswith(".jsonl"):
                write_jsonl(path, content)
            elif isinstance(content, bytes):
                path.write_bytes(content)
            elif isinstance(content, str):
                path.write_text(content, encoding="utf-8")
            else:
                path.write_text(json.dumps(content), encoding="utf-8")
        atomic_write_json(bank / "MANIFEST.json", {"schema_version": 1, "version": version, "files": sorted(files)})
        return bank

    return make
