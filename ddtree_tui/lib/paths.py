"""Every default path of the program, in one place, with the reason it lives where it does.

Two homes:
- the project directory `.ddtree/` (relative to where the program runs, like `.git/`): what belongs to one
  checkout or one experiment and is worth keeping next to it — bench history, the todo list, sweep outputs,
  saved logs, crash tracebacks, the collector's token for the intents of the fleet run from here. It is in
  `.gitignore`; a path given on the command line always wins.
- the user's directories (platformdirs: XDG on Linux, the platform's own elsewhere): what belongs to the
  person, across checkouts — host profiles (config), GPU holds (state that must be seen by every ddtree-tui
  process of this user, whichever directory it was started in).
"""

from __future__ import annotations

import os
from pathlib import Path

APP = "ddtree-tui"

# --- project-local (relative: resolved against the current directory when used) --------------------------
PROJECT_DIR = Path(".ddtree")
BENCH_HISTORY = PROJECT_DIR / "bench-history.jsonl"  # every bench / load / soak run, one JSON line each
TODOS = PROJECT_DIR / "todos.json"  # the todo list (todowrite-compatible), next to the work it tracks
COLLECTOR_TOKEN = PROJECT_DIR / "collector.token"  # `serve --intents` bearer token (mode 600)
SWEEPS = PROJECT_DIR / "sweeps"  # one directory per sweep started from the TUI
SAVED_LOGS = PROJECT_DIR / "logs"  # log lines saved from the log pane
CRASH_DIR = PROJECT_DIR  # the traceback of a TUI crash, where the user looks first
PROJECT_PROFILES = Path("hostprofiles")  # ./hostprofiles/ wins over the user's when it exists

HOLDS_ENV = "DDTREE_TUI_HOLDS_DIR"  # tests and multi-user setups point the holds somewhere else


# --- the user's (absolute, from platformdirs) --------------------------------------------------------------
def user_profiles_dir() -> Path:
    """Host profiles of this user (config: edited by hand, shared by every checkout)."""
    import platformdirs  # when first asked: a run given its paths never needs it (~10 ms of a start)

    return Path(platformdirs.user_config_dir(APP)) / "hostprofiles"


def holds_dir() -> Path:
    """GPU holds (state: every process of this user must see the same holds), or $DDTREE_TUI_HOLDS_DIR."""
    env = os.environ.get(HOLDS_ENV)
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_state_dir(APP)) / "holds"
