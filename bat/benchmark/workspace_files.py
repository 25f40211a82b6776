"""File names of a benchmark instance on disk, relative to its two folders.

The agent's workspace: the brief and spec under `task/`, one folder per candidate model under `models/` (weights
and card), case inputs under `data/`, the plan, the model's outputs under `outputs/` and the submission under
`submission/` (one file per case plus its manifest). The grader's side, outside the workspace: the instance
metadata, the truths (JSON and arrays) and the instance's source line. The modules that write or read an
instance's files (instance, grader, tools, env, expert agent, suite, verifier) name them from here; text shown to
the agent (briefs, prompts, tool descriptions) spells them out.
"""

from __future__ import annotations

TASK_DIR = "task"
"""What the task gives: the brief and the spec (never an artifact of the agent's)."""
BRIEF = f"{TASK_DIR}/README.md"
"""The task brief, the first file an agent reads."""
SPEC = f"{TASK_DIR}/spec.json"
"""The machine-readable task: cases, inputs, output contract."""
MODELS_DIR = "models"
"""One folder per candidate model."""
MODEL_WEIGHTS = "weights.json"
"""A candidate model's weights, in its folder."""
MODEL_CARD = "card.md"
"""A candidate model's card, in its folder."""
DATA_DIR = "data"
"""Case inputs (and, for VQA, each case's question)."""
PLAN = "plan.md"
"""The plan `write_plan` writes."""
OUTPUTS_DIR = "outputs"
"""One output per case, written by `run_model` (or agent code)."""
SUBMISSION_DIR = "submission"
"""The submitted outputs, copied from `outputs/` by `submit`."""
MANIFEST = "manifest.json"
"""The submission's manifest, in `submission/`."""
SUBMISSION_MANIFEST = f"{SUBMISSION_DIR}/{MANIFEST}"

GRADER_META = "instance.json"
"""Instance metadata on the grader side (case ids, candidates, fitting model; no truths)."""
GRADER_TRUTHS = "truth.json"
"""Truths that are not arrays."""
GRADER_ARRAYS = "truth.npz"
"""Array truths (masks, boxes)."""
GRADER_SOURCE = "SOURCE"
"""`<space>:<track>:<seed>` of the instance."""


def model_file(name: str, file: str) -> str:
    """`models/<name>/<file>`, relative to the workspace."""
    return f"{MODELS_DIR}/{name}/{file}"


def data_file(name: str) -> str:
    """`data/<name>`, relative to the workspace."""
    return f"{DATA_DIR}/{name}"
