"""The command-line contract: every mode listed, global options before or after the mode word."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddtree_tui.cli import HANDLERS, build_parser, main

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
        [
            sys.executable,
            "-m",
            "ddtree_tui.cli",
            "status",
            "--json",
            "--profile",
            str(prof),
            "--timeout",
            "5",
        ],
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
