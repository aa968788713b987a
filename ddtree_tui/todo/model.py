"""The todo list's evidence checks (the `check` grammar and its parser), the store's error and the file's
default place. The shapes that cross layers (items, TodoEdit/TodoResult/TodoView) are in ddtree_tui.model.todo.

No I/O.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ddtree_tui.lib import paths

DEFAULT_TODOS = paths.TODOS


class TodoError(Exception):
    """A todo operation that cannot be done (read-only store, bad index, bad value)."""


# --- evidence checks ------------------------------------------------------------------------------------

CheckKind = Literal["service", "bench", "host", "gpu"]
SERVICE_STATES = ("ready", "stopped", "starting", "unhealthy", "crashed", "unknown")
HOST_STATES = ("connected", "disconnected", "connecting")
GPU_METRICS = {"memory": "mem_used_mb", "mem": "mem_used_mb", "util": "util_gpu", "temp": "temp_c"}
OPS = ("<=", ">=", "<", ">", "==", "!=")
CHECK_HELP = (
    "expected one of: 'service HOST/SVC ready|stopped|starting|unhealthy|crashed', "
    "'bench HOST/SVC SET ok', 'host HOST connected|disconnected', "
    "'gpu HOST:IDX memory|util|temp <|>|<=|>= N' (memory in MiB)"
)


class Check(BaseModel):
    """A piece of evidence an item points at, parsed from its `check` text."""

    model_config = ConfigDict(frozen=True)

    kind: CheckKind
    host: str
    service: str | None = None
    state: str | None = None  # service / host state wanted
    prompt_set: str | None = None
    gpu_index: int | None = None
    metric: str | None = None  # memory | util | temp
    op: str | None = None
    value: float | None = None
    text: str = ""

    @property
    def service_ref(self) -> str:
        return f"{self.host}/{self.service}"


def _split_ref(ref: str, text: str) -> tuple[str, str]:
    host, sep, svc = ref.partition("/")
    if not sep or not host or not svc:
        raise ValueError(f"bad check {text!r}: {ref!r} is not HOST/SVC; {CHECK_HELP}")
    return host, svc


def parse_check(text: str) -> Check:
    """Parse a check text; ValueError with the accepted forms when it is not one of them."""
    raw = " ".join(text.split())
    # allow "memory<1000" without spaces around the operator
    words = re.sub(r"\s*(<=|>=|==|!=|<|>)\s*", r" \1 ", raw).split()
    if not words:
        raise ValueError(f"empty check; {CHECK_HELP}")
    kind = words[0].lower()
    if kind == "service" and len(words) == 3:
        host, svc = _split_ref(words[1], text)
        state = words[2].lower()
        if state not in SERVICE_STATES:
            raise ValueError(f"bad check {text!r}: unknown service state {words[2]!r}; {CHECK_HELP}")
        return Check(kind="service", host=host, service=svc, state=state, text=raw)
    if kind == "bench" and len(words) == 4:
        host, svc = _split_ref(words[1], text)
        if words[3].lower() != "ok":
            raise ValueError(f"bad check {text!r}: a bench check ends with 'ok'; {CHECK_HELP}")
        return Check(kind="bench", host=host, service=svc, prompt_set=words[2], state="ok", text=raw)
    if kind == "host" and len(words) == 3:
        state = words[2].lower()
        if state not in HOST_STATES:
            raise ValueError(f"bad check {text!r}: unknown host state {words[2]!r}; {CHECK_HELP}")
        return Check(kind="host", host=words[1], state=state, text=raw)
    if kind == "gpu" and len(words) == 5:
        host, sep, idx = words[1].rpartition(":")
        if not sep or not host or not idx.isdigit():
            raise ValueError(f"bad check {text!r}: {words[1]!r} is not HOST:INDEX; {CHECK_HELP}")
        metric = words[2].lower()
        if metric not in GPU_METRICS:
            raise ValueError(f"bad check {text!r}: unknown GPU metric {words[2]!r}; {CHECK_HELP}")
        if words[3] not in OPS:
            raise ValueError(f"bad check {text!r}: unknown comparison {words[3]!r}; {CHECK_HELP}")
        try:
            value = float(words[4])
        except ValueError:
            raise ValueError(f"bad check {text!r}: {words[4]!r} is not a number; {CHECK_HELP}") from None
        metric = "memory" if metric == "mem" else metric
        return Check(
            kind="gpu", host=host, gpu_index=int(idx), metric=metric, op=words[3], value=value, text=raw
        )
    raise ValueError(f"bad check {text!r}: {CHECK_HELP}")
