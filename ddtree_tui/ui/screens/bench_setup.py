"""Choose what to benchmark: services, prompt set, repeats, max new tokens and the baseline; optionally a load
shape (sync | concurrency:1,2,4 | rate:R | poisson:R[,seed] | sweep) with requests or a duration per level and
SLOs, a soak, or agentic sessions. The load fields go through the CLI's parser (bench/load.py `shape_params`),
and a bad one is shown in the dialog, which stays open with everything typed. The fields scroll (the focused
one is scrolled into view) while the title, the error line and Cancel/Run stay on screen, so the dialog works
at 80×24.

Issue 26's run options (GPU energy, per-request spec details with the API that returns them, time slices,
server metrics and how often, the cache reset, the over-saturation test for ladders, the seed) go through
the CLI's own rules (bench/runoptions.py `run_options`), so a combination `--run-bench` refuses is refused
here with the same words."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Input, Label, Select, SelectionList
from textual.widgets.selection_list import Selection

from ddtree_tui.bench.load import LoadError, shape_params
from ddtree_tui.bench.models import DEFAULT_MAX_NEW_TOKENS, BenchRequest, ShapeRequest
from ddtree_tui.bench.runoptions import SATURATION_TESTS, RunKind, run_options, soak_window
from ddtree_tui.ui.screens.form import form_buttons, steady_inputs

PROMPT_SETS = ["seed3", "agentic", "longctx"]


def _fields(*fields: tuple[str, Widget]) -> ComposeResult:
    """A row of labels over a row of fields, one column each."""
    with Horizontal(classes="labels"):
        for label, _ in fields:
            yield Label(label, classes="field-label")
    with Horizontal(classes="row"):
        for _, widget in fields:
            yield widget


class BenchSetupScreen(ModalScreen[dict[str, Any] | None]):
    DEFAULT_CSS = """
    BenchSetupScreen { align: center middle; }
    BenchSetupScreen > #dialog { width: 76; max-width: 100%; height: auto; max-height: 100%; padding: 0 1;
        border: thick $accent; background: $surface; }
    BenchSetupScreen #fields { height: auto; padding-right: 1; }
    BenchSetupScreen .hint { width: 1fr; height: auto; }
    BenchSetupScreen SelectionList { height: auto; max-height: 8; }
    BenchSetupScreen .row { height: auto; }
    BenchSetupScreen .row > * { width: 1fr; }
    BenchSetupScreen .labels { height: 1; margin-top: 1; }
    BenchSetupScreen .labels > * { width: 1fr; padding: 0 1; }
    BenchSetupScreen .field-label { color: $text-muted; }
    BenchSetupScreen #load-error { color: $error; height: auto; width: 1fr; }
    BenchSetupScreen #load-error.-empty { display: none; }
    BenchSetupScreen #buttons { height: auto; align-horizontal: right; }
    BenchSetupScreen Button { margin-left: 2; }
    BenchSetupScreen .checks { height: auto; margin-top: 1; }
    BenchSetupScreen .checks > Checkbox { width: auto; margin-right: 2; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("ctrl+r", "run", "Run")]

    def __init__(self, refs: Sequence[tuple[str, str]], preselect: list[str]) -> None:
        """refs: (HOST/SVC, state) of every service; preselect: the ones ticked at first."""
        super().__init__()
        self.refs = refs
        self.preselect = preselect

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Benchmark: tick services (space), Tab to the fields, Run (ctrl+r)")
            with VerticalScroll(id="fields"):
                yield from self._field_widgets()
            yield Label("", id="load-error", classes="-empty")
            yield from form_buttons("Run", "run")

    def _field_widgets(self) -> ComposeResult:
        """Everything between the title and the buttons: it scrolls when the terminal is short."""
        from ddtree_tui.fleet.benching import (
            NOT_RUNNING,  # not at import: the app's first frame needs no fleet
        )

        # a stopped or crashed service has no server of ours behind its port: shown, never tickable
        yield SelectionList[str](
            *[
                Selection(
                    f"{r}  ({st}{': not running, cannot be measured' if st in NOT_RUNNING else ''})",
                    r,
                    r in self.preselect and st not in NOT_RUNNING,
                    disabled=st in NOT_RUNNING,
                )
                for r, st in self.refs
            ],
            id="services",
        )
        yield from _fields(
            (
                "prompt set",
                Select([(p, p) for p in PROMPT_SETS], value="seed3", allow_blank=False, id="prompts"),
            ),
            (
                "repeats (per prompt)",
                Input("1", placeholder="repeats", id="repeats", type="integer", tooltip="repeats"),
            ),
            (
                "max new tokens",
                Input(
                    str(DEFAULT_MAX_NEW_TOKENS),
                    placeholder="max new tokens",
                    id="max-tokens",
                    type="integer",
                ),
            ),
        )
        yield Label("baseline (Δ columns are relative to it)", classes="field-label")
        baseline_opts = [(r, r) for r, _ in self.refs]
        yield Select(baseline_opts, prompt="baseline: first selected", id="baseline")
        yield Label(
            "load shape (blank: the plain run above): sync | concurrency:1,2,4 | rate:R | poisson:R[,seed]"
            " | sweep",
            classes="field-label hint",
            id="load-hint",
        )
        yield Input(
            "", placeholder="e.g. concurrency:1,2,4,8 (also gamma:R,B, ramp:linear,1,8,30s)", id="load"
        )
        yield from _fields(
            ("requests / level", Input("", placeholder="e.g. 16", id="requests")),
            ("duration / level", Input("", placeholder="e.g. 20s", id="duration")),
            ("SLOs", Input("", placeholder="ttft=200ms,tpot=20ms", id="slo")),
        )
        yield from _fields(
            ("soak for", Input("", placeholder="e.g. 30m", id="soak")),
            ("soak window", Input("", placeholder="10s", id="window")),
            ("agentic sessions", Input("", placeholder="e.g. 4", id="sessions")),
            ("think time", Input("", placeholder="0s", id="think-time")),
        )
        # workloads (issue 26): trace replay, a cap on an open loop, client cancellation (README: Workloads)
        yield from _fields(
            ("trace file", Input("", placeholder="mooncake .jsonl", id="wl-trace")),
            ("trace speed", Input("", placeholder="1", id="wl-trace-speed")),
            ("max in flight", Input("", placeholder="open loop cap", id="wl-max-concurrency")),
            ("cancel", Input("", placeholder="0.1,0.5s", id="wl-cancel")),
        )
        yield from self._option_widgets()

    def _option_widgets(self) -> ComposeResult:
        """Issue 26's run options (README: the options of --run-bench), checked by bench/runoptions.py."""
        with Horizontal(classes="checks"):
            yield Checkbox(
                "energy", id="opt-energy", compact=True, tooltip="--energy: J/token from GPU telemetry"
            )
            yield Checkbox("spec details", id="opt-spec-details", compact=True, tooltip="--spec-details")
            yield Checkbox(
                "server metrics", id="opt-server-metrics", compact=True, tooltip="--server-metrics"
            )
            yield Checkbox("flush cache", id="opt-flush-cache", compact=True, tooltip="--flush-cache")
        apis = [("generate", "generate"), ("chat (OpenAI)", "chat"), ("completions (OpenAI)", "completions")]
        tests = [(t, t) for t in SATURATION_TESTS]
        yield from _fields(
            ("API", Select(apis, value="generate", allow_blank=False, id="opt-api")),
            ("slice", Input("", placeholder="e.g. 5s", id="opt-slice")),
            ("scrape every", Input("", placeholder="2s", id="opt-metrics-every")),
        )
        yield from _fields(
            ("saturation test (ladders)", Select(tests, prompt="fixed", id="opt-saturation")),
            ("seed", Input("", placeholder="0", id="opt-seed", type="integer")),
        )

    def on_mount(self) -> None:
        steady_inputs(self)
        self._fit()
        self.query_one(SelectionList).focus()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """The load shape's hint comes into view with its field (the workload rows below push it up)."""
        if event.widget.id == "load":
            self.query_one("#load-hint").scroll_visible(animate=False, immediate=True)

    def on_resize(self, event: events.Resize) -> None:
        self._fit()

    def _fit(self) -> None:
        """The fields get what the screen leaves after the title, the error line, the buttons and the border:
        the buttons are never pushed off a short terminal."""
        error = 0 if self.query_one("#load-error").has_class("-empty") else 2
        room = (self.app.size.height or 24) - 1 - 3 - 2 - error
        self.query_one("#fields").styles.max_height = max(3, room)

    def _error(self, text: str) -> None:
        """The problem shown in place, above the buttons; what was typed stays."""
        label = self.query_one("#load-error", Label)
        label.update(text)
        label.set_class(not text, "-empty")
        self._fit()

    def action_run(self) -> None:
        from ddtree_tui.fleet.benching import NOT_RUNNING

        chosen = list(self.query_one(SelectionList).selected)
        down = {r for r, st in self.refs if st in NOT_RUNNING}
        refs = [r for r in chosen if r not in down]
        if len(refs) < len(chosen):
            self.notify(
                f"left out (not running): {', '.join(r for r in chosen if r in down)}", severity="warning"
            )
        if not refs:
            self._error("tick at least one service (space in the list)")
            return
        baseline = self.query_one("#baseline", Select).value
        try:
            repeats = max(1, int(self.query_one("#repeats", Input).value or 1))
            max_tokens = max(1, int(self.query_one("#max-tokens", Input).value or DEFAULT_MAX_NEW_TOKENS))
        except ValueError:
            self._error("repeats and max new tokens are whole numbers")
            return
        base = baseline if isinstance(baseline, str) else None
        field = {f: self.query_one(f"#{f}", Input).value for f in ("load", "requests", "duration", "slo")}
        field |= {f: self.query_one(f"#{f}", Input).value for f in ("soak", "window", "sessions")}
        try:
            shape = shape_params(
                **field,
                think_time=self.query_one("#think-time", Input).value,
                trace=self.query_one("#wl-trace", Input).value,
                trace_speed=self.query_one("#wl-trace-speed", Input).value,
                max_concurrency=self.query_one("#wl-max-concurrency", Input).value,
                cancel=self.query_one("#wl-cancel", Input).value,
                refs=refs,
                max_new_tokens=max_tokens,
                baseline=base,
            )
            options = self._options(shape)
        except LoadError as e:
            self._error(str(e))
            return
        try:
            if shape is not None:
                shape = ShapeRequest.model_validate(shape.model_dump() | options)
                self.dismiss({"refs": refs, "shape": shape})
                return
            params = BenchRequest(
                refs=refs,
                prompts=str(self.query_one("#prompts", Select).value),
                repeats=repeats,
                max_new_tokens=max_tokens,
                baseline=base,
                **options,  # type: ignore[arg-type]  # run_options: the request's own field names
            )
        except ValidationError as e:
            err = e.errors()[0]
            msg = f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}".replace("_", " ")
            self._error(msg)
            return
        self.dismiss({"refs": refs, "params": params})

    def _options(self, shape: ShapeRequest | None) -> dict[str, object]:
        """Issue 26's run options as request fields, by the CLI's rules for this kind of run (LoadError)."""
        kind: RunKind = (
            "plain" if shape is None else "agentic" if shape.sessions else "soak" if shape.soak else "load"
        )
        sat = self.query_one("#opt-saturation", Select).value
        api = str(self.query_one("#opt-api", Select).value)
        out = run_options(
            kind,
            api=api,
            energy=self.query_one("#opt-energy", Checkbox).value,
            spec_details=self.query_one("#opt-spec-details", Checkbox).value,
            slice_text=self.query_one("#opt-slice", Input).value,
            server_metrics=self.query_one("#opt-server-metrics", Checkbox).value,
            server_metrics_every=self.query_one("#opt-metrics-every", Input).value,
            flush_cache=self.query_one("#opt-flush-cache", Checkbox).value,
            saturation_test=sat if isinstance(sat, str) else None,
            seed=self.query_one("#opt-seed", Input).value,
        )
        out["api"] = api
        if shape is not None and shape.soak and "slice_s" in out:  # a soak's slices are its windows
            out["window_s"] = soak_window(out["slice_s"], shape.window_s if self._window_given() else None)
        return out

    def _window_given(self) -> bool:
        return bool(self.query_one("#window", Input).value.strip())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "run":
            self.action_run()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
