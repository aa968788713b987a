"""When the garbage collector runs in the app: between frames, not inside the frame a key waits for.

CPython starts a collection when enough objects were allocated, so its pauses land where the app allocates
most: rendering a frame, which is where a key waits (issue 28: 7-9 full collections in 30 s at 16 hosts,
100-140 ms each on the busy machine, and tens of young ones of 10-80 ms, each a key's worst case when it
landed in its window; `benchmarks/ui.py --slow-keys`). Two changes here:

- **Strips are not cyclic garbage.** Textual's `Strip` keeps seven small caches, and `crop_extend` (what
  the compositor asks of every line it places) and `divide` store the strip itself in its own cache when the
  answer is the strip unchanged, so nearly every rendered line was a reference cycle only a collection can
  free: with its caches and segments most of what the collector found (~38,000 objects in 6 s).
  `break_strip_cycles` makes those two methods (and `adjust_cell_length`) return the strip without storing it
  in its own cache: the same answers, and a strip no longer needed is freed at once by its reference count.
- **Collections at idle moments** (`IdleCollector`): once the app is up, the app collects after a repaint
  tick's frame when no input is waiting: the young generations every tick (what 200 ms left: a few
  milliseconds at most), a full collection every FULL_EVERY_S. The automatic young thresholds stay Python's,
  so a loop too busy to reach an idle moment (64 hosts on a loaded machine) still collects its young objects
  in small steps (a raised young threshold made each automatic one 20,000 objects: ~30 ms there); only the
  automatic full collection is made ten times rarer, a bound for when no idle moment comes.
- **What survives a full collection is frozen** (gc.freeze, as the app's start-up heap already is): a full
  collection walks every object not frozen, and the app's long-lived render caches (Textual's line caches,
  the tables' cell caches: lists, strips and segments) made it ~100-130 ms of CPU on the busy machine at 16
  hosts, even right after another. Frozen objects still die by their reference count (an evicted cache
  entry is freed at once); only a reference cycle among them waits, so every UNFREEZE_EVERY_S the whole heap
  is unfrozen, collected once and frozen again (one long collection, at an idle moment, every few minutes).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

from textual.strip import Strip

# automatic collections once the app is up: Python's young thresholds (700 allocations, 10 young ones; the
# app's own collection every tick resets both), a full one after 100 middle ones instead of 10
AUTO_THRESHOLDS = (700, 10, 100)
FULL_EVERY_S = 10.0  # a full collection at an idle moment at most this often (the automatic ones: ~4 s)
UNFREEZE_EVERY_S = 300.0  # the whole heap, frozen part included, collected at most this often


def break_strip_cycles() -> bool:
    """Make Textual's Strip stop caching itself in its own caches (above); False where this Textual's Strip
    has not the methods this knows (nothing changed then). Idempotent."""
    if getattr(Strip, "_ddtree_no_self_cache", False):
        return True
    needed = ("crop_extend", "divide", "adjust_cell_length", "_crop_extend_cache", "_divide_cache")
    if not all(hasattr(Strip, name) for name in needed):
        return False
    crop_extend, divide, adjust = Strip.crop_extend, Strip.divide, Strip.adjust_cell_length

    def crop_extend_no_cycle(self: Strip, start: int, end: int, style: Any) -> Strip:
        if start == 0 and end == self.cell_length:
            return self  # what Textual's answers (extend by nothing, crop to the whole), without caching it
        return crop_extend(self, start, end, style)

    def divide_no_cycle(self: Strip, cuts: Any) -> Any:
        cuts = list(cuts)
        if [cut for cut in cuts if cut <= self.cell_length] == [self.cell_length]:
            return [self]  # Textual's answer for one cut at the end, uncached (a list holding the strip)
        return divide(self, cuts)

    def adjust_no_cycle(self: Strip, cell_length: int, style: Any = None) -> Strip:
        if self.cell_length == cell_length:
            return self
        return adjust(self, cell_length, style)

    Strip.crop_extend = crop_extend_no_cycle  # type: ignore[method-assign]
    Strip.divide = divide_no_cycle  # type: ignore[method-assign]
    Strip.adjust_cell_length = adjust_no_cycle  # type: ignore[method-assign]
    Strip._ddtree_no_self_cache = True  # type: ignore[attr-defined]
    return True


class IdleCollector:
    """The app's garbage collection policy once it is up (above). `collect_idle` is called at a moment
    when nothing waits (after a repaint tick's frame, no input queued); `clock` is injectable for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.installed = False
        self._before: tuple[int, int, int] | None = None
        self._last_full = self._last_whole = clock()
        self.young = 0  # collections run here: tests and benchmarks/ui.py read them
        self.full = 0
        self.whole = 0

    def install(self) -> None:
        """Set the automatic thresholds (AUTO_THRESHOLDS); from now on `collect_idle` collects."""
        if self.installed:
            return
        self._before = gc.get_threshold()
        gc.set_threshold(*AUTO_THRESHOLDS)
        self._last_full = self._last_whole = self.clock()
        self.installed = True

    def uninstall(self) -> None:
        """Python's thresholds as they were (the app has left)."""
        if self.installed and self._before is not None:
            gc.set_threshold(*self._before)
        self.installed = False

    def collect_idle(self) -> int:
        """The collections due now: the young generations always; every FULL_EVERY_S a full collection of
        what is not frozen, its survivors frozen then; every UNFREEZE_EVERY_S the whole heap. What was
        collected: 1 (young), 2 (full), 3 (the whole heap), -1 (nothing: not installed, collector off)."""
        if not self.installed or not gc.isenabled():
            return -1
        now = self.clock()
        if now - self._last_whole >= UNFREEZE_EVERY_S:
            self._last_whole = self._last_full = now
            gc.unfreeze()
            gc.collect(2)
            gc.freeze()
            self.whole += 1
            return 3
        if now - self._last_full >= FULL_EVERY_S:
            self._last_full = now
            gc.collect(2)
            gc.freeze()
            self.full += 1
            return 2
        gc.collect(1)
        self.young += 1
        return 1
