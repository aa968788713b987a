"""Run SGLang's own benchmark client (`bench_serving.py` of the sglang wheel) standalone, offline.

`sglang/bench_serving.py` in 0.5.23 is a shim over `sglang.benchmark.serving`, whose only imports from the
server side are two small helpers (`FAKE_BOOTSTRAP_HOST`, `resolve_base_url` / `resolve_host_port`); the
`sglang` package's own `__init__` pulls in torch. So this script registers empty parent packages and those two
helpers, then imports `sglang.benchmark` straight from the extracted wheel and calls its `cli_main()` with the
remaining arguments. Its requirements (aiohttp, orjson, msgspec, numpy, requests, tqdm, transformers) come
from a separate virtual environment; transformers runs without torch for tokenizers only.

The tokenizer is built here, offline, with the `tokenizers` package: a word-level vocabulary `w0 … wN` (what
benchmarks/exact_server.py streams), saved as a PreTrainedTokenizerFast directory.

It also measures the client's CPU time while it streams: from `benchmark()`'s start to `calculate_metrics()`'s
(which re-tokenizes outputs afterwards: not streaming cost) and writes it, with the wall time and each
counted request's own record (start, TTFT, latency, output length: its per-request export, which the
`--output-details` file lacks the start and latency of), to the file named by SGLANG_CLIENT_CPU_FILE.

Usage (from benchmarks/bench_client.py):
  SG_PYTHON benchmarks/sglang_client.py --sglang-src DIR --make-tokenizer DIR
  SG_PYTHON benchmarks/sglang_client.py --sglang-src DIR -- --backend sglang --base-url URL ...
DIR of --sglang-src holds `sglang/benchmark/` extracted from the wheel (`pip download sglang==0.5.23
--no-deps`, unzip).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import types
from pathlib import Path


def make_tokenizer(out: Path, vocab: int = 20000) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for i in range(vocab):
        words[f"w{i}"] = len(words)
    tok = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "unk_token": "<unk>",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "model_max_length": 1_000_000,
            }
        )
    )


def _stub(name: str, path: Path | None = None, **attrs: object) -> types.ModuleType:
    m = types.ModuleType(name)
    if path is not None:
        m.__path__ = [str(path)]  # type: ignore[attr-defined]
    for k, v in attrs.items():
        setattr(m, k, v)
    sys.modules[name] = m
    return m


def _resolve_base_url(base_url: str, host: str, port: int) -> str:
    return base_url or f"http://{host}:{port}"


def _resolve_host_port(base_url: str, host: str, port: int) -> str:
    return base_url or f"{host}:{port}"


def _unavailable(mod: str) -> object:
    def f(*a: object, **kw: object) -> object:
        raise RuntimeError(f"{mod} is not installed (not needed by the random dataset)")

    return f


def run(src: Path, argv: list[str]) -> None:
    _stub("sglang", src / "sglang")
    _stub("sglang.srt", src / "sglang" / "srt")
    _stub("sglang.srt.disaggregation", src / "sglang" / "srt" / "disaggregation")
    _stub("sglang.srt.disaggregation.utils", FAKE_BOOTSTRAP_HOST="2.2.2.2")
    _stub("sglang.srt.utils", src / "sglang" / "srt" / "utils")
    _stub(
        "sglang.srt.utils.network",
        resolve_base_url=_resolve_base_url,
        resolve_host_port=_resolve_host_port,
    )
    for mod, attr in (("datasets", "load_dataset"),):  # used only by datasets this bench does not run
        if importlib.util.find_spec(mod) is None:
            _stub(mod, **{attr: _unavailable(mod)})
    sys.path.insert(0, str(src))
    import sglang.benchmark.serving as serving

    cpu_file = os.environ.get("SGLANG_CLIENT_CPU_FILE")
    marks: dict[str, float] = {}
    orig_benchmark = serving.benchmark
    orig_metrics = serving.calculate_metrics

    async def benchmark(*a: object, **kw: object) -> object:
        marks["cpu0"], marks["t0"] = time.process_time(), time.monotonic()
        return await orig_benchmark(*a, **kw)

    per_request: list[dict[str, object]] = []

    def calculate_metrics(*a: object, **kw: object) -> object:
        marks.setdefault("cpu1", time.process_time())
        marks.setdefault("t1", time.monotonic())
        outputs = kw.get("outputs", a[1] if len(a) > 1 else [])
        if not per_request:  # the counted requests (the warm-up's never reach calculate_metrics)
            for o in outputs:  # type: ignore[attr-defined]
                per_request.append(
                    {
                        "ok": bool(o.success),
                        "start": o.start_time,  # time.perf_counter() (one clock within the process)
                        "ttft": o.ttft,
                        "latency": o.latency,
                        "output_len": o.output_len,
                        "chunk_gaps": len(o.itl),
                    }
                )
        return orig_metrics(*a, **kw)

    serving.benchmark = benchmark
    serving.calculate_metrics = calculate_metrics
    sys.argv = ["bench_serving.py", *argv]
    serving.cli_main()
    if cpu_file and "cpu1" in marks:
        Path(cpu_file).write_text(
            json.dumps(
                {
                    "cpu_s": marks["cpu1"] - marks["cpu0"],
                    "wall_s": marks["t1"] - marks["t0"],
                    "requests": per_request,
                }
            )
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sglang-src", type=Path, required=True)
    ap.add_argument("--make-tokenizer", type=Path)
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if a.make_tokenizer:
        make_tokenizer(a.make_tokenizer)
        return
    rest = a.rest[1:] if a.rest[:1] == ["--"] else a.rest
    run(a.sglang_src, rest)


if __name__ == "__main__":
    main()
