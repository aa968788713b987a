"""nvidia-smi CSV parsing and fault texts, against the real H200 output in tests/fixtures/gpu."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddtree_tui.remote.smi import SMI_FIELDS, parse_help_fields, pick_fields
from ddtree_tui.telemetry.nvsmi import (
    DEFAULT_FIELDS,
    CsvParseError,
    SmiParse,
    canonical,
    decode_throttle,
    detect_fault,
    parse_apps,
    parse_query,
    query_rows,
)

GPU = Path(__file__).parent.parent / "fixtures" / "gpu"


def text(name: str) -> str:
    return (GPU / name).read_text()


def test_header_with_units_idle() -> None:
    p = parse_query(text("query-gpu-idle.csv"), ts=5.0)
    assert not p.skipped and p.fault is None
    g0, g1 = p.samples
    assert (g0.index, g0.uuid, g0.name) == (0, "GPU-db30c28e-7c42-8e74-15eb-4380c304e54b", "NVIDIA H200")
    assert g0.pci_bus_id == "00000000:00:06.0"
    assert (g0.util_gpu, g0.util_mem, g0.mem_used_mb, g0.mem_total_mb) == (0, 0, 0, 143771)
    assert (g0.temp_c, g0.power_w, g0.power_limit_w, g0.sm_clock_mhz, g0.pstate) == (
        34,
        99.86,
        700.0,
        345,
        "P0",
    )
    assert g1.power_w == 101.89 and g1.temp_c == 35 and g1.ts == 5.0
    assert p.driver_version == "580.159.04"


def test_header_renames_alias_clocks_sm() -> None:
    header = text("query-gpu-idle.csv").splitlines()[0]
    assert "clocks.current.sm [MHz]" in header
    assert canonical("clocks.current.sm [MHz]") == "clocks.sm"
    assert canonical(" utilization.gpu [%] ") == "utilization.gpu"


def test_nounits_under_load_exact_numbers() -> None:
    p = parse_query(text("query-gpu-under-load-nounits.csv"), DEFAULT_FIELDS)
    g0, g1 = p.samples
    assert (g0.util_gpu, g0.util_mem, g0.mem_used_mb, g0.temp_c) == (100, 23, 21491, 57)
    assert (g0.power_w, g0.sm_clock_mhz) == (691.29, 1485)
    assert g0.uuid == "GPU-a3d17c95-2dae-bb06-e486-01c3ab05eacd"
    assert (g1.mem_used_mb, g1.power_w, g1.health) == (4, 76.55, "ok")


def test_after_and_busy_rows() -> None:
    after = parse_query(text("query-gpu-after.csv"), DEFAULT_FIELDS).samples
    assert (after[0].power_w, after[0].sm_clock_mhz, after[0].temp_c) == (255.0, 1980, 39)
    busy = parse_query(text("query-gpu-busy-nounits.csv"), DEFAULT_FIELDS).samples
    assert [g.power_w for g in busy] == [79.39, 77.63]


def test_na_and_not_supported_are_none() -> None:
    fields = ["index", "uuid", "temperature.gpu", "power.draw", "utilization.gpu", "pstate"]
    p = parse_query("0, GPU-x, [N/A], [Not Supported], [N/A], [Unknown Error]\n", fields)
    g = p.samples[0]
    assert (g.temp_c, g.power_w, g.util_gpu, g.pstate) == (None, None, None, None)
    assert g.health == "ok"


def test_bad_row_skipped_not_fatal() -> None:
    rows = text("query-gpu-under-load-nounits.csv").splitlines()
    garbage = "1, GPU-x, NVIDIA H200, 0000, 580, P0, hot, 100"
    notnum = rows[1].replace(", 34, ", ", warm, ", 1)
    p = parse_query("\n".join([rows[0], garbage, notnum, "just words"]), DEFAULT_FIELDS)
    assert [g.index for g in p.samples] == [0]
    assert len(p.skipped) == 3


def test_throttle_reasons_decoded() -> None:
    p = parse_query("0, 0x0000000000000005\n1, [N/A]\n", ["index", "clocks_throttle_reasons.active"])
    assert p.samples[0].throttle_reasons == ["gpu_idle", "sw_power_cap"]
    assert p.samples[1].throttle_reasons is None
    assert decode_throttle(0) == [] and decode_throttle(None) is None


def test_no_header_and_no_fields_is_a_clear_error() -> None:
    with pytest.raises(CsvParseError):
        parse_query("0, GPU-x\n")
    with pytest.raises(CsvParseError):
        parse_query("0, GPU-x\n", ["uuid", "name"])


NODRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)


@pytest.mark.parametrize(
    ("out", "kind"),
    [
        ("No devices were found", "no-devices"),
        (NODRIVER, "driver"),
        ("Unable to determine the device handle for GPU0000:41:00.0: Unknown Error", "handle"),
        ("GPU is lost", "lost"),
        ('Field "x" is not a valid field to query.', "field"),
    ],
)
def test_fault_texts_detected(out: str, kind: str) -> None:
    found = detect_fault(out)
    assert found is not None and found[0] == kind and found[1] == out


def test_host_faults_in_query_output() -> None:
    for msg in ("No devices were found", NODRIVER):
        p = parse_query(msg + "\n", DEFAULT_FIELDS)
        assert p.samples == [] and p.fault == msg


def test_handle_error_is_a_gpu_fault_and_other_rows_survive() -> None:
    row0 = text("query-gpu-under-load-nounits.csv").splitlines()[0]
    msg = "Unable to determine the device handle for GPU0000:41:00.0: Unknown Error"
    p = parse_query(row0 + "\n" + msg + "\n", DEFAULT_FIELDS)
    assert [g.index for g in p.samples] == [0]
    assert p.gpu_faults == {"0000:41:00.0": msg}
    assert p.fault is None


def test_gpu_is_lost_in_a_row() -> None:
    fields = ["index", "uuid", "utilization.gpu", "memory.used"]
    p = parse_query("0, GPU-a, 5, 10\n1, [GPU is lost], [GPU is lost], [GPU is lost]\n", fields, ts=7.0)
    ok, lost = p.samples
    assert ok.health == "ok" and ok.util_gpu == 5
    assert (lost.index, lost.health, lost.fault, lost.fault_at) == (1, "fault", "GPU is lost", 7.0)
    assert lost.util_gpu is None


def test_apps_fixture_and_empty() -> None:
    apps = parse_apps(text("query-apps-under-load.csv"), {567: "dflash"})
    (proc,) = apps["GPU-a3d17c95-2dae-bb06-e486-01c3ab05eacd"]
    assert (proc.pid, proc.name, proc.used_memory_mb, proc.service) == (567, "python3", 21482, "dflash")
    assert "bus:00:06.0" not in apps
    assert parse_apps("7, x, 5, [N/A], 00000000:41:00.0")["bus:41:00.0"][0].pid == 7
    assert parse_apps("") == {}


def test_help_fields_and_pick() -> None:
    valid = parse_help_fields(text("help-query-gpu.txt"))
    assert {"index", "clocks.sm", "clocks_throttle_reasons.active", "gpu_name"} <= valid
    assert "x" not in valid
    fields = pick_fields(valid)
    assert fields[0] == "index" and "clocks_event_reasons.active" in fields
    assert len(fields) == len(SMI_FIELDS)
    # an older driver without the new name: the old spelling is used; one without it: dropped
    old = valid - {"clocks_event_reasons.active"}
    assert "clocks_throttle_reasons.active" in pick_fields(old)
    assert not any("reasons" in f for f in pick_fields(old - {"clocks_throttle_reasons.active"}))


@settings(max_examples=300, deadline=None)
@given(st.text(), st.sampled_from([None, DEFAULT_FIELDS, ["index", "uuid"], ["uuid"]]))
def test_any_text_gives_samples_or_a_clear_error(s: str, fields: list[str] | None) -> None:
    try:
        p = parse_query(s, fields)
    except CsvParseError:
        return
    assert isinstance(p, SmiParse)
    assert all(isinstance(g.index, int) for g in p.samples)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from(
                [
                    "0",
                    "1",
                    "12",
                    "[N/A]",
                    "[Not Supported]",
                    "x",
                    "3.5",
                    "",
                    "GPU-a",
                    '"q,"',
                    "0x1F",
                    "[GPU is lost]",
                    "-1",
                    "1e400",
                ]
            ),
            min_size=1,
            max_size=6,
        ),
        max_size=5,
    )
)
def test_csv_like_rows_never_traceback(rows: list[list[str]]) -> None:
    fields = [
        "index",
        "utilization.gpu",
        "power.draw",
        "uuid",
        "clocks_event_reasons.active",
        "temperature.gpu",
    ]
    s = "\n".join(", ".join(r) for r in rows)
    p = parse_query(s, fields)
    assert len(p.samples) + len(p.skipped) <= len(rows)


def test_query_rows_keeps_cells_as_printed_under_canonical_names() -> None:
    text = (
        "index, gpu_uuid, name, compute_cap\n"  # a header line is not a row
        "0, GPU-a, NVIDIA H200, 9.0\n"
        "1, [GPU is lost], [GPU is lost], [GPU is lost]\n"
        "2, GPU-c, short row\n"  # the wrong number of cells: skipped
        "Unable to determine the device handle for GPU0000:41:00.0: Unknown Error\n"
    )
    rows = query_rows(text, ["index", "gpu_uuid", "name", "compute_cap"])
    assert rows == [
        {"index": "0", "uuid": "GPU-a", "name": "NVIDIA H200", "compute_cap": "9.0"},
        {"index": "1", "uuid": "[GPU is lost]", "name": "[GPU is lost]", "compute_cap": "[GPU is lost]"},
    ]
