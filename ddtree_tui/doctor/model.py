"""The doctor's result shapes (they cross into the UI, the CLI's JSON and the tests) and the small helpers
every check family shares."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.config import HostProfile
from ddtree_tui.transport.base import Env, RunResult, Transport, TransportError

FindingStatus = Literal["ok", "warn", "fail"]


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True)

    check: str
    status: FindingStatus
    evidence: str
    fix: str | None = None


def fail(check: str, evidence: str, fix: str | None = None) -> Finding:
    """A failed check: the finding most checks write, in one place."""
    return Finding(check=check, status="fail", evidence=evidence, fix=fix)


class DoctorReport(BaseModel):
    host: str
    address: str = ""
    findings: list[Finding] = Field(default_factory=list)
    facts: dict[str, Any] = Field(default_factory=dict)  # the raw probe / nvidia-smi facts, for --json

    @property
    def worst(self) -> FindingStatus:
        st = {f.status for f in self.findings}
        return "fail" if "fail" in st else "warn" if "warn" in st else "ok"


def tail(text: str, n: int = 300) -> str:
    """The end of a long output on one line: what a finding quotes of an error."""
    t = " ".join(text.strip().split())
    return t if len(t) <= n else "…" + t[-n:]


async def run_quiet(
    t: Transport,
    argv: Sequence[str],
    *,
    timeout: float | None = 30.0,
    input: str | None = None,
    env: Env = None,
) -> RunResult:
    """t.run (its keywords and defaults), with an unreachable host as a failed RunResult: a check reports it,
    never raises."""
    try:
        return await t.run(argv, timeout=timeout, input=input, env=env)
    except TransportError as e:
        return RunResult(argv=list(argv), exit_status=None, stdout="", stderr=str(e), duration_s=0.0)


def major_minor(v: str | None) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", v or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def needs_gpu(profile: HostProfile) -> bool:
    """Whether any service of the profile is an SGLang server (a missing GPU or package then fails)."""
    return any(s.launcher == "sglang" for s in profile.service)
