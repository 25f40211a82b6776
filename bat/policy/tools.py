"""The tool list a policy sees in its system turn: full JSON schemas or a compact one-line form per tool."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def policy_tools(
    render_tools: bool, tool_format: str = "json", specs: Sequence[dict[str, Any]] | None = None
) -> list[dict[str, Any]] | None:
    """The tool list rendered into the policy's system turn: `specs` (default: the built-in benchmark's TOOL_SPECS)
    when `sft.render_tools` (in `sft.tool_format`: full JSON schemas or `compact_tools`), else None. SFT, rollouts
    and evaluation all render through this, so the policy sees one prompt shape."""
    if not render_tools:
        return None
    if specs is None:
        from bat.benchmark import TOOL_SPECS

        specs = TOOL_SPECS
    if tool_format == "compact":
        return compact_tools(specs)
    if tool_format != "json":
        raise ValueError(f"unknown tool format {tool_format!r}; valid: ['json', 'compact']")
    return list(specs)


def _parameter(name: str, schema: dict[str, Any], required: bool) -> str:
    kind = schema.get("type") or "|".join(str(s.get("type")) for s in schema.get("anyOf", []) if s.get("type"))
    if schema.get("enum"):
        kind = "|".join(str(v) for v in schema["enum"])
    elif kind == "array":
        kind = f"list[{schema.get('items', {}).get('type', 'any')}]"
    default = "" if required or "default" not in schema else f" = {json.dumps(schema['default'])}"
    return f"{name}: {kind}{default}"


def compact_tools(specs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One short object per tool: `{"name", "does", "args"}` with the description's first sentence and each
    parameter as `name: type = default` (optional ones carry their default)."""
    out = []
    for spec in specs:
        params = spec.get("parameters", {})
        required = set(params.get("required", []))
        args = [_parameter(n, s, n in required) for n, s in params.get("properties", {}).items()]
        does = str(spec.get("description", "")).split(". ")[0].rstrip(".")
        out.append({"name": spec["name"], "does": does, "args": ", ".join(args)})
    return out


def benchmark_specs(config: Any) -> list[dict[str, Any]] | None:
    """The configured benchmark's tool schemas for `policy_tools`: None (the built-in TOOL_SPECS) for the built-in
    benchmark, a plug-in's `tools()` otherwise."""
    if config.benchmark.name == "builtin":
        return None
    from bat.staged.registry import from_config

    return from_config(config).tools()


def config_tools(config: Any) -> tuple[list[str], list[dict[str, Any]] | None]:
    """(tool names the agent loop accepts, tool list rendered into the policy's system turn) of the configured
    benchmark under `sft.render_tools` and `sft.tool_format`."""
    specs = benchmark_specs(config)
    if specs is None:
        from bat.benchmark import TOOL_NAMES

        names = list(TOOL_NAMES)
    else:
        names = [t["name"] for t in specs]
    return names, policy_tools(config.sft.render_tools, config.sft.tool_format, specs)
