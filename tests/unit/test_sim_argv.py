"""One builder of `ddtree-tui sim` argv (sim/process.sim_argv), used by SimProcess and by a profile's sim
service: what it writes, the simulator's own parser reads back as the same config."""

from __future__ import annotations

import importlib
import sys

from ddtree_tui.cli import HANDLERS, build_parser
from ddtree_tui.config import parse_profile
from ddtree_tui.services.launchline import build_launch
from ddtree_tui.sim.process import SimConfig, sim_argv


def _read_back(argv: list[str]) -> SimConfig:
    """The config the `sim` mode's own handler module builds from these words."""
    assert argv[:4] == [sys.executable, "-m", "ddtree_tui.cli", "sim"]
    sim_mode = importlib.import_module(HANDLERS["sim"].split(":")[0])
    cfg: SimConfig = sim_mode.config_from_namespace(build_parser().parse_args(argv[3:]))
    return cfg


def test_a_config_round_trips_through_its_argv() -> None:
    cfg = SimConfig(
        algorithm="ddtree", mode="tree", accept_length=3.25, decode_rate=55.5, load_time=0.5, seed=7,
        model_path="sim/other", decode_log_interval=5, block_size=8, budget=64, hybrid=True,
        allow_hybrid_unsafe=True, max_running_requests=4, disconnect_abort_s=2.0, faults=["slow=2"],
        health_latency=0.25, prefill_rate=900.0, kv_capacity=5000, slowdown_after=3.0, slowdown_factor=2.0, mem_creep_after=1.0,
        mem_creep_mib_s=10.0, batch_slowdown=True, reasoning=True, usage_on_finish=True, no_done=True,
        detail_errors=True, strict_openai=True, incremental_streaming_output=True,
    )  # fmt: skip
    back = _read_back(sim_argv(cfg, 31999))
    assert back == cfg.model_copy(update={"port": 31999, "exit_process": True})


def test_defaults_are_left_out() -> None:
    argv = sim_argv(SimConfig(), 31000)
    assert argv[4:] == ["--algorithm", "dflash", "--port", "31000", "--host", "127.0.0.1", "--decode-rate", "40",
                        "--load-time", "0", "--seed", "0"]  # fmt: skip
    assert _read_back(argv) == SimConfig(port=31000, exit_process=True)


def test_a_profiles_sim_service_uses_the_same_builder() -> None:
    prof = parse_profile(
        'name = "local"\naddress = "local"\nworkdir = ".ddtree/demo"\n[[service]]\nname = "dd"\n'
        'algorithm = "ddtree"\nmode = "tree"\nlauncher = "sim"\nport = 31012\nbudget = 32\nblock_size = 8\n'
        'allow_hybrid_unsafe = true\nextra_args = ["--reasoning"]\n'
        "[service.sim]\nhybrid = true\nrealistic = true\nmax_running_requests = 3\ndisconnect_abort_s = 2.5\n"
    )
    argv = build_launch(prof, prof.services[0]).argv
    assert argv[-1] == "--reasoning" and "--realistic" in argv  # the switch, not its values one by one
    back = _read_back(argv)
    assert (back.budget, back.block_size, back.hybrid, back.allow_hybrid_unsafe) == (32, 8, True, True)
    assert back.max_running_requests == 3 and back.reasoning and back.batch_slowdown
    assert back.disconnect_abort_s == 2.5
