"""`ddtree-tui smoke HOST/SVC|URL [--json]`: one short streaming request, through Fleet for a profile's
service (a server's base URL needs no profile): ok or why not."""

from __future__ import annotations

import argparse
import asyncio
import json

from ddtree_tui.bench.smoke import SmokeResult, smoke_request
from ddtree_tui.bench.urls import url_list, url_ref
from ddtree_tui.cli.common import EXIT_FAIL, EXIT_OK, UsageError, handler, service_of
from ddtree_tui.config import HostProfile
from ddtree_tui.fleet import Fleet


async def _fleet_smoke(ns: argparse.Namespace, profiles: list[HostProfile], ref: str) -> SmokeResult:
    """A fleet without telemetry (a smoke test needs no GPU numbers): send the request, let go."""
    async with Fleet.open(profiles, telemetry=False, auto_complete_todos=False) as fleet:
        return await fleet.smoke(
            ref,
            prompt=ns.prompt,
            max_new_tokens=ns.max_new_tokens,
            timeout=ns.timeout,
            api=getattr(ns, "api", "generate"),
            model=getattr(ns, "model", None),
        )


def _url_smoke(ns: argparse.Namespace) -> SmokeResult:
    try:
        urls = url_list(ns.service)
    except ValueError as e:
        raise UsageError(str(e)) from e
    if len(urls) != 1:
        raise UsageError("smoke takes one URL")
    return asyncio.run(
        smoke_request(
            url_ref(urls[0]),
            urls[0],
            algorithm="baseline",
            prompt=ns.prompt,
            max_new_tokens=ns.max_new_tokens,
            timeout=ns.timeout,
            api=getattr(ns, "api", "generate"),
            model=getattr(ns, "model", None),
        )
    )


@handler("smoke")
def smoke_main(ns: argparse.Namespace) -> int:
    """Exit 0 when the service answered, 1 when it did not (an aborted request too), 2 for a bad profile or
    ref."""
    if ns.max_new_tokens < 1 or ns.timeout <= 0:
        raise UsageError("--max-new-tokens and --timeout must be positive")
    if ns.service.startswith(("http://", "https://")):
        res = _url_smoke(ns)
    else:
        profiles, host, spec = service_of(ns, ns.service)
        res = asyncio.run(_fleet_smoke(ns, profiles, f"{host.name}/{spec.name}"))
    if ns.json:
        print(json.dumps(res.model_dump(mode="json"), indent=2))
    else:
        print(res.line())
    return EXIT_OK if res.ok else EXIT_FAIL
