"""Host profile parsing: every error names the file, the line and the field; no input ever ends in a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddtree_tui.config import HostProfile, ProfileError, load_profile, load_profiles, parse_profile

REPO = Path(__file__).resolve().parents[2]

SIM = 'launcher = "sim"\n'


def err(text: str, path: str = "hosts/ct.toml") -> ProfileError:
    with pytest.raises(ProfileError) as ei:
        parse_profile(text, path)
    e = ei.value
    assert str(e).startswith(path), str(e)  # the file, always first
    return e


def where(e: ProfileError, line: int, field: str | None) -> None:
    """The message carries file:line and the field; the attributes agree with it."""
    assert e.line == line, str(e)
    assert e.field == field, str(e)
    assert str(e).startswith(f"{e.path}:{line}:"), str(e)
    if field:
        assert f"'{field}'" in str(e), str(e)


def test_a_full_profile_parses() -> None:
    text = """name = "ct200"
address = "ct200"
user = "root"
port = 2222
python = "/opt/sglang/.venv/bin/python"
workdir = "/var/tmp/ddtree"
known_hosts = "accept-new"
connect_timeout = 5
[env]
LD_LIBRARY_PATH = "/opt/lib"

[[service]]
name = "dflash"
algorithm = "dflash"
model = "/models/t"
draft_model = "/models/d"
port = 30010
gpus = [1]

