"""Load YAML configs with dotted overrides, report validation errors by field and value, hash and dump.

`load_config("configs/local.yaml", ["grpo.lr=1e-6"])` -> BatConfig. Overrides are `dotted.key=value`
with the value parsed as YAML (`1e-6`, `true`, `[a, b]`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from bat.config.root import BatConfig


class ConfigError(ValueError):
    """A config file or override that cannot be used; the message names file, field and value."""


def _parse_override(text: str) -> tuple[list[str], Any]:
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like dotted.key=value (e.g. grpo.lr=1e-6)")
    key, raw = text.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"override {text!r} has an empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {text!r}: value is not valid YAML ({exc})") from exc
    return parts, value


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Return a copy of `data` with each `a.b.c=value` override set (intermediate dicts created)."""
    result = json.loads(json.dumps(data))
    for text in overrides:
        parts, value = _parse_override(text)
        node = result
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"override {text!r}: {part!r} is a value ({child!r}), not a section")
            node = child
        node[parts[-1]] = value
    return result


def _lookup(data: Any, loc: tuple[Any, ...]) -> Any:
    node = data
    for part in loc:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return "<missing>"
    return node


def format_validation_error(exc: ValidationError, data: dict[str, Any], source: str) -> str:
    """One line per problem: `source: field.path: message (got value)`; unknown keys list the valid ones."""
    lines = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        where = ".".join(str(p) for p in loc) or "<root>"
        if error["type"] == "extra_forbidden":
            parent_model = _model_at(BatConfig, loc[:-1])
            valid = sorted(parent_model.model_fields) if parent_model else []
            lines.append(f"{source}: {where}: unknown key; valid keys here: {', '.join(valid)}")
            continue
        value = error.get("input", _lookup(data, loc))
        shown = json.dumps(value, default=str) if not isinstance(value, dict) else "{...}"
        lines.append(f"{source}: {where}: {error['msg']} (got {shown})")
    return "invalid config:\n  " + "\n  ".join(lines)


def _model_at(model: Any, loc: tuple[Any, ...]) -> Any:
    current = model
    for part in loc:
        fields = getattr(current, "model_fields", None)
        if fields is None or part not in fields:
            return None
        annotation = fields[part].annotation
        current = annotation if hasattr(annotation, "model_fields") else None
        if current is None:
            return None
    return current


def parse_config(data: dict[str, Any], source: str = "<config>") -> BatConfig:
    """Validate a plain dict into BatConfig; raise ConfigError with one line per problem."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: top level must be a mapping of sections, got {type(data).__name__}")
    try:
        return BatConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, data, source)) from None


def load_config(path: str | os.PathLike[str] | None, overrides: Iterable[str] = ()) -> BatConfig:
    """Read YAML at `path` (None = all defaults), apply overrides, validate."""
    data: dict[str, Any] = {}
    source = "<defaults>"
    if path is not None:
        p = Path(path)
        source = str(p)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist")
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{p}: not UTF-8 text (byte {exc.start}); save the config as UTF-8 YAML") from None
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{p}: not valid YAML: {exc}") from exc
        if loaded is None:
            raise ConfigError(
                f"{p}: the config file is empty; give at least one section (e.g. `run: {{name: my-run}}`), "
                "or omit --config for the built-in defaults"
            )
        data = loaded
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: top level must be a mapping of sections, got {type(data).__name__}")
    overrides = list(overrides)
    if overrides:
        data = apply_overrides(data, overrides)
        source = f"{source} + --set"
    return parse_config(data, source)


def resolved_dict(config: BatConfig) -> dict[str, Any]:
    """The fully resolved config as plain JSON data (defaults filled in)."""
    return config.model_dump(mode="json")


OUTPUT_NEUTRAL_SECTIONS = ("orchestrate",)
"""Sections that change where/how phases run but not what they compute; left out of the config hash so the
same run can move between the local executor and Slurm."""


def config_hash(config: BatConfig) -> str:
    """sha256 of the canonical JSON of the resolved config minus output-neutral sections (first 16 hex chars)."""
    data = {k: v for k, v in resolved_dict(config).items() if k not in OUTPUT_NEUTRAL_SECTIONS}
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]
