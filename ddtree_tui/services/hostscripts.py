"""The service programs run on the host with the host's Python (`python -I -c SCRIPT`), by name.

The programs themselves are ordinary modules in `ddtree_tui/remote/` (wrapper, launch, kill, watch, read_log,
with their helpers hostlib, trust and atomicio), sent as their own source with `ddtree_tui.remote.source`.

Why Python on the host rather than shell: every GPU host that runs SGLang has a Python, while `ss`, `setsid`
or `pkill` flavours differ; and the checks (pid start time from /proc/<pid>/stat, command line, port holder
from /proc/net/tcp) must happen in one round trip, next to the process, without a race.

Trust (issue 20): the workdir and its run/ and logs/ folders must be directories owned by the login user and
writable by nobody else, every folder above them owned by root or that user and not writable by others
unless sticky (/var/tmp is fine); launch creates them 0700 and refuses anything else, with how to fix it.
A pidfile is believed only in such a workdir, and only for a process of our own uid whose command line is
the argv we would run for the spec (or the argv recorded by our own wrapper, which is still its parent).
Our Python runs isolated (`-I`, and the first sys.path entry dropped for older Pythons), the service gets
PYTHONSAFEPATH=1: the workdir (its cwd) is never on sys.path.
"""

from __future__ import annotations

from ddtree_tui.remote import source

WRAPPER = source("wrapper")
LAUNCH = source("launch")
KILL = source("kill")
WATCH = source("watch")
READ_LOG = source("read_log")
