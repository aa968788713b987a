"""What the doctor's checks read, typed: the probe's reply (`remote/probe.py` prints it on the host: its
output shape is the contract, field for field) and nvidia-smi's facts (`gpu.collect` gathers them).

The reply is parsed once, where the doctor receives it (`parse_reply`); a reply that does not match is a
finding naming the field, never a KeyError in a check. Values the probe copies from the host's own files
(a config.json's model_type, a module's __version__, a pidfile's pid) are read leniently: an odd value in
one file reads as text or None, it does not make the whole reply malformed.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, ValidationError


def _text(v: object) -> object:
    """A value the host's file chose: text as it is, None as None, anything else as its text."""
    return v if v is None or isinstance(v, str) else str(v)


def _pid(v: object) -> object:
    """A pidfile's pid or pgid: an int, or None (another value means no usable pid, as the probe reads it)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


HostText = Annotated[str | None, BeforeValidator(_text)]
PidfileInt = Annotated[int | None, BeforeValidator(_pid)]


class _Shape(BaseModel):
    """A part of the reply: exactly the probe's keys (one it does not print is a malformed reply)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PackageInfo(_Shape):
    """One package the probe imported (`probe_packages`): the torch-only keys are None for the others."""

    dist_version: HostText = None
    ok: bool = False
    version: HostText = None
    file: HostText = None
    cuda: HostText = None
    cuda_available: bool | None = None
    device_count: int | None = None
    capabilities: list[tuple[int, int]] = Field(default_factory=list)
    cuda_error: str | None = None
    missing: bool = False
    error: str | None = None
    seconds: float | None = None


class LdEntry(_Shape):
    dir: str
    exists: bool = False
    cudart_majors: list[int] = Field(default_factory=list)


class CudaWheel(_Shape):
    path: str
    major: int | None = None


class Libs(_Shape):
    """The CUDA runtimes reachable: LD_LIBRARY_PATH's directories and the nvidia-* wheels' libcudart."""

    ld_library_path: list[LdEntry] = Field(default_factory=list)
    wheels: list[CudaWheel] = Field(default_factory=list)


class Nvcc(_Shape):
    path: str
    version: str | None = None
    error: str | None = None


class ModelConfig(_Shape):
    """One model directory and what its config.json says (`model_config`)."""

    path: str
    exists: bool = False
    is_dir: bool = False
    has_config: bool = False
    model_type: HostText = None
    architectures: JsonValue = None
    text_model_type: HostText = None
    layer_kinds: list[str] = Field(default_factory=list)
    config_error: str | None = None


class PortHolder(_Shape):
    pid: int | None = None
    name: str | None = None
    pgid: int | None = None


class PortProbe(_Shape):
    """One [[service]]'s port: free, or who holds it, and what our pidfile says (`probe_ports`)."""

    name: str
    port: int
    bind: str
    free: bool = False
    error: str | None = None
    holder: PortHolder | None = None
    pidfile_pid: PidfileInt = None
    pidfile_pgid: PidfileInt = None
    pidfile_alive: bool = False


class Workdir(_Shape):
    """The workdir: trust (the launcher's own check), writable, and the disk under it (`probe_workdir`)."""

    path: str
    exists: bool = False
    trust: str | None = None
    existing: str | None = None
    writable: bool = False
    error: str | None = None
    free_mb: int | None = None
    total_mb: int | None = None
    statvfs_error: str | None = None


class ProbeEnv(_Shape):
    ld_library_path: str | None = Field(default=None, alias="LD_LIBRARY_PATH")
    cuda_visible_devices: str | None = Field(default=None, alias="CUDA_VISIBLE_DEVICES")


class ProbeReply(_Shape):
    """The probe's whole reply. A part the probe could not gather is None (its error is in `errors`);
    `packages` and `loaded_libs` are only there when packages were asked for."""

    probe: Literal[1]
    python: str
    executable: str | None = None
    errors: list[str] = Field(default_factory=list)
    workdir: Workdir | None = None
    paths: dict[str, bool] = Field(default_factory=dict)
    models: dict[str, ModelConfig | None] = Field(default_factory=dict)
    ports: list[PortProbe] | None = None
    nvcc: Nvcc | None = None
    libs: Libs | None = None
    packages: dict[str, PackageInfo] = Field(default_factory=dict)
    loaded_libs: list[str] | None = None
    env: ProbeEnv = Field(default_factory=ProbeEnv)

    def as_json(self) -> dict[str, JsonValue]:
        """The reply as the probe printed it (its keys, none added): the report's facts for --json."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


def parse_reply(raw: object) -> ProbeReply | str:
    """The probe's decoded JSON as a ProbeReply, or what is wrong with it (the field and why) in words."""
    try:
        return ProbeReply.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the reply"
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        return f"{where}: {first['msg']}{more}"


class SmiGpu(BaseModel):
    index: int
    uuid: str | None = None
    name: str | None = None
    compute_cap: str | None = None
    driver_version: str | None = None
    mem_total_mb: int | None = None
    mem_used_mb: int | None = None


class SmiApp(BaseModel):
    """One row of `--query-compute-apps`: a process holding GPU memory."""

    pid: int
    name: str
    used_mb: int | None = None
    gpu_uuid: str


class SmiFailed(BaseModel):
    """nvidia-smi could not answer: its error, and whether it is not installed at all."""

    error: str
    missing: bool = False


class SmiFacts(BaseModel):
    """What nvidia-smi said: the GPUs that answer, the lost ones (index → the cell they read), handle errors,
    the driver's CUDA version and who holds GPU memory."""

    gpus: list[SmiGpu] = Field(default_factory=list)
    lost: dict[int, str] = Field(default_factory=dict)
    handle_errors: list[str] = Field(default_factory=list)
    driver_cuda: str | None = None
    apps: list[SmiApp] = Field(default_factory=list)
    raw_error: str | None = None
