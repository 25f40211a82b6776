"""The public tool table: argument models (validation + JSON schema), function refs, base stages, TOOL_SPECS."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ListFilesArgs(_Args):
    path: str = Field(".", description="workspace directory, relative")


class ReadFileArgs(_Args):
    path: str = Field(description="workspace file, relative (e.g. task/spec.json)")
    max_chars: int = Field(1500, ge=1, le=20000, description="truncate text after this many characters")


class WritePlanArgs(_Args):
    text: str = Field(min_length=1, description="the plan (markdown); written to plan.md")


class ModelArgs(_Args):
    model: str = Field(description="model name (a folder of models/)")


class InstallArgs(_Args):
    package: str = Field(description="package name from env/wheelhouse.txt")


class RunModelArgs(_Args):
    cases: list[str] = Field(min_length=1, description='case ids from task/spec.json, or ["all"]')
    normalize: Literal["none", "unit_range", "zscore"] = Field("none", description="input scaling before the model")
    fill_nan: bool = Field(False, description="replace non-finite input values by the case median")
    match_contract: bool = Field(
        False, description="convert the model's native output layout to the submission contract"
    )


class CheckOutputsArgs(_Args):
    cases: list[str] | None = Field(None, description='case ids or ["all"]; default: every case with an output')


class SubmitArgs(_Args):
    pass


class ExecuteCodeArgs(_Args):
    language: Literal["python", "bash"] = Field(description="interpreter")
    code: str = Field(min_length=1, description="program text; runs in the workspace inside the sandbox")


@dataclass(frozen=True)
class ToolDef:
    """One public tool: name, argument model, function ref run by the sandbox, base stage, description."""

    name: str
    args: type[_Args]
    ref: str
    stage: str | None
    description: str


_T = "bat.benchmark.tools"
TOOLS: tuple[ToolDef, ...] = (
    ToolDef("list_files", ListFilesArgs, f"{_T}.files:list_files", None, "List a workspace directory."),
    ToolDef(
        "read_file",
        ReadFileArgs,
        f"{_T}.files:read_file",
        None,
        "Read a workspace file (arrays are summarised: shape, range, non-finite count).",
    ),
    ToolDef("write_plan", WritePlanArgs, f"{_T}.files:write_plan", "S1", "Write the plan to plan.md."),
    ToolDef(
        "check_compatibility",
        ModelArgs,
        f"{_T}.setup:check_compatibility",
        "S2",
        "Check a model's modality, input scaling, output layout and requirements against the task.",
    ),
    ToolDef("install", InstallArgs, f"{_T}.setup:install", "S2", "Install a package from the offline wheelhouse."),
    ToolDef(
        "load_model",
        ModelArgs,
        f"{_T}.setup:load_model",
        "S2",
        "Load a model (its required packages must be installed).",
    ),
    ToolDef(
        "run_model",
        RunModelArgs,
        f"{_T}.infer:run_model",
        "S3|S4",
        "Run the loaded model on chosen cases with chosen preprocessing; writes outputs/.",
    ),
    ToolDef(
        "check_outputs",
        CheckOutputsArgs,
        f"{_T}.infer:check_outputs",
        "S3|S4",
        "Check outputs/ against the output contract (shape, range, NaN, degenerate output).",
    ),
    ToolDef(
        "submit", SubmitArgs, f"{_T}.submit:submit", "S5", "Submit outputs/ as the final result (ends the episode)."
    ),
)
EXECUTE_CODE = ToolDef(
    "execute_code", ExecuteCodeArgs, "execute_code", None, "Run python or bash code in the workspace (sandboxed)."
)
TOOL_BY_NAME = {t.name: t for t in (*TOOLS, EXECUTE_CODE)}
TOOL_BY_REF = {t.ref: t for t in (*TOOLS, EXECUTE_CODE)}


def _strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def tool_specs(execute_code: bool = False) -> list[dict[str, Any]]:
    """[{name, description, parameters (JSON schema)}] of the offered tools."""
    tools = (*TOOLS, EXECUTE_CODE) if execute_code else TOOLS
    return [
        {"name": t.name, "description": t.description, "parameters": _strip_titles(t.args.model_json_schema())}
        for t in tools
    ]


TOOL_SPECS: list[dict[str, Any]] = tool_specs(False)
TOOL_NAMES: tuple[str, ...] = tuple(t.name for t in TOOLS)


def validate_call(name: Any, arguments: Any, offered: tuple[str, ...]) -> tuple[ToolDef, dict[str, Any]]:
    """Check a call against the offered tools; returns (tool, validated args) or raises ValueError saying what is valid."""
    if name not in offered:
        raise ValueError(f"unknown tool {name!r}; valid: {list(offered)}")
    tool = TOOL_BY_NAME[name]
    if not isinstance(arguments, dict):
        raise ValueError(f"arguments of {name} must be a JSON object, got {type(arguments).__name__}")
    try:
        parsed = tool.args.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()[:4]
        )
        fields = list(tool.args.model_fields)
        raise ValueError(f"invalid arguments for {name}: {problems} (parameters: {fields})") from exc
    return tool, parsed.model_dump(exclude_unset=False)
