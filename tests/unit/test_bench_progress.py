"""The one progress reducer (bench/progress.py), which the TUI's bench pane and the headless printer both
fold events with: done never passes total (the TUI soak showed `running · 9/3 requests`), a time-bounded
run counts without a total, warm-ups are not counted."""

from __future__ import annotations

import io

from ddtree_tui.bench.models import PromptFinished, RequestResult, RunStarted
from ddtree_tui.bench.progress import BenchProgress
from ddtree_tui.cli.bench import Progress
from ddtree_tui.model.events import BenchEventWrap


def _done(done: int, total: int, *, warmup: bool = False) -> PromptFinished:
    r = RequestResult(service="h/a", algorithm="dflash", mode="linear", prompt_id="p", repeat=done, seq=done,
                      started_at=0.0, warmup=warmup, tok_s=10.0, output_tokens=8)  # fmt: skip
    return PromptFinished(run_id="r", result=r, done=done, total=total)


def test_a_soak_counts_requests_past_its_planned_pass_without_passing_100_percent() -> None:
    p = BenchProgress()
    p.reset_load("starting a 60 s soak (sync)")
    for n in range(1, 10):  # the soak's runner planned one pass of 3 prompts, then kept sending
        p.apply(_done(n, 3))
        assert p.fraction is None and p.total == 0
        assert f"{n}/3" not in p.status and p.status.endswith(f"{n} requests"), p.status


def test_a_plain_run_never_shows_more_done_than_planned() -> None:
    p = BenchProgress()
    p.apply(RunStarted(run_id="r", total=3, targets=[], prompts=["p"]))
    p.apply(_done(0, 3, warmup=True))
    assert (p.done, p.total) == (0, 3)
    for n in (1, 2, 3, 4):  # an engine that miscounts must not show 4/3
        p.apply(_done(n, 3))
        assert p.done <= p.total and p.fraction is not None and p.fraction <= 1.0
    assert p.status == "running · 4/4 requests"


def test_the_headless_printer_counts_with_the_same_reducer() -> None:
    out = io.StringIO()
    printer = Progress(stream=out)
    printer(BenchEventWrap(event=RunStarted(run_id="r", total=3, targets=[], prompts=["p"])))
    printer(BenchEventWrap(event=_done(1, 3)))
    assert "[1/3] h/a (dflash/linear) p #2" in out.getvalue()
    assert (printer.progress.done, printer.progress.total) == (1, 3)
    shaped = Progress(shaped=True, stream=io.StringIO())
    for n in range(1, 10):
        shaped(BenchEventWrap(event=_done(n, 3)))
    assert shaped.progress.fraction is None and shaped.progress.done == 9
