"""Host profiles: TOML files, one a host, loaded with tomllib into strict pydantic models.

Every error names the file, the line, the field and what was expected, because a profile is edited by hand
and a traceback helps nobody at 2 a.m.
"""

from __future__ import annotations

import difflib
import re
import tomllib
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ddtree_tui.config_errors import explain, field_name, grep_key, locate_line
from ddtree_tui.lib import paths
from ddtree_tui.model.modes import display_mode as display_mode  # re-exported

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
# names that look like they hold a secret: environment variables (WANDB_KEY, PRIVATE_KEY, AWS_ACCESS_KEY_ID,
# HF_TOKEN, ...) and command-line flags (--api-key, --hf-token, --admin-api-key, ...)
SECRET_KEY_RE = re.compile(
    r"(SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE|COOKIE|API[_-]?KEY|ACCESS[_-]?KEY"
    r"|(^|[_-])(TOKEN|KEYS?|PASS|AUTH|AUTHORIZATION|BEARER|SIGNATURE)($|[_-]))",
    re.IGNORECASE,
)

Algorithm = Literal["baseline", "dflash", "ddtree"]
DDTreeMode = Literal["linear", "shadow-linear", "tree"]


class ProfileError(Exception):
    """A profile that cannot be used; the message names file, line, field and what was expected."""

    def __init__(self, path: Path | str, line: int | None, field: str | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        where = f"{self.path}:{line}" if line else self.path
        what = f" field '{field}'" if field else ""
        super().__init__(f"{where}:{what} {message}".replace(": ", ": ", 1))


class _Strict(BaseModel):
    # strict: `port = "32110"`, `keepalive_count_max = true` or `trust_remote_code = "no"` are errors, not
    # silently coerced (an integer is still accepted where a float is expected)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class DDTreeFlags(_Strict):
    """How a patched SGLang build spells DDTree's switches; every fork names them differently.

    No SGLang release has DDTree (0.5.23's `SpeculativeAlgorithm.from_string("DDTREE")` raises). The defaults
    are the open upstream PR's spelling (`DDTREE`, `--speculative-ddtree-budget`); the shadow-linear and
    hybrid-unsafe switches exist only in private builds, so they have no default: set them to your build's
    words (`ddtree-tui doctor HOST` lists the DDTree flags the host's build has). A value is a flag
    (`--my-shadow-linear`) or an environment assignment (`SGLANG_DDTREE_SHADOW=1`) for builds that read one.
    """

    algorithm: str = "DDTREE"
    budget: str = "--speculative-ddtree-budget"
    shadow_linear: str | None = None
    allow_hybrid_unsafe: str | None = None


class SimOptions(_Strict):
    """Knobs of the simulated server (launcher = "sim")."""

    accept_length: float | None = Field(default=None, gt=0, le=64)
    decode_rate: float = Field(default=40.0, gt=0, le=100000, description="verify passes per second")
    load_time: float = Field(default=2.0, ge=0, le=3600)
    seed: int = 0
    realistic: bool = False  # SGLang 0.5.23's /health latency, prefill time and batch slowdown
    hybrid: bool = (
        False  # the simulated target is a hybrid GDN/Mamba model: tree verify needs allow_hybrid_unsafe
    )
    max_running_requests: int = Field(default=0, ge=0, le=100000)  # 0: no cap; beyond it requests queue
    # a stream whose client went decodes on this long, then aborts (SGLang 0.5.23: 2 s); 0: at once
    disconnect_abort_s: float = Field(default=0.0, ge=0, le=60)


class TelemetryOptions(_Strict):
    """Where GPU numbers come from: the host itself, or a replay of a recording (always labelled)."""

    source: Literal["auto", "nvml", "nvidia-smi", "replay", "none", "prometheus"] = "auto"
    replay: str | None = None
    interval_ms: int = Field(default=1000, ge=100, le=60000)
    # source = "prometheus": DCGM-exporter series read through a Prometheus server's HTTP API
    prometheus_url: str | None = Field(default=None, pattern=r"^https?://")
    host_label: str = Field(default="Hostname", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    host_value: str | None = None  # the label's value for this host (default: the profile's name)

    @model_validator(mode="after")
    def _prometheus_needs_url(self) -> TelemetryOptions:
        if self.source == "prometheus" and not self.prometheus_url:
            raise ValueError('source = "prometheus" needs prometheus_url = "http://HOST:9090"')
        return self


class AlertOptions(_Strict):
    """When the fleet raises an alert for this host (ddtree_tui.alerts)."""

    accept_collapse_ratio: float = Field(default=0.5, gt=0, lt=1, description="of the running median")
    accept_window: int = Field(default=60, ge=3, le=100000, description="accept-length samples in the median")
    accept_min_samples: int = Field(default=10, ge=2, le=100000)
    restart_count: int = Field(default=3, ge=1, le=1000, description="restarts within restart_window_s")
    restart_window_s: float = Field(default=600.0, gt=0, le=86400)
    throttle_reasons: list[str] = Field(
        default_factory=lambda: [
            "hw_slowdown",
            "hw_thermal_slowdown",
            "sw_thermal_slowdown",
            "hw_power_brake_slowdown",
        ]
    )
    gpu_faults: bool = True


class ServiceSpec(_Strict):
    name: Annotated[str, Field(pattern=NAME_RE)]
    algorithm: Algorithm = "dflash"
    mode: DDTreeMode | None = None
    launcher: Literal["sglang", "sim", "external"] = "sglang"  # external: running already, not ours to start
    model: str | None = None
    draft_model: str | None = None
    port: int = Field(ge=1, le=65535)
    bind: str = "127.0.0.1"
    gpus: list[Annotated[int, Field(ge=0, le=1023)]] = Field(default_factory=list)
    tp_size: int = Field(default=1, ge=1, le=64)
    attention_backend: str | None = None
    draft_attention_backend: str | None = None
    block_size: int | None = Field(default=None, ge=1, le=256)
    budget: int | None = Field(default=None, ge=1, le=4096)
    mem_fraction_static: float | None = Field(default=None, gt=0, le=1)
    mamba_radix_cache_strategy: str | None = None  # auto | no_buffer | extra_buffer | extra_buffer_lazy
    mamba_scheduler_strategy: str | None = None  # the old key, same setting; launched as the new flag
    trust_remote_code: bool = True
    allow_hybrid_unsafe: bool = False
    served_model_name: str | None = None
    enable_metrics: bool = True
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    startup_timeout: float = Field(default=900, gt=0, le=86400)
    kill_timeout: float = Field(default=30, gt=0, le=3600)
    sim: SimOptions = Field(default_factory=SimOptions)

    @model_validator(mode="after")
    def _check_algorithm(self) -> ServiceSpec:
        # _LocatedError: the message names the field the fix goes in, not just the [[service]] table
        if self.algorithm == "ddtree" and self.mode not in ("shadow-linear", "tree"):
            raise _LocatedError(("mode",), 'algorithm \'ddtree\' needs mode = "shadow-linear" or "tree"')
        if self.algorithm != "ddtree" and self.mode not in (None, "linear"):
            raise _LocatedError(("mode",), f"mode '{self.mode}' only applies to algorithm 'ddtree'")
        if self.launcher == "sglang" and not self.model:
            raise _LocatedError(("model",), "launcher 'sglang' needs 'model' (the target model path)")
        if self.launcher == "sglang" and self.algorithm in ("dflash", "ddtree") and not self.draft_model:
            raise _LocatedError(
                ("draft_model",),
                f"algorithm '{self.algorithm}' needs 'draft_model' (the DFlash drafter path)",
            )
        return self

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
                raise ValueError(f"environment variable name {k!r} is not a valid name")
        return v

    @property
    def display_mode(self) -> str:
        """The mode a human reads (see `display_mode`)."""
        return display_mode(self.algorithm, self.mode)


class SweepPreset(_Strict):
    """A ready-made tuning-lab sweep (`ddtree-tui sweep HOST/SVC --preset NAME`); keys as `--set` takes them."""

    name: Annotated[str, Field(pattern=NAME_RE)]
    service: Annotated[str, Field(pattern=NAME_RE)]
    set: dict[str, list[str | int | float | bool]] = Field(default_factory=dict)
    load: str | None = None  # e.g. "concurrency:1,8"
    prompts: str = "seed3"
    repeats: int = Field(default=3, ge=1, le=100)
    max_new_tokens: int = Field(default=128, ge=1, le=100000)
    objective: Literal["tok_s", "goodput", "ttft"] = "tok_s"
    constraints: list[str] = Field(default_factory=list)
    strategy: Literal["grid", "one-at-a-time"] = "grid"
    description: str | None = None


class HostProfile(_Strict):
    name: Annotated[str, Field(pattern=NAME_RE)]
    address: str = "local"
    user: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    python: str = "python3"
    workdir: str = "/var/tmp/ddtree"
    known_hosts: Literal["strict", "accept-new"] = "strict"
    connect_timeout: float = Field(default=10, gt=0, le=300)
    keepalive_interval: float = Field(default=15, gt=0, le=3600)
    keepalive_count_max: int = Field(default=3, ge=1, le=100)
    description: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    ddtree_flags: DDTreeFlags = Field(default_factory=DDTreeFlags)
    telemetry: TelemetryOptions = Field(default_factory=TelemetryOptions)
    alerts: AlertOptions = Field(default_factory=AlertOptions)
    service: list[ServiceSpec] = Field(default_factory=list)
    sweep: list[SweepPreset] = Field(default_factory=list)

    # where the profile came from, for messages; not a TOML key
    source: str | None = Field(default=None, exclude=True)

    @property
    def is_local(self) -> bool:
        return self.address == "local"

    @property
    def services(self) -> list[ServiceSpec]:
        return self.service

    def get_service(self, name: str) -> ServiceSpec | None:
        return next((s for s in self.service if s.name == name), None)

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.:\-\[\]%]+", v) or v.startswith("-"):
            raise ValueError('expected a hostname, an ssh config alias, an IP address or "local"')
        return v

    @field_validator("user")
    @classmethod
    def _user(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*\$?", v):
            raise ValueError("expected a user name")
        return v

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        return ServiceSpec._env_names(v)

    @model_validator(mode="after")
    def _unique(self) -> HostProfile:
        if not self.is_local and not self.workdir.startswith("/"):
            # a relative or ~ path would be resolved against whatever directory each helper runs in
            raise _LocatedError(
                ("workdir",),
                f"workdir {self.workdir!r} of a remote host must be an absolute path on that host "
                '(~ and relative paths are not expanded there), e.g. workdir = "/home/USER/ddtree"',
            )
        names: set[str] = set()
        ports: dict[int, str] = {}
        for i, s in enumerate(self.service):
            if s.name in names:
                raise _LocatedError(("service", i, "name"), f"service name '{s.name}' is used twice")
            names.add(s.name)
            if s.port in ports:
                raise _LocatedError(
                    ("service", i, "port"), f"port {s.port} is already used by service '{ports[s.port]}'"
                )
            ports[s.port] = s.name
        return self


class _LocatedError(ValueError):
    def __init__(self, loc: tuple[Any, ...], msg: str) -> None:
        self.loc = loc
        super().__init__(msg)


MASK = "***"


def is_secret_name(name: str) -> bool:
    """An environment variable or flag name that looks like it holds a secret (`--api-key`, `WANDB_KEY`)."""
    return bool(SECRET_KEY_RE.search(name.lstrip("-")))


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """Env with secret-looking values masked, for anything shown or logged."""
    return {k: (MASK if is_secret_name(k) and v else v) for k, v in env.items()}


def _is_secret_flag(word: str) -> bool:
    return word.startswith("--") and is_secret_name(word.split("=", 1)[0])


def redact_argv(argv: Sequence[str]) -> list[str]:
    """argv with the values of secret-looking flags masked: `--api-key X` and `--api-key=X` show `***`."""
    out: list[str] = []
    mask_next = False
    for a in argv:
        if mask_next and not a.startswith("--"):
            out.append(MASK)
            mask_next = False
            continue
        mask_next = False
        if _is_secret_flag(a):
            if "=" in a:
                out.append(a.split("=", 1)[0] + "=" + MASK)
            else:
                out.append(a)
                mask_next = True
            continue
        out.append(a)
    return out


def secret_values(argv: Sequence[str], env: dict[str, str]) -> set[str]:
    """The secret values in an argv and an env (by flag and by name), to mask wherever text is shown."""
    vals: set[str] = {v for k, v in env.items() if is_secret_name(k) and v}
    for i, a in enumerate(argv):
        if _is_secret_flag(a):
            if "=" in a:
                vals.add(a.split("=", 1)[1])
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                vals.add(argv[i + 1])
    return {v for v in vals if len(v) >= 3}


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """text with every known secret value replaced by ***, longest first."""
    for v in sorted(secrets, key=len, reverse=True):
        if v in text:
            text = text.replace(v, MASK)
    return text


def parse_profile(text: str, path: Path | str = "<profile>") -> HostProfile:
    """Parse one profile's TOML text; raise ProfileError naming file, line, field and expectation."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+)", str(e))
        raise ProfileError(path, int(m.group(1)) if m else None, None, f"invalid TOML: {e}") from None
    except RecursionError:
        raise ProfileError(path, None, None, "invalid TOML: arrays or tables nested too deeply") from None
    try:
        return HostProfile.model_validate({**data, "source": str(path)} if "source" not in data else data)
    except _LocatedError as e:
        raise ProfileError(path, locate_line(text, e.loc), field_name(e.loc), str(e)) from None
    except RecursionError:
        raise ProfileError(path, None, None, "values nested too deeply") from None
    except ValidationError as e:
        raise _profile_error(text, path, e) from None


def _model_at(loc: Sequence[Any]) -> type[BaseModel] | None:
    """The pydantic model that holds the last key of `loc` (HostProfile, ServiceSpec, ...), for hints."""
    model: type[BaseModel] = HostProfile
    for k in loc[:-1]:
        if isinstance(k, int):
            continue
        f = model.model_fields.get(str(k))
        if f is None:
            return None
        found = None
        stack: list[Any] = [f.annotation]
        while stack:
            t = stack.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                found = t
                break
            stack.extend(typing.get_args(t))
        if found is None:
            return None
        model = found
    return model


def _did_you_mean(loc: Sequence[int | str]) -> str | None:
    """`prot` -> `port`: the closest field name where an unknown key was found."""
    if not loc or not isinstance(loc[-1], str):
        return None
    model = _model_at(loc)
    if model is None:
        return None
    names = [n for n in model.model_fields if n != "source"]
    close = difflib.get_close_matches(loc[-1], names, n=1, cutoff=0.6)
    return close[0] if close else None


def _profile_error(text: str, path: Path | str, e: ValidationError) -> ProfileError:
    """Every validation error, unknown keys first (a typo'd key is usually why a required one is
    missing), each with its line, its field and, for an unknown key, the field it probably meant."""
    located: list[tuple[int | None, str | None, str]] = []
    errors = sorted(e.errors(), key=lambda x: 0 if x.get("type") == "extra_forbidden" else 1)
    for err in errors:
        loc = tuple(err.get("loc", ()))
        message = explain(err)
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, _LocatedError):
            # a model-level check that knows its field: the model's loc + the field inside it
            loc, message = loc + tuple(cause.loc), str(cause)
        if err.get("type") == "extra_forbidden":
            hint = _did_you_mean(loc)
            if hint:
                message = f"unknown key (did you mean '{hint}'?)"
        line = locate_line(text, loc) if loc else None
        if line is None and loc and err.get("type") != "missing":
            line = grep_key(text, loc)
        if line is None and len(loc) > 1:
            line = locate_line(text, loc[:-1])  # at least the table it belongs to
        located.append((line, field_name(loc) or None, message))
    line, field, message = located[0]
    for ln, fld, msg in located[1:]:
        where = f"{path}:{ln}" if ln else str(path)
        message += f"\n  {where}:{f' field {fld!r}' if fld else ''} {msg}"
    return ProfileError(path, line, field, message)


# a host profile is a few KiB of TOML; a bigger file is not one (and is never read whole to find that out)
MAX_PROFILE_BYTES = 1024 * 1024


def read_profile_text(path: Path | str) -> str:
    """A profile file's text, read at most MAX_PROFILE_BYTES (+1 to tell it is bigger); ProfileError naming
    the file when it is missing, unreadable, not UTF-8 or too big."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_PROFILE_BYTES + 1)
    except FileNotFoundError:
        raise ProfileError(p, None, None, "file not found") from None
    except IsADirectoryError:
        raise ProfileError(p, None, None, "is a directory, not a profile file") from None
    except OSError as e:
        raise ProfileError(p, None, None, f"cannot read: {e.strerror or e}") from None
    if len(raw) > MAX_PROFILE_BYTES:
        raise ProfileError(
            p,
            None,
            None,
            f"larger than {MAX_PROFILE_BYTES // 1024} KiB: not a host profile (not read further)",
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProfileError(p, None, None, f"not UTF-8 text: {e}") from None


def load_profile(path: Path | str) -> HostProfile:
    p = Path(path)
    text = read_profile_text(p)
    prof = parse_profile(text, p)
    if prof.source != str(p):
        prof = prof.model_copy(update={"source": str(p)})
    return prof


def load_profiles(paths: Iterable[Path | str]) -> list[HostProfile]:
    """Load several profiles; host names must be unique across them."""
    out: list[HostProfile] = []
    seen: dict[str, str] = {}
    for p in paths:
        prof = load_profile(p)
        if prof.name in seen:
            text = read_profile_text(p)
            raise ProfileError(
                p,
                locate_line(text, ("name",)),
                "name",
                f"host name '{prof.name}' is also used by {seen[prof.name]}",
            )
        seen[prof.name] = str(p)
        out.append(prof)
    return out


def profile_dir_files(directory: Path | str) -> list[Path]:
    d = Path(directory)
    if not d.is_dir():
        raise ProfileError(d, None, None, "not a directory of host profiles")
    return sorted(d.glob("*.toml"))


def packaged_demo_profile() -> Path:
    """The shipped local-demo profile: next to the package in a checkout, or inside it when installed."""
    here = Path(__file__).resolve().parent
    for cand in (here.parent / "hostprofiles" / "local-demo.toml", here / "data" / "local-demo.toml"):
        if cand.is_file():
            return cand
    raise ProfileError("local-demo.toml", None, None, "the demo profile is missing from this installation")


def default_profile_paths(cwd: Path | None = None) -> list[Path]:
    """./hostprofiles/ if it exists, else the user's config directory."""
    base = cwd or Path.cwd()
    local = base / paths.PROJECT_PROFILES
    if local.is_dir():
        return profile_dir_files(local)
    user = paths.user_profiles_dir()
    if user.is_dir():
        return profile_dir_files(user)
    return []


def resolve_profiles(
    profile_files: Sequence[str] | None, profiles_dir: str | None, demo: bool = False
) -> list[HostProfile]:
    if demo and not profile_files and not profiles_dir:
        return load_profiles([packaged_demo_profile()])
    paths: list[Path] = []
    if profiles_dir:
        paths.extend(profile_dir_files(profiles_dir))
    if profile_files:
        paths.extend(Path(p) for p in profile_files)
    if not paths:
        paths = default_profile_paths()
    return load_profiles(paths)


def find_service(profiles: Sequence[HostProfile], ref: str) -> tuple[HostProfile, ServiceSpec]:
    """Resolve HOST/SVC; raises ValueError with the choices when it names nothing."""
    if "/" not in ref:
        raise ValueError(f"expected HOST/SVC, got {ref!r}")
    host_name, svc_name = ref.split("/", 1)
    host = next((h for h in profiles if h.name == host_name), None)
    if host is None:
        raise ValueError(f"no host '{host_name}' (known: {', '.join(h.name for h in profiles) or 'none'})")
    svc = host.get_service(svc_name)
    if svc is None:
        names = ", ".join(s.name for s in host.service) or "none"
        raise ValueError(f"host '{host_name}' has no service '{svc_name}' (known: {names})")
    return host, svc
