#!/usr/bin/env python3
"""Regenerate the SGLang contract fixtures from a real SGLang release, without torch or a GPU.

    python3 scripts/gen_sglang_contract.py                      # 0.5.23; flag tables of 0.5.16, .19, .20 too
    python3 scripts/gen_sglang_contract.py --version 0.5.24 --history 0.5.19 0.5.23

What it does, for each version:
1. `pip download sglang==V --no-deps` into a cache (~/.cache/ddtree-tui/sglang by default) and unzip the wheel.
2. `pip install --target` the few pure dependencies the serializers need for real (msgspec, orjson,
   pydantic, openai) into the cache.
3. Runs a child `python -I -S -B` whose sys.path is only that dependency folder and the unpacked wheel. Heavy
   or binary modules (torch, triton, numpy, zmq, ...) are replaced by inert stubs: any module that fails to
   import is added to the stub list and the child is run again, so a new release needs no edits here. The
   stubbed names are recorded in the output.
   - flags: `argparse.ArgumentParser()` + the release's own `ServerArgs.add_cli_args(parser)`, every action
     dumped (option strings, nargs, choices, deprecated replacement).
   - streams (newest version only): SSE bytes produced by the release's own serializers: `dumps_json`
     (utils/json_response.py) on the chunk dicts `/generate` yields (key order as in
     managers/tokenizer_manager.py `_handle_batch_output`), the `FINISH_*` classes' `to_json`
     (managers/schedule_batch.py), `build_sse_content` (entrypoints/openai/sse_utils.py), the pydantic
     `ChatCompletionStreamResponse` + `UsageProcessor.calculate_streaming_usage` for the usage chunk, and
     `create_streaming_error_response` (serving_base.py) for errors. Arrival times are synthetic (stated
     per case) because no GPU runs here.
   - log lines: the release's own f-strings rendered: `PoolStats.get_*_usage_msg_parts` executed for real,
     and the Prefill/Decode batch f-strings of metrics_reporter.py evaluated with chosen values; prefixes
     from `configure_logger`'s format (with/without SGLANG_LOG_MS) and the scheduler's rank tags.
4. Writes:
   ddtree_tui/data/sglang/flags-V.json   the flag table (shipped: the launch check uses it offline)
   ddtree_tui/data/sglang/renames.json   flag renames across the versions given (deprecated aliases with a
                                         `new_flag`, and flags that vanished while another kept their dest)
   tests/fixtures/sglang/V/streams.json  recorded streams
   tests/fixtures/sglang/V/log_lines.json log-line variants

CI never runs this: it uses the checked-in output. Re-run it for a new SGLang version and commit the result.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEPS = ["msgspec", "orjson", "pydantic", "openai", "packaging", "dill"]
BASE_STUBS = ["torch", "triton", "numpy", "zmq", "PIL", "psutil", "requests", "pybase64"]
SCHEMA = 1


# ----------------------------------------------------------------------------------------------------------
# parent side


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def fetch_wheel(version: str, cache: Path) -> Path:
    """The unpacked sglang wheel of `version` (downloaded once)."""
    dest = cache / f"sglang-{version}"
    if (dest / "sglang" / "srt" / "server_args.py").is_file():
        return dest
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(f"sglang-{version}-*.whl"))
    if not found:
        _pip("download", f"sglang=={version}", "--no-deps", "-q", "-d", str(wheels))
        found = sorted(wheels.glob(f"sglang-{version}-*.whl"))
    if not found:
        raise SystemExit(f"no wheel for sglang=={version}")
    with zipfile.ZipFile(found[0]) as z:
        z.extractall(dest, [n for n in z.namelist() if n.startswith("sglang/") and n.endswith(".py")])
    return dest


def ensure_deps(cache: Path) -> Path:
    d = cache / "deps"
    if not (d / ".ok").exists():
        _pip("install", "-q", "--target", str(d), *DEPS)
        (d / ".ok").write_text("ok\n")
    return d


def run_child(mode: str, wheel: Path, deps: Path, extra: dict | None = None) -> dict:
    """Run this file as the isolated child; grow the stub list until the release's modules import."""
    stubs = list(BASE_STUBS)
    last = ""
    for _ in range(60):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
        payload = json.dumps(
            {"mode": mode, "wheel": str(wheel), "deps": str(deps), "stubs": stubs, **(extra or {})}
        )
        p = subprocess.run(
            [sys.executable, "-I", "-S", "-B", __file__, "--child"],
            input=payload,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        out = p.stdout.strip().splitlines()
        if p.returncode == 0 and out:
            return json.loads(out[-1])
        last = p.stderr
        missing = [
            ln.split("'")[1] for ln in p.stderr.splitlines() if "ModuleNotFoundError: No module named" in ln
        ]
        top = missing[-1].split(".")[0] if missing else None
        if not top or top in stubs or top == "sglang":
            break
        stubs.append(top)
    raise SystemExit(f"child {mode} failed for {wheel}:\n{last[-4000:]}")


def renames_between(tables: list[tuple[str, dict]]) -> list[dict]:
    """Flag renames: a deprecated action naming its replacement, or a flag that disappeared while a flag that
    is still there writes the same dest (an alias retired)."""
    out: dict[str, dict] = {}
    for version, t in tables:
        for a in t["flags"]:
            nf = a.get("new_flag")
            if a.get("deprecated") and nf:
                for old in a["flags"]:
                    out.setdefault(
                        old,
                        {
                            "old": old,
                            "new": nf,
                            "deprecated_in": version,
                            "last_seen": version,
                            "removed_in": None,
                        },
                    )
                    out[old]["last_seen"] = version
    for (v_old, old_t), (v_new, new_t) in itertools.pairwise(tables):
        new_flags = {f for a in new_t["flags"] for f in a["flags"]}
        new_by_dest: dict[str, str] = {}
        for a in new_t["flags"]:
            if not a.get("deprecated"):
                new_by_dest.setdefault(a["dest"], a["flags"][0])
        for a in old_t["flags"]:
            for f in a["flags"]:
                if f in new_flags:
                    continue
                rec = out.get(f)
                if rec is not None:
                    rec["removed_in"] = rec["removed_in"] or v_new
                    rec["last_seen"] = v_old if rec["last_seen"] is None else rec["last_seen"]
                    continue
                target = new_by_dest.get(a["dest"])
                if target and target != f:
                    out[f] = {
                        "old": f,
                        "new": target,
                        "deprecated_in": None,
                        "last_seen": v_old,
                        "removed_in": v_new,
                    }
    return sorted(out.values(), key=lambda r: r["old"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", default="0.5.23", help="the release to record streams and logs from")
    ap.add_argument(
        "--history",
        nargs="*",
        default=["0.5.16", "0.5.19", "0.5.20"],
        help="older releases for the flag tables and renames",
    )
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "ddtree-tui" / "sglang"))
    ap.add_argument("--flags-out", default=str(ROOT / "ddtree_tui" / "data" / "sglang"))
    ap.add_argument("--fixtures-out", default=str(ROOT / "tests" / "fixtures" / "sglang"))
    ns = ap.parse_args()
    cache = Path(ns.cache)
    cache.mkdir(parents=True, exist_ok=True)
    deps = ensure_deps(cache)
    versions = sorted(
        {*ns.history, ns.version},
        key=lambda v: [int(x) if x.isdigit() else x for x in v.replace("post", ".").split(".")],
    )
    flags_out = Path(ns.flags_out)
    flags_out.mkdir(parents=True, exist_ok=True)
    tables = []
    for v in versions:
        wheel = fetch_wheel(v, cache)
        t = run_child("flags", wheel, deps)
        t = {"schema": SCHEMA, "sglang_version": v, "generated_by": "scripts/gen_sglang_contract.py", **t}
        (flags_out / f"flags-{v}.json").write_text(json.dumps(t, indent=1, ensure_ascii=False) + "\n")
        tables.append((v, t))
        print(f"flags-{v}.json: {len(t['flags'])} actions (stubbed: {', '.join(t['stubbed'])})")
    ren = {
        "schema": SCHEMA,
        "versions": versions,
        "meaning": "deprecated_in: the oldest table version where `old` is a deprecated alias of `new` (it may be "
        "older still); last_seen: the newest table version that accepts `old`; removed_in: the first table "
        "version that rejects it (None: still accepted by the newest)",
        "renames": renames_between(tables),
    }
    (flags_out / "renames.json").write_text(json.dumps(ren, indent=1) + "\n")
    print(f"renames.json: {len(ren['renames'])} renames")
    wheel = fetch_wheel(ns.version, cache)
    fx = Path(ns.fixtures_out) / ns.version
    fx.mkdir(parents=True, exist_ok=True)
    for mode, name in (("streams", "streams.json"), ("logs", "log_lines.json")):
        data = run_child(mode, wheel, deps)
        data = {
            "schema": SCHEMA,
            "sglang_version": ns.version,
            "generated_by": "scripts/gen_sglang_contract.py",
            **data,
        }
        (fx / name).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        n = len(data.get("cases") or data.get("lines") or [])
        print(f"{fx / name}: {n} entries")
    return 0


# ----------------------------------------------------------------------------------------------------------
# child side: runs with -I -S -B, sys.path = [deps, wheel]; never imports anything of ddtree_tui


def _child() -> None:
    import ast
    import importlib.abc
    import importlib.machinery
    import types

    req = json.loads(sys.stdin.read())
    sys.path[:0] = [req["deps"], req["wheel"]]
    stub_names = set(req["stubs"])
    stubbed: set[str] = set()
    # `hasattr(torch, "npu")` must be False, or sglang believes it runs on Ascend; `triton.runtime.driver`
    # must fail, so device probes fall back to "cpu" instead of returning a stub
    deny = {"npu", "driver"}

    class _Any:
        """Anything a stub module hands out: callable, subscriptable, iterable (empty), falsy."""

        def __init__(self, n: str) -> None:
            self._n = n

        def __call__(self, *a, **k):
            return _Any(self._n + "()")

        def __getattr__(self, name: str):
            if name.startswith("__") or name in deny:
                raise AttributeError(name)
            return _Any(self._n + "." + name)

        def __mro_entries__(self, bases):
            nm = self._n.rsplit(".", 1)[-1]
            ns = {
                "__init__": lambda s, *a, **k: None,
                "__init_subclass__": classmethod(lambda c, **k: None),
                "__get_pydantic_core_schema__": classmethod(lambda c, src, h: _any_schema()),
            }
            return (type(nm, (), ns),)

        def __get_pydantic_core_schema__(self, source, handler):
            return _any_schema()

        def __iter__(self):
            return iter(())

        def __bool__(self) -> bool:
            return False

        def __getitem__(self, k):
            return _Any(self._n + "[]")

        def __setitem__(self, k, v) -> None:
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a) -> bool:
            return False

        def __or__(self, o):
            return self

        __ror__ = __or__

        def __int__(self) -> int:
            return 0

        __index__ = __int__

        def __len__(self) -> int:
            return 0

        def __contains__(self, x) -> bool:
            return False

        def __eq__(self, o) -> bool:
            return self is o

        def __hash__(self) -> int:
            return id(self)

        def __lt__(self, o) -> bool:
            return False

        __gt__ = __le__ = __ge__ = __lt__

        def __repr__(self) -> str:
            return f"<stub {self._n}>"

    def _any_schema():
        from pydantic_core import core_schema

        return core_schema.any_schema()

    class _StubModule(types.ModuleType):
        def __getattr__(self, name: str):
            if name == "__version__":
                return "2.9.1"
            if name.startswith("__") or name in deny:
                raise AttributeError(name)
            return _Any(f"{self.__name__}.{name}")

    class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] not in stub_names:
                return None
            return importlib.machinery.ModuleSpec(name, self, is_package=True)

        def create_module(self, spec):
            m = _StubModule(spec.name)
            m.__path__ = []
            stubbed.add(spec.name.split(".")[0])
            return m

        def exec_module(self, module) -> None:
            pass

    sys.meta_path.insert(0, _Finder())
    # sglang/__init__.py imports the whole runtime; the package is entered without it
    for pkg in ("sglang",):
        m = types.ModuleType(pkg)
        m.__path__ = [os.path.join(req["wheel"], pkg)]
        sys.modules[pkg] = m
    src_root = os.path.join(req["wheel"], "sglang", "srt")

    def src(rel: str) -> str:
        with open(os.path.join(src_root, rel), encoding="utf-8") as f:
            return f.read()

    def exec_classes(rel: str, names: list[str], ns: dict) -> dict:
        """Execute only the named class definitions of a source file (its serializers, no runtime)."""
        tree = ast.parse(src(rel))
        body = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in names]
        missing = set(names) - {n.name for n in body}
        if missing:
            raise SystemExit(f"{rel}: classes not found: {sorted(missing)}")
        exec(compile(ast.Module(body=body, type_ignores=[]), rel, "exec"), ns)
        return ns

    def jsonable(v):
        if isinstance(v, (str, int, float, bool)) or v is None:
            return v
        if isinstance(v, (list, tuple, set, frozenset)):
            items = [jsonable(x) for x in v]
            return sorted(items, key=str) if isinstance(v, (set, frozenset)) else items
        return repr(v)

    mode = req["mode"]
    if mode == "flags":
        import argparse as _ap

        from sglang.srt.server_args import ServerArgs

        parser = _ap.ArgumentParser(prog="sglang serve")
        ServerArgs.add_cli_args(parser)
        flags = []
        for a in parser._actions:
            if isinstance(a, _ap._HelpAction) or not a.option_strings:
                continue
            choices = None
            choices_known = True
            if a.choices is not None:
                vals = list(a.choices)
                if all(isinstance(c, (str, int, float)) for c in vals):
                    choices = (
                        sorted(str(c) for c in vals)
                        if isinstance(a.choices, (set, frozenset))
                        else [str(c) for c in vals]
                    )
                else:
                    choices_known = False
            flags.append(
                {
                    "flags": list(a.option_strings),
                    "dest": a.dest,
                    "nargs": a.nargs if isinstance(a.nargs, (int, str)) else None,
                    "takes_value": a.nargs != 0,
                    "choices": choices,
                    "choices_known": choices_known,
                    "action": type(a).__name__,
                    "deprecated": "Deprecated" in type(a).__name__,
                    "new_flag": jsonable(getattr(a, "new_flag", None)),
                    "required": bool(a.required),
                    "type": getattr(a.type, "__name__", None) if a.type is not None else None,
                    "default": jsonable(a.default),
                }
            )
        print(
            json.dumps(
                {
                    "stubbed": sorted(stubbed),
                    "prog": parser.prog,
                    "allow_abbrev": parser.allow_abbrev,
                    "flags": flags,
                },
                default=repr,
            )
        )
        return

    if mode == "streams":
        import importlib.util
        from http import HTTPStatus

        def load_file(modname: str, rel: str):
            spec = importlib.util.spec_from_file_location(modname, os.path.join(src_root, rel))
            mod = importlib.util.module_from_spec(spec)
            sys.modules[modname] = mod
            spec.loader.exec_module(mod)
            return mod

        jr = load_file("sglang.srt.utils.json_response", "utils/json_response.py")
        dumps_json = jr.dumps_json
        fin = exec_classes(
            "managers/schedule_batch.py",
            [
                "BaseFinishReason",
                "FINISH_MATCHED_TOKEN",
                "FINISH_MATCHED_STR",
                "FINISH_LENGTH",
                "FINISH_ABORT",
            ],
            {"Union": object, "List": list, "Optional": object},
        )
        sse = load_file("sglang.srt.entrypoints.openai.sse_utils", "entrypoints/openai/sse_utils.py")
        from sglang.srt.entrypoints.openai import protocol as P
        from sglang.srt.entrypoints.openai.usage_processor import UsageProcessor

        base_ns: dict = {"ErrorResponse": P.ErrorResponse, "json": json}
        tree = ast.parse(src("entrypoints/openai/serving_base.py"))
        fn = next(
            n
            for c in tree.body
            if isinstance(c, ast.ClassDef)
            for n in c.body
            if isinstance(n, ast.FunctionDef) and n.name == "create_streaming_error_response"
        )
        fn.decorator_list = []
        exec(compile(ast.Module(body=[fn], type_ignores=[]), "serving_base.py", "exec"), base_ns)
        streaming_error = base_ns["create_streaming_error_response"]

        tm = src("managers/tokenizer_manager.py")
        sb = src("managers/schedule_batch.py")
        for key in (
            "spec_num_correct_drafts",
            "spec_num_proposed_drafts",
            "spec_verify_ct",
            "spec_accept_length",
            "e2e_latency",
            "num_retractions",
        ):
            assert f'"{key}"' in tm, key  # the meta_info keys below are the release's own
        retract_msg = "Retracted under decode memory pressure without a KV backup. Retry later."
        assert '"Retracted under decode memory pressure without a KV "' in sb
        oom_msg = "Out of memory even after retracting all other requests in the decode batch. Aborting the last request."
        assert '"Out of memory even after retracting all other requests "' in sb

        rid = "5f1c0a7e2b9d4c3e8a6f1b2c3d4e5f60"

        def gen_chunk(text, ids, prompt, ct, finish=None, cached=0, spec=None, e2e=None, reasoning=0):
            meta = {
                "id": rid,
                "finish_reason": finish.to_json() if finish is not None else None,
                "prompt_tokens": prompt,
                "weight_version": "default",
                "num_retractions": 0,
                "reasoning_tokens": reasoning,
                "completion_tokens": ct,
                "cached_tokens": cached,
            }
            if finish is not None:
                meta["e2e_latency"] = e2e
                if spec:
                    meta.update(spec)
            return {"text": text, "output_ids": ids, "meta_info": meta}

        def sse_gen(obj) -> str:
            return (b"data: " + dumps_json(obj) + b"\n\n").decode()

        done = "data: [DONE]\n\n"
        cases = []

        def spec_meta(ct, verify, ndraft=16, correct=None):
            correct = ct - verify if correct is None else correct
            proposed = verify * (ndraft - 1)
            return {
                "spec_accept_rate": correct / proposed,
                "spec_accept_length": ct / verify,
                "spec_num_correct_drafts": correct,
                "spec_num_proposed_drafts": proposed,
                "spec_verify_ct": verify,
            }

        # /generate, cumulative text (the default), DFlash: several tokens a chunk
        pieces = [("Hello", 1), (" there! I", 3), (" am a", 2), (" helpful assistant.", 4)]
        text, n, events, t = "", 0, [], 0.048
        ids = []
        for i, (p, k) in enumerate(pieces):
            text += p
            n += k
            ids = list(range(100, 100 + n))
            last = i == len(pieces) - 1
            fr = fin["FINISH_LENGTH"](length=10) if last else None
            events.append(
                {
                    "t": round(t, 3),
                    "data": sse_gen(
                        gen_chunk(
                            text,
                            ids,
                            12,
                            n,
                            fr,
                            spec=spec_meta(n, 4) if last else None,
                            e2e=round(t, 3) if last else None,
                        )
                    ),
                }
            )
            t += 0.024
        events.append({"t": round(t - 0.023, 3), "data": done})
        cases.append(
            {
                "name": "generate_cumulative",
                "api": "generate",
                "note": "default cumulative text; DFlash puts several tokens in a chunk; first chunk is the prefill's one token",
                "expect": {
                    "ok": True,
                    "output_tokens": 10,
                    "text": text,
                    "finish_reason": "length",
                    "text_mode": "cumulative",
                    "ttft_s": 0.048,
                    "accept_length": 2.5,
                },
                "events": events,
            }
        )

        # /generate, cumulative with an exactly repeated chunk (an empty detokenizer piece on incomplete UTF-8)
        steps = [("你好", 2), ("你好", 3), ("你好世界", 5), ("你好世界😀", 7), ("你好世界😀!", 8)]
        events, t = [], 0.05
        for i, (txt, ct) in enumerate(steps):
            last = i == len(steps) - 1
            fr = fin["FINISH_MATCHED_TOKEN"](matched=151645) if last else None
            events.append(
                {
                    "t": round(t, 3),
                    "data": sse_gen(
                        gen_chunk(txt, list(range(ct)), 9, ct, fr, e2e=round(t, 3) if last else None)
                    ),
                }
            )
            t += 0.02
        events.append({"t": round(t - 0.019, 3), "data": done})
        cases.append(
            {
                "name": "generate_repeated_text",
                "api": "generate",
                "note": "cumulative text where chunk 2 repeats chunk 1 exactly (tokens 3 but no new character)",
                "expect": {
                    "ok": True,
                    "output_tokens": 8,
                    "text": "你好世界😀!",
                    "finish_reason": "stop",
                    "text_mode": "cumulative",
                },
                "events": events,
            }
        )

        # /generate with --incremental-streaming-output: deltas, and a delta that happens to start like the text so far
        deltas = [("ab", 1), ("ab", 1), ("abc", 2), ("d", 1)]
        events, t = [], 0.05
        for i, (d, k) in enumerate(deltas):
            last = i == len(deltas) - 1
            ct = sum(x[1] for x in deltas[: i + 1])
            fr = fin["FINISH_LENGTH"](length=5) if last else None
            events.append(
                {
                    "t": round(t, 3),
                    "data": sse_gen(gen_chunk(d, [1] * k, 9, ct, fr, e2e=round(t, 3) if last else None)),
                }
            )
            t += 0.02
        events.append({"t": round(t - 0.019, 3), "data": done})
        cases.append(
            {
                "name": "generate_incremental",
                "api": "generate",
                "note": "--incremental-streaming-output: each chunk is the delta; chunk 3 starts with the text so far and still is a delta",
                "expect": {
                    "ok": True,
                    "output_tokens": 5,
                    "text": "abababcd",
                    "finish_reason": "length",
                    "text_mode": "incremental",
                },
                "events": events,
            }
        )

        # /generate aborted by decode retraction (503), then [DONE]
        events = [
            {"t": 0.05, "data": sse_gen(gen_chunk("The", [1], 20, 1))},
            {"t": 0.07, "data": sse_gen(gen_chunk("The answer", [1, 2], 20, 2))},
            {
                "t": 0.40,
                "data": sse_gen(
                    gen_chunk(
                        "The answer",
                        [1, 2],
                        20,
                        2,
                        fin["FINISH_ABORT"](retract_msg, status_code=HTTPStatus.SERVICE_UNAVAILABLE),
                        e2e=0.4,
                    )
                ),
            },
            {"t": 0.401, "data": done},
        ]
        cases.append(
            {
                "name": "generate_abort_503",
                "api": "generate",
                "note": "decode out-of-memory retraction without a KV backup: a normal chunk whose finish_reason is abort, then [DONE]",
                "expect": {
                    "ok": False,
                    "status_code": 503,
                    "error_contains": "Retracted under decode memory pressure",
                    "finish_reason": "abort",
                },
                "events": events,
            }
        )
        events = [
            {"t": 0.05, "data": sse_gen(gen_chunk("x", [1], 20, 1))},
            {
                "t": 0.30,
                "data": sse_gen(
                    gen_chunk(
                        "x",
                        [1],
                        20,
                        1,
                        fin["FINISH_ABORT"](oom_msg, status_code=HTTPStatus.INTERNAL_SERVER_ERROR),
                        e2e=0.3,
                    )
                ),
            },
            {"t": 0.301, "data": done},
        ]
        cases.append(
            {
                "name": "generate_abort_500",
                "api": "generate",
                "note": "the last request of a batch that cannot fit even alone",
                "expect": {
                    "ok": False,
                    "status_code": 500,
                    "error_contains": "Out of memory even after retracting",
                    "finish_reason": "abort",
                },
                "events": events,
            }
        )

        # /generate error inside the stream (ValueError in generate_request), then [DONE]
        err = {
            "error": {
                "message": "The input (40000 tokens) is longer than the model's context length (32768 tokens).",
                "type": "invalid_request_error",
                "code": 400,
                "retryable": False,
            }
        }
        assert '"type": "invalid_request_error"' in src("entrypoints/http_server.py")
        cases.append(
            {
                "name": "generate_error",
                "api": "generate",
                "note": "http_server.py stream_results: a ValueError becomes an error object, then [DONE]",
                "expect": {"ok": False, "error_contains": "longer than the model's context length"},
                "events": [{"t": 0.01, "data": sse_gen(err)}, {"t": 0.011, "data": done}],
            }
        )

        # chat: role chunk, content chunks, finish chunk, usage chunk, [DONE]
        created = 1767225600
        model = "default"

        def usage_chunk(prompt, ct, reasoning=0):
            u = UsageProcessor.calculate_streaming_usage(
                {0: prompt}, {0: reasoning}, {0: ct}, {0: 0}, n_choices=1
            )
            c = P.ChatCompletionStreamResponse(id=rid, created=created, choices=[], model=model, usage=u)
            return f"data: {c.model_dump_json()}\n\n"

        b = sse.build_sse_content
        events = [
            {
                "t": 0.050,
                "data": b(chunk_id=rid, created=created, model=model, index=0, role="assistant", content=""),
            },
            {"t": 0.050, "data": b(chunk_id=rid, created=created, model=model, index=0, content="Hello")},
            {"t": 0.074, "data": b(chunk_id=rid, created=created, model=model, index=0, content=" there! I")},
            {
                "t": 0.098,
                "data": b(chunk_id=rid, created=created, model=model, index=0, content=" am a helpful"),
            },
            {
                "t": 0.099,
                "data": b(
                    chunk_id=rid,
                    created=created,
                    model=model,
                    index=0,
                    finish_reason="stop",
                    matched_stop=151645,
                ),
            },
            {"t": 0.099, "data": usage_chunk(12, 7)},
            {"t": 0.0995, "data": done},
        ]
        cases.append(
            {
                "name": "chat_usage_last",
                "api": "chat",
                "note": "stream_options.include_usage: usage only on a last chunk with choices []; tokens per chunk unknown",
                "expect": {
                    "ok": True,
                    "output_tokens": 7,
                    "text": "Hello there! I am a helpful",
                    "finish_reason": "stop",
                    "ttft_s": 0.05,
                    "tokens_source": "usage-estimated",
                },
                "events": events,
            }
        )

        # chat with a reasoning parser: reasoning_content first, then content
        events = [
            {
                "t": 0.050,
                "data": b(chunk_id=rid, created=created, model=model, index=0, role="assistant", content=""),
            },
            {
                "t": 0.050,
                "data": b(
                    chunk_id=rid, created=created, model=model, index=0, reasoning_content="Okay, the user"
                ),
            },
            {
                "t": 0.080,
                "data": b(
                    chunk_id=rid,
                    created=created,
                    model=model,
                    index=0,
                    reasoning_content=" wants a greeting.",
                ),
            },
            {
                "t": 0.110,
                "data": b(
                    chunk_id=rid, created=created, model=model, index=0, reasoning_content=" Keep it short."
                ),
            },
            {"t": 0.204, "data": b(chunk_id=rid, created=created, model=model, index=0, content="Hello!")},
            {
                "t": 0.234,
                "data": b(chunk_id=rid, created=created, model=model, index=0, content=" How can I help?"),
            },
            {
                "t": 0.235,
                "data": b(
                    chunk_id=rid,
                    created=created,
                    model=model,
                    index=0,
                    finish_reason="stop",
                    matched_stop=151645,
                ),
            },
            {"t": 0.235, "data": usage_chunk(12, 20, reasoning=12)},
            {"t": 0.2355, "data": done},
        ]
        cases.append(
            {
                "name": "chat_reasoning",
                "api": "chat",
                "note": "--reasoning-parser: thinking as delta.reasoning_content before delta.content; both are generated tokens",
                "expect": {
                    "ok": True,
                    "output_tokens": 20,
                    "ttft_s": 0.05,
                    "first_answer_s": 0.204,
                    "finish_reason": "stop",
                    "text": "Hello! How can I help?",
                },
                "events": events,
            }
        )

        # chat aborted with a status code: an error chunk instead of a finish chunk, usage, [DONE]
        events = [
            {
                "t": 0.050,
                "data": b(chunk_id=rid, created=created, model=model, index=0, role="assistant", content=""),
            },
            {"t": 0.050, "data": b(chunk_id=rid, created=created, model=model, index=0, content="The")},
            {
                "t": 0.400,
                "data": "data: "
                + streaming_error(
                    None,
                    retract_msg,
                    HTTPStatus.SERVICE_UNAVAILABLE.name,
                    HTTPStatus.SERVICE_UNAVAILABLE.value,
                )
                + "\n\n",
            },
            {"t": 0.400, "data": usage_chunk(20, 2)},
            {"t": 0.4005, "data": done},
        ]
        cases.append(
            {
                "name": "chat_abort_503",
                "api": "chat",
                "note": "serving_chat.py: abort with a status_code becomes create_streaming_error_response, then the usage chunk and [DONE]",
                "expect": {
                    "ok": False,
                    "status_code": 503,
                    "error_contains": "Retracted under decode memory pressure",
                },
                "events": events,
            }
        )
        print(
            json.dumps(
                {
                    "stubbed": sorted(stubbed),
                    "timing": "arrival times are synthetic, in seconds after the request was sent",
                    "cases": cases,
                }
            )
        )
        return

    if mode == "logs":
        ps_ns: dict = {}
        tree = ast.parse(src("managers/scheduler_components/pool_stats_observer.py"))
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PoolStats")
        cls.body = [
            n
            for n in cls.body
            if not (
                isinstance(n, ast.FunctionDef)
                and n.name
                not in (
                    "get_prefill_usage_msg_parts",
                    "get_decode_usage_msg_parts",
                    "get_max_pool_usage",
                    "get_kv_token_stats",
                )
            )
        ]
        import dataclasses
        import typing

        psmod = types.ModuleType("pool_stats_observer")
        sys.modules[psmod.__name__] = psmod
        psmod.__dict__.update(
            dataclasses=dataclasses,
            dataclass=dataclasses.dataclass,
            Optional=typing.Optional,
            List=list,
            Tuple=tuple,
            Any=typing.Any,
        )
        exec(
            compile(ast.Module(body=[cls], type_ignores=[]), "pool_stats_observer.py", "exec"), psmod.__dict__
        )
        ps_ns = psmod.__dict__
        PoolStats = ps_ns["PoolStats"]
        mr_tree = ast.parse(src("managers/scheduler_components/metrics_reporter.py"))

        def fstrings_containing(marker: str) -> list[ast.JoinedStr]:
            out = []
            for node in ast.walk(mr_tree):
                if isinstance(node, ast.FunctionDef) and any(
                    isinstance(c, ast.Constant) and isinstance(c.value, str) and marker in c.value
                    for c in ast.walk(node)
                ):
                    for st in ast.walk(node):
                        if isinstance(st, (ast.Assign, ast.AugAssign)):
                            tgt = st.targets[0] if isinstance(st, ast.Assign) else st.target
                            if isinstance(tgt, ast.Name) and tgt.id == "msg":
                                out.append(st.value)
                    break
            return out

        def render(node, values: dict) -> str:
            """An f-string (or a concatenation of them) from the source, with each expression's value chosen."""
            if isinstance(node, ast.JoinedStr):
                s = ""
                for v in node.values:
                    if isinstance(v, ast.Constant):
                        s += v.value
                    else:
                        expr = ast.unparse(v.value)
                        if expr not in values:
                            raise KeyError(expr)
                        spec = render(v.format_spec, values) if v.format_spec else ""
                        s += format(values[expr], spec)
                return s
            if isinstance(node, ast.Constant):
                return node.value
            if isinstance(node, ast.BinOp):
                return render(node.left, values) + render(node.right, values)
            raise TypeError(ast.dump(node))

        def piece(stmts, startswith: str, values: dict) -> str:
            for s in stmts:
                try:
                    r = render(s, values)
                except (KeyError, TypeError):
                    continue
                if r.startswith(startswith):
                    return r
            raise SystemExit(f"no format string starting {startswith!r}")

        dec = fstrings_containing("Decode batch")
        pre = fstrings_containing("Prefill batch")
        graph = "cuda graph"
        common = {
            "self._graph_backend_label": graph,
            "can_run_cuda_graph": True,
            "len(self.scheduler.waiting_queue)": 0,
        }

        def pools(kind: str):
            p = PoolStats(
                full_num_used=612,
                full_token_usage=0.01 if kind == "plain" else 0.02,
                full_available_size=60000,
                full_evictable_size=0,
            )
            if kind in ("swa", "swa+mamba"):
                p.is_hybrid_swa, p.swa_num_used, p.swa_token_usage = True, 2048, 0.31
            if kind in ("mamba", "swa+mamba"):
                p.is_hybrid_ssm, p.mamba_num_used, p.mamba_usage = True, 3, 0.45
            return p

        lines = []
        prefixes = [
            ("plain", "[2026-11-29 18:07:27] ", {}),
            ("tp0", "[2026-11-29 18:07:27 TP0] ", {"tp_rank": 0}),
            ("dp_tp", "[2026-11-29 18:07:27 DP1 TP3] ", {"dp_rank": 1, "tp_rank": 3}),
            ("ms", "[2026-11-29 18:07:27.123 TP0] ", {"tp_rank": 0, "ms": True}),
            (
                "multi_rank",
                "[2026-11-29 18:07:27.045 DP0 PP1 ATTN_CP1 MOE_DP0 TP2 EP2] ",
                {"dp_rank": 0, "tp_rank": 2, "ms": True},
            ),
            (
                "ray",
                "(SchedulerProcess pid=123, ip=10.0.0.5) [2026-11-29 18:07:27 DP0 TP0] ",
                {"dp_rank": 0, "tp_rank": 0},
            ),
        ]
        cl = src("utils/common.py")
        assert 'maybe_ms = ".%(msecs)03d" if envs.SGLANG_LOG_MS.get() else ""' in cl
        assert (
            'format = f"[%(asctime)s{maybe_ms}{prefix}] %(message)s"' in cl
            and 'datefmt="%Y-%m-%d %H:%M:%S"' in cl
        )
        sch = src("managers/scheduler.py")
        for tag in ("DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP"):
            assert f'prefix += f" {tag}' in sch, tag
        for kind in ("plain", "mamba", "swa", "swa+mamba"):
            p = pools(kind)
            usage_max = p.get_max_pool_usage()
            dparts = ", ".join(p.get_decode_usage_msg_parts()) + ", "
            pparts = ", ".join(p.get_prefill_usage_msg_parts()) + ", "
            for spec, iter_tag in ((True, ""), (True, " [1234]"), (False, "")):
                v = {
                    **common,
                    "iter_msg": iter_tag,
                    "num_running_reqs": 4,
                    "token_usage_msg": dparts,
                    "spec_accept_length": 3.42,
                    "spec_accept_rate": 0.61,
                    "spec_cap_length": 3.9,
                    "spec_block_accept_length": 3.1,
                    "self.last_gen_throughput": 140.62,
                }
                msg = piece(dec, "Decode batch", v)
                expect = {
                    "kind": "decode",
                    "running_req": 4,
                    "gen_throughput": 140.62,
                    "queue_req": 0,
                    "token_usage": round(usage_max, 2),
                    "cuda_graph": True,
                }
                if spec:
                    msg += piece(dec, "accept len", v)
                    expect.update(accept_len=3.42, accept_rate=0.61)
                    if kind == "plain" and not iter_tag:
                        msg += piece(dec, "cap len", v) + piece(dec, "block accept len", v)
                        expect.update(cap_len=3.9, block_accept_len=3.1)
                if iter_tag:
                    expect["iteration"] = 1234
                msg += piece(dec, f"{graph}:", v)
                lines.append({"pool": kind, "spec": spec, "message": msg, "expect": expect})
            vp = {
                **common,
                "iter_msg": "",
                "prefill_stats.num_new_seqs": 1,
                "prefill_stats.log_input_tokens": 37,
                "prefill_stats.log_hit_tokens": 0,
                "token_usage_msg": pparts,
                "prefill_stats.num_running_reqs.total": 0,
                "prefill_stats.num_pending_tokens": 0,
                "self.last_input_throughput": 1234.5,
            }
            msg = (
                piece(pre, "Prefill batch", vp)
                + piece(pre, f"{graph}:", vp)
                + piece(pre, "input throughput", vp)
            )
            lines.append(
                {
                    "pool": kind,
                    "spec": False,
                    "message": msg,
                    "expect": {
                        "kind": "prefill",
                        "new_seq": 1,
                        "new_token": 37,
                        "cached_token": 0,
                        "running_req": 0,
                        "queue_req": 0,
                        "input_throughput": 1234.5,
                        "token_usage": round(usage_max, 2),
                    },
                }
            )
        out = []
        for pname, prefix, pexp in prefixes:
            for ln in lines:
                exp = dict(ln["expect"])
                exp.update({k: v for k, v in pexp.items() if k != "ms"})
                out.append(
                    {"prefix": pname, "pool": ln["pool"], "line": prefix + ln["message"], "expect": exp}
                )
        print(
            json.dumps(
                {
                    "stubbed": sorted(stubbed),
                    "note": "token_usage in expect is SGLang's own: max over the full, SWA and mamba pools (PoolStats.get_max_pool_usage)",
                    "lines": out,
                }
            )
        )
        return
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    if "--child" in sys.argv:
        _child()
    else:
        sys.exit(main())
