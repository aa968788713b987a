"""Cache reset between runs (issue 26, `--flush-cache`): the server's prefix cache emptied before a run, each
load level, each agentic run or each sweep point, so one arm's cached prompts never speed up the next one's.

SGLang: `POST /flush_cache` (0.5.23 http_server.py; GET works too). Its scheduler flushes only when fully idle
(no running and no waiting request), else the endpoint answers 400 "Flush cache failed."; 0.5.23 takes
`?timeout=S` and waits up to S seconds for idle first (flush_wrapper.py; older builds ignore the parameter).
So the flush asks to wait `wait_s`, and a refusal is still retried a few times (the last requests of a level
may be finishing), then recorded as failed. vLLM: `POST /reset_prefix_cache`, tried when `/flush_cache` is
not found (404). Every attempt's outcome is recorded on the
run (`CacheFlush`: when, which service, which endpoint, the status, the server's words).

`flush_cache` is one service, `flush_all` several at once: the sweep calls them (through the fleet's
`flush_cache`) before each point.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from ddtree_tui.bench.windows import CacheFlush
from ddtree_tui.lib import http

ENDPOINTS = ("/flush_cache", "/reset_prefix_cache")  # SGLang, then vLLM
ATTEMPTS = 5
RETRY_S = 0.5
WAIT_S = 5.0  # SGLang 0.5.23's ?timeout=: how long the server may wait for idle before it flushes
MAX_BODY = 64 * 1024


async def flush_cache(
    ref: str,
    base_url: str,
    before: str,
    headers: Mapping[str, str] | None = None,
    *,
    attempts: int = ATTEMPTS,
    retry_s: float = RETRY_S,
    wait_s: float = WAIT_S,
    timeout_s: float = 30.0,
) -> CacheFlush:
    """Reset one server's prefix cache; never raises for the server's answer (the record says what
    happened). SGLang may wait `wait_s` for idle; a 400 (requests still running) is retried `attempts` times
    `retry_s` apart."""
    import aiohttp  # imported by the run that flushes, not by every run's start (~0.1 s of CPU)

    at = datetime.now(UTC)
    base = base_url.rstrip("/")
    status: int | None = None
    text = ""
    endpoint: str | None = None
    n = 0
    async with http.session(headers=headers, timeout=timeout_s) as s:
        for n in range(1, max(1, attempts) + 1):
            for path in ENDPOINTS:
                try:
                    query = {"timeout": f"{wait_s:g}"} if path == "/flush_cache" and wait_s > 0 else None
                    async with s.post(base + path, params=query, allow_redirects=False) as r:
                        status = r.status
                        text = (await http.read_body(r, MAX_BODY)).decode("utf-8", "replace").strip()
                except (aiohttp.ClientError, TimeoutError, OSError, http.HttpError) as e:
                    status, text, endpoint = None, f"no answer: {http.describe(e)}", path
                    break
                endpoint = path
                if status not in (404, 405):  # the server has this endpoint
                    break
            if status is not None and 200 <= status < 300:
                break
            if status != 400 or n == attempts:
                break
            await asyncio.sleep(retry_s)
    ok = status is not None and 200 <= status < 300
    if status in (404, 405):
        text = f"neither {' nor '.join(ENDPOINTS)} exists on this server ({status})"
    return CacheFlush(
        service=ref, before=before, at=at, endpoint=endpoint, status=status, ok=ok, attempts=n,
        message=text[:200],
    )  # fmt: skip


async def flush_all(
    targets: Sequence[tuple[str, str, Mapping[str, str]]],
    before: str,
    *,
    attempts: int = ATTEMPTS,
    retry_s: float = RETRY_S,
) -> list[CacheFlush]:
    """Reset every (ref, base_url, headers) target's cache at once; the records in the targets' order."""
    return list(
        await asyncio.gather(
            *(
                flush_cache(ref, url, before, hdr, attempts=attempts, retry_s=retry_s)
                for ref, url, hdr in targets
            )
        )
    )
