"""ServiceRef and the intent union: parsed once at a face, carried typed, serialised back as HOST/SVC."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from ddtree_tui.model.intents import INTENTS, Kill, Launch, Move, Outcome, Todo, parse_intent
from ddtree_tui.model.ref import ServiceRef
from ddtree_tui.model.snapshot import ActionResult


class _Holder(BaseModel):
    ref: ServiceRef


def test_a_ref_parses_prints_and_hashes() -> None:
    r = ServiceRef.parse(" ct200/dflash ")
    assert (r.host, r.service) == ("ct200", "dflash")
    assert str(r) == "ct200/dflash"
    assert {r: 1}[ServiceRef("ct200", "dflash")] == 1
    assert ServiceRef.parse(r) is r


@pytest.mark.parametrize("bad", ["nohost", "/svc", "host/", "a/b/c", "a b/c", ""])
def test_a_bad_ref_is_a_clear_value_error(bad: str) -> None:
    with pytest.raises(ValueError, match="expected HOST/SVC"):
        ServiceRef.parse(bad)


def test_a_ref_field_takes_and_gives_the_string() -> None:
    h = _Holder.model_validate_json('{"ref": "local/dflash"}')
    assert h.ref == ServiceRef("local", "dflash")
    assert h.model_dump() == {"ref": "local/dflash"}
    assert h.model_dump_json() == '{"ref":"local/dflash"}'
    with pytest.raises(ValidationError, match="expected HOST/SVC"):
        _Holder(ref="local")  # type: ignore[arg-type]


def test_one_union_for_every_face() -> None:
    assert parse_intent("launch", {"ref": "local/a"}) == Launch(ref=ServiceRef("local", "a"))
    assert parse_intent("kill", {"ref": "local/a", "timeout": 3}) == Kill(
        ref=ServiceRef("local", "a"), timeout=3
    )
    m = INTENTS.validate_json('{"kind": "move", "ref": "a/b", "to_host": "c"}')
    assert isinstance(m, Move) and m.to_host == "c"
    t = parse_intent("todo", {"action": "add", "content": "x"})
    assert isinstance(t, Todo) and t.edit.content == "x"
    with pytest.raises(KeyError):
        parse_intent("explode", {})
    with pytest.raises(ValidationError):
        parse_intent("launch", {"ref": "local/a", "bogus": 1})


def test_an_outcome_keeps_the_typed_detail() -> None:
    res = ActionResult(ok=False, message="no", suggestion="try")
    out = Outcome.of_action(res)
    assert (out.ok, out.message, out.suggestion, out.action) == (False, "no", "try", res)
