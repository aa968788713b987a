"""`ddtree-tui smoke HOST/SVC|URL [--json]`: one short streaming request, through Fleet for a profile's
service (a server's base URL needs no profile): ok or why not."""

from __future__ import annotations

import asyncio
import json

from ddtree_tui.bench.smoke import SmokeResult, smoke_request
from ddtree_tui.bench.urls import url_list, url_ref
from ddtree_tui.cli.args import SmokeArgs
from ddtree_tui.cli.common import EXIT_FAIL, EXIT_OK, UsageError, handler, service_of
from ddtree_tui.config import HostProfile
from ddtree_tui.fleet import Fleet
from ddtree_tui.fleet.identity import served_identity


async def _fleet_smoke(args: SmokeArgs, profiles: list[HostProfile], ref: str) -> SmokeResult:
    """A fleet without telemetry (a smoke test needs no GPU numbers): send the request, let go."""
    async with Fleet.open(profiles, telemetry=False, auto_complete_todos=False) as fleet:
        return await fleet.smoke(
            ref,
            prompt=args.prompt,
            max_new_tokens=args.max_new_tokens,
            timeout=args.timeout,
            api=args.api,
            model=args.model,
            force=args.force,
        )


def _url_smoke(args: SmokeArgs) -> SmokeResult:
    try:
        urls = url_list(args.service)
    except ValueError as e:
        raise UsageError(str(e)) from e
    if len(urls) != 1:
        raise UsageError("smoke takes one URL")

    async def smoke() -> SmokeResult:
        """The request, and what the server says it is (/server_info), recorded beside it (issue 29)."""
        res = await smoke_request(
            url_ref(urls[0]),
            urls[0],
            algorithm="baseline",
            prompt=args.prompt,
            max_new_tokens=args.max_new_tokens,
            timeout=args.timeout,
            api=args.api,
            model=args.model,
        )
        ident = await served_identity(url_ref(urls[0]), urls[0], "url", timeout=min(args.timeout, 5.0))
        return res.model_copy(update={"identity": ident})

    return asyncio.run(smoke())


@handler("smoke", SmokeArgs)
def smoke_main(args: SmokeArgs) -> int:
    """Exit 0 when the service answered, 1 when it did not (an aborted request too), 2 for a bad profile or
    ref."""
    if args.max_new_tokens < 1 or args.timeout <= 0:
        raise UsageError("--max-new-tokens and --timeout must be positive")
    if args.service.startswith(("http://", "https://")):
        res = _url_smoke(args)
    else:
        profiles, host, spec = service_of(args, args.service)
        res = asyncio.run(_fleet_smoke(args, profiles, f"{host.name}/{spec.name}"))
    if args.as_json:
        print(json.dumps(res.model_dump(mode="json"), indent=2))
    else:
        print(res.line())
    return EXIT_OK if res.ok else EXIT_FAIL
