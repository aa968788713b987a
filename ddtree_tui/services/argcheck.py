"""Does the host's SGLang accept the launch line? The host's own build is the judge.

- `check_on_host`: runs `ddtree_tui/remote/argcheck.py` (sent as source) with the host's Python and the service's
  environment, over the transport, on the exact words we are about to run after `-m sglang.launch_server`.
  Before a launch (lifecycle calls `preflight` once) and in `doctor`.
- `check_offline`: the same question against a flag table recorded from a real release
  (`ddtree_tui/data/sglang/flags-V.json`, made by scripts/gen_sglang_contract.py): argparse rebuilt from the
  table, so prefix matching, store-true flags and choices behave as SGLang's own parser does.
- `RENAMES`: flags renamed across releases (renames.json), so a refusal can say what the flag is called now.
"""

from __future__ import annotations

import argparse
import json
import re
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict

from pydantic import BaseModel, Field

from ddtree_tui.config import HostProfile, ServiceSpec, is_secret_name, redact_text
from ddtree_tui.lib.jsontypes import JsonValue
from ddtree_tui.remote import source
from ddtree_tui.services.replies import ArgcheckReply, BadReply, last_json_object, parse_reply
from ddtree_tui.transport.base import Transport, TransportError

if TYPE_CHECKING:
    from ddtree_tui.services.launchline import LaunchCommand

PROGRAM = source("argcheck")  # ddtree_tui/remote/argcheck.py
CHECK_TIMEOUT = 180.0  # importing sglang.srt.server_args imports torch: a cold disk takes a minute
_DATA = "ddtree_tui.data"


class ArgCheck(BaseModel):
    """What the host's parser said about one argv. `ok` None: it could not be asked (see `note`)."""

    ok: bool | None
    version: str | None = None
    problems: list[str] = Field(
        default_factory=list
    )  # one sentence a rejected word, with the rename if known
    unknown: list[str] = Field(default_factory=list)
    bad_flag: str | None = None
    algorithm_error: str | None = None
    algorithms: list[str] | None = None
    ddtree_flags: list[str] = Field(default_factory=list)
    ddtree_env: list[str] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list, exclude=True)
    note: str | None = None

    def summary(self) -> str:
        ver = f"SGLang {self.version}" if self.version else "the host's SGLang"
        if self.ok is None:
            return f"launch line not checked: {self.note or 'the parser could not be asked'}"
        if self.ok:
            return f"{ver} accepts the launch line"
        return f"{ver} rejects the launch line: " + "; ".join(self.problems)


def sglang_args(argv: list[str]) -> list[str] | None:
    """The words after `-m sglang.launch_server` (what its parser sees); None for any other command."""
    for i in range(len(argv) - 1):
        if argv[i] == "-m" and argv[i + 1] in ("sglang.launch_server", "sglang.srt.server"):
            return list(argv[i + 2 :])
    return None


# --- renames --------------------------------------------------------------------------------------------


class Rename(TypedDict, total=False):
    """One entry of data/sglang/renames.json."""

    old: str
    new: str
    deprecated_in: str
    last_seen: str
    removed_in: str


class FlagSpec(TypedDict, total=False):
    """One option of a recorded sglang parser (data/sglang/flags-VERSION.json, scripts that record it)."""

    flags: list[str]
    dest: str
    takes_value: bool
    nargs: str | int | None
    choices: list[str] | None
    choices_known: bool
    action: str
    deprecated: bool
    new_flag: str | None
    required: bool
    type: str | None
    default: JsonValue


class FlagTable(TypedDict, total=False):
    """A recorded sglang parser: data/sglang/flags-VERSION.json."""

    schema: int
    sglang_version: str
    generated_by: str
    stubbed: list[str]
    prog: str
    allow_abbrev: bool
    flags: list[FlagSpec]


@cache
def renames() -> dict[str, Rename]:
    """old flag -> {"new", "deprecated_in", "last_seen", "removed_in"}, from the recorded releases."""
    try:
        raw = resources.files(_DATA).joinpath("sglang/renames.json").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return {}
    return {r["old"]: r for r in json.loads(raw).get("renames", [])}


