"""Workloads of issue 26 as parsed and generated, without a server: gsp prompts share their group's prefix,
ShareGPT files read one entry at a time with errors naming file, line and field, mooncake traces' equal
leading hash ids become equal prompt prefixes, arrival schedules (gamma's mean and burstiness, ramps), the
--load and --cancel grammars, and the simulator's page cache."""

from __future__ import annotations

import itertools
import json
import random
import statistics
from pathlib import Path

import pytest

from ddtree_tui.bench.load import LoadError, parse_load
from ddtree_tui.bench.prompts import PromptError, load_prompts
from ddtree_tui.bench.workloads import arrivals
from ddtree_tui.bench.workloads.base import WorkloadError
from ddtree_tui.bench.workloads.cancel import parse_cancel
from ddtree_tui.bench.workloads.trace import BLOCK_TOKENS, load_trace, trace_items
from ddtree_tui.sim.prefixcache import PrefixCache

SAMPLE = Path(__file__).resolve().parents[2] / "ddtree_tui" / "data" / "mooncake-sample.jsonl"


def test_gsp_groups_share_their_system_prompt_and_are_shuffled_by_seed() -> None:
    ps = load_prompts("gsp:3,4,64,8,16", seed=1)
    assert len(ps) == 12 and all(p.max_new_tokens == 16 for p in ps)
    by_group: dict[str, set[str]] = {}
    for p in ps:
        by_group.setdefault(p.id.split("-")[1], set()).add(p.messages[0]["content"])
    assert len(by_group) == 3 and all(len(v) == 1 for v in by_group.values())
    assert len({next(iter(v)) for v in by_group.values()}) == 3  # each group its own prefix
    assert len(ps[0].messages[0]["content"]) == 64 * 4 and len(ps[0].messages[1]["content"]) == 8 * 4
    assert [p.id for p in load_prompts("gsp:3,4,64,8,16", seed=1)] == [p.id for p in ps]
    assert [p.id for p in load_prompts("gsp:3,4,64,8,16", seed=2)] != [p.id for p in ps]
    with pytest.raises(PromptError, match=r"question tokens Q 'x'"):
        load_prompts("gsp:3,4,64,x")
    with pytest.raises(PromptError, match="expected gsp:G,P,SYS,Q"):
        load_prompts("gsp:3,4")


def test_sharegpt_first_human_turn_gpt_length_and_errors(tmp_path: Path) -> None:
    rows = [
        {
            "id": "a",
            "conversations": [{"from": "human", "value": "hi there"}, {"from": "gpt", "value": "x" * 40}],
        },
        {"id": "b", "conversations": [{"from": "gpt", "value": "no human"}]},
        {"id": "c", "conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "q2"}]},
    ]
    f = tmp_path / "sg.json"
    f.write_text(json.dumps(rows, indent=1))
    ps = {p.id: p for p in load_prompts(f"sharegpt:{f}")}
    assert set(ps) == {"a-0", "c-2"} and ps["a-0"].messages == [{"role": "user", "content": "hi there"}]
    assert ps["a-0"].max_new_tokens is None
    # gpt-len: the reply's length (characters / 4) is the output length; no reply, no prompt
    ps = {p.id: p for p in load_prompts(f"sharegpt:{f},gpt-len")}
    assert set(ps) == {"a-0"} and ps["a-0"].max_new_tokens == 10
    bad = tmp_path / "bad.json"
    bad.write_text('[\n{"id": "a", "conversations": []},\n{"id": "b", "conversations": [{"from": 3}]}\n]')
    with pytest.raises(PromptError, match=r"bad\.json:3: entry 1: conversations\[0\]"):
        load_prompts(f"sharegpt:{bad}")
    notarray = tmp_path / "n.json"
    notarray.write_text('{"id": 1}')
    with pytest.raises(PromptError, match=r"n\.json:1: expected a JSON array"):
        load_prompts(f"sharegpt:{notarray}")
    with pytest.raises(PromptError, match="not found"):
        load_prompts(f"sharegpt:{tmp_path / 'missing.json'}")


def test_trace_equal_leading_hash_ids_are_equal_prefixes() -> None:
    tr = load_trace(SAMPLE)
    items = trace_items(tr, seed=0)
    assert len(items) == len(tr.records) == 24
    for rec, it in zip(tr.records, items, strict=True):
        assert len(it.text) == 4 * rec.input_length and it.max_new_tokens == rec.output_length and it.raw
    a, b = tr.records[0], tr.records[1]
    assert a.hash_ids[:3] == b.hash_ids[:3] and a.hash_ids[3] != b.hash_ids[3]
    shared = 3 * BLOCK_TOKENS * 4
    assert items[0].text[:shared] == items[1].text[:shared]
    assert items[0].text[shared : shared + 64] != items[1].text[shared : shared + 64]
    assert tr.offsets(2.0)[1] == (b.timestamp_ms - a.timestamp_ms) / 2000.0
    assert 0 < tr.ideal_hit_tokens() < sum(r.input_length for r in tr.records)


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ('{"timestamp": 1, "input_length": 0, "output_length": 4}', r"t\.jsonl:2: input_length 0"),
        ('{"timestamp": "x", "input_length": 5, "output_length": 4}', r"t\.jsonl:2: timestamp 'x'"),
        (
            '{"timestamp": 1, "input_length": 5, "output_length": 4, "hash_ids": [1, 2]}',
            r"t\.jsonl:2: hash_ids",
        ),
        (
            '{"timestamp": 1, "input_length": 5, "output_length": 4, "hash_ids": ["a"]}',
            r"t\.jsonl:2: hash_ids",
        ),
        ("[1]", r"t\.jsonl:2: expected a JSON object"),
        ('{"timestamp": 1, "input_length": 5', r"t\.jsonl:2: not a JSON object"),
    ],
)
def test_trace_bad_line_names_file_line_and_field(tmp_path: Path, line: str, match: str) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(
        '{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]}\n' + line + "\n"
    )
    with pytest.raises(WorkloadError, match=match):
        load_trace(f)


