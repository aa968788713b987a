"""`python -m ddtree_tui.cli`: the same as the `ddtree-tui` command."""

from ddtree_tui.cli import main

raise SystemExit(main())
