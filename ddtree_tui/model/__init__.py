"""The bottom of the core: the shapes every layer speaks (snapshot, events, todo view, ServiceRef, intents).
Imports nothing of ddtree_tui but `lib/`, so any layer may import it."""
