"""Textual's Footer, minus a leak: every recompose left the old keys alive (RSS grew with each focus change)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import HorizontalGroup
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

# keys that must never drop out of a narrow footer: docked at the right end, next to ^p Commands
ESSENTIAL = ("help", "quit")


class LeanFooter(Footer):
    """Footer that drops the watchers of the keys a recompose removed.

    Footer recomposes its FooterKeys on every bindings change (each focus move), and each key is bound to
    `Footer.compact` with `data_bind`, which adds a (key, setter) watcher on the Footer. Textual (8.2) prunes
    watchers of closed nodes only when `compact` itself changes, which in this app it never does, so every
    removed key stayed reachable with its styles, message queue and renders: ~10 widgets per focus change.
    """

    DEFAULT_CSS = """
    LeanFooter HorizontalGroup.-essential { dock: right; width: auto; height: 1; background: $panel; }
    LeanFooter HorizontalGroup.-essential FooterKey.-command-palette { dock: none; }
    """

    _composed: tuple[object, ...] | None = None  # what the keys shown were composed from (`_shows`)

    def _shows(self) -> tuple[object, ...] | None:
        """What compose reads: the screen's shown bindings (key, action, description, enabled, tooltip),
        the compact flag and the palette key; None before the bindings are ready."""
        if not self._bindings_ready:
            return None
        shown = tuple(
            (b.key, b.action, b.description, b.group, enabled, tooltip)
            for (_, b, enabled, tooltip) in self.screen.active_bindings.values()
            if b.show
        )
        return (shown, self.compact, self.show_command_palette, self.app.ENABLE_COMMAND_PALETTE)

    def compose(self) -> ComposeResult:
        """Footer's keys, with `^p` Commands, `?` Help and `q` Quit in one group docked at the right, so a
        narrow screen cuts the optional keys in the middle, never those."""
        self._composed = self._shows()
        right: list[FooterKey] = []
        for w in super().compose():
            if isinstance(w, FooterKey) and (w.action in ESSENTIAL or w.has_class("-command-palette")):
                right.append(w)
                continue
            yield w
        order = {"help": 1, "quit": 2}
        yield HorizontalGroup(*sorted(right, key=lambda k: order.get(k.action, 0)), classes="-essential")

    async def recompose(self) -> None:
        """Footer recomposes on every bindings change, twice a focus move; only when what it shows changed
        (a focus move between two tables kept the same keys: ~15 widgets made and dropped for nothing, a
        layout pass, and their reference cycles left to the garbage collector, issue 28)."""
        if self._composed is not None and self.is_attached and self._shows() == self._composed:
            return
        await super().recompose()
        prune_closed_watchers(self)
        self.fit_keys()

    def on_mount(self) -> None:
        self.call_after_refresh(self.fit_keys)

    def on_resize(self) -> None:
        self.fit_keys()

    def fit_keys(self) -> None:
        """Hide, whole, the optional keys that do not fit beside the docked essential group (at 80 columns
        it covered `t New todo` and left `t New▏`); a wider screen shows them again."""
        width = self.size.width or self.app.size.width or 80
        essential = [k for g in self.query_children(HorizontalGroup) for k in g.query_children(FooterKey)]
        room = width - sum(key_width(k, self.compact) for k in essential)
        fits = True
        for key in self.query_children(FooterKey):
            room -= key_width(key, self.compact)
            fits = fits and room >= 0
            if key.display != fits:  # setting it at all asks for a layout pass (the footer blanked a frame)
                key.display = fits


def key_width(key: FooterKey, compact: bool) -> int:
    """Cells a footer key takes: key, description, their padding (FooterKey's CSS) and the gap after it."""
    return len(key.key_display) + len(key.description) + (2 if compact else 4)


def prune_closed_watchers(node: object) -> int:
    """Drop watchers registered on `node` by nodes that have since closed; how many were dropped."""
    watchers = getattr(node, "__watchers", None)
    dropped = 0
    if isinstance(watchers, dict):
        for name, entries in watchers.items():
            keep = [(n, cb) for n, cb in entries if not getattr(n, "_closing", False)]
            dropped += len(entries) - len(keep)
            watchers[name][:] = keep
    return dropped
