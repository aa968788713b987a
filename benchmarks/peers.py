"""Which benchmark client measures a streaming server best: ours, NVIDIA's AIPerf, GuideLLM, SGLang's
`bench_serving` and vLLM's `bench serve`, side by side against one server whose schedule is exactly known
(benchmarks/exact_server.py).

Every tool speaks OpenAI's streaming `/v1/completions` to the same exact server (a child process on a free
port), scenario after scenario; within a scenario the tools take turns round by round (A B C D, then D C B A),
so a machine that gets busier hits them alike. Each tool runs as a child process from its own virtual
environment, made by this script under `--cache` (pip; `--wheels DIR` installs from local wheels instead, for
a machine without a package index), and the time each setup took is printed.

The truth is the server's own record of every request: monotonic time of arrival, of its first chunk's send
and of its last (GET /stats). The tool's counted requests are the last k arrivals (k = the requests the tool
exported as counted; warm-ups come first). Every error is computed from the tool's **per-request export**,
never from its summary:

  ours      the run's JSON (`results`: started_at, ttft_s, e2e_s, output_tokens)
  aiperf    profile_export.jsonl (request_start_ns, request_end_ns, time_to_first_token, request_latency,
            output_sequence_length; profiling phase only)
  guidellm  benchmarks.json (each successful request's start, first token and end times, output tokens)
  sglang    each counted RequestFuncOutput (start_time, ttft, latency, output_len), written by
            benchmarks/sglang_client.py (bench_serving's --output-details file has no start or latency)
  vllm      `vllm bench serve --save-result --save-detailed`: start_times (time.perf_counter, which is
            CLOCK_MONOTONIC on Linux, the server's clock), ttfts, latencies, output_lens, errors

Columns (medians over rounds; per round the median over requests, client vs server):
  TTFT err ms     client's median TTFT − the true median TTFT (first send − arrival)
  e2e err         client's median e2e vs the true median (last send − arrival), %
  tok/s err       client's median per-request tokens/e2e vs the true one, %
  agg err         client's Σ tokens / (last end − first start) vs the server's (last send − first arrival), %
  CPU µs/tok      the tool's whole process tree (getrusage of the waited children: start-up, tokenizer and
                  export included) / output tokens; `run µs/tok`: the streaming phase alone where the tool
                  reports it (ours: its measured phase; sglang: benchmark() start to metrics). Every tool
                  starts from bytecode: pip compiled the others' at install, ours' (run from its source
                  tree) is compiled before the runs (`--no-compile-ours` leaves it out)
  headline        the tool's own summary: median TTFT ms / median e2e ms / output tok/s, beside the truth

After each scenario, a table of CPU per token round by round: each tool's figure, its ratio to AIPerf's of
the same round (where AIPerf ran), and what the machine was like for that run: `probe ms` (the CPU time of a
fixed piece of Python work timed just before the tool started: the same work takes longer on a machine whose
cores are shared with other guests) and `steal %` (the hypervisor's steal time over the tool's run, of all
cores, /proc/stat). CPU time is not wall time, but on a shared host it still grows with contention: the same
client measured 16 and 24 µs/token at poisson 20 minutes apart on one 2-core machine.

Needs: pip (or --wheels), about 1 GiB of disk for the AIPerf, GuideLLM and bench_serving environments and
about 10 GiB for vLLM's (torch and CUDA libraries; `--only` leaves it out). AIPerf, GuideLLM and vLLM read a local
word-level tokenizer (built here with `tokenizers`: each streamed word "wN" is one token); AIPerf will not read
a local tokenizer folder while HF_HUB_OFFLINE=1, so that variable is removed from its environment.

Variants of ours, side by side in the same run (`--ours-variant NAME:SETTING[,SETTING]`, repeatable): each
is one more tool `ours:NAME` that takes its turn with the others round by round; a SETTING is `workers=N`
(its `--workers`) or `VAR=VALUE` (an environment variable of its process tree: DDTREE_BENCH_LOOP=asyncio,
DDTREE_BENCH_GC=default, DDTREE_BENCH_DEFER_MS=0). Compare variants as ratios within one run: a busy
machine moves both alike.

Run:  python benchmarks/peers.py [--only ours,aiperf] [--scenarios c1,c64x4] [--rounds 2] [--setup-only]
      [--out FILE.md] [--cache DIR] [--wheels DIR] [--many-core] [--ours-variant asyncio:DDTREE_BENCH_LOOP=asyncio]
      [--server-procs N]

The exact server is one process by default. At c=256 its one loop takes 256 arrivals at once and sends 64k
chunks/s, and the lateness that costs (p99 1–3 ms on 16 cores) is a TTFT-error floor every tool pays;
`--server-procs N` spreads the connections over N processes sharing the port (SO_REUSEPORT), each stamping
with the same monotonic clock, so what is left of the error is the client's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from exact_server import Config, ExactServer  # noqa: E402

TOOLS = ("ours", "aiperf", "guidellm", "sglang", "vllm")
PINS = {
    "aiperf": ["aiperf==0.13.0"],
    "guidellm": ["guidellm==0.8.0"],
    # bench_serving's own imports (serving.py), the benchmark source comes from the sglang wheel unzipped
    "sglang": [
        "aiohttp",
        "orjson",
        "msgspec",
        "numpy",
        "requests",
        "tqdm",
        "transformers",
        "tokenizers",
        "pillow",
        "pybase64",
    ],
}
SGLANG_WHEEL = "sglang==0.5.23"
# vLLM's `bench serve` runs from the vllm package (its benchmarks import vllm's own modules), so the whole
# release is installed: 0.34.0, the newest, does not resolve here (it pins flashinfer-python==0.7.3, which the
# package index lacks); 0.33.0 does. Several GiB (torch and CUDA libraries), though no GPU is used.
PINS["vllm"] = ["vllm==0.33.0"]
TOOL_TIMEOUT = 900


@dataclass
class Scenario:
    name: str
    rate: float  # tokens/s per request
    tpc: int  # tokens per chunk
    conc: int  # concurrency (closed loop); for poisson: the cap on requests in flight
    tokens: int  # per request
    n: int  # counted requests
    poisson: float | None = None  # requests/s (open loop)
    many_core: bool = False

    @property
    def label(self) -> str:
        load = f"poisson {self.poisson:g} req/s" if self.poisson else f"c={self.conc}"
        return f"{load}, {self.rate:g} tok/s × {self.tpc} tok/chunk, {self.tokens} tok"


SCENARIOS = [
    Scenario("c1", 150, 1, 1, 300, 4),
    Scenario("c16x4", 1000, 4, 16, 1000, 32),
    Scenario("c64x4", 1000, 4, 64, 1000, 128),
    Scenario("c64x1", 1000, 1, 64, 1000, 128),
    Scenario("c256x4", 1000, 4, 256, 1000, 512, many_core=True),
    Scenario("poisson", 1000, 4, 256, 500, 100, poisson=20.0),
]


@dataclass
class Rec:
    """One counted request as a tool exported it (seconds; `start` on any clock of that tool)."""

    start: float
    ttft: float
    e2e: float
    tokens: int


@dataclass
class Result:
    tool: str
    recs: list[Rec] = field(default_factory=list)
    cpu_tree_s: float | None = None
    cpu_run_s: float | None = None
    wall_s: float = 0.0
    headline: dict[str, float | None] = field(default_factory=dict)  # ttft_ms, e2e_ms, agg
    note: str = ""
    workers: str = ""
    probe_ms: float | None = None  # speed_probe() just before the run
    steal_pct: float | None = None  # steal time over the run, % of all cores' time


@dataclass
class Truth:
    ttft_ms: float
    e2e_ms: float
    tok_s: float
    agg: float
    late_p99: float | None


def warm_server(base: str, conc: int, tokens: int = 32) -> None:
    """A fresh exact server streams `conc` requests of the scenario's length at once (at most 64) before any
    tool is timed, so the first tool of a scenario's first round does not meet a cold server process (its
    first streams ran late, and ours, first in the order, read up to +5 % e2e there against under +1 % in the
    rounds after), nor one that builds that length's chunks while the tool's first requests arrive (a tool
    whose own warm-up is short, ours since it asks 64 tokens, read TTFT +1.0..+1.8 ms in such a first round
    against +0.1..+0.5 in the next)."""
    from concurrent.futures import ThreadPoolExecutor
    from urllib.request import Request, urlopen

    body = json.dumps({"model": "exact", "prompt": "w0", "max_tokens": tokens, "stream": True}).encode()

    def one(_: int) -> None:
        req = Request(base + "/v1/completions", body, {"content-type": "application/json"})
        with contextlib.suppress(OSError), urlopen(req, timeout=30) as r:
            r.read()

    with ThreadPoolExecutor(min(conc, 64)) as ex:
        list(ex.map(one, range(min(conc, 64))))


def truth_of(stats: dict[str, Any], k: int) -> Truth | None:
    done = sorted(stats["done"], key=lambda d: d["t_arrival"])[-k:]
    if not done:
        return None
    span = max(d["t_last"] for d in done) - min(d["t_arrival"] for d in done)
    return Truth(
        ttft_ms=statistics.median((d["t_first"] - d["t_arrival"]) * 1000 for d in done),
        e2e_ms=statistics.median((d["t_last"] - d["t_arrival"]) * 1000 for d in done),
        tok_s=statistics.median(d["tokens"] / (d["t_last"] - d["t_arrival"]) for d in done),
        agg=sum(d["tokens"] for d in done) / span,
        late_p99=stats.get("late_ms_p99"),
    )


# --- environments ---------------------------------------------------------------------------------------


def _pip(py: Path, args: list[str], wheels: Path | None) -> None:
    extra = ["--no-index", "--find-links", str(wheels)] if wheels else []
    subprocess.run([str(py), "-m", "pip", "install", "-q", *extra, *args], check=True)


def ensure_env(tool: str, cache: Path, wheels: Path | None, system_site: bool) -> tuple[Path, float | None]:
    """The tool's virtual environment (made when missing): its python and the seconds setup took (None when it
    was there already)."""
    venv = cache / tool
    py = venv / "bin" / "python"
    stamp = venv / ".peers-ok"
    if stamp.exists():
        return py, None
    t0 = time.monotonic()
    shutil.rmtree(venv, ignore_errors=True)
    cmd = [sys.executable, "-m", "venv", str(venv)]
    if system_site:
        cmd.append("--system-site-packages")
    subprocess.run(cmd, check=True)
    _pip(py, PINS[tool], wheels)
    if tool == "sglang":
        src = cache / "sglang-src"
        if not (src / "sglang" / "benchmark" / "serving.py").exists():
            with tempfile.TemporaryDirectory() as d:
                dl = ["download", "--no-deps", "--only-binary=:all:", "-d", d, SGLANG_WHEEL]
                if wheels:
                    whl = sorted(wheels.glob("sglang-*.whl"))
                    if not whl:
                        raise SystemExit(f"{wheels}: no sglang-*.whl for bench_serving's source")
                    shutil.copy(whl[-1], d)
                else:
                    subprocess.run([str(py), "-m", "pip", *dl], check=True, stdout=subprocess.DEVNULL)
                import zipfile

                with zipfile.ZipFile(next(Path(d).glob("sglang-*.whl"))) as z:
                    z.extractall(src, [m for m in z.namelist() if m.startswith("sglang/benchmark/")])
    took = time.monotonic() - t0
    stamp.write_text(json.dumps({"setup_s": took}))
    return py, took


def make_tokenizer(py: Path, out: Path) -> None:
    """A word-level tokenizer in which each streamed word `wN` is one token, built offline by
    sglang_client.py with a tool environment's `tokenizers`."""
    subprocess.run(
        [str(py), str(HERE / "sglang_client.py"), "--sglang-src", ".", "--make-tokenizer", str(out)],
        check=True,
    )


