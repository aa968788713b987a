"""The doctor's probe: what the host has (Python, GPUs, CUDA libraries, packages, ports, models, disk).

Runs with Python >= 3.6 and the standard library only; reads the request (JSON) on stdin and writes one line,
`@@DDTREE-DOCTOR@@` + JSON (the marker because the libraries it imports may print to stdout).
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Set

from ddtree_tui.remote.ports import bind_error, port_holder_pid
from ddtree_tui.remote.trust import secure_dir

req: Dict[str, Any] = json.loads(sys.stdin.read() or "{}")
errors: List[str] = []
out: Dict[str, Any] = {
    "probe": 1,
    "python": sys.version.split()[0],
    "executable": sys.executable,
    "errors": errors,
}


def safe(fn: Callable[..., Any], *a: Any) -> Any:
    try:
        return fn(*a)
    except BaseException as e:
        errors.append("%s: %s" % (type(e).__name__, e))
        return None


def dist_version(names: List[str]) -> Optional[str]:
    try:
        from importlib import metadata
    except ImportError:
        return None
    for n in names:
        try:
            return metadata.version(n)
        except Exception:
            pass
    return None


DISTS = {
    "torch": ["torch"],
    "sglang": ["sglang"],
    "sgl_kernel": ["sglang-kernel", "sgl-kernel", "sgl_kernel"],
    "flashinfer": ["flashinfer-python", "flashinfer"],
    "triton": ["triton"],
    "transformers": ["transformers"],
}


def probe_packages() -> Dict[str, Any]:
    pk: Dict[str, Any] = {}
    for name in req.get("packages", []):
        info: Dict[str, Any] = {"dist_version": dist_version(DISTS.get(name, [name]))}
        t0 = time.time()
        try:
            mod = __import__(name)
            info["ok"] = True
            info["version"] = getattr(mod, "__version__", None) or info["dist_version"]
            info["file"] = getattr(mod, "__file__", None)
            if name == "torch":
                info["cuda"] = getattr(mod.version, "cuda", None)
                try:
                    info["cuda_available"] = bool(mod.cuda.is_available())
                    n = mod.cuda.device_count() if info["cuda_available"] else 0
                    info["device_count"] = n
                    info["capabilities"] = [list(mod.cuda.get_device_capability(i)) for i in range(n)]
                except BaseException as e:
                    info["cuda_error"] = "%s: %s" % (type(e).__name__, e)
        except BaseException as e:
            info["ok"] = False
            info["missing"] = isinstance(e, ImportError) and getattr(e, "name", None) == name
            info["error"] = ("%s: %s" % (type(e).__name__, e))[-2000:]
        info["seconds"] = round(time.time() - t0, 2)
        pk[name] = info
    return pk


def cudart_major(fname: str) -> Optional[int]:
    m = re.match(r"libcudart\.so\.(\d+)", fname)
    return int(m.group(1)) if m else None


def probe_libs() -> Dict[str, Any]:
    ld = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    entries = []
    for d in ld:
        found = (cudart_major(os.path.basename(f)) for f in glob.glob(os.path.join(d, "libcudart.so.*")))
        majors = sorted({m for m in found if m is not None})
        entries.append({"dir": d, "exists": os.path.isdir(d), "cudart_majors": majors})
    wheels = []
    seen: Set[str] = set()
    for sp in sys.path:
        nv = os.path.join(sp or ".", "nvidia")
        if not os.path.isdir(nv) or nv in seen:
            continue
        seen.add(nv)
        for f in sorted(glob.glob(os.path.join(nv, "*", "lib", "libcudart.so.*"))):
            wheels.append({"path": f, "major": cudart_major(os.path.basename(f))})
    return {"ld_library_path": entries, "wheels": wheels}


def loaded_libs() -> Optional[List[str]]:
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return None
    keep = [p for p in paths if re.search(r"lib(cudart|nvrtc|cublas)\.so\.\d+", os.path.basename(p))]
    return sorted(keep)


def nvcc() -> Optional[Dict[str, Any]]:
    cands: List[str] = []
    for d in os.environ.get("PATH", "").split(":"):
        cands.append(os.path.join(d, "nvcc"))
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            cands.append(os.path.join(home, "bin", "nvcc"))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            try:
                txt = subprocess.run(
                    [c, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20
                ).stdout.decode(errors="replace")
            except Exception as e:
                return {"path": c, "error": str(e)}
            m = re.search(r"release (\d+)\.(\d+)", txt)
            return {"path": c, "version": "%s.%s" % m.groups() if m else None}
    return None


def model_config(path: str) -> Dict[str, Any]:
    p = os.path.expanduser(path)
    r: Dict[str, Any] = {"path": path, "exists": os.path.exists(p), "is_dir": os.path.isdir(p)}
    cfg = os.path.join(p, "config.json")
    r["has_config"] = os.path.isfile(cfg)
    if r["has_config"]:
        try:
            with open(cfg) as f:
                c = json.load(f)
            subs = [c] + [
                c[k] for k in ("text_config", "language_config", "llm_config") if isinstance(c.get(k), dict)
            ]
            r["model_type"] = c.get("model_type")
            r["architectures"] = c.get("architectures")
            kinds: Set[str] = set()
            for s in subs:
                for key in ("layer_types", "layers_block_type", "layer_type"):
                    v = s.get(key)
                    if isinstance(v, list):
                        kinds.update(str(x) for x in v)
                if s.get("model_type") and s is not c:
                    r["text_model_type"] = s.get("model_type")
                if s.get("hybrid_override_pattern"):
                    kinds.add("hybrid_override_pattern")
            r["layer_kinds"] = sorted(kinds)
        except Exception as e:
            r["config_error"] = "%s: %s" % (type(e).__name__, e)
    return r


def port_holder(port: int) -> Optional[Dict[str, Any]]:
    """None when nothing listens on `port`; else its holder's pid, name and group (None where hidden)."""
    listening, pid = port_holder_pid(port)
    if not listening:
        return None
    if pid is None:
        return {"pid": None, "name": None}
    try:
        with open("/proc/%s/comm" % pid) as f:
            name = f.read().strip()
    except Exception:
        name = None
    try:
        pgid = os.getpgid(pid)
    except OSError:
        pgid = None
    return {"pid": pid, "name": name, "pgid": pgid}


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def probe_ports(workdir: str) -> List[Dict[str, Any]]:
    res: List[Dict[str, Any]] = []
    for s in req.get("services", []):
        r: Dict[str, Any] = {"name": s["name"], "port": s["port"], "bind": s["bind"]}
        error = bind_error(s["bind"], s["port"])
        r["free"] = error is None
        if error is not None:
            r["error"] = error
            r["holder"] = port_holder(s["port"])
        pf = os.path.join(workdir, "run", s["name"] + ".json")
        try:
            with open(pf) as f:
                rec = json.load(f)
            pid = rec.get("pid")
            r["pidfile_pid"] = pid
            r["pidfile_pgid"] = rec.get("pgid")
            r["pidfile_alive"] = bool(isinstance(pid, int) and pid_alive(pid))
        except Exception:
            r["pidfile_pid"] = None
        res.append(r)
    return res


