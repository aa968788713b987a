"""The streamed save (issue 25): `report.iter_json` writes exactly what json.dumps of the whole dump wrote
(so `report` and every reader are unchanged), and a write that fails half way through leaves the old file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddtree_tui.bench import report
from ddtree_tui.bench.models import dump
from ddtree_tui.remote.atomicio import write_file
from tests.bench_runs import bench_run, plain_run


@pytest.mark.parametrize("indent", [2, 1, None])
def test_iter_json_is_byte_identical_to_dumping_the_whole_run(indent: int | None) -> None:
    runs = [
        bench_run("seed3", [("h/a", None), ("h/b", "boom: ü $_$ \n"), ("h/a", None)]),
        plain_run("empty"),  # no results: every list empty
    ]
    for run in runs:
        seps = (",", ":") if indent is None else (",", ": ")
        whole = json.dumps(dump(run), indent=indent, ensure_ascii=False, separators=seps)
        assert b"".join(report.iter_json(run, indent)).decode() == whole
    assert report.from_json(report.to_json(runs[0])) == runs[0]


def test_a_write_that_fails_half_way_leaves_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text("the old run\n")

    def chunks() -> Iterator[bytes]:
        yield b'{"schema": 1,'
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_file(out, chunks())
    assert out.read_text() == "the old run\n"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left
    write_file(out, report.iter_json(bench_run("seed3", [("h/a", None)])))
    assert report.from_json(out.read_text()).id == "r-seed3-1"