# --- running a tool -------------------------------------------------------------------------------------


def speed_probe() -> float:
    """CPU ms of a fixed piece of pure-Python work (dict stores, integer arithmetic): the median of three.
    Taken before each tool run: how fast this machine ran Python then."""
    out = []
    for _ in range(3):
        t = time.process_time()
        d: dict[int, int] = {}
        for i in range(200_000):
            d[i & 1023] = i * 3
        out.append((time.process_time() - t) * 1000)
    return statistics.median(out)


def _steal() -> tuple[int, int] | None:
    """(steal, all) jiffies of all cores so far (/proc/stat); None where there is no such file."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (v[7] if len(v) > 7 else 0), sum(v[:8])


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(
    argv: list[str], env: dict[str, str], cwd: Path, log: Path, timeout: float = TOOL_TIMEOUT
) -> tuple[int, float, float]:
    """The tool's process tree to its end: (returncode, CPU seconds of the tree, wall seconds)."""
    cpu0, t0 = _children_cpu(), time.monotonic()
    with log.open("wb") as f:
        try:
            p = subprocess.run(argv, env=env, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = -9
    return rc, _children_cpu() - cpu0, time.monotonic() - t0


def _tail(log: Path) -> str:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:160] if lines else "?"


@dataclass
class Variant:
    """One setting of ours run beside the default (`--ours-variant NAME:SETTING,...`)."""

    name: str
    workers: str | None = None
    env: dict[str, str] = field(default_factory=dict)


