"""The stage skill texts (kappa) a bank version's rows carry: the static `STAGE_SKILLS`, with `bank.skills` in place
of the stages it names (set by the LLM skill writer, `bat.bank.skill_writer`).

Reads: `config.bank.skills`, `config.stages`, `bat.benchmark.STAGE_SKILLS`. Writes: `skills.json` of a bank version
(`BankVersionLayout.skills`) through `write_skills_file`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.state.atomic import atomic_write_json

if TYPE_CHECKING:
    from bat.config.root import BatConfig

SKILLS_SCHEMA_VERSION = 1


def stage_skills(config: BatConfig) -> dict[str, str]:
    """Skill text per stage key: `STAGE_SKILLS` overlaid with `config.bank.skills`; a key of `bank.skills` that is
    not a configured stage raises, listing the configured keys."""
    from bat.benchmark import STAGE_SKILLS

    unknown = sorted(set(config.bank.skills) - set(config.stage_keys))
    if unknown:
        raise ValueError(f"bank.skills has stage keys {unknown}; valid keys: {list(config.stage_keys)}")
    return {**STAGE_SKILLS, **config.bank.skills}


def skills_file(config: BatConfig) -> dict[str, Any]:
    """The content of `skills.json`: every configured stage's text and whether it is `rewritten` or `static`."""
    texts = stage_skills(config)
    return {
        "schema_version": SKILLS_SCHEMA_VERSION,
        "stages": {
            key: {"text": texts.get(key, ""), "source": "rewritten" if key in config.bank.skills else "static"}
            for key in config.stage_keys
        },
    }


def write_skills_file(path: Path, config: BatConfig) -> bool:
    """Write `skills.json` at `path` when `bank.skills` replaces some stage's text; returns whether it wrote (with
    only static texts nothing is written, so such a version's files stay as they were)."""
    if not config.bank.skills:
        return False
    atomic_write_json(path, skills_file(config))
    return True
