"""Who froze this process's heap (gc.freeze): a headless mode, once its imports were done, or a long-lived app
(the terminal UI freezes its heap and collects at idle moments, ui/gcpolicy.py). A measured run
(bench/worker.py `quiet_gc`) sets its own collector policy in the first case and leaves the app's alone in
the second; both have frozen heaps, and the count of frozen objects falls as they die, so it cannot tell
them apart."""

from __future__ import annotations

import gc

_imports_only = False  # the frozen objects are a headless mode's imports (freeze_imports), nothing else's


def freeze_imports() -> None:
    """A headless mode's imported heap, frozen out of the collector once its imports are done, without a
    collection first. Imports run with the collector off and leave ~40,000 young objects and almost no
    garbage: the first young collection after them walked all of them (23 ms), and a full collection before
    freezing costs as much (22 ms); frozen, no pass walks them (issue 26). Only where nothing was frozen
    before (a process that froze its heap for its own reasons keeps that policy)."""
    global _imports_only
    if gc.get_freeze_count() == 0:
        gc.freeze()
        _imports_only = True


def frozen_by_app() -> bool:
    """Whether objects are frozen other than by freeze_imports: an app's policy, or a run already under way in
    this process (its `quiet_gc`)."""
    return not _imports_only and gc.get_freeze_count() > 0


def froze_more() -> None:
    """Something besides the imports is frozen now (`quiet_gc` froze what its run found, and unfreezes it all
    at its end): from here on the freeze count means what it says, so a run nested in that one leaves its
    policy alone."""
    global _imports_only
    _imports_only = False