def rename_words(flag: str) -> str:
    """', renamed --new (last accepted by 0.5.19, gone in 0.5.20)' or '' when no rename is known."""
    r = renames().get(flag)
    if not r:
        return ""
    bits = []
    if r.get("last_seen"):
        bits.append(f"last accepted by {r['last_seen']}")
    if r.get("removed_in"):
        bits.append(f"gone in {r['removed_in']}")
    when = f" ({', '.join(bits)})" if bits else ""
    return f"; it is now {r['new']}{when}"


def _problems(res: ArgcheckReply) -> list[str]:
    out: list[str] = []
    for u in res.unknown:
        flag = u.split("=", 1)[0]
        out.append(f"unknown flag {u}{rename_words(flag)}")
    if res.error:
        bad = res.bad_flag
        out.append(f"{res.error}{rename_words(bad) if bad else ''}")
    if res.algorithm_error:
        known = res.algorithms
        tail = f" (this build knows {', '.join(known)})" if known else ""
        out.append(f"{res.algorithm_error}{tail}")
    return out


def from_answer(res: ArgcheckReply) -> ArgCheck:
    """ArgCheck from the host program's answer."""
    if not res.parser:
        return ArgCheck(
            ok=None,
            version=res.version,
            note=f"sglang.srt.server_args did not load: {res.import_error or res.error or '?'}",
        )
    problems = _problems(res)
    return ArgCheck(
        ok=not problems,
        version=res.version,
        problems=problems,
        unknown=list(res.unknown),
        bad_flag=res.bad_flag,
        algorithm_error=res.algorithm_error,
        algorithms=res.algorithms,
        ddtree_flags=list(res.ddtree_flags),
        ddtree_env=list(res.ddtree_env),
        flags=list(res.flags),
    )


async def check_on_host(
    transport: Transport,
    python: str,
    args: list[str],
    env: dict[str, str] | None = None,
    timeout: float = CHECK_TIMEOUT,
) -> ArgCheck:
    """Ask the host's own parser about `args` (the words after `-m sglang.launch_server`); never raises."""
    try:
        res = await transport.run(
            [python, "-c", PROGRAM], input=json.dumps({"argv": args}), env=env or None, timeout=timeout
        )
    except TransportError as e:
        return ArgCheck(ok=None, note=f"cannot run {python} on the host: {e}")
    data = last_json_object(res.stdout or "", "argcheck")
    if data is not None:
        try:
            return from_answer(parse_reply(ArgcheckReply, data, f"{ArgcheckReply.PROGRAM} ({python})"))
        except BadReply as e:
            return ArgCheck(ok=None, note=str(e))
    if res.timed_out:
        return ArgCheck(ok=None, note=f"the check did not finish in {timeout:.0f} s")
    why = (res.stderr or res.stdout or f"exit status {res.exit_status}").strip()[-300:]
    return ArgCheck(ok=None, note=f"{python} could not run the check: {why}")


# --- offline: a recorded release's flag table -------------------------------------------------------------


def known_versions() -> list[str]:
    d = resources.files(_DATA).joinpath("sglang")
    out = []
    for p in d.iterdir():
        m = re.fullmatch(r"flags-(.+)\.json", p.name)
        if m:
            out.append(m.group(1))
    return sorted(out, key=_vkey)


def _vkey(v: str) -> list[Any]:
    return [int(x) if x.isdigit() else x for x in re.split(r"[.+-]|post", v) if x != ""]


@cache
def flag_table(version: str) -> FlagTable:
    """The recorded flag table of a release; KeyError names the versions there are."""
    try:
        raw = resources.files(_DATA).joinpath(f"sglang/flags-{version}.json").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        raise KeyError(f"no flag table for sglang {version} (have {', '.join(known_versions())})") from None
    table: FlagTable = json.loads(raw)
    return table


def nearest_version(version: str | None) -> str | None:
    """The newest recorded release not newer than `version` (the newest recorded one for None)."""
    vs = known_versions()
    if not vs:
        return None
    if not version:
        return vs[-1]
    base = re.match(r"\d+(\.\d+)*", version)
    key = _vkey(base.group(0) if base else version)
    older = [v for v in vs if _vkey(v) <= key]
    return older[-1] if older else vs[0]


