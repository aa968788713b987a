"""`ServiceRef`: which service on which host, the `HOST/SVC` a person types, parsed once at the faces (CLI
arguments, UI rows, collector bodies) and passed as a value from there on. Frozen and hashable (a dict key, a
set member); `str()` gives `HOST/SVC` back, and as a pydantic field it validates from and serialises to that
string, so a JSON body keeps carrying `"ref": "HOST/SVC"`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

_PART = re.compile(r"^[^/\s]+$")


@dataclass(frozen=True, slots=True)
class ServiceRef:
    """One service on one host; neither part is empty nor holds a `/` or a space."""

    host: str
    service: str

    def __post_init__(self) -> None:
        for what, part in (("host", self.host), ("service", self.service)):
            if not isinstance(part, str) or not _PART.match(part):
                raise ValueError(f"bad {what} {part!r} in a service reference: expected HOST/SVC")

    @classmethod
    def parse(cls, text: str | ServiceRef) -> ServiceRef:
        """`HOST/SVC` (surrounding spaces ignored) as a ServiceRef; a ServiceRef is returned as it is.
        ValueError saying what was expected otherwise."""
        if isinstance(text, ServiceRef):
            return text
        if not isinstance(text, str):
            raise ValueError(f"expected HOST/SVC, got {type(text).__name__}")
        host, sep, svc = text.strip().partition("/")
        if not sep or not _PART.match(host) or not _PART.match(svc):
            raise ValueError(f"expected HOST/SVC, got {text!r}")
        return cls(host, svc)

    def __str__(self) -> str:
        return f"{self.host}/{self.service}"

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        from_str = core_schema.no_info_after_validator_function(cls.parse, core_schema.str_schema())
        return core_schema.json_or_python_schema(
            json_schema=from_str,
            python_schema=core_schema.no_info_plain_validator_function(cls.parse),
            serialization=core_schema.to_string_ser_schema(when_used="always"),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string", "pattern": r"^[^/\s]+/[^/\s]+$", "description": "HOST/SVC"}


RefLike = ServiceRef | str
"""What the fleet's methods take: a ServiceRef, or `HOST/SVC` from code that has not parsed it yet (parsed
on the way in, with the same clear ValueError)."""