def test_trace_line_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ddtree_tui.bench.workloads import trace

    monkeypatch.setattr(trace, "MAX_LINE_BYTES", 64)
    f = tmp_path / "t.jsonl"
    f.write_text(
        '{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [1, 2], "x": "'
        + "y" * 80
        + '"}\n'
    )
    with pytest.raises(WorkloadError, match=r"t\.jsonl:1: line longer than 64 bytes"):
        load_trace(f)


def test_gamma_mean_rate_and_burstiness() -> None:
    def gaps(b: float) -> list[float]:
        it = arrivals.gamma_offsets(10.0, b, random.Random(5))
        offs = [next(it) for _ in range(4001)]
        return [y - x for x, y in itertools.pairwise(offs)]

    for b in (0.25, 1.0, 4.0):
        g = gaps(b)
        assert statistics.fmean(g) == pytest.approx(0.1, rel=0.1)
        # coefficient of variation 1/sqrt(b): burstier below 1, poisson at 1, smoother above
        assert statistics.pstdev(g) / statistics.fmean(g) == pytest.approx(b**-0.5, rel=0.15)


def test_ramp_schedule_linear_and_exponential() -> None:
    lin = list(arrivals.ramp_offsets(arrivals.Ramp(strategy="linear", start=2, end=10, duration_s=4)))
    exp = list(arrivals.ramp_offsets(arrivals.Ramp(strategy="exp", start=2, end=10, duration_s=4)))
    assert lin[0] == 0 and lin[-1] <= 4.0 and exp[-1] <= 4.0
    assert lin[1] - lin[0] == pytest.approx(0.5) and lin[-1] - lin[-2] == pytest.approx(0.1, rel=0.1)
    assert len(exp) < len(lin)  # the exponential ramp spends longer near the start rate
    assert arrivals.planned_rate(lin) == pytest.approx((len(lin) - 1) / lin[-1])


def test_load_grammar_of_workloads() -> None:
    for text in ("gamma:4,0.5", "gamma:4,2,7", "ramp:linear,1,8,30s", "ramp:exp,1,8,60s", "trace:2"):
        spec = parse_load(text)
        assert spec.text == text and parse_load(spec.text) == spec and not spec.closed_loop
    assert (
        parse_load("ramp:exp,1,8,1m").ramp is not None and parse_load("trace:0.5").label(0.5) == "trace ×0.5"
    )
    for bad, match in (
        ("gamma:4", "gamma:RATE,BURSTINESS"),
        ("gamma:4,0", "burstiness"),
        ("ramp:up,1,2,3s", "ramp:linear|exp"),
        ("ramp:linear,1,2,x", "ramp duration"),
        ("trace:0", "--trace-speed"),
    ):
        with pytest.raises(LoadError, match=match):
            parse_load(bad)
    assert parse_cancel("0.25").delay_s == 0.5 and parse_cancel("0.1,200ms").delay_s == pytest.approx(0.2)
    for bad in ("0", "1.5", "x", "0.1,soon"):
        with pytest.raises(WorkloadError):
            parse_cancel(bad)


def test_sim_prefix_cache_pages_and_whole_prompts() -> None:
    c = PrefixCache(4)
    assert c.hit_and_insert("abcdefgh12") == 0
    assert c.hit_and_insert("abcdefgh12") == 10  # the same prompt: all of it
    assert c.hit_and_insert("abcdefgh123") == 10  # an earlier prompt it starts with, partial page too
    assert c.hit_and_insert("abcdXXXX") == 4  # whole pages only otherwise
    assert c.hit_and_insert("ab") == 0
    c.clear()
    assert c.hit_and_insert("abcdefgh") == 0


