"""The launch line of a service: argv for `python -m sglang.launch_server` per algorithm (or the simulator),
its environment, working directory, log file and pidfile.

Built in one place so that `launch --dry-run`, the TUI's confirm dialog and the real launch show and run the
same words. DDTree flag names come from the host's `ddtree_flags` table because every patched build spells
them differently.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ddtree_tui.config import HostProfile, ServiceSpec, redact_argv, redact_env, secret_values
from ddtree_tui.sim import process as simproc
from ddtree_tui.sim.config import SimConfig
from ddtree_tui.sim.process import argword

_SIM_DEFAULT = SimConfig()


class LaunchCommand(BaseModel):
    """What will run on the host, in which directory, with which environment, logging where."""

    model_config = ConfigDict(frozen=True)

    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)  # only what we add; the host's own env is inherited
    cwd: str
    log_path: str
    pidfile_path: str
    exitfile_path: str = ""

    def argv_hash(self) -> str:
        return argv_hash(self.argv)

    def display_argv(self) -> list[str]:
        """argv with the values of secret flags (`--api-key X`) masked: what logs, pidfiles and screens show."""
        return redact_argv(self.argv)

    def secrets(self) -> set[str]:
        """The secret values of this launch (secret-named env values, secret flags' values)."""
        return secret_values(self.argv, self.env)

    def display(self, redact: bool = True) -> str:
        """The shell line equivalent to the launch, secrets masked: cd, env, argv, log redirection."""
        env = redact_env(self.env) if redact else self.env
        argv = self.display_argv() if redact else self.argv
        words = [f"cd {shlex.quote(self.cwd)} &&"]
        if env:
            words.append("env")
            words.extend(shlex.quote(f"{k}={v}") for k, v in env.items())
        words.extend(shlex.quote(a) for a in argv)
        words.append(f">> {shlex.quote(self.log_path)} 2>&1")
        return " ".join(words)


def argv_hash(argv: list[str]) -> str:
    """A stable fingerprint of an argv (what /proc/<pid>/cmdline must still show for us to signal it)."""
    return hashlib.sha256(json.dumps(list(argv)).encode()).hexdigest()[:16]


def host_python(profile: HostProfile) -> str:
    """The Python to run on the host. A local profile saying plain "python3" means this interpreter (the venv
    ddtree-tui runs from), so the demo's simulator is importable; a remote host's value is used as written."""
    if profile.is_local and profile.python in ("python3", "python"):
        return sys.executable
    return profile.python


def workdir(profile: HostProfile) -> str:
    """The host's workdir; for local hosts `~` and relative paths (the demo's ".ddtree/demo") are resolved
    here; a remote host's is absolute (the profile refuses anything else)."""
    if profile.is_local:
        return str(Path(profile.workdir).expanduser().absolute())
    return profile.workdir


def service_paths(profile: HostProfile, name: str) -> dict[str, str]:
    wd = workdir(profile)
    return {
        "workdir": wd,
        "log": posixpath.join(wd, "logs", f"{name}.log"),
        "pidfile": posixpath.join(wd, "run", f"{name}.json"),
        "exitfile": posixpath.join(wd, "run", f"{name}.exit"),
        "stopping": posixpath.join(wd, "run", f"{name}.stopping"),
        "lockfile": posixpath.join(wd, "run", f"{name}.lock"),
    }


def sglang_argv(profile: HostProfile, spec: ServiceSpec) -> list[str]:
    """argv for `python -m sglang.launch_server` for baseline, DFlash or DDTree (shadow-linear / tree)."""
    a: list[str] = [host_python(profile), "-m", "sglang.launch_server"]
    a += ["--model-path", str(spec.model), "--host", spec.bind, "--port", str(spec.port)]
    a += ["--tp-size", str(spec.tp_size)]
    if spec.attention_backend:
        a += ["--attention-backend", spec.attention_backend]
    if spec.algorithm in ("dflash", "ddtree"):
        flags = profile.ddtree_flags
        algo = "DFLASH" if spec.algorithm == "dflash" else flags.algorithm
        a += ["--speculative-algorithm", algo, "--speculative-draft-model-path", str(spec.draft_model)]
        if spec.block_size is not None:
            a += ["--speculative-num-draft-tokens", str(spec.block_size)]
            a += ["--speculative-dflash-block-size", str(spec.block_size)]
        if spec.draft_attention_backend:
            a += ["--speculative-draft-attention-backend", spec.draft_attention_backend]
        if spec.algorithm == "ddtree":
            if spec.budget is not None:
                a += [flags.budget, str(spec.budget)]
            for switch in ddtree_switches(profile, spec):
                if not _is_env_switch(switch):
                    a.append(switch)
    if spec.mem_fraction_static is not None:
        a += ["--mem-fraction-static", argword(spec.mem_fraction_static)]
    strategy = mamba_strategy(spec)
    if strategy:
        a += ["--mamba-radix-cache-strategy", strategy]
    if spec.trust_remote_code:
        a.append("--trust-remote-code")
    if spec.served_model_name:
        a += ["--served-model-name", spec.served_model_name]
    if spec.enable_metrics:
        a.append("--enable-metrics")
    a += list(spec.extra_args)
    return a


def mamba_strategy(spec: ServiceSpec) -> str | None:
    """The mamba radix-cache strategy, under either key (`mamba_scheduler_strategy` is the old name)."""
    return spec.mamba_radix_cache_strategy or spec.mamba_scheduler_strategy


def ddtree_switches(profile: HostProfile, spec: ServiceSpec) -> list[str]:
    """The host build's switches this DDTree service's mode needs (flags or ENV=VALUE), as configured."""
    if spec.algorithm != "ddtree":
        return []
    flags = profile.ddtree_flags
    out: list[str] = []
    if spec.mode == "shadow-linear" and flags.shadow_linear:
        out.append(flags.shadow_linear)
    if spec.mode == "tree" and spec.allow_hybrid_unsafe and flags.allow_hybrid_unsafe:
        out.append(flags.allow_hybrid_unsafe)
    return out


def missing_ddtree_switches(profile: HostProfile, spec: ServiceSpec) -> list[str]:
    """The `[ddtree_flags]` keys this service's mode needs but the profile leaves unset."""
    if spec.algorithm != "ddtree" or spec.launcher != "sglang":
        return []
    flags = profile.ddtree_flags
    out = []
    if spec.mode == "shadow-linear" and not flags.shadow_linear:
        out.append("shadow_linear")
    if spec.mode == "tree" and spec.allow_hybrid_unsafe and not flags.allow_hybrid_unsafe:
        out.append("allow_hybrid_unsafe")
    return out


def _is_env_switch(word: str) -> bool:
    return not word.startswith("-") and "=" in word


def sim_argv(profile: HostProfile, spec: ServiceSpec) -> list[str]:
    """argv for the simulated SGLang server (`ddtree-tui sim`), by the simulator's own builder. Built without
    validation: a value the simulator refuses is its error at startup (in the log), as for SGLang."""
    cfg = SimConfig.model_construct(
        algorithm=spec.algorithm,
        mode=spec.mode,
        host=spec.bind,
        accept_length=spec.sim.accept_length,
        decode_rate=spec.sim.decode_rate,
        load_time=spec.sim.load_time,
        seed=spec.sim.seed,
        block_size=spec.block_size if spec.block_size is not None else _SIM_DEFAULT.block_size,
        budget=spec.budget if spec.algorithm == "ddtree" else None,
        hybrid=spec.sim.hybrid,
        allow_hybrid_unsafe=spec.allow_hybrid_unsafe,
        max_running_requests=spec.sim.max_running_requests,
        disconnect_abort_s=spec.sim.disconnect_abort_s,
        model_path=spec.model or _SIM_DEFAULT.model_path,
    )
    return simproc.sim_argv(
        cfg, spec.port, python=host_python(profile), realistic=spec.sim.realistic, extra=spec.extra_args
    )


def service_env(profile: HostProfile, spec: ServiceSpec) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES from gpus, then the host's env, then the service's own (later wins)."""
    env: dict[str, str] = {}
    if spec.gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in spec.gpus)
    env.update(profile.env)
    for switch in ddtree_switches(profile, spec):
        if _is_env_switch(switch):
            k, v = switch.split("=", 1)
            env[k] = v
    env.update(spec.env)
    return env


def build_launch(profile: HostProfile, spec: ServiceSpec) -> LaunchCommand:
    """The full launch of one service on one host."""
    argv = sim_argv(profile, spec) if spec.launcher == "sim" else sglang_argv(profile, spec)
    p = service_paths(profile, spec.name)
    return LaunchCommand(
        argv=argv,
        env=service_env(profile, spec),
        cwd=p["workdir"],
        log_path=p["log"],
        pidfile_path=p["pidfile"],
        exitfile_path=p["exitfile"],
    )