def parse_variant(text: str) -> Variant:
    name, _, rest = text.partition(":")
    if not name or not rest:
        raise SystemExit(f"--ours-variant {text!r}: NAME:SETTING[,SETTING] (workers=N or VAR=VALUE)")
    v = Variant(name)
    for item in rest.split(","):
        k, eq, val = item.partition("=")
        if not eq or not k:
            raise SystemExit(f"--ours-variant {text!r}: {item!r} is not workers=N or VAR=VALUE")
        if k == "workers":
            v.workers = val
        else:
            v.env[k] = val
    return v


def compile_ours(python: str, variants: dict[str, Variant]) -> list[str]:
    """Ours' bytecode written once before the runs, as pip writes every other tool's at install: ours runs
    from its source tree, and where PYTHONDONTWRITEBYTECODE is set (it is on some machines) each of its
    starts would compile every module it imports again (~0.2 s of CPU a start on 2 cores). The lines say
    what was compiled."""
    trees = [ROOT] + [
        Path(d) for v in variants.values() for d in v.env.get("PYTHONPATH", "").split(os.pathsep) if d
    ]
    out = []
    for t in dict.fromkeys(trees):
        pkg = t / "ddtree_tui"
        if pkg.is_dir():
            t0 = time.monotonic()
            subprocess.run(
                [python, "-m", "compileall", "-q", str(pkg)], check=True, stdout=subprocess.DEVNULL
            )
            out.append(f"- ours: bytecode of {'this tree' if t == ROOT else 'a variant tree'} compiled before the "
                       f"runs ({time.monotonic() - t0:.0f} s), as pip does at install for the other tools")  # fmt: skip
    return out