def test_dialog_workload_fields_follow_the_cli_rules() -> None:
    from ddtree_tui.bench.load import shape_params

    p = shape_params(trace="t.jsonl", trace_speed="2", cancel="0.1,200ms")
    assert p is not None and (p.load, p.trace, p.prompts, p.cancel) == (
        "trace:2",
        "t.jsonl",
        "trace:t.jsonl",
        "0.1,0.2",
    )
    p = shape_params("gamma:4,0.5", requests="8", max_concurrency="3")
    assert p is not None and (p.load, p.max_concurrency, p.requests) == ("gamma:4,0.5", 3, 8)
    for kw, msg in (
        ({"trace_speed": "2"}, "needs a trace file"),
        ({"trace": "t.jsonl", "load": "rate:2"}, "leave the load shape blank"),
        ({"load": "concurrency:4", "max_concurrency": "2"}, "caps an open loop"),
        ({"load": "rate:4", "max_concurrency": "0"}, "max in flight '0'"),
        ({"cancel": "2"}, "FRACTION must be above 0"),
        ({"soak": "1m", "cancel": "0.1"}, "not a soak"),
    ):
        with pytest.raises(LoadError, match=msg):
            shape_params(**kw)  # type: ignore[arg-type]


def test_sharegpt_reads_entry_by_entry_and_stops_at_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ddtree_tui.bench.workloads import sharegpt

    f = tmp_path / "big.json"
    good = {"id": "a", "conversations": [{"from": "human", "value": "q"}]}
    f.write_text("[" + json.dumps(good) + ", " + json.dumps(good) + ", {not json at all")
    # the first two usable entries are all it reads: the broken rest of the file is never decoded
    assert len(sharegpt.sharegpt_items(f"sharegpt:{f}", limit=2)) == 2
    with pytest.raises(WorkloadError, match=r"big\.json:1: entry 2: not JSON"):
        sharegpt.sharegpt_items(f"sharegpt:{f}", limit=3)
    monkeypatch.setattr(sharegpt, "MAX_ENTRY_BYTES", 16)
    monkeypatch.setattr(sharegpt, "READ_CHUNK", 8)
    with pytest.raises(WorkloadError, match="entry 0: longer than 16 bytes"):
        sharegpt.sharegpt_items(f"sharegpt:{f}")


def test_workload_options_reach_the_request_or_are_refused_by_name() -> None:
    from ddtree_tui.bench.models import ShapeRequest
    from ddtree_tui.cli import build_parser
    from ddtree_tui.cli.args import BenchArgs
    from ddtree_tui.cli.bench import build_request

    p = build_parser()
    group = next(g for g in p._action_groups if (g.title or "").startswith("benchmark workloads"))
    dests = {a.dest for a in group._group_actions}
    assert (
        dests
        == {"trace", "trace_speed", "max_concurrency", "cancel", "bench_seed"}
        <= set(BenchArgs.model_fields)
    )

    def req(*argv: str) -> object:
        return build_request(BenchArgs.of(p.parse_args(["--run-bench", *argv])), ["h/a"])

    r = req(
        "--trace",
        str(SAMPLE),
        "--trace-speed",
        "3",
        "--max-concurrency",
        "4",
        "--cancel",
        "0.2",
        "--seed",
        "9",
    )
    assert isinstance(r, ShapeRequest)
    assert (r.load, r.trace, r.prompts, r.max_concurrency, r.cancel, r.seed) == (
        "trace:3", str(SAMPLE), f"trace:{SAMPLE}", 4, "0.2,0.5", 9,
    )  # fmt: skip
    r = req("--cancel", "0.5,1s")  # cancellation alone: a sync load run
    assert isinstance(r, ShapeRequest) and (r.load, r.cancel) == ("sync", "0.5,1")
    r = req("--prompts", "gsp:2,2,8,4", "--seed", "3")  # a workload's prompts alone: still a plain run
    assert not isinstance(r, ShapeRequest) and (r.prompts, r.seed) == ("gsp:2,2,8,4", 3)
    for argv, msg in (
        (["--trace", "t.jsonl", "--load", "rate:2"], "leave out --load"),
        (["--trace-speed", "2"], "needs --trace"),
        (["--trace", "t.jsonl", "--trace-speed", "0"], "--trace-speed 0"),
        (["--max-concurrency", "4"], "caps an open loop"),
        (["--load", "concurrency:2", "--max-concurrency", "4"], "caps an open loop"),
        (["--cancel", "0.1", "--workers", "2"], "leave out --workers"),
        (["--cancel", "x"], "FRACTION 'x'"),
    ):
        with pytest.raises(LoadError, match=msg):
            req(*argv)
