"""The collector: one long-running Fleet served over HTTP (`ddtree-tui serve`) for Prometheus, for TUIs that
attach to it and for browsers; plus the client side of attaching (AttachedFleet)."""
