"""A move onto a host that already has a different service of the same name is refused before anything is
launched, and the destination's own service keeps its spec (found while writing the reference story: the
launch used to overwrite the destination's spec, so its health probes went to the wrong port)."""

from __future__ import annotations

from pathlib import Path

from ddtree_tui.config import HostProfile
from ddtree_tui.services.lifecycle import ServiceManager, move_service
from ddtree_tui.transport import make_transport


def _profile(name: str, workdir: Path, port: int) -> HostProfile:
    return HostProfile.model_validate(
        {
            "name": name,
            "address": "local",
            "workdir": str(workdir),
            "service": [{"name": "dflash", "algorithm": "dflash", "launcher": "sim", "port": port}],
        }
    )


async def test_move_onto_a_same_named_service_is_refused(tmp_path: Path) -> None:
    src_p, dst_p = _profile("ct129", tmp_path / "a", 31001), _profile("ct200", tmp_path / "b", 31002)
    src = ServiceManager(make_transport(src_p), src_p)
    dst = ServiceManager(make_transport(dst_p), dst_p)
    res = await move_service(src, dst, "dflash")
    assert not res.ok
    assert "ct200 already has a different service named 'dflash' (port 31002)" in res.message
    assert dst.spec("dflash").port == 31002  # untouched
    assert not (tmp_path / "b").exists()  # nothing ran on the destination
