"""The options every mode has, as the base of each mode's arguments model (cli/args.py). A module of its own
so that a process imports only its own mode's model: the simulator (`cli/simargs.py`) makes none of the
others (their classes alone were ~40 ms of each simulator's start, issue 24)."""

from __future__ import annotations

import argparse
from typing import Self

from pydantic import BaseModel, ConfigDict


class CliArgs(BaseModel):
    """The options every mode has (before or after the mode word)."""

    # defer_build: a process builds the validator of its own mode's model only, on its first `of` (building
    # all of them was ~0.1 s of every CLI process's start, issue 24)
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True, defer_build=True)

    mode: str | None = None
    profile: list[str] | None = None
    profiles: str | None = None
    todos: str | None = None
    demo: bool = False

    @classmethod
    def of(cls, ns: argparse.Namespace) -> Self:
        """The model of this namespace; pydantic's ValidationError for a value of the wrong type."""
        return cls.model_validate(vars(ns))
