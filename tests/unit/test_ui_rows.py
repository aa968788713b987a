"""The row builders of the hosts, services and GPU panes (ui/views.py): pure functions of a snapshot, tested
without a terminal, in the wide column set and the narrow one an 80-column terminal gets."""

from __future__ import annotations

import pytest

from ddtree_tui.config import ServiceSpec, display_mode
from ddtree_tui.model.snapshot import FleetSnapshot, GpuProcess, HostView, ServiceStatus
from ddtree_tui.ui.views import (
    GPUS_NARROW,
    GPUS_WIDE,
    HOSTS_NARROW,
    HOSTS_WIDE,
    SERVICES_NARROW,
    SERVICES_WIDE,
    Cell,
    PaneInputs,
    Row,
    Seg,
    TableView,
    algorithm_text,
    gpus_view,
    hosts_view,
    plain_of,
    process_rows,
    service_detail_line,
    services_view,
    short_services,
    spark_width,
)
from tests.app.snapdata import T0, history, snapshot

WIDE, NARROW = 200, 80


def cells(row: Row, columns: tuple[str, ...]) -> dict[str, str]:
    return {c: plain_of(v) for c, v in zip(columns, row.cells, strict=True)}


def shown(
    table: TableView, wide: tuple[str, ...], narrow: tuple[str, ...], width: int, key: str
) -> dict[str, str]:
    """The row `key` as text by column, after checking the column set fits the width."""
    cols = wide if width >= 118 else narrow
    assert table.columns == cols
    return cells(next(r for r in table.rows if r.key == key), cols)


def badge(row: Row, columns: tuple[str, ...], column: str) -> str | None:
    cell = row.cells[columns.index(column)]
    assert isinstance(cell, Cell)
    return cell.base or next((s.badge for s in cell.segs if s.badge), None)


def svc(algorithm: str, mode: str | None = None, **kw: object) -> ServiceStatus:
    return ServiceStatus(name="s", host="h", algorithm=algorithm, mode=mode, port=1, **kw)  # type: ignore[arg-type]


# --- hosts ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("width", "host", "want"),
    [
        (WIDE, "local", {"State": "● connected", "CPU": "12%", "GPUs": "1", "Telemetry": "REPLAY"}),
        (WIDE, "ct200", {"State": "↻ reconnecting in 7s", "RAM": "-", "Note": "✖ error (below)"}),
        (NARROW, "local", {"State": "● connected", "Note": "REPLAY telemetry", "Disk free": "117.2G"}),
        (NARROW, "ct200", {"Host": "ct200", "Note": "✖ error (below)"}),
    ],
)
def test_host_rows(width: int, host: str, want: dict[str, str]) -> None:
    got = shown(
        hosts_view(snapshot(), PaneInputs(now=T0, width=width)).table, HOSTS_WIDE, HOSTS_NARROW, width, host
    )
    assert {k: got[k] for k in want} == want


def test_host_errors_in_full_below_and_the_filter() -> None:
    view = hosts_view(snapshot(), PaneInputs(now=T0, width=NARROW, filter="refused"))
    assert [r.key for r in view.table.rows] == ["ct200"]
    assert view.table.title == "1 Hosts · filter /refused"
    assert "".join(s.text for s in view.errors) == "ct200: Connection refused · retry in 7s"
    assert Seg("Connection refused", "bad") in view.errors


def test_a_down_host_without_retry_and_a_connecting_one() -> None:
    snap = FleetSnapshot(
        ts=T0,
        hosts=[
            HostView(name="a", address="a", state="disconnected"),
            HostView(name="b", address="b", state="connecting"),
        ],
    )
    rows = hosts_view(snap, PaneInputs(now=T0, width=WIDE)).table.rows
    assert [plain_of(r.cells[1]) for r in rows] == ["✖ down", "◌ connecting"]
    assert badge(rows[0], HOSTS_WIDE, "State") == "bad"


