"""Fixed, deterministic tokenizer-training corpus: the tool language, practice episodes, text shipped with Python.

Reads `bat.benchmark.TOOL_SPECS` (tool names, descriptions, JSON-schema parameters), the public
`STAGE_SKILLS` texts and practice-instance episodes (`bat.policy.practice_text`) when the benchmark package
provides them (otherwise a built-in tool list); never anything from the held-out side.
"""

from __future__ import annotations

import importlib
import inspect
import json
import random
from typing import Any

from bat.policy.codec import render_tool_call

# Stdlib modules whose docstrings give ordinary English + code text (same bytes for one Python version).
_STDLIB_MODULES = (
    "json",
    "pathlib",
    "shutil",
    "subprocess",
    "argparse",
    "csv",
    "os",
    "re",
    "textwrap",
    "string",
    "statistics",
    "random",
    "collections",
    "functools",
    "itertools",
    "logging",
    "tempfile",
    "hashlib",
    "datetime",
    "math",
    "zipfile",
    "tarfile",
    "glob",
    "fnmatch",
    "difflib",
    "unittest",
    "typing",
)
_FALLBACK_TOOLS = (
    {
        "name": "list_files",
        "description": "List files under a workspace directory.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {
        "name": "read_file",
        "description": "Read a text file from the workspace.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {
        "name": "write_file",
        "description": "Write a text file into the workspace.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
    {
        "name": "run_python",
        "description": "Run a Python script inside the sandbox and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "args": {"type": "array"}},
            "required": ["path"],
        },
    },
    {
        "name": "submit",
        "description": "Submit the final results directory.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
)
_WORDS = (
    "plan",
    "setup",
    "validate",
    "inference",
    "submit",
    "pilot",
    "case",
    "cases",
    "output",
    "outputs",
    "model",
    "checkpoint",
    "results",
    "predictions",
    "segmentation",
    "classification",
    "detection",
    "enhancement",
    "report",
    "synthesis",
    "vqa",
    "mask",
    "image",
    "label",
    "score",
    "metric",
    "format",
    "shape",
    "error",
    "ok",
    "done",
    "failed",
    "retry",
    "fixed",
    "environment",
    "install",
    "requirements",
    "data",
    "input",
)


def benchmark_tool_specs() -> list[dict[str, Any]]:
    """`bat.benchmark.TOOL_SPECS` when available, else the built-in fallback tool list."""
    try:
        module = importlib.import_module("bat.benchmark")
    except ImportError:
        return [dict(t) for t in _FALLBACK_TOOLS]
    specs = getattr(module, "TOOL_SPECS", None)
    return [dict(t) for t in specs] if specs else [dict(t) for t in _FALLBACK_TOOLS]


def benchmark_public_texts() -> list[str]:
    """Public stage-skill texts (`bat.benchmark.STAGE_SKILLS`) when available; never held-out material."""
    try:
        module = importlib.import_module("bat.benchmark")
        skills = getattr(module, "STAGE_SKILLS", None) or {}
    except ImportError:
        return []
    return [str(skills[key]) for key in sorted(skills)]


def _stdlib_text() -> list[str]:
    texts = []
    for name in _STDLIB_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        doc = inspect.getdoc(module)
        if doc:
            texts.append(doc)
    return texts


def _argument_value(schema: dict[str, Any], rng: random.Random) -> Any:
    kind = schema.get("type", "string")
    if kind == "integer":
        return rng.randint(0, 64)
    if kind == "number":
        return round(rng.random() * 10, 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [rng.choice(_WORDS) for _ in range(rng.randint(0, 3))]
    if kind == "object":
        return {rng.choice(_WORDS): rng.choice(_WORDS)}
    words = [rng.choice(_WORDS) for _ in range(rng.randint(1, 3))]
    return "/".join(words) + rng.choice(("", ".py", ".json", ".csv", ".md", ".txt"))


def synthetic_tool_calls(tools: list[dict[str, Any]], count: int, seed: int = 0) -> list[str]:
    """`count` rendered tool calls over `tools` with schema-shaped random arguments (deterministic)."""
    rng = random.Random(seed)
    calls = []
    for _ in range(count):
        tool = rng.choice(tools)
        props = (tool.get("parameters") or {}).get("properties", {})
        args = {key: _argument_value(spec, rng) for key, spec in props.items()}
        thought = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(0, 8)))
        calls.append(render_tool_call({"name": tool["name"], "arguments": args}, thought=thought))
    return calls


def practice_corpus(seed: int) -> list[str]:
    """Briefs, responses and observations of scripted practice episodes (empty without the benchmark package)."""
    try:
        importlib.import_module("bat.benchmark")
    except ImportError:
        return []
    from bat.policy.practice_text import practice_texts

    return practice_texts(seed)


def tokenizer_corpus(extra: list[str] | None = None, seed: int = 0, *, practice: bool = True) -> list[str]:
    """All texts the tiny tokenizer is trained on: tool specs, synthetic calls/observations, stdlib docs and
    (with `practice`) the texts of scripted episodes on practice instances seeded from `seed`."""
    tools = benchmark_tool_specs()
    texts = [json.dumps(tool, ensure_ascii=False) for tool in tools]
    texts += synthetic_tool_calls(tools, 2000, seed)
    rng = random.Random(seed + 1)
    texts += [
        f"exit status {rng.randint(0, 2)}; wrote {rng.randint(1, 99)} files; " + " ".join(rng.choices(_WORDS, k=12))
        for _ in range(500)
    ]
    roles = ("system", "user", "assistant", "tool")
    texts += [f"<|im_start|>{rng.choice(roles)}\n{text}<|im_end|>\n" for text in texts[:1000]]
    texts += benchmark_public_texts()
    texts += _stdlib_text()
    texts += practice_corpus(seed) if practice else []
    texts += list(extra or [])
    return texts
