"""Typed configuration: `BatConfig` (one section per module) and YAML loading with dotted overrides."""

from bat.config.load import ConfigError, apply_overrides, config_hash, load_config, parse_config, resolved_dict
from bat.config.root import BatConfig

__all__ = ["BatConfig", "ConfigError", "apply_overrides", "config_hash", "load_config", "parse_config", "resolved_dict"]