def run_ours(sc: Scenario, base: str, work: Path, ctx: Ctx, variant: Variant | None = None) -> Result:
    out = work / "ours.json"
    argv = [ctx.ours_python, "-c", "from ddtree_tui.cli import main; main()", "--run-bench", "--url", base]
    argv += ["--api", "completions", "--model", "exact", "--max-new-tokens", str(sc.tokens), "--ignore-eos"]
    argv += ["--requests", str(sc.n), "--warmup", "1", "--timeout", "300"]
    argv += ["--json", str(out), "--history", str(work / "history.jsonl"), "--no-saturation-stop"]
    argv += ["--load", f"poisson:{sc.poisson:g},1" if sc.poisson else f"concurrency:{sc.conc}"]
    workers = variant.workers if variant is not None and variant.workers else ctx.ours_workers
    if workers:
        argv += ["--workers", workers]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        **(variant.env if variant is not None else {}),
    }
    rc, cpu, wall = _run(argv, env, work, work / "ours.log", ctx.tool_timeout)
    res = Result("ours" if variant is None else f"ours:{variant.name}", cpu_tree_s=cpu, wall_s=wall)
    if not out.exists():
        res.note = f"failed ({rc}): {_tail(work / 'ours.log')}"
        return res
    run = json.loads(out.read_text())
    for r in run.get("results", []):
        if r.get("ok") and not r.get("warmup") and r.get("e2e_s"):
            res.recs.append(Rec(r["started_at"], r["ttft_s"], r["e2e_s"], r.get("output_tokens") or 0))
    c = run.get("client") or {}
    res.cpu_run_s = c.get("cpu_s")
    n = c.get("workers") or run.get("client_workers")
    why = c.get("workers_reason") or run.get("client_workers_reason")
    res.workers = f"{n} ({why})" if n and why else str(n or "")
    lvl = (run.get("levels") or [{}])[-1]
    svc = (lvl.get("services") or [{}])[0]
    res.headline = {
        "ttft_ms": (svc.get("ttft_ms") or {}).get("p50"),
        "e2e_ms": (svc.get("e2e_ms") or {}).get("p50"),
        "agg": svc.get("output_throughput"),
    }
    return res


def run_aiperf(sc: Scenario, base: str, work: Path, ctx: Ctx) -> Result:
    art = work / "aiperf"
    argv = [str(ctx.py["aiperf"]), "-m", "aiperf", "profile", "--model", "exact", "--url", base]
    argv += ["--endpoint-type", "completions", "--streaming", "--tokenizer", str(ctx.tok_dir)]
    argv += ["--synthetic-input-tokens-mean", "8", "--synthetic-input-tokens-stddev", "0"]
    argv += ["--output-tokens-mean", str(sc.tokens), "--output-tokens-stddev", "0"]
    argv += ["--extra-inputs", "ignore_eos:true", "--extra-inputs", f"max_tokens:{sc.tokens}"]
    argv += ["--request-count", str(sc.n), "--artifact-dir", str(art), "--ui-type", "none"]
    if sc.poisson:
        argv += ["--request-rate", f"{sc.poisson:g}", "--random-seed", "1"]
    else:
        argv += ["--concurrency", str(sc.conc), "--warmup-request-count", str(sc.conc)]
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    rc, cpu, wall = _run(argv, env, work, work / "aiperf.log", ctx.tool_timeout)
    res = Result("aiperf", cpu_tree_s=cpu, wall_s=wall)
    exports = list(art.rglob("profile_export.jsonl"))
    if not exports:
        res.note = f"failed ({rc}): {_tail(work / 'aiperf.log')}"
        return res
    for line in exports[0].read_text().splitlines():
        r = json.loads(line)
        md, m = r.get("metadata", {}), r.get("metrics", {})
        if r.get("error") or md.get("benchmark_phase", "profiling") != "profiling":
            continue

        def v(name: str, m: dict[str, Any] = m) -> float | None:
            x = m.get(name)
            return x.get("value") if isinstance(x, dict) else x

        ttft, lat, osl = v("time_to_first_token"), v("request_latency"), v("output_sequence_length")
        if ttft is None or lat is None:
            continue
        res.recs.append(Rec(md["request_start_ns"] / 1e9, ttft / 1000, lat / 1000, int(osl or 0)))
    summ = list(art.rglob("profile_export_aiperf.json"))
    if summ:
        s = json.loads(summ[0].read_text())
        recs = s.get("records", s)

        def stat(name: str, key: str) -> float | None:
            x = recs.get(name) if isinstance(recs, dict) else None
            return x.get(key) if isinstance(x, dict) else None

        res.headline = {
            "ttft_ms": stat("time_to_first_token", "p50"),
            "e2e_ms": stat("request_latency", "p50"),
            "agg": stat("output_token_throughput", "avg"),
        }
    return res


