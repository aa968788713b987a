"""Asking whether a process is still there, without racing its exit."""

from __future__ import annotations

import psutil


def alive(p: psutil.Process | int) -> bool:
    """True while the process exists and is not a zombie; a process that exits while we look is gone."""
    try:
        proc = p if isinstance(p, psutil.Process) else psutil.Process(p)
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
