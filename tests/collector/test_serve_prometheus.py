"""`ddtree-tui serve --demo` scraped by a real Prometheus server; PromQL joins a GPU to its service."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests import httpc
from tests.collector.conftest import ServeProc
from tests.collector.prom import Prometheus


@pytest.mark.timeout(120)
def test_prometheus_scrapes_serve_and_joins_gpu_to_service(
    serve_demo: Callable[..., ServeProc], prometheus: Callable[[list[str]], Prometheus]
) -> None:
    srv = serve_demo()
    prom = prometheus([f"127.0.0.1:{srv.port}"])
    up = prom.wait_query('up{job="ddtree"} == 1', 30, "the collector target to be up")
    assert up[0]["metric"]["instance"] == f"127.0.0.1:{srv.port}"
    assert prom.wait_query("ddtree_up == 1", 15, "ddtree_up")
    build = prom.wait_query("ddtree_build_info", 15, "build info")
    assert build[0]["metric"]["version"]
    # a GPU's utilisation joined to the service configured on it
    joined = prom.wait_query(
        'ddtree_gpu_utilization_ratio * on (host, gpu) group_left (service) ddtree_gpu_service_info{service="dflash"}',
        20,
        "GPU utilisation joined to its service",
    )
    assert {r["metric"]["service"] for r in joined} == {"dflash"}
    assert {(r["metric"]["host"], r["metric"]["gpu"]) for r in joined} == {("local", "0")}
    assert 0.0 <= float(joined[0]["value"][1]) <= 1.0
    # per-service state, host connection state, GPU power in watts
    state = prom.wait_query(
        'ddtree_service_state{service="dflash", state="stopped"} == 1', 15, "service state"
    )
    assert state[0]["metric"]["host"] == "local"
    assert prom.wait_query('ddtree_host_up{host="local"} == 1', 15, "host up")
    power = prom.wait_query('ddtree_gpu_power_watts{host="local", gpu="0"}', 15, "GPU power")
    assert float(power[0]["value"][1]) > 10  # the H200 recording idles near 80 W
    # the other endpoints of the same process
    snap = httpc.get(f"{srv.url}/snapshot", timeout=5).json()
    assert snap["schema"] == 1 and snap["hosts"][0]["name"] == "local"
    assert httpc.get(f"{srv.url}/-/healthy", timeout=5).status_code == 200
    assert srv.stop() == 0