[[service]]
name = "ddtree-shadow"
algorithm = "ddtree"
mode = "shadow-linear"
model = "/models/t"
draft_model = "/models/d"
budget = 32
port = 30011
"""
    p = parse_profile(text, "ct200.toml")
    assert p.name == "ct200" and p.port == 2222 and p.known_hosts == "accept-new"
    assert [s.name for s in p.services] == ["dflash", "ddtree-shadow"]
    assert p.get_service("ddtree-shadow").mode == "shadow-linear"  # type: ignore[union-attr]
    assert p.source == "ct200.toml" and not p.is_local


@pytest.mark.parametrize("name", ["local-demo.toml", "examples/ct129.toml", "examples/ct200.toml"])
def test_shipped_profiles_load(name: str) -> None:
    p = load_profile(REPO / "hostprofiles" / name)
    assert p.name and p.source == str(REPO / "hostprofiles" / name)


# --- every error path: file, line, field ---------------------------------------------------------------------


def test_unknown_top_level_key() -> None:
    e = err('name = "h"\naddress = "h"\nadress = "typo"\n')
    where(e, 3, "adress")
    assert "unknown key" in str(e)


def test_unknown_key_in_second_service() -> None:
    text = f'name = "h"\n\n[[service]]\nname = "a"\nport = 1\n{SIM}\n[[service]]\nname = "b"\nport = 2\n{SIM}prot = 3\n'
    where(err(text), 12, "service[1].prot")


def test_unknown_key_in_subtable_and_dotted_and_inline() -> None:
    where(err('name = "h"\n[telemetry]\nsource = "auto"\nintervall = 3\n'), 4, "telemetry.intervall")
    where(err('name = "h"\ntelemetry.intervall = 5\n'), 2, "telemetry.intervall")
    where(err('name = "h"\n\nservice = [{name = "a", port = 1, zzz = 1}]\n'), 3, "service[0].zzz")


def test_wrong_types() -> None:
    e = err('name = "h"\nconnect_timeout = "soon"\n')
    where(e, 2, "connect_timeout")
    assert "valid number" in str(e) and "'soon'" in str(e)
    where(err(f'name = "h"\n[[service]]\nname = "a"\n{SIM}port = "x"\n'), 5, "service[0].port")
    where(err(f'name = "h"\n[[service]]\nname = "a"\n{SIM}port = 70000\n'), 5, "service[0].port")
    where(err('name = "h"\nknown_hosts = "off"\n'), 2, "known_hosts")  # never off
    where(
        err('name = "h"\n[[service]]\nname = "a"\nport = 1\n[service.sim]\ndecode_rate = -1\n'),
        6,
        "service[0].sim.decode_rate",
    )


def test_missing_required_fields() -> None:
    e = err('address = "h"\n')
    assert e.field == "name" and "required" in str(e)
    # a missing service key points at the [[service]] table it belongs in
    where(err(f'name = "h"\n\n[[service]]\nname = "a"\n{SIM}'), 3, "service[0].port")


def test_bad_toml_syntax_names_the_line() -> None:
    e = err('name = "h"\naddress = "h"\nport = \n')
    assert e.line == 3 and str(e).startswith("hosts/ct.toml:3:") and "invalid TOML" in str(e)
    e2 = err('name = "h"\n[[service]\n')
    assert e2.line == 2


def test_duplicate_service_name_and_port() -> None:
    two = f'name = "h"\n[[service]]\nname = "a"\nport = 1\n{SIM}[[service]]\n'
    e = err(two + f'name = "a"\nport = 2\n{SIM}')
    where(e, 7, "service[1].name")
    assert "used twice" in str(e)
    e = err(two + f'name = "b"\nport = 1\n{SIM}')
    where(e, 8, "service[1].port")
    assert "already used by service 'a'" in str(e)


def test_ddtree_without_mode_and_mode_without_ddtree() -> None:
    e = err(
        f'name = "h"\n[[service]]\nname = "z"\nport = 3\n{SIM}[[service]]\nname = "a"\nport = 1\n{SIM}algorithm = "ddtree"\n'
    )
    where(e, 6, "service[1].mode")  # missing: the table that needs it
    assert "needs mode" in str(e)
    e = err(f'name = "h"\n[[service]]\nname = "a"\nport = 1\n{SIM}algorithm = "dflash"\nmode = "tree"\n')
    where(e, 7, "service[0].mode")  # present but wrong: its own line


def test_sglang_launcher_needs_model_and_draft_model() -> None:
    e = err('name = "h"\n[[service]]\nname = "a"\nport = 1\n')
    where(e, 2, "service[0].model")
    assert "needs 'model'" in str(e)
    e = err('name = "h"\n[[service]]\nname = "a"\nport = 1\nmodel = "/m"\n')
    where(e, 2, "service[0].draft_model")


@pytest.mark.parametrize(
    ("line", "field", "value"),
    [
        ("address", "address", "x; touch /tmp/pwned"),
        ("address", "address", "-oProxyCommand=sh"),
        ("address", "address", "$(id)"),
        ("user", "user", "root; rm -rf /"),
        ("user", "user", "-l"),
        ("name", "name", "../etc"),
    ],
)
def test_values_that_would_reach_a_shell_are_refused(line: str, field: str, value: str) -> None:
    base = {"name": "h", "address": "x"}
    base[line] = value
    text = "".join(f"{k} = {json.dumps(v)}\n" for k, v in base.items() if k != line)
    text += f"{line} = {json.dumps(value)}\n"
    e = err(text)
    assert e.field == field and e.line == text.count("\n")
    assert repr(value) in str(e)


def test_env_names_are_checked() -> None:
    where(err('name = "h"\n[env]\n"A B" = "x"\n'), 2, "env")
    where(
        err('name = "h"\n[[service]]\nname = "a"\nport = 1\nlauncher = "sim"\n[service.env]\n"A;B" = "x"\n'),
        6,
        "service[0].env",
    )


def test_file_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ProfileError, match=re.escape(f"{missing}: file not found")):
        load_profile(missing)
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"name = \xff\xfe\n")
    with pytest.raises(ProfileError, match="not UTF-8"):
        load_profile(binary)
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "h"\nbogus = 1\n')
    with pytest.raises(ProfileError) as ei:
        load_profile(bad)
    assert str(ei.value).startswith(f"{bad}:2:") and ei.value.field == "bogus"


def test_duplicate_host_names_across_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('name = "h"\n')
    b.write_text('# the same host again\nname = "h"\n')
    with pytest.raises(ProfileError) as ei:
        load_profiles([a, b])
    assert str(ei.value).startswith(f"{b}:2:") and ei.value.field == "name" and str(a) in str(ei.value)


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    e = err('name = "h"\nx = ' + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested too deeply" in str(e)


# --- property: any input gives a model or a located ProfileError --------------------------------------------


def _check_any(text: str) -> None:
    try:
        prof = parse_profile(text, "any.toml")
    except ProfileError as e:
        assert str(e).startswith("any.toml") and e.message.strip()
        assert e.line is None or 1 <= e.line <= max(1, text.count("\n") + 1)
    else:
        assert isinstance(prof, HostProfile)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_any_text(text: str) -> None:
    _check_any(text)


KEYS = [
    "name", "address", "user", "port", "python", "workdir", "known_hosts", "connect_timeout", "env",
    "service", "telemetry", "mode", "algorithm", "launcher", "model", "draft_model", "gpus", "budget",
    "sim", "source", "bogus",
]  # fmt: skip
_scalar = st.one_of(
    st.text(max_size=12),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.sampled_from(["h", "local", "ddtree", "sim", "tree", "strict", "accept-new", "127.0.0.1"]),
)
_key = st.one_of(st.sampled_from(KEYS), st.text(min_size=1, max_size=8))
_value: st.SearchStrategy[Any] = st.recursive(
    _scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_key, inner, max_size=4)),
    max_leaves=12,
)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(v), repr(v))
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"


def _toml(doc: dict[str, Any]) -> str:
    """A small TOML writer: scalars and inline values first, then [table]s and [[array]]s of tables."""
    lines = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines.append(f"[{json.dumps(k)}]")
            lines += [f"{json.dumps(kk)} = {_toml_value(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


_service = st.dictionaries(_key, _value, max_size=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_key, _value, max_size=10), st.lists(_service, max_size=3))
@pytest.mark.slow
def test_any_toml_document(doc: dict[str, Any], services: list[dict[str, Any]]) -> None:
    text = _toml(doc)
    if "service" not in doc:
        for svc in services:
            text += "[[service]]\n" + "".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in svc.items())
    _check_any(text)


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries(
        {"name": st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)},
        optional={
            "address": st.sampled_from(["local", "ct200", "10.0.0.1", "x; rm", ""]),
            "port": st.integers(-5, 70000),
            "known_hosts": st.sampled_from(["strict", "accept-new", "no"]),
            "connect_timeout": st.floats(-1, 400, allow_nan=False),
        },
    ),
    st.lists(
        st.fixed_dictionaries(
            {"name": st.sampled_from(["a", "b", "c"]), "port": st.integers(0, 3)},
            optional={
                "algorithm": st.sampled_from(["baseline", "dflash", "ddtree", "eagle"]),
                "mode": st.sampled_from(["linear", "shadow-linear", "tree", "x"]),
                "launcher": st.sampled_from(["sim", "sglang"]),
                "model": st.just("/m"),
                "draft_model": st.just("/d"),
            },
        ),
        max_size=4,
    ),
)
def test_near_valid_profiles(host: dict[str, Any], services: list[dict[str, Any]]) -> None:
    """Documents close to valid ones reach the model validators; errors there still carry a line."""
    text = _toml(host) + "".join(
        "[[service]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in s.items()) for s in services
    )
    try:
        parse_profile(text, "near.toml")
    except ProfileError as e:
        assert e.message.strip()
        if e.field and e.field.startswith("service["):
            assert e.line is not None, str(e)


@pytest.mark.parametrize(
    ("extra", "field", "got"),
    [
        ('port = "32110"', "port", "'32110'"),
        ("keepalive_count_max = true", "keepalive_count_max", "True"),
        (
            '[[service]]\nname = "a"\nport = 1\nlauncher = "sim"\ntrust_remote_code = "no"',
            "service[0].trust_remote_code",
            "'no'",
        ),
        ('[[service]]\nname = "a"\nport = "30010"\nlauncher = "sim"', "service[0].port", "'30010'"),
    ],
)
def test_strict_types_are_not_coerced(extra: str, field: str, got: str) -> None:
    """Issue 20: a string where a number goes, a bool where a count goes, "no" for a bool: errors with
    file, line and field, never silently converted (an integer is still fine where a float goes)."""
    text = f'name = "h"\naddress = "somehost"\nworkdir = "/w"\n{extra}\n'
    with pytest.raises(ProfileError) as e:
        parse_profile(text, "h.toml")
    key = field.rsplit(".", 1)[-1]
    line = next(n for n, x in enumerate(text.splitlines(), 1) if x.startswith(f"{key} ="))
    assert str(e.value).startswith(f"h.toml:{line}:") and f"field '{field}'" in str(e.value), str(e.value)
    assert f"(got {got})" in str(e.value)
    ok = parse_profile('name = "h"\naddress = "x"\nworkdir = "/w"\nconnect_timeout = 5\n', "h.toml")
    assert ok.connect_timeout == 5.0


def test_typo_is_reported_first_with_its_line_and_a_did_you_mean() -> None:
    """Issue 19: `prot = 30001` in a [[service]] was reported as `port is required (and 1 more)`."""
    text = 'name = "x"\n[[service]]\nname = "a"\nlauncher = "sim"\nalgorithm = "dflash"\n\n\nprot = 30001\n'
    e = err(text)
    where(e, 8, "service[0].prot")
    first, *rest = str(e).splitlines()
    assert "did you mean 'port'?" in first
    assert len(rest) == 1 and "hosts/ct.toml:2:" in rest[0] and "'service[0].port' is required" in rest[0]
    assert "more)" not in str(e)