def probe_workdir(wd: str) -> Dict[str, Any]:
    r: Dict[str, Any] = {"path": wd, "exists": os.path.isdir(wd)}
    r["trust"] = secure_dir(wd, False)  # the launcher's own check: who else could write there
    d = wd
    while d and not os.path.exists(d):
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    r["existing"] = d
    try:
        if r["exists"]:
            fd, tmp = tempfile.mkstemp(dir=wd, prefix=".doctor-")
            os.close(fd)
            os.unlink(tmp)
            r["writable"] = True
        else:
            r["writable"] = os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK)
            if not os.path.isdir(d):
                r["error"] = "%s is not a directory" % d
    except OSError as e:
        r["writable"] = False
        r["error"] = e.strerror
    try:
        st = os.statvfs(d)
        r["free_mb"] = st.f_bavail * st.f_frsize // (1024 * 1024)
        r["total_mb"] = st.f_blocks * st.f_frsize // (1024 * 1024)
    except OSError as e:
        r["statvfs_error"] = e.strerror
    return r


wd = os.path.abspath(os.path.expanduser(req.get("workdir", ".")))
out["workdir"] = safe(probe_workdir, wd)
out["paths"] = {p: os.path.exists(os.path.expanduser(p)) for p in req.get("paths", [])}
out["models"] = {p: safe(model_config, p) for p in req.get("models", [])}
out["ports"] = safe(probe_ports, wd)
out["nvcc"] = safe(nvcc)
out["libs"] = safe(probe_libs)
if req.get("packages"):
    out["packages"] = probe_packages()
    out["loaded_libs"] = safe(loaded_libs)
out["env"] = {
    "LD_LIBRARY_PATH": os.environ.get("LD_LIBRARY_PATH"),
    "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
}
sys.stdout.write("\n@@DDTREE-DOCTOR@@" + json.dumps(out) + "\n")
sys.stdout.flush()
