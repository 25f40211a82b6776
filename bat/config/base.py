"""Shared base for every config section: unknown keys are rejected, values are validated on assignment."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """Base of all config sections: `extra="forbid"`, frozen after validation, documented fields."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
