"""The host programs in ddtree_tui/remote/: standard library only, sent as their own source, one protocol.

Each program runs here in a child process exactly as it is sent to a host (`python -I -c SOURCE`).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import ddtree_tui
from ddtree_tui import remote

REMOTE = Path(remote.__file__).parent
PROGRAMS = sorted(p.stem for p in REMOTE.glob("*.py") if p.stem != "__init__")
# what a program inspects on the host when present (imported inside a function, on purpose)
INSPECTS = {"argcheck": {"sglang"}, "probe": {"sglang", "torch"}, "sampler": {"pynvml"}}


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_host_program_imports_only_the_standard_library_and_its_own_package(name: str) -> None:
    bad = {
        m
        for m in _imports(REMOTE / f"{name}.py")
        if m.split(".")[0] not in sys.stdlib_module_names | INSPECTS.get(name, set())
        and not m.startswith("ddtree_tui.remote")
    }
    assert not bad, f"remote/{name}.py imports {sorted(bad)}"


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_bundled_program_compiles(name: str) -> None:
    compile(remote.source(name), f"<{name}>", "exec")


def _run(name: str, payload: object, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-c", remote.source(name), *argv],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_a_program_without_helpers_is_sent_exactly_as_its_file() -> None:
    assert remote.source("patch_read") == (REMOTE / "patch_read.py").read_text(encoding="utf-8")
    assert remote.dependencies(remote.module_text("launch")) == ["atomicio", "trust", "hostlib", "ports"]


def test_the_sampler_bundle_carries_its_helpers_and_runs_one_tick(tmp_path: Path) -> None:
    # the sampler's /proc stats and nvidia-smi code live in helper modules: the bundle must bring them along
    assert remote.dependencies(remote.module_text("sampler")) == ["hoststats", "smi"]
    res = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            remote.source("sampler"),
            "--mode",
            "none",
            "--count",
            "1",
            "--workdir",
            "/",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 0, res.stderr
    line = json.loads(res.stdout.strip().splitlines()[-1])
    assert line["src"] == "none" and line["note"] == "GPU telemetry off in the profile"
    assert set(line["host"]) >= {"cpu_percent", "mem_total_mb", "disk_free_mb", "uptime_s"}


def test_the_bundle_serves_helpers_from_memory_not_from_an_installed_package(tmp_path: Path) -> None:
    # a planted `ddtree_tui` in the current directory (the workdir) is never imported
    (tmp_path / "ddtree_tui" / "remote").mkdir(parents=True)
    (tmp_path / "ddtree_tui" / "__init__.py").write_text("raise SystemExit('planted package imported')\n")
    prog = remote.bundle(
        "import sys\nfrom ddtree_tui.remote.hostlib import argv_hash\nprint(argv_hash(['a']))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", prog], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert res.returncode == 0, res.stderr
    from ddtree_tui.remote.hostlib import argv_hash

    assert res.stdout.strip() == argv_hash(["a"])


def test_patch_read_replies_one_json_line(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("hello\n")
    res = _run("patch_read", [str(f), str(tmp_path / "missing")])
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {
        str(f): "hello\n",
        str(tmp_path / "missing"): None,
    }


def test_patch_locate_finds_a_stdlib_package_from_json_on_stdin() -> None:
    res = _run("patch_locate", {"package": "json", "distribution": "no-such-dist-ddtree"})
    assert res.returncode == 0, res.stderr
    reply = json.loads(res.stdout.strip().splitlines()[-1])
    assert reply["dir"] and Path(reply["dir"]).name == "json"
    assert reply["version"] is None


def test_read_log_replies_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "svc.log"
    log.write_text("".join(f"line {i}\n" for i in range(50)))
    res = _run("read_log", {"path": str(log), "lines": 3})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {"lines": ["line 47", "line 48", "line 49"]}


def test_no_python_program_lives_in_a_string_literal_of_the_package() -> None:
    """Host programs are modules in ddtree_tui/remote/, never string literals elsewhere."""
    root = Path(ddtree_tui.__file__).parent
    found = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.count("\n") >= 3:
                text = node.value
                if "import " not in text and "def " not in text:
                    continue
                try:
                    ast.parse(text)
                except SyntaxError:
                    continue
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not found, f"Python programs in string literals: {found}"
