"""Service checks, per [[service]]: its port (free, ours, or held by another process), its model and draft
paths, and hybrid (linear attention / Mamba) targets under speculative decoding."""

from __future__ import annotations

from ddtree_tui.config import HostProfile, ServiceSpec
from ddtree_tui.doctor.facts import ModelConfig, PortHolder, PortProbe, ProbeReply
from ddtree_tui.doctor.model import Finding, fail


def is_hybrid(cfg: ModelConfig | None) -> str | None:
    """Why a model config is hybrid (linear attention / Mamba layers), or None."""
    if cfg is None:
        return None
    kinds = [k.lower() for k in cfg.layer_kinds]
    hits = sorted({k for k in kinds if "linear" in k or "mamba" in k or k in ("hybrid_override_pattern",)})
    if hits:
        return f"layer types {', '.join(hits)}"
    for mt in (cfg.model_type, cfg.text_model_type):
        mt = (mt or "").lower()
        if mt.startswith(("qwen3_next", "qwen3_5", "qwen3.5", "qwen3_6")) or "mamba" in mt or "jamba" in mt:
            return f"model_type {mt}"
    return None


def _port_finding(s: ServiceSpec, p: PortProbe) -> Finding:
    check, where = f"port:{s.name}", f"{s.bind}:{s.port}"
    if s.launcher == "external":  # a server we did not start: its port must be in use, by it
        free = p.free
        state = "free: the external server is not running" if free else "in use (external)"
        return Finding(check=check, status="warn" if free else "ok", evidence=f"{where} is {state}")
    if p.free:
        return Finding(check=check, status="ok", evidence=f"{where} is free")
    holder = p.holder or PortHolder()
    hp = holder.pid
    same_group = p.pidfile_pgid is not None and holder.pgid == p.pidfile_pgid
    if p.pidfile_alive and (hp is None or hp == p.pidfile_pid or same_group):
        return Finding(
            check=check,
            status="ok",
            evidence=f"{where} is held by our service {s.name} (pid {p.pidfile_pid})",
        )
    who = f"pid {hp} ({holder.name})" if hp else "another process"
    return fail(
        check,
        f"{where} is in use by {who}: {p.error or 'bind failed'}",
        f"stop that process or give service {s.name} another port",
    )


def _path_findings(profile: HostProfile, s: ServiceSpec, probe: ProbeReply) -> list[Finding]:
    paths, models = probe.paths, probe.models
    out: list[Finding] = []
    for what, path in (("model", s.model), ("draft_model", s.draft_model)):
        if not path:
            continue
        if not paths.get(path):
            out.append(
                fail(
                    f"{what}:{s.name}",
                    f"{path} does not exist on {profile.name}",
                    f"download it there or fix {what} in [[service]] {s.name}",
                )
            )
            continue
        cfg = models.get(path)
        note = "" if what != "model" or (cfg and cfg.has_config) else " (no config.json in it)"
        out.append(
            Finding(
                check=f"{what}:{s.name}",
                status="warn" if note else "ok",
                evidence=f"{path} exists{note}",
                fix="point model at the directory holding config.json" if note else None,
            )
        )
    return out


def _hybrid_findings(profile: HostProfile, s: ServiceSpec, probe: ProbeReply) -> list[Finding]:
    why = is_hybrid(probe.models.get(s.model or ""))
    if not why or s.algorithm not in ("dflash", "ddtree"):
        return []
    strategy = s.mamba_radix_cache_strategy or s.mamba_scheduler_strategy
    for flag in ("--mamba-radix-cache-strategy", "--mamba-scheduler-strategy"):
        if flag in s.extra_args:
            i = s.extra_args.index(flag)
            strategy = s.extra_args[i + 1] if i + 1 < len(s.extra_args) else strategy
    ev = f"target {s.model} is hybrid ({why}) and {s.name} uses speculative decoding ({s.algorithm})"
    # "auto" picks extra_buffer only with the overlap scheduler or paging (0.5.23 arg_groups/
    # overrides.py), and speculative decoding turns the overlap scheduler off: say it explicitly
    if strategy not in ("extra_buffer", "extra_buffer_lazy"):
        out = [
            fail(
                f"hybrid:{s.name}",
                f"{ev}; mamba_radix_cache_strategy is {strategy or 'unset (auto)'}",
                f'in [[service]] {s.name}: mamba_radix_cache_strategy = "extra_buffer"',
            )
        ]
    else:
        out = [Finding(check=f"hybrid:{s.name}", status="ok", evidence=f"{ev}; {strategy} is set")]
    if s.algorithm == "ddtree" and s.mode == "tree":
        flag = profile.ddtree_flags.allow_hybrid_unsafe or "[ddtree_flags] allow_hybrid_unsafe"
        if s.allow_hybrid_unsafe:
            out.append(
                Finding(
                    check=f"hybrid-tree:{s.name}",
                    status="warn",
                    evidence=f"DDTree tree mode on a hybrid target, allowed explicitly ({flag}): tree "
                    "verification of linear-attention/Mamba state is not exact",
                    fix='use mode = "shadow-linear" for trusted numbers',
                )
            )
        else:
            out.append(
                Finding(
                    check=f"hybrid-tree:{s.name}",
                    status="fail",
                    evidence=f"DDTree tree mode on a hybrid target needs the explicit switch {flag}",
                    fix=f"set allow_hybrid_unsafe = true in [[service]] {s.name} (knowing it is unsafe), "
                    'or mode = "shadow-linear"',
                )
            )
    return out


def service_findings(profile: HostProfile, probe: ProbeReply) -> list[Finding]:
    out: list[Finding] = []
    ports = {p.name: p for p in probe.ports or []}
    for s in profile.service:
        if s.name in ports:
            out.append(_port_finding(s, ports[s.name]))
        if s.launcher != "sglang":
            continue
        out += _path_findings(profile, s, probe)
        out += _hybrid_findings(profile, s, probe)
    return out
