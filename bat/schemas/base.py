"""Base class of every JSONL/JSON record type: strict fields and a `schema_version` checked on read."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, model_validator


class Record(BaseModel):
    """A versioned record. Subclasses set `SCHEMA_VERSION`; a record from another version is refused."""

    model_config = ConfigDict(extra="forbid")

    SCHEMA_VERSION: ClassVar[int] = 1
    schema_version: int = 1

    @model_validator(mode="before")
    @classmethod
    def _default_version(cls, data: object) -> object:
        if isinstance(data, dict) and "schema_version" not in data:
            data = {**data, "schema_version": cls.SCHEMA_VERSION}
        return data

    @model_validator(mode="after")
    def _check_version(self) -> Record:
        if self.schema_version != self.SCHEMA_VERSION:
            raise ValueError(
                f"{type(self).__name__} schema_version {self.schema_version} is not supported; "
                f"this code reads version {self.SCHEMA_VERSION}"
            )
        return self
