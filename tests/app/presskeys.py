"""Keys for a live app, waiting on events rather than on an idle process.

Pilot.press sends each key through the app's driver and then waits, twice a key, for the process to spend a
20 ms slice almost idle (at most 1 s each time). A live app (repaints at refresh_hz, replayed telemetry, a
run streaming from the simulators) on a busy machine rarely has such a slice, so a key could cost 2 s of wall
time while the app kept repainting. `press` sends the same key events the same way, and after each one waits
for the app and then the screen's widgets to have handled what was queued (twice: the app forwards a key
to the focused widget) and for any animation to end: the next key is read after this one, as from a
terminal. The tests that use it then wait on a condition (tests/app/screen_text.until)."""

from __future__ import annotations

import unicodedata
from typing import Any

from textual import events
from textual.keys import REPLACED_KEYS, _character_to_key, _get_unicode_name_from_key
from textual.pilot import Pilot
from textual.screen import Screen

from tests.app.screen_text import until


def key_event(key: str) -> events.Key:
    """The event Pilot.press builds for `key` (a name such as "ctrl+r", or one character)."""
    if len(key) == 1 and not key.isalnum():
        key = _character_to_key(key)
    try:
        char: str | None = unicodedata.lookup(_get_unicode_name_from_key(REPLACED_KEYS.get(key, key)))
    except KeyError:
        char = key if len(key) == 1 else None
    return events.Key(key, char)


async def press(pilot: Pilot[Any], *keys: str) -> None:
    """Press `keys` in order, each handled by the screen before the next is sent."""
    app = pilot.app
    assert app._driver is not None, "the app is not running"
    for key in keys:
        event = key_event(key)
        event.set_sender(app)
        # what the driver does for a key it read, awaited here so the key is queued before the waits below
        await app._post_message(event)
        await pilot._wait_for_screen()  # the app has handled it (and forwarded it to the focused widget)
        await pilot._wait_for_screen()  # the widgets have handled what that queued for them
        await app._animator.wait_until_complete()


async def opened(pilot: Pilot[Any], kind: type[Screen[Any]], timeout: float = 10) -> None:
    """Wait for a screen of `kind` on top, mounted and focused: keys sent before its first focus is given
    go to the screen below or are taken back."""
    await until(
        pilot,
        lambda: isinstance(pilot.app.screen, kind) and pilot.app.screen.focused is not None,
        timeout,
        f"the {kind.__name__}",
    )