class _Rejected(Exception):
    pass


class _TableParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Rejected(message)


@cache
def _parser(version: str) -> _TableParser:
    t = flag_table(version)
    p = _TableParser(
        prog=t.get("prog") or "sglang serve", allow_abbrev=bool(t.get("allow_abbrev", True)), add_help=False
    )
    for a in t["flags"]:
        kw: dict[str, Any] = {"dest": a["dest"] + "__" + str(id(a))}
        if not a.get("takes_value", True):
            kw["action"] = "store_true"
        else:
            if a.get("nargs") is not None:
                kw["nargs"] = a["nargs"]
            if a.get("choices") is not None and a.get("choices_known", True):
                kw["choices"] = a["choices"]
        try:
            p.add_argument(*a["flags"], **kw)
        except (ValueError, argparse.ArgumentError):
            continue
    return p


def check_offline(args: list[str], version: str) -> ArgCheck:
    """`args` against the recorded parser of `version` (argparse semantics, choices included)."""
    p = _parser(version)
    res: dict[str, Any] = {"parser": True, "version": version}
    try:
        _ns, unknown = p.parse_known_args(list(args))
        res["unknown"] = [u for u in unknown if u.startswith("-")] or list(unknown)
    except _Rejected as e:
        res["error"] = str(e)
        m = re.search(r"argument (--[\w-]+)", str(e))
        res["bad_flag"] = m.group(1) if m else None
    out = from_answer(ArgcheckReply.model_validate(res))
    out.flags = sorted({f for a in flag_table(version)["flags"] for f in a["flags"]})
    return out


# --- before a launch ------------------------------------------------------------------------------------


async def preflight(
    transport: Transport, profile: HostProfile, spec: ServiceSpec, cmd: LaunchCommand
) -> ArgCheck | None:
    """The check lifecycle runs before launching an `sglang` service: the profile's own gaps (a DDTree mode
    whose switch `[ddtree_flags]` leaves unset), then the host's parser on the exact argv, with the service's
    environment. None for services that are not `python -m sglang.launch_server`."""
    from ddtree_tui.services.launchline import missing_ddtree_switches

    if getattr(spec, "launcher", None) != "sglang":
        return None
    args = sglang_args(cmd.argv)
    if args is None:
        return None
    missing = missing_ddtree_switches(profile, spec)
    # secrets never ride on a command line (the transport passes env as `env K=V` words): the parser does not
    # need them, and what it says back is masked before anyone shows it
    env = {k: v for k, v in (cmd.env or {}).items() if not is_secret_name(k)}
    res = await check_on_host(transport, cmd.argv[0], args, env=env)
    secrets = set(cmd.secrets())

    def shown(text: str) -> str:  # masked, and on one line: a newline in an argument cannot forge a line
        return redact_text(text, secrets).replace("\r", "\\r").replace("\n", "\\n")

    res = res.model_copy(
        update={
            "problems": [shown(p) for p in res.problems],
            "note": shown(res.note) if res.note else res.note,
        }
    )
    if missing:
        have = ", ".join(res.ddtree_flags) or "none"
        keys = " and ".join(f"[ddtree_flags] {k}" for k in missing)
        res = res.model_copy(
            update={
                "ok": False,
                "problems": [
                    f"mode {spec.mode} needs {keys} in {getattr(profile, 'source', None) or 'the profile'}: "
                    f"the switch of this host's DDTree build (its DDTree flags: {have})",
                    *res.problems,
                ],
            }
        )
    return res


def refusal(ref: str, res: ArgCheck) -> tuple[str, str]:
    """(message, suggestion) for a launch refused by the check."""
    ver = f"SGLang {res.version}" if res.version else "the host's SGLang"
    msg = f"refused to launch {ref}: {ver} would reject its command line: " + "; ".join(res.problems)
    msg += "; nothing was started"
    return msg, "fix the profile (see hostprofiles/README.md), or launch anyway with --force"