def run_guidellm(sc: Scenario, base: str, work: Path, ctx: Ctx) -> Result:
    out = work / "guidellm.json"
    prompt = " ".join(f"w{j}" for j in range(8))  # its synthetic text is drawn from a corpus the word
    # tokenizer cannot encode, so the prompts are given: 8 words, max_tokens = the scenario's tokens
    rows = [{"prompt": prompt, "prompt_tokens_count": 8, "output_tokens_count": sc.tokens}] * sc.n
    profile: dict[str, Any] = (
        {"kind": "poisson", "rate": [sc.poisson]}
        if sc.poisson
        else {"kind": "concurrent", "streams": [sc.conc]}
    )
    spec = {
        "backend": {
            "kind": "openai_http",
            "target": base,
            "model": "exact",
            "request_format": "/v1/completions",
            "extras": {"body": {"ignore_eos": True}},
        },
        "profile": profile,
        "data": [{"kind": "in_memory_dict_list", "data": rows}],
        "tokenizer": {"kind": "hf_auto", "model": str(ctx.tok_dir)},
        "constraints": [{"kind": "max_requests", "count": sc.n}],
        "outputs": [{"kind": "json", "path": str(out)}],
    }
    cfg = work / "guidellm-scenario.json"
    cfg.write_text(json.dumps({"spec": spec}))
    argv = [str(ctx.py["guidellm"]), "-m", "guidellm", "run", "-c", str(cfg), "--disable-console-interactive"]
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    rc, cpu, wall = _run(argv, env, work, work / "guidellm.log", ctx.tool_timeout)
    res = Result("guidellm", cpu_tree_s=cpu, wall_s=wall)
    if not out.exists():
        res.note = f"failed ({rc}): {_tail(work / 'guidellm.log')}"
        return res
    bench = json.loads(out.read_text())["benchmarks"][-1]
    for r in bench["requests"].get("successful") or []:
        t = r["info"]["timings"]
        start, first, end = t.get("request_start"), t.get("first_token_iteration"), t.get("request_end")
        if start is None or first is None or end is None:
            continue
        toks = (r.get("output_metrics") or {}).get("text_tokens") or 0
        res.recs.append(Rec(start, first - start, end - start, int(toks)))
    m = bench.get("metrics", {})

    def stat(name: str, key: str) -> float | None:
        x = (m.get(name) or {}).get("successful") or {}
        v = x.get(key)
        return float(v) if isinstance(v, int | float) else None

    lat = stat("request_latency", "median")
    res.headline = {
        "ttft_ms": stat("time_to_first_token_ms", "median"),
        "e2e_ms": lat * 1000 if lat is not None else None,
        "agg": stat("output_tokens_per_second", "mean"),
    }
    return res