# --- services ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("width", "ref", "want"),
    [
        (
            WIDE,
            "local/dflash",
            {"State": "● ready", "Algorithm": "dflash linear", "Kind": "SIMULATED", "Accept": "3.41",
             "Gen tok/s": "139.6", "Health": "3ms", "Uptime": "2m05s"},
        ),
        (WIDE, "local/ddtree-shadow", {"Algorithm": "ddtree shadow-linear", "Accept": "-", "Uptime": "4s"}),
        (WIDE, "ct200/ddtree-tree", {"State": "✖ crashed", "Kind": "sglang", "Uptime": "-", "Health": "-"}),
        (NARROW, "local/dflash", {"Service": "local/dflash SIM", "Algorithm": "dflash", "tok/s": "139.6"}),
        (NARROW, "local/ddtree-shadow", {"Algorithm": "ddtree:shadow", "State": "◌ starting"}),
        (NARROW, "ct200/ddtree-tree", {"Service": "ct200/ddtree-tree", "Algorithm": "ddtree:tree"}),
    ],
)  # fmt: skip
def test_service_rows(width: int, ref: str, want: dict[str, str]) -> None:
    view = services_view(snapshot(), PaneInputs(now=T0, width=width))
    got = shown(view.table, SERVICES_WIDE, SERVICES_NARROW, width, ref)
    assert {k: got[k] for k in want} == want


def test_a_crashed_service_says_why_in_red_and_the_detail_line_follows_the_selection() -> None:
    view = services_view(snapshot(), PaneInputs(now=T0, width=WIDE, selected_service="ct200/ddtree-tree"))
    row = next(r for r in view.table.rows if r.key == "ct200/ddtree-tree")
    assert badge(row, SERVICES_WIDE, "Detail") == "bad"
    line = "".join(s.text for s in view.detail)
    assert line == "ct200/ddtree-tree :30011 · pid - · health - · exit status 1: CUDA out of memory"
    assert service_detail_line(None) == ()


def test_service_filter_matches_the_algorithm_as_shown() -> None:
    view = services_view(snapshot(), PaneInputs(now=T0, width=NARROW, filter="ddtree:shadow"))
    assert [r.key for r in view.table.rows] == ["local/ddtree-shadow"]
    assert view.table.title == "3 Services · filter /ddtree:shadow"


@pytest.mark.parametrize(
    ("algorithm", "mode", "narrow", "want"),
    [
        ("baseline", None, False, "baseline"),
        ("baseline", "-", True, "baseline"),  # the fleet's status carries ServiceSpec.display_mode
        ("dflash", None, False, "dflash linear"),
        ("dflash", "linear", True, "dflash"),
        ("ddtree", "tree", False, "ddtree tree"),
        ("ddtree", None, True, "ddtree:shadow"),
    ],
)
def test_algorithm_text_uses_the_one_display_mode(
    algorithm: str, mode: str | None, narrow: bool, want: str
) -> None:
    assert algorithm_text(svc(algorithm, mode), narrow) == want


def test_display_mode_is_the_spec_answer() -> None:
    assert ServiceSpec(name="b", launcher="sim", port=1, algorithm="baseline").display_mode == "-"
    assert ServiceSpec(name="d", launcher="sim", port=1, algorithm="dflash").display_mode == "linear"
    assert display_mode("ddtree", None) == "shadow-linear"
    assert display_mode("ddtree", "tree") == "tree"


# --- GPUs ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("width", "key", "want"),
    [
        (WIDE, "local:0", {"Host:GPU": "local:0 REPLAY", "Temp": "64°C", "Power": "654/700W",
                           "Service": "dflash, ddtree-shadow", "Fault": "ok"}),
        (WIDE, "ct200:1", {"Fault": "✖ fault (below)", "Service": "-"}),
        (NARROW, "local:0", {"GPU": "local:0", "Power": "654W", "Service": "dflash +1"}),
        (NARROW, "ct200:1", {"Service": "✖ fault (below)"}),
    ],
)  # fmt: skip
def test_gpu_rows(width: int, key: str, want: dict[str, str]) -> None:
    view = gpus_view(snapshot(), PaneInputs(now=T0, width=width, history=history()))
    got = shown(view.table, GPUS_WIDE, GPUS_NARROW, width, key)
    assert {k: got[k] for k in want} == want
    util = got["Util"]
    assert util.endswith("%") and len(util) == (6 if width < 118 else 8) + 5


def test_gpu_view_title_faults_and_host_scope() -> None:
    view = gpus_view(snapshot(), PaneInputs(now=T0, width=WIDE, selected_host="ct200"))
    assert view.table.title == "2 GPUs · ct200"
    assert [r.key for r in view.table.rows] == ["ct200:1"]
    assert "".join(s.text for s in view.faults) == "ct200:1: Xid 79: GPU has fallen off the bus"
    everything = gpus_view(snapshot(), PaneInputs(now=T0, width=WIDE))
    assert everything.table.title == "2 GPUs · all hosts · REPLAY of a recording"


