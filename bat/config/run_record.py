"""`run.json`: the resolved config of a run, its hash and the code version, written once per run.

Reopening a run with a different config is refused (the message names the differing sections),
unless the caller explicitly allows it; the previous record is then kept as `run.<hash>.json`.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from bat.config.load import OUTPUT_NEUTRAL_SECTIONS, config_hash, resolved_dict
from bat.config.root import BatConfig
from bat.state.atomic import atomic_write_json, read_json
from bat.state.layout import RunLayout
from bat.version import code_version


class RunConfigMismatch(RuntimeError):
    """The state directory belongs to a run with a different resolved config."""


def open_run(layout: RunLayout, config: BatConfig, *, allow_config_change: bool = False) -> dict[str, Any]:
    """Create the layout and write `run.json` (or check it matches); returns the run record."""
    layout.ensure()
    resolved = resolved_dict(config)
    digest = config_hash(config)
    if layout.run_json.exists():
        existing = read_json(layout.run_json)
        if existing.get("config_hash") == digest:
            if existing.get("config") != resolved:  # only output-neutral sections (executor, resources) changed
                existing = {**existing, "config": resolved}
                atomic_write_json(layout.run_json, existing)
            return existing
        if not allow_config_change:
            old = existing.get("config", {})
            changed = sorted(k for k in set(old) | set(resolved) if old.get(k) != resolved.get(k))
            changed = [k for k in changed if k not in OUTPUT_NEUTRAL_SECTIONS]
            raise RunConfigMismatch(
                f"{layout.run_json} was written with config {existing.get('config_hash')}, "
                f"this config is {digest}; differing sections: {', '.join(changed) or '?'}. "
                "Use a new --state directory, or pass --allow-config-change to continue this run."
            )
        atomic_write_json(layout.root / f"run.{existing.get('config_hash')}.json", existing)
    record = {
        "schema_version": 1,
        "run": config.run.name,
        "config_hash": digest,
        "config": resolved,
        "code_version": code_version(),
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    atomic_write_json(layout.run_json, record)
    return record


def recorded_config(layout: RunLayout, overrides: list[str] | tuple[str, ...] = ()) -> BatConfig | None:
    """The resolved config the run at `layout` ran under (its `run.json`) with `overrides` on top, or None when it
    has no run.json. A malformed one raises (StateFileError / ConfigError naming the file)."""
    from bat.config.load import apply_overrides, parse_config

    if not layout.run_json.exists():
        return None
    data = apply_overrides(read_json(layout.run_json)["config"], list(overrides))
    return parse_config(data, f"{layout.run_json} + --set" if overrides else str(layout.run_json))


def config_of_run(state: str | None, config_path: str | None, overrides: list[str]) -> BatConfig:
    """The config that commands reading a finished run work under: `config_path` when given, else the run's own
    resolved config (`<state>/run.json`), else the defaults; `overrides` (dotted `key=value`) on top."""
    from bat.config.load import load_config

    if config_path or state is None:
        return load_config(config_path, overrides)
    recorded = recorded_config(RunLayout(state), overrides)
    return recorded if recorded is not None else load_config(None, overrides)