def run_sglang(sc: Scenario, base: str, work: Path, ctx: Ctx) -> Result:
    out, cpu_file = work / "sglang.jsonl", work / "sglang-cpu.json"
    argv = [
        str(ctx.py["sglang"]),
        str(HERE / "sglang_client.py"),
        "--sglang-src",
        str(ctx.sglang_src),
    ]
    argv += ["--", "--backend", "sglang-oai", "--base-url", base, "--model", "exact"]
    argv += ["--tokenizer", str(ctx.tok_dir), "--dataset-name", "random-ids", "--random-input-len", "8"]
    argv += ["--random-output-len", str(sc.tokens), "--random-range-ratio", "1.0", "--num-prompts", str(sc.n)]
    argv += ["--disable-tqdm", "--output-file", str(out), "--warmup-requests", "1", "--seed", "1"]
    if sc.poisson:
        argv += ["--request-rate", f"{sc.poisson:g}"]
    else:
        argv += ["--max-concurrency", str(sc.conc)]
    env = {
        **os.environ,
        "SGLANG_CLIENT_CPU_FILE": str(cpu_file),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    rc, cpu, wall = _run(argv, env, work, work / "sglang.log", ctx.tool_timeout)
    res = Result("sglang", cpu_tree_s=cpu, wall_s=wall)
    if not out.exists() or not cpu_file.exists():
        res.note = f"failed ({rc}): {_tail(work / 'sglang.log')}"
        return res
    c = json.loads(cpu_file.read_text())
    res.cpu_run_s = c.get("cpu_s")
    for r in c.get("requests", []):
        if r["ok"]:
            res.recs.append(Rec(r["start"], r["ttft"], r["latency"], int(r["output_len"] or 0)))
    s = json.loads(out.read_text().splitlines()[-1])
    res.headline = {
        "ttft_ms": s.get("median_ttft_ms"),
        "e2e_ms": s.get("median_e2e_latency_ms"),
        "agg": s.get("output_throughput"),
    }
    return res


def run_vllm(sc: Scenario, base: str, work: Path, ctx: Ctx) -> Result:
    """vLLM's `bench serve` (its OpenAI completions client: aiohttp, one loop), one warm-up request as
    bench_serving gets; its counted requests are the detailed result's lists."""
    out = work / "vllm.json"
    argv = [str(ctx.py["vllm"]), "-m", "vllm.entrypoints.cli.main", "bench", "serve"]
    argv += ["--backend", "openai", "--base-url", base, "--endpoint", "/v1/completions", "--model", "exact"]
    argv += ["--tokenizer", str(ctx.tok_dir), "--dataset-name", "random", "--random-input-len", "8"]
    argv += ["--random-output-len", str(sc.tokens), "--random-range-ratio", "0", "--num-prompts", str(sc.n)]
    argv += ["--ignore-eos", "--num-warmups", "1", "--seed", "1", "--disable-tqdm"]
    argv += ["--percentile-metrics", "ttft,tpot,itl,e2el"]
    argv += ["--save-result", "--save-detailed", "--result-dir", str(work), "--result-filename", out.name]
    if sc.poisson:
        argv += ["--request-rate", f"{sc.poisson:g}"]
    else:
        argv += ["--request-rate", "inf", "--max-concurrency", str(sc.conc)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    rc, cpu, wall = _run(argv, env, work, work / "vllm.log", ctx.tool_timeout)
    res = Result("vllm", cpu_tree_s=cpu, wall_s=wall)
    if not out.exists():
        res.note = f"failed ({rc}): {_tail(work / 'vllm.log')}"
        return res
    r = json.loads(out.read_text())
    cols = zip(r["start_times"], r["ttfts"], r["latencies"], r["output_lens"], r["errors"], strict=True)
    for start, ttft, lat, osl, err in cols:
        if not err and lat and ttft:
            res.recs.append(Rec(start, ttft, lat, int(osl or 0)))
    res.headline = {
        "ttft_ms": r.get("median_ttft_ms"),
        "e2e_ms": r.get("median_e2el_ms"),
        "agg": r.get("output_throughput"),
    }
    return res


RUNNERS: dict[str, Callable[[Scenario, str, Path, Ctx], Result]] = {
    "ours": run_ours,
    "aiperf": run_aiperf,
    "guidellm": run_guidellm,
    "sglang": run_sglang,
    "vllm": run_vllm,
}


@dataclass
class Ctx:
    cache: Path
    tok_dir: Path
    py: dict[str, Path]
    ours_python: str = sys.executable
    ours_workers: str | None = None
    sglang_src: Path = Path()
    tool_timeout: float = TOOL_TIMEOUT
    variants: dict[str, Variant] = field(default_factory=dict)  # tool name ours:NAME -> its settings


def run_tool(tool: str, sc: Scenario, base: str, work: Path, ctx: Ctx) -> Result:
    if tool in ctx.variants:
        return run_ours(sc, base, work, ctx, ctx.variants[tool])
    return RUNNERS[tool](sc, base, work, ctx)


# --- scoring and the table ------------------------------------------------------------------------------


@dataclass
class Score:
    ttft_err_ms: float
    e2e_err: float
    tok_s_err: float
    agg_err: float
    cpu_us_tok: float | None
    run_us_tok: float | None
    ok: int
    truth: Truth
    headline: dict[str, float | None]
    workers: str
    probe_ms: float | None = None
    steal_pct: float | None = None


def score(res: Result, t: Truth) -> Score | None:
    recs = [r for r in res.recs if r.e2e > 0]
    if not recs:
        return None
    toks = sum(r.tokens for r in recs)
    span = max(r.start + r.e2e for r in recs) - min(r.start for r in recs)
    return Score(
        ttft_err_ms=statistics.median(r.ttft for r in recs) * 1000 - t.ttft_ms,
        e2e_err=(statistics.median(r.e2e for r in recs) * 1000 - t.e2e_ms) / t.e2e_ms * 100,
        tok_s_err=(statistics.median(r.tokens / r.e2e for r in recs) - t.tok_s) / t.tok_s * 100,
        agg_err=(toks / span - t.agg) / t.agg * 100,
        cpu_us_tok=res.cpu_tree_s / toks * 1e6 if res.cpu_tree_s is not None and toks else None,
        run_us_tok=res.cpu_run_s / toks * 1e6 if res.cpu_run_s is not None and toks else None,
        ok=len(recs),
        truth=t,
        headline=res.headline,
        workers=res.workers,
        probe_ms=res.probe_ms,
        steal_pct=res.steal_pct,
    )


def _f(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def table(
    sc: Scenario, scores: dict[str, list[Score]], notes: dict[str, str], tools: Sequence[str] = TOOLS
) -> list[str]:
    head = ["tool", "ok", "TTFT err ms", "e2e err", "tok/s err", "agg err", "CPU µs/tok", "run µs/tok",
            "headline TTFT/e2e ms/agg", "truth TTFT/e2e ms/agg", "late p99"]  # fmt: skip
    rows = []
    for tool in [*TOOLS, *(t for t in tools if t not in TOOLS)]:
        ss = scores.get(tool) or []
        if not ss:
            if tool in notes:
                rows.append([tool, "0", *["-"] * 9])
            continue

        def med(f: Callable[[Score], float | None], ss: list[Score] = ss) -> float | None:
            v = [x for x in (f(s) for s in ss) if x is not None]
            return statistics.median(v) if v else None

        h, t = ss[-1].headline, ss[-1].truth
        rows.append([
            tool + (f" ×{ss[-1].workers.split(' ')[0]}" if ss[-1].workers else ""),
            str(ss[-1].ok),
            _f(med(lambda s: s.ttft_err_ms), "+.2f"),
            _f(med(lambda s: s.e2e_err), "+.2f") + "%",
            _f(med(lambda s: s.tok_s_err), "+.2f") + "%",
            _f(med(lambda s: s.agg_err), "+.2f") + "%",
            _f(med(lambda s: s.cpu_us_tok), ".0f"),
            _f(med(lambda s: s.run_us_tok), ".0f"),
            f"{_f(h.get('ttft_ms'), '.1f')}/{_f(h.get('e2e_ms'), '.0f')}/{_f(h.get('agg'), '.0f')}",
            f"{t.ttft_ms:.1f}/{t.e2e_ms:.0f}/{t.agg:.0f}",
            _f(med(lambda s: s.truth.late_p99), ".2f"),
        ])  # fmt: skip
    out = [f"### {sc.name}: {sc.label}, {sc.n} counted requests", "", *_markdown(head, rows)]
    for tool, n in notes.items():
        out.append(f"- {tool}: {n}")
    ours = scores.get("ours") or []
    if ours and ours[-1].workers:
        out.append(f"- ours chose {ours[-1].workers} worker process(es)")
    return out


def cpu_rounds(scores: dict[str, list[Score]], tools: Sequence[str] = TOOLS) -> list[str]:
    """CPU µs/token round by round: each tool's figure and its ratio to AIPerf's of the same round, with the
    machine's speed probe and steal time for that run (`probe ms / steal %`)."""
    names = [t for t in [*TOOLS, *(t for t in tools if t not in TOOLS)] if scores.get(t)]
    rounds = max((len(v) for v in scores.values()), default=0)
    if not names or not rounds:
        return []
    ref = scores.get("aiperf") or []
    head = ["round", *(f"{t} µs/tok" + (" (÷ aiperf)" if ref and t != "aiperf" else "") for t in names),
            *(f"{t} probe ms / steal %" for t in names)]  # fmt: skip
    rows = []
    for i in range(rounds):
        row = [str(i + 1)]
        base = ref[i].cpu_us_tok if i < len(ref) else None
        for t in names:
            s = scores[t][i] if i < len(scores[t]) else None
            v = s.cpu_us_tok if s is not None else None
            cell = _f(v, ".1f")
            if ref and t != "aiperf" and v is not None and base:
                cell += f" ({v / base * 100:.1f} %)"
            row.append(cell)
        for t in names:
            s = scores[t][i] if i < len(scores[t]) else None
            row.append(f"{_f(s.probe_ms if s else None, '.1f')} / {_f(s.steal_pct if s else None, '.2f')}")
        rows.append(row)
    return [
        "",
        "CPU per token, round by round (rounds alternate the tools' order):",
        "",
        *_markdown(head, rows),
    ]


def _markdown(head: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table, its columns padded to their widest cell."""
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    out = ["| " + " | ".join(h.ljust(w[i]) for i, h in enumerate(head)) + " |"]
    out.append("|" + "|".join("-" * (x + 2) for x in w) + "|")
    out += ["| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r)) + " |" for r in rows]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help=f"comma list of tools ({','.join(TOOLS)})")
    ap.add_argument("--scenarios", help=f"comma list ({','.join(s.name for s in SCENARIOS)})")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--many-core", action="store_true", help="include the many-core scenarios (c=256)")
    ap.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ddtree-peers",
    )
    ap.add_argument("--wheels", type=Path, help="install the tools from these wheels (no index)")
    ap.add_argument("--system-site", action="store_true", help="venvs see the system's packages")
    ap.add_argument(
        "--system-python",
        action="store_true",
        help="no environments: every tool runs on this python (its packages already on PYTHONPATH)",
    )
    ap.add_argument("--sglang-src", type=Path, help="bench_serving's source (default: under --cache)")
    ap.add_argument("--tool-timeout", type=float, default=TOOL_TIMEOUT, help="seconds one tool run may take")
    ap.add_argument("--deadline", type=float, help="start no tool run after this many seconds")
    ap.add_argument("--setup-only", action="store_true")
    ap.add_argument("--ours-workers", help="pass --workers to ours (default: its own choice)")
    ap.add_argument(
        "--ours-variant",
        action="append",
        metavar="NAME:SETTING[,SETTING]",
        help="also run ours with these settings, as tool ours:NAME (workers=N or VAR=VALUE; repeatable)",
    )
    ap.add_argument(
        "--server-procs",
        type=int,
        default=1,
        help="exact-server processes sharing the port (SO_REUSEPORT; default 1): spreads a burst's intake",
    )
    ap.add_argument("--out", type=Path, help="also write the tables (markdown) here")
    ap.add_argument(
        "--no-compile-ours",
        action="store_true",
        help="leave ours' source trees without bytecode (each start then compiles what it imports)",
    )
    a = ap.parse_args()
    tools = [t.strip() for t in a.only.split(",")] if a.only else list(TOOLS)
    for t in tools:
        if t not in TOOLS:
            raise SystemExit(f"--only: unknown tool {t!r} (one of {', '.join(TOOLS)})")
    variants = {f"ours:{v.name}": v for v in map(parse_variant, a.ours_variant or [])}
    tools += list(variants)
    names = {s.name for s in SCENARIOS}
    if a.scenarios:
        want = [s.strip() for s in a.scenarios.split(",")]
        for s in want:
            if s not in names:
                raise SystemExit(f"--scenarios: unknown {s!r} (one of {', '.join(names)})")
        scenarios = [next(s for s in SCENARIOS if s.name == w) for w in want]  # in the order given
    else:
        scenarios = [s for s in SCENARIOS if a.many_core or not s.many_core]
    a.cache.mkdir(parents=True, exist_ok=True)
    py: dict[str, Path] = {}
    setup_lines = []
    for t in tools:
        if t == "ours" or t in variants:
            continue
        if a.system_python:
            py[t] = Path(sys.executable)
            continue
        py[t], took = ensure_env(t, a.cache, a.wheels, a.system_site)
        stamp = json.loads((a.cache / t / ".peers-ok").read_text())
        setup_lines.append(
            f"- {t}: environment {'made now in' if took is not None else 'cached; made in'} "
            f"{took if took is not None else stamp.get('setup_s', 0):.0f} s"
        )
    if not a.no_compile_ours and ("ours" in tools or variants):
        setup_lines += compile_ours(sys.executable, variants)
    for ln in setup_lines:
        print(ln, file=sys.stderr)
    if a.setup_only:
        return
    tok_dir = a.cache / "tokenizer-words"
    if py and not (tok_dir / "tokenizer.json").exists():
        make_tokenizer(next(iter(py.values())), tok_dir)
    ctx = Ctx(
        a.cache,
        tok_dir,
        py,
        ours_workers=a.ours_workers,
        sglang_src=(a.sglang_src or a.cache / "sglang-src").resolve(),  # the tool runs in its own folder
        tool_timeout=a.tool_timeout,
        variants=variants,
    )
    t_start = time.monotonic()
    cores = len(os.sched_getaffinity(0))
    lines = [
        f"{cores} usable cores; load average at start {os.getloadavg()[0]:.1f}; {a.rounds} round(s); "
        f"truth from the exact server's own send times ({a.server_procs} server process(es)); "
        "errors from each tool's per-request export",
        "",
        *setup_lines,
        "",
    ]
    for sc in scenarios:
        scores: dict[str, list[Score]] = {}
        notes: dict[str, str] = {}
        srv = ExactServer(Config(sc.rate, sc.tpc, 0.02, incremental=True), procs=a.server_procs)
        with srv as base, tempfile.TemporaryDirectory(prefix="peers-") as d:
            warm_server(base, sc.conc, sc.tokens)
            for rnd in range(a.rounds):
                order = tools if rnd % 2 == 0 else list(reversed(tools))
                for tool in order:
                    if a.deadline is not None and time.monotonic() - t_start > a.deadline:
                        notes.setdefault(tool, f"not run: past --deadline {a.deadline:g} s")
                        continue
                    work = Path(d) / f"{tool}-{rnd}"
                    work.mkdir()
                    srv.reset()
                    probe, st0 = speed_probe(), _steal()
                    res = run_tool(tool, sc, base, work, ctx)
                    st1 = _steal()
                    res.probe_ms = probe
                    if st0 is not None and st1 is not None and st1[1] > st0[1]:
                        res.steal_pct = (st1[0] - st0[0]) / (st1[1] - st0[1]) * 100
                    t = truth_of(srv.get("/stats"), len(res.recs)) if res.recs else None
                    s = score(res, t) if t is not None else None
                    if s is None:
                        notes[tool] = res.note or "no counted requests in its export"
                    else:
                        scores.setdefault(tool, []).append(s)
                    print(f"{sc.name} round {rnd + 1} {tool}: {s or res.note} ({res.wall_s:.0f} s)",
                          file=sys.stderr, flush=True)  # fmt: skip
        block = table(sc, scores, notes, tools) + cpu_rounds(scores, tools)
        print("\n".join(block), flush=True)
        lines += [*block, ""]
        if a.out:
            with contextlib.suppress(OSError):
                a.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
