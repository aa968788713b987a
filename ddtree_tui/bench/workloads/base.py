"""What every workload produces: `WorkItem` (one prompt: its text, an optional system prompt, its output
length) and `WorkloadError` (names the file, the line and the field), plus the deterministic filler text
that gives generated prompts their exact lengths.

Filler text: each pseudo-token is a three-letter word and a space (four characters), so a prompt of N
tokens is 4·N characters: exactly N for the simulator (about four characters a token) and about N for a real
BPE tokenizer (a short common word is one token). A block's words come from a generator seeded by the run's
seed and the block's key, so equal keys give equal text (shared prefixes) and the run is reproducible.
"""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict

_WORDS = (
    "cat dog sun sky sea red big old new one two six ten art box car cup day ear egg eye fan fig fox gem "
    "hat ice ink jam jar key kit law leg lid map mud net oak oil owl pan pen pig pot ram rat rib rod row "
    "rug saw tap tea tin toe top toy van war web wig yak zip arm bag bat bed bee bow bus cab cow"
).split()
TOKEN_CHARS = 4  # characters of one pseudo-token ("cat ")
BLOCK_CACHE = 4096  # block texts kept (a trace repeats its hash ids)


class WorkloadError(ValueError):
    """A workload file or spec that cannot be used; the message names the file, the line and the field."""


class WorkItem(BaseModel):
    """One prompt of a workload: `text` is the user turn (for /generate: the whole text when `system` is
    None), `max_new_tokens` its output length when the workload gives one."""

    model_config = ConfigDict(frozen=True)

    id: str
    title: str = ""
    text: str
    system: str | None = None
    max_new_tokens: int | None = None
    raw: bool = False  # send `text` to /generate verbatim (no chat template): trace blocks stay aligned


class Filler:
    """Deterministic filler text: `block(key, tokens)` is the same string for the same seed and key."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._blocks: dict[tuple[str, int], str] = {}

    def block(self, key: str, tokens: int) -> str:
        """`tokens` pseudo-tokens of the block named `key` (a prefix of the longer block of that key)."""
        if tokens <= 0:
            return ""
        k = (key, tokens)
        got = self._blocks.get(k)
        if got is None:
            rng = random.Random(f"{self.seed}:{key}")
            got = "".join(w + " " for w in rng.choices(_WORDS, k=tokens))
            if len(self._blocks) >= BLOCK_CACHE:
                self._blocks.clear()
            self._blocks[k] = got
        return got
