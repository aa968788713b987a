"""The command-line contract: every mode listed, global options before or after the mode word."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddtree_tui.cli import HANDLERS, build_parser, main
from tests.util import cli_argv

ROOT = Path(__file__).resolve().parents[2]


def test_help_lists_every_mode(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for mode in (
        "status",
        "smoke",
        "launch",
        "kill",
        "restart",
        "move",
        "patches",
        "logs",
        "doctor",
        "todo",
        "sim",
    ):
        assert mode in out
    assert "--run-bench" in out and "--demo" in out


def test_every_handler_resolves() -> None:
    """No mode is a silent no-op: each one names a function that exists."""
    import importlib

    for mode, spec in HANDLERS.items():
        mod, func = spec.split(":")
        assert callable(getattr(importlib.import_module(mod), func)), mode


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--json", "--profile", "x.toml"],
        ["--profile", "x.toml", "status", "--json"],
    ],
)
def test_global_options_before_or_after(argv: list[str]) -> None:
    ns = build_parser().parse_args(argv)
    assert ns.mode == "status" and ns.json is True and ns.profile == ["x.toml"]


def test_bad_profile_exits_2_naming_file_line_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "h"\naddress = "local"\n\n[[service]]\nname = "a"\nport = "high"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "ddtree_tui.cli", "status", "--profile", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert f"{bad}:6" in proc.stderr and "service[0].port" in proc.stderr


def test_status_json_local_host(tmp_path: Path) -> None:
    prof = tmp_path / "p.toml"
    prof.write_text(
        f'name = "here"\naddress = "local"\nworkdir = "{tmp_path / "w"}"\n[telemetry]\nsource = "none"\n'
    )
    proc = subprocess.run(
        cli_argv("status", "--json", "--profile", str(prof), "--timeout", "5"),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema"] == 1
    (host,) = data["hosts"]
    assert host["name"] == "here" and host["state"] == "connected" and host["error"] is None
    assert host["host"]["mem_total_mb"] > 0


def test_version_and_every_option_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 19: `--version`; help text on every option, defaults shown."""
    import argparse

    from ddtree_tui import __version__
    from ddtree_tui.cli import build_parser

    with pytest.raises(SystemExit) as ei:
        main(["--version"])
    assert ei.value.code == 0 and capsys.readouterr().out.strip() == f"ddtree-tui {__version__}"
    parser = build_parser()
    parsers = [parser]
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            parsers += list(a.choices.values())
    for p in parsers:
        for a in p._actions:
            if isinstance(a, argparse._HelpAction | argparse._SubParsersAction):
                continue
            assert a.help, f"{p.prog}: {a.option_strings or a.dest} has no help text"
    assert (
        "(default: 40)" in parsers[-1].format_help()
        or "(default: 40)" in build_parser().format_help()
        or any("(default: 40)" in p.format_help() for p in parsers)
    )


def test_global_options_after_the_positionals_are_not_a_usage_error() -> None:
    """`patches status --demo local` was rejected with the top-level usage."""
    from ddtree_tui.cli import build_parser, hoist_globals

    assert hoist_globals(["patches", "status", "--demo", "local"]) == ["--demo", "patches", "status", "local"]
    assert hoist_globals(["status", "--profile", "x.toml", "--json"]) == [
        "--profile",
        "x.toml",
        "status",
        "--json",
    ]
    ns = build_parser().parse_args(hoist_globals(["patches", "status", "--demo", "local"]))
    assert (ns.mode, ns.action, ns.host, ns.demo) == ("patches", "status", "local", True)


@pytest.mark.parametrize(
    ("argv", "model", "want"),
    [
        (["status", "--json", "--timeout", "3"], "StatusArgs", {"as_json": True, "timeout": 3.0}),
        (["--demo", "kill", "local/dflash"], "ServiceArgs", {"service": "local/dflash", "demo": True}),
        (["move", "a/b", "c", "--timeout", "9"], "ServiceArgs", {"to_host": "c", "timeout": 9.0}),
        (["logs", "a/b", "-f", "-n", "5"], "ServiceArgs", {"follow": True, "lines": 5}),
        (
            ["todo", "add", "x", "--priority", "high"],
            "TodoArgs",
            {"action": "add", "arg": "x", "priority": "high"},
        ),
        (["todo"], "TodoArgs", {"action": "list", "as_json": False}),
        (["doctor", "h1", "--json", "--todos", "t.json"], "DoctorArgs", {"host": "h1", "todos": "t.json"}),
        (
            ["smoke", "http://127.0.0.1:1", "--api", "chat"],
            "SmokeArgs",
            {"api": "chat", "max_new_tokens": 32},
        ),
        (["serve", "--intents", "--replay", "r.gz"], "ServeArgs", {"intents": True, "replay": "r.gz"}),
        (["--theme", "light", "web", "--listen", "127.0.0.1:1"], "WebArgs", {"theme": "light"}),
        (["--replay", "r.gz", "--speed", "4"], "TuiArgs", {"replay": "r.gz", "speed": 4.0}),
        (["sweep", "show", "D", "--objective", "ttft"], "SweepArgs", {"dir": "D", "sw_objective": "ttft"}),
        (
            ["--run-bench", "--load", "concurrency:1,2", "--json", "o.json", "--workers", "2"],
            "BenchArgs",
            {"load": "concurrency:1,2", "json_out": "o.json", "workers": 2, "max_new_tokens": 256},
        ),
    ],
)
def test_each_mode_family_gets_its_arguments_typed(
    argv: list[str], model: str, want: dict[str, object]
) -> None:
    """Issue 24: a handler takes one model built from the namespace, defaults and types included."""
    from ddtree_tui.cli import args as cli_args
    from ddtree_tui.cli import hoist_globals

    ns = build_parser().parse_args(hoist_globals(argv))
    got = getattr(cli_args, model).of(ns)
    assert {k: getattr(got, k) for k in want} == want


def test_every_run_bench_option_is_a_field_of_bench_args() -> None:
    """Issue 24: --run-bench's handler reads BenchArgs, which ignores what it has no field for; an option
    added to the parser without a field would be silently dropped."""
    from ddtree_tui.cli.args import BenchArgs

    group = next(g for g in build_parser()._action_groups if g.title == "headless benchmark (--run-bench)")
    dests = {a.dest for a in group._group_actions} - {"run_bench"}
    assert dests and dests <= set(BenchArgs.model_fields), dests - set(BenchArgs.model_fields)


def test_theme_is_an_option_of_the_ui_modes_only(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 24: --theme was listed (and accepted) in every subcommand's help."""
    p = build_parser()
    sub = next(a for a in p._actions if a.dest == "mode")
    with_theme = {name for name, sp in sub.choices.items() if "--theme" in sp.format_help()}
    assert with_theme == {"web"}
    assert "--theme" in p.format_help()  # the TUI, --attach, --replay, --record
    for argv in (["status", "--theme", "light"], ["--theme", "light", "status"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
    assert "--theme" in capsys.readouterr().err


def test_a_kill_timeout_that_is_not_positive_is_a_usage_error(tmp_path: Path) -> None:
    """The timeout becomes part of the Kill intent; a bad one is refused before any host is reached."""
    prof = tmp_path / "p.toml"
    prof.write_text(
        f'name = "here"\naddress = "local"\nworkdir = "{tmp_path / "w"}"\n'
        '[[service]]\nname = "a"\nport = 31999\nlauncher = "sim"\n'
    )
    proc = subprocess.run(
        cli_argv("kill", "here/a", "--timeout", "0", "--profile", str(prof)),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert "--timeout must be a positive number of seconds" in proc.stderr
