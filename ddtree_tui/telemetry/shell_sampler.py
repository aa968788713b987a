"""The last resort for a host without a usable Python: a POSIX sh loop over the same single channel that prints
/proc and one-shot nvidia-smi output between markers each tick; parsed here into the sampler's line format.

It exits with the channel: its next `echo` to a closed pipe gets SIGPIPE (and the SSH transport's wrapper kills
its process group when the channel closes).
"""

from __future__ import annotations

import time
from typing import Any

from ddtree_tui.lib.jsontypes import JsonObject
from ddtree_tui.remote.hoststats import (
    cpu_percent,
    host_dict,
    parse_cpu_times,
    parse_loadavg,
    parse_meminfo,
    parse_uptime,
)
from ddtree_tui.remote.smi import SMI_APPS

# $1 workdir, $2 field list, $3 seconds between ticks, $4 number of ticks (0 = forever)
SHELL_SCRIPT = r"""W=$1; F=$2; S=$3; N=$4; i=0
d=$W; while [ ! -e "$d" ] && [ "$d" != "/" ]; do d=$(dirname "$d"); done
while :; do
  echo "@@tick"
  echo "@@uptime"; cat /proc/uptime 2>/dev/null
  echo "@@loadavg"; cat /proc/loadavg 2>/dev/null
  echo "@@stat"; head -n 1 /proc/stat 2>/dev/null
  echo "@@meminfo"; grep -E '^(MemTotal|MemAvailable|MemFree|Buffers|Cached):' /proc/meminfo 2>/dev/null
  echo "@@df"; df -Pk "$d" 2>/dev/null | tail -n 1
  echo "@@gpu"; nvidia-smi --query-gpu="$F" --format=csv,noheader,nounits 2>&1
  echo "@@apps"; nvidia-smi --query-compute-apps=APPS --format=csv,noheader,nounits 2>&1
  echo "@@end" || exit 0
  i=$((i + 1)); if [ "$N" -gt 0 ] && [ "$i" -ge "$N" ]; then exit 0; fi
  sleep "$S" || exit 0
done""".replace("APPS", SMI_APPS)


def shell_argv(workdir: str, fields: list[str], interval_s: float, count: int = 0) -> list[str]:
    return ["sh", "-c", SHELL_SCRIPT, "sh", workdir, ",".join(fields), f"{interval_s:g}", str(count)]


class ShellParser:
    """Feed it lines; it returns a sampler line (dict) at each `@@end`."""

    def __init__(self, fields: list[str]) -> None:
        self.fields = fields
        self.section: str | None = None
        self.buf: dict[str, list[str]] = {}
        self.prev_cpu: tuple[int, int] | None = None

    def feed(self, line: str) -> JsonObject | None:
        if line.startswith("@@"):
            tag = line[2:].strip()
            if tag == "tick":
                self.buf = {}
                self.section = None
                return None
            if tag == "end":
                out = self._frame()
                self.buf = {}
                self.section = None
                return out
            self.section = tag
            self.buf.setdefault(tag, [])
            return None
        if self.section is not None:
            self.buf[self.section].append(line)
        return None

    def _text(self, key: str) -> str:
        return "\n".join(self.buf.get(key, []))

    def _frame(self) -> dict[str, Any]:
        cur = parse_cpu_times(self._text("stat"))
        pct = cpu_percent(self.prev_cpu, cur)
        self.prev_cpu = cur or self.prev_cpu
        used, total = parse_meminfo(self._text("meminfo"))
        l1, l5, l15 = parse_loadavg(self._text("loadavg"))
        free = dtotal = None
        df = self._text("df").split()
        if len(df) >= 4:
            try:
                dtotal, free = int(df[1]) // 1024, int(df[3]) // 1024
            except ValueError:
                pass
        host = host_dict(
            pct, (l1, l5, l15), (used, total), (free, dtotal), parse_uptime(self._text("uptime"))
        )
        gpu_lines = [ln for ln in self.buf.get("gpu", []) if ln.strip()]
        line: dict[str, Any] = {"v": 1, "t": round(time.time(), 3), "src": "nvidia-smi-oneshot", "host": host}
        if any("nvidia-smi" in ln and "not found" in ln.lower() for ln in gpu_lines):
            line["src"] = "none"
            line["note"] = "no NVIDIA GPU"
            return line
        apps = [ln for ln in self.buf.get("apps", []) if ln.strip() and ln.strip()[0].isdigit()]
        line["smi"] = {"fields": self.fields, "rows": gpu_lines, "errs": [], "apps": apps}
        return line
