"""Runs ON a host, in the host's own Python: parse an argv with the host's own `sglang.srt.server_args`.

Sent as source (`python -c <this file> < request.json`), like the telemetry sampler, so the check is exactly
what `python -m sglang.launch_server ARGV` would do with its command line on that build: the same
`ServerArgs.add_cli_args(parser)` and `parser.parse_args`, plus `SpeculativeAlgorithm.from_string` for the
algorithm name (0.5.23 rejects DDTREE there, not in argparse). Nothing is launched and no GPU is touched.

Request (stdin, JSON): {"argv": [...the words after `-m sglang.launch_server`...]}
Answer (the last stdout line, JSON):
  {"argcheck": 1, "version": "0.5.23" | null, "parser": true | false, "import_error": str | null,
   "unknown": [flag, ...], "error": str | null, "bad_flag": flag | null, "algorithm_error": str | null,
   "algorithms": [names] | null, "ddtree_flags": [flags of this build containing "ddtree"],
   "ddtree_env": [SGLANG_DDTREE_* names the build's environ.py declares], "flags": [every option string]}

Stdlib only and Python >= 3.7 compatible; it never raises: every failure is a field of the answer.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import traceback
from typing import Any, NoReturn

PROTOCOL = 1


class _Rejected(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would print usage and exit 2
        raise _Rejected(message)


def _version() -> str | None:
    try:
        from importlib import metadata

        return metadata.version("sglang")
    except Exception:
        pass
    try:
        import sglang

        return getattr(sglang, "__version__", None)
    except Exception:
        return None


def _bad_flag(message: str) -> str | None:
    m = re.search(r"argument (--[\w-]+)", message)
    if m:
        return m.group(1)
    m = re.search(r"unrecognized arguments: (--[\w-]+)", message)
    return m.group(1) if m else None


def check(argv: list[str]) -> dict[str, Any]:
    out = {
        "argcheck": PROTOCOL,
        "python": sys.version.split()[0],
        "version": _version(),
        "parser": False,
        "import_error": None,
        "unknown": [],
        "error": None,
        "bad_flag": None,
        "algorithm_error": None,
        "algorithms": None,
        "ddtree_flags": [],
        "ddtree_env": [],
        "flags": [],
    }
    real_stdout, real_stderr = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = io.StringIO()  # imports print; only the answer goes to stdout
    try:
        try:
            from sglang.srt.server_args import ServerArgs
        except BaseException as e:
            out["import_error"] = f"{type(e).__name__}: {e}"[-1500:]
            return out
        parser = _Parser(prog="sglang serve")
        try:
            ServerArgs.add_cli_args(parser)
        except BaseException as e:
            out["import_error"] = f"add_cli_args failed: {type(e).__name__}: {e}"[-1500:]
            return out
        out["parser"] = True
        out["flags"] = flags = sorted({s for a in parser._actions for s in a.option_strings})
        out["ddtree_flags"] = [f for f in flags if "ddtree" in f.lower()]
        ns = None
        try:
            ns, unknown = parser.parse_known_args(list(argv))
            out["unknown"] = [u for u in unknown if u.startswith("-")] or list(unknown)
        except _Rejected as e:
            out["error"] = str(e)
            out["bad_flag"] = _bad_flag(str(e))
        except SystemExit as e:  # an action that exits on its own
            out["error"] = f"the parser exited ({e.code})"
        algo = getattr(ns, "speculative_algorithm", None) if ns is not None else None
        try:
            from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

            try:
                out["algorithms"] = [m.name for m in SpeculativeAlgorithm if m.name != "NONE"]
            except Exception:
                pass
            if algo:
                try:
                    SpeculativeAlgorithm.from_string(algo)
                except (ValueError, KeyError) as e:
                    out["algorithm_error"] = str(e) or f"unknown speculative algorithm {algo}"
        except BaseException as e:
            out["algorithms_note"] = f"cannot check the algorithm name: {type(e).__name__}: {e}"[-300:]
        try:
            import sglang.srt.environ as environ

            with open(environ.__file__, encoding="utf-8") as f:
                src = f.read()
            names = set(re.findall(r"\b(SGLANG_DDTREE_\w+)", src))
            names |= {n for n in dir(environ) if n.startswith("SGLANG_DDTREE_")}
            envs = getattr(environ, "envs", None)
            names |= {n for n in dir(envs) if n.startswith("SGLANG_DDTREE_")} if envs is not None else set()
            out["ddtree_env"] = sorted(names)
        except BaseException:
            pass
        return out
    except BaseException:
        out["error"] = "argcheck crashed: " + traceback.format_exc()[-1500:]
        return out
    finally:
        sys.stdout, sys.stderr = real_stdout, real_stderr


def main() -> None:
    try:
        req = json.loads(sys.stdin.read() or "{}")
    except ValueError:
        req = {}
    res = check(req.get("argv") or [])
    sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
