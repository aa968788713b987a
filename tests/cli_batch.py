"""Several `ddtree-tui ARGS...` command lines run one after another in ONE child process (issue 24).

Every `python -m ddtree_tui.cli` child pays the imports (1.3-1.6 s of CPU a process for `report`, more for
the modes that import the fleet) before it does anything; a test that checks seven bad inputs of `report`
paid that seven times. Here one child imports once and runs `ddtree_tui.cli.main(argv)` (what
`python -m ddtree_tui.cli` runs: `raise SystemExit(main())`) for each command line, with its own stdout and
stderr captured and its exit status (main's return value, or the SystemExit that argparse raises for a usage
error) kept. For command lines whose process is not what the test checks: reports, usage errors, `sweep
show/apply`, `smoke`, and `--run-bench` runs (each opens and closes its own fleet, simulators, SSH
connections and sockets, as in a child of its own). A run that is signalled, reads stdin or a terminal, or
whose process's life is the point keeps its own child.

Run as a script by `tests.util.cli_batch`: the command lines come as JSON on stdin, the results go as one JSON
list into the file named by the first argument (not stdout: what writes to file descriptor 1 directly, past
sys.stdout, must not garble them).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys


def run_all(argvs: list[list[str]]) -> list[dict[str, object]]:
    from ddtree_tui.cli import main

    out: list[dict[str, object]] = []
    for argv in argvs:
        so, se = io.StringIO(), io.StringIO()
        code: object
        with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
            try:
                code = main(argv)
            except SystemExit as e:  # argparse's usage errors, and `raise SystemExit(n)` of a handler
                code = e.code
        if code is None:
            code = 0
        elif not isinstance(code, int):  # SystemExit("message"): Python prints it and exits 1
            se.write(f"{code}\n")
            code = 1
        out.append({"returncode": code, "stdout": so.getvalue(), "stderr": se.getvalue()})
    return out


if __name__ == "__main__":
    results = run_all(json.loads(sys.stdin.read()))
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(results, f)
