"""SGLang's own Prometheus endpoint (`/metrics`, served when it runs with `--enable-metrics`): the gauges
that say how a service is doing, read with prometheus_client's parser.

Names as SGLang exports them: `sglang:num_running_reqs`, `sglang:num_queue_reqs`, `sglang:token_usage`,
`sglang:gen_throughput` (token/s), `sglang:cache_hit_rate`, `sglang:spec_accept_length`,
`sglang:spec_accept_rate`. A server with several ranks (tp/dp) reports one series per rank: request counts
and throughput are summed, ratios and the accept length averaged.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from ddtree_tui.services.probehttp import MAX_METRICS_BODY, get_capped

if TYPE_CHECKING:
    import aiohttp

_SUM = {"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput"}
_MEAN = {
    "sglang:token_usage",
    "sglang:cache_hit_rate",
    "sglang:spec_accept_length",
    "sglang:spec_accept_rate",
}


class SglangGauges(BaseModel):
    model_config = ConfigDict(frozen=True)

    running_reqs: int | None = None
    queue_reqs: int | None = None
    token_usage: float | None = None
    gen_throughput: float | None = None
    cache_hit_rate: float | None = None
    accept_length: float | None = None
    accept_rate: float | None = None


def parse_sglang_metrics(text: str) -> SglangGauges | None:
    """The gauges in one /metrics body; None when it holds no `sglang:` series (not an SGLang server).
    Raises ValueError for text that is not the Prometheus format."""
    from prometheus_client.parser import text_string_to_metric_families  # on first use (issue 28: startup)

    values: dict[str, list[float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in _SUM or s.name in _MEAN:
                if s.value == s.value:  # not NaN
                    values.setdefault(s.name, []).append(float(s.value))
    if not values:
        return None

    def agg(name: str) -> float | None:
        v = values.get(name)
        if not v:
            return None
        return sum(v) if name in _SUM else statistics.fmean(v)

    run, queue = agg("sglang:num_running_reqs"), agg("sglang:num_queue_reqs")
    accept = agg("sglang:spec_accept_length")  # 0 until something was decoded: no number, not a collapse
    return SglangGauges(
        running_reqs=None if run is None else round(run),
        queue_reqs=None if queue is None else round(queue),
        token_usage=agg("sglang:token_usage"),
        gen_throughput=agg("sglang:gen_throughput"),
        cache_hit_rate=agg("sglang:cache_hit_rate"),
        accept_length=accept if accept else None,
        accept_rate=agg("sglang:spec_accept_rate") if accept else None,
    )


async def fetch_sglang_metrics(
    session: aiohttp.ClientSession, base_url: str, timeout: float = 5.0
) -> SglangGauges | None:
    """GET /metrics; None when the server has none (404: started without --enable-metrics), answers
    something else, or is not reachable. BodyTooLarge when the body is over MAX_METRICS_BODY."""
    import aiohttp  # already imported by the session's maker

    try:
        code, body = await get_capped(session, f"{base_url}/metrics", cap=MAX_METRICS_BODY, timeout=timeout)
    except (aiohttp.ClientError, TimeoutError, OSError):
        return None
    if code != 200:
        return None
    try:
        return parse_sglang_metrics(body.decode("utf-8", "replace"))
    except ValueError:
        return None
