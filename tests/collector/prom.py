"""A real Prometheus server for tests: the OS package, on loopback, with its own config and data directory."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from tests import httpc
from tests.procs import stop_child
from tests.util import free_port

PROMETHEUS = shutil.which("prometheus")


def wait_http(url: str, timeout: float, what: str, proc: subprocess.Popen[Any] | None = None) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what} exited with {proc.returncode} before {url} answered")
        try:
            r = httpc.get(url, timeout=2)
            if r.status_code == 200:
                return
            last = f"HTTP {r.status_code}"
        except httpc.ERRORS as e:
            last = repr(e)
        time.sleep(0.2)
    raise AssertionError(f"{what}: {url} did not answer 200 within {timeout:g} s ({last})")


class Prometheus:
    """`prometheus` scraping `targets` (HOST:PORT) every second; `query()` runs PromQL."""

    def __init__(self, workdir: Path, targets: list[str], job: str = "ddtree") -> None:
        if PROMETHEUS is None:
            raise AssertionError(
                "the prometheus server is not installed: run scripts/test, which installs it"
            )
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        cfg = self.dir / "prometheus.yml"
        tlist = ", ".join(f"'{t}'" for t in targets)
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: {job}\n    scrape_interval: 1s\n    scrape_timeout: 900ms\n"
            f"    static_configs:\n      - targets: [{tlist}]\n",
            encoding="utf-8",
        )
        self.log = open(self.dir / "prometheus.log", "wb")  # closed in stop()
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        try:
            wait_http(f"{self.url}/-/ready", 30, "prometheus", self.proc)
        except AssertionError:
            self.stop()
            raise AssertionError(self.tail()) from None

    def tail(self) -> str:
        return (self.dir / "prometheus.log").read_text(errors="replace")[-3000:]

    def query(self, promql: str) -> list[dict[str, Any]]:
        r = httpc.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5)
        r.raise_for_status()
        body = r.json()
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def wait_query(self, promql: str, timeout: float, what: str) -> list[dict[str, Any]]:
        """Poll a query until it returns at least one series (every 0.2 s: a query is one loopback request,
        and a scrape lands once a second, so a 0.5 s poll added a quarter of a second to each wait)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            res = self.query(promql)
            if res:
                return res
            time.sleep(0.2)
        targets = httpc.get(f"{self.url}/api/v1/targets", timeout=5).text[:2000]
        raise AssertionError(f"{what}: `{promql}` returned nothing within {timeout:g} s; targets: {targets}")

    def stop(self) -> None:
        stop_child(self.proc)
        self.log.close()