def test_gpu_history_width_follows_the_pane() -> None:
    assert [spark_width(w) for w in (80, 118, 150, 400)] == [8, 16, 48, 60]
    widths = {}
    for width in (150, 200, 400):
        view = gpus_view(snapshot(), PaneInputs(now=T0, width=width, history=history()))
        assert view.table.columns == GPUS_WIDE
        row = next(r for r in view.table.rows if r.key == "local:0")
        widths[width] = len(plain_of(row.cells[GPUS_WIDE.index("Util history")]))
        used = sum(
            max(len(c), *(len(plain_of(r.cells[i])) for r in view.table.rows)) + 2
            for i, c in enumerate(GPUS_WIDE)
        )
        assert used <= width - 2, (width, used)  # every column whole inside the pane's border (issue 28)
    assert widths[150] < widths[200] <= widths[400] == 60


def test_gpu_table_at_120_columns_takes_the_compact_set_rather_than_cut_fault() -> None:
    # 120 columns passed the wide threshold, but the wide set needs more: its last column read `Fa`
    view = gpus_view(snapshot(), PaneInputs(now=T0, width=120, history=history()))
    assert view.table.columns == GPUS_NARROW


def test_process_rows_under_their_gpu_biggest_first() -> None:
    g = (
        snapshot()
        .hosts[0]
        .gpus[0]
        .model_copy(
            update={
                "processes": [
                    GpuProcess(pid=1, name="python", used_memory_mb=100),
                    GpuProcess(pid=2, name="sglang", used_memory_mb=9000, service="dflash"),
                ]
            }
        )
    )
    rows = process_rows(g, "local")
    assert [(p.key, p.name, p.service) for p in rows] == [
        ("local:0:pid2", " ├ pid 2", "local/dflash"),
        ("local:0:pid1", " └ pid 1", "-"),
    ]
    assert short_services("a,b,c", narrow=True) == "a +2"
    assert short_services(None, narrow=False) == "-"


def test_live_values_older_than_a_few_intervals_are_dimmed_with_their_age() -> None:
    """Issue 29: a value whose source stopped reporting it (an idle server's last throughput, a sampler that
    went quiet) is shown dimmed with its age; one observed just now is shown as it is."""
    from ddtree_tui.model.snapshot import STALE_AFTER_S
    from ddtree_tui.ui.details import service_facts

    snap = snapshot()
    h = snap.hosts[0]
    s = h.services[0].model_copy(
        update={"gen_throughput": 69.2, "accept_length": 3.4, "running_reqs": 1, "queue_reqs": 0,
                "health_latency_ms": 2.0,
                "observed_at": {"gen_throughput": T0, "accept_length": T0, "running_reqs": T0, "queue_reqs": T0,
                                "health_latency_ms": T0 + 363}}
    )  # fmt: skip
    snap = snap.model_copy(update={"hosts": [h.model_copy(update={"services": [s]}), *snap.hosts[1:]]})
    now = T0 + 363  # six minutes after the last decode line
    view = services_view(snap, PaneInputs(now=now, width=WIDE))
    row = next(r for r in view.table.rows if r.key == "local/dflash")
    got = cells(row, SERVICES_WIDE)
    assert got["Gen tok/s"] == "69.2 6m03s ago" and badge(row, SERVICES_WIDE, "Gen tok/s") == "dim"
    assert got["Accept"] == "3.40 6m03s ago" and badge(row, SERVICES_WIDE, "Accept") == "dim"
    assert got["Health"] == "2ms"  # probed just now: as it is
    facts = dict(service_facts(s, now))
    assert facts["running / queued"] == "1 / 0 · stale, 6m03s ago"
    assert facts["gen throughput"] == "69.2 tok/s · stale, 6m03s ago" and facts["health latency"] == "2 ms"
    fresh = services_view(snap, PaneInputs(now=T0 + STALE_AFTER_S - 1, width=WIDE))
    assert (
        cells(next(r for r in fresh.table.rows if r.key == "local/dflash"), SERVICES_WIDE)["Gen tok/s"]
        == "69.2"
    )
    # the host sample and the GPU sample stopped coming too (both were taken at T0)
    hrow = next(r for r in hosts_view(snap, PaneInputs(now=now, width=WIDE)).table.rows if r.key == "local")
    assert cells(hrow, HOSTS_WIDE)["CPU"] == "12% 6m03s ago" and badge(hrow, HOSTS_WIDE, "RAM") == "dim"
    grow = next(r for r in gpus_view(snap, PaneInputs(now=now, width=WIDE)).table.rows if r.key == "local:0")
    assert (
        cells(grow, GPUS_WIDE)["Host:GPU"].endswith("6m03s ago") and badge(grow, GPUS_WIDE, "Util") == "dim"
    )
