"""SGLang's generated-shared-prefix workload (`bench_serving --dataset-name generated-shared-prefix`):
G groups, each with one system prompt of SYS tokens shared by P prompts whose questions are Q tokens long,
and an output length OUT per prompt.

    --prompts gsp:G,P,SYS,Q[,OUT]       e.g. gsp:4,8,1024,64,128

As SGLang does, the G × P prompts are shuffled (seeded by the run's --seed), so a group's prompts arrive
spread over the run and its prefix is hit from the cache after the first. The system prompt is sent as the
conversation's system message (chat) or, rendered with the chat template, as the head of the text
(/generate): either way the group's prompts share it as a prefix. OUT left out: the run's --max-new-tokens.
vLLM's prefix-repetition dataset (N prefixes of a length, each followed by unique suffixes) is the same
workload: gsp:N,PROMPTS/N,PREFIX,SUFFIX.
"""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.bench.bounds import MAX_NEW_TOKENS, MAX_PROMPTS
from ddtree_tui.bench.workloads.base import Filler, WorkItem, WorkloadError

MAX_PROMPT_TOKENS = 1_000_000  # a generated system prompt or question


class GspSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    groups: int = Field(ge=1)
    prompts_per_group: int = Field(ge=1)
    system_tokens: int = Field(ge=0, le=MAX_PROMPT_TOKENS)
    question_tokens: int = Field(ge=1, le=MAX_PROMPT_TOKENS)
    output_tokens: int | None = Field(default=None, ge=1, le=MAX_NEW_TOKENS)

    @property
    def text(self) -> str:
        parts = [self.groups, self.prompts_per_group, self.system_tokens, self.question_tokens]
        return "gsp:" + ",".join(
            str(x) for x in [*parts, *([self.output_tokens] if self.output_tokens else [])]
        )


def parse_gsp(spec: str) -> GspSpec:
    """`gsp:G,P,SYS,Q[,OUT]` → GspSpec; WorkloadError names what is wrong."""
    body = spec.partition(":")[2]
    parts = [p.strip() for p in body.split(",")]
    names = ("groups G", "prompts per group P", "system prompt tokens SYS", "question tokens Q", "output OUT")
    if len(parts) not in (4, 5):
        raise WorkloadError(f"--prompts {spec!r}: expected gsp:G,P,SYS,Q[,OUT] (e.g. gsp:4,8,1024,64,128)")
    vals: list[int] = []
    for name, p in zip(names, parts, strict=False):
        if not p.isdigit():
            raise WorkloadError(f"--prompts {spec!r}: {name} {p!r} is not a whole number")
        vals.append(int(p))
    g, per, sys_t, q = vals[:4]
    if g < 1 or per < 1 or q < 1:
        raise WorkloadError(f"--prompts {spec!r}: G, P and Q must be at least 1")
    if g * per > MAX_PROMPTS:
        raise WorkloadError(f"--prompts {spec!r}: G × P = {g * per} prompts, more than {MAX_PROMPTS}")
    if max(sys_t, q) > MAX_PROMPT_TOKENS:
        raise WorkloadError(f"--prompts {spec!r}: a prompt part above {MAX_PROMPT_TOKENS} tokens")
    out = vals[4] if len(vals) == 5 else None
    if out is not None and not 1 <= out <= MAX_NEW_TOKENS:
        raise WorkloadError(f"--prompts {spec!r}: OUT must be 1…{MAX_NEW_TOKENS}")
    return GspSpec(groups=g, prompts_per_group=per, system_tokens=sys_t, question_tokens=q, output_tokens=out)


def gsp_items(spec: GspSpec, seed: int = 0) -> list[WorkItem]:
    """The G × P prompts, shuffled by `seed`; ids `gsp-g{group}-p{prompt}`."""
    fill = Filler(seed)
    out: list[WorkItem] = []
    for g in range(spec.groups):
        system = fill.block(f"gsp-sys-{g}", spec.system_tokens) if spec.system_tokens else None
        for i in range(spec.prompts_per_group):
            out.append(
                WorkItem(
                    id=f"gsp-g{g}-p{i}",
                    title=f"group {g} prompt {i}",
                    text=fill.block(f"gsp-q-{g}-{i}", spec.question_tokens),
                    system=system,
                    max_new_tokens=spec.output_tokens,
                )
            )
    random.Random(f"gsp:{seed}").shuffle(out)
    return out
