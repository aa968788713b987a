"""A real OpenSSH server for tests: own host key, own user key, own config, a free high port on 127.0.0.1.

The client side lives in a temp HOME (~/.ssh/config with an alias, known_hosts), which asyncssh reads.
Fake tools (nvidia-smi, a fake python) go in `bin_dir`, first on the PATH of remote commands.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import psutil

from tests.util import free_port

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port}")


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


class SshdServer:
    """One sshd process; restartable on the same port and keys."""

    def __init__(self, root: Path, alias: str = "testhost", port: int | None = None) -> None:
        self.root = root
        self.alias = alias
        self.port = port or free_port()
        self.dir = root / f"sshd-{alias}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.bin_dir = self.dir / "bin"
        self.bin_dir.mkdir(exist_ok=True)
        self.host_key = self.dir / "host_key"
        if not self.host_key.exists():
            _keygen(self.host_key)
        self.user = os.environ.get("USER") or "root"
        try:
            import pwd

            self.user = pwd.getpwuid(os.getuid()).pw_name
        except Exception:
            pass
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.dir / "sshd.log"

    def write_config(self, authorized_keys: Path, extra: str = "") -> None:
        """SHLVL=1 keeps Debian's bash from sourcing ~/.bashrc for ssh commands (it does when SHLVL < 2):
        a developer's rc (pyenv init and its `pyenv rehash` lock, PATH changes) must not slow down or
        change the test host, and a session killed inside `pyenv rehash` left a stale lock that made every
        later session wait 60 s."""
        path = f"{self.bin_dir}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
        venv_bin = os.path.dirname(os.path.realpath(os.sys.executable))  # type: ignore[attr-defined]
        path = f"{self.bin_dir}:{venv_bin}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
        (self.dir / "sshd_config").write_text(
            f"""Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.host_key}
AuthorizedKeysFile {authorized_keys}
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
PidFile {self.dir}/sshd.pid
StrictModes no
UsePAM no
AllowTcpForwarding yes
MaxSessions 64
MaxStartups 64:30:128
ClientAliveInterval 0
SetEnv PATH={path} SHLVL=1
{extra}
"""
        )

    def start(self) -> None:
        os.makedirs("/run/sshd", exist_ok=True)
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.dir / "sshd_config")],
            stdout=logf,
            stderr=logf,
            start_new_session=True,
        )
        try:
            wait_port(self.port)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"sshd did not start: {self.log.read_text()[-2000:]}") from None

    def stop(self) -> None:
        """Kill sshd and every session it spawned (the whole process group)."""
        if self.proc is None:
            return
        # per-connection sshd processes call setsid() and retitle themselves ("sshd: user@notty"), so neither
        # the listener's process group nor a name match reaches them: collect the tree before the kill
        try:
            tree = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            tree = []
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for child in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        self.proc.wait(5)
        self.proc = None
        # child sessions run in their own sessions; kill those started from our config too
        subprocess.run(["pkill", "-9", "-f", f"sshd.*{self.dir}"], check=False)

    def host_key_line(self) -> str:
        pub = (self.dir / "host_key.pub").read_text().split()
        return f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}"


class SshEnv:
    """A temp HOME with an ssh client config and key, and any number of sshd servers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.ssh_dir = self.home / ".ssh"
        self.ssh_dir.mkdir(parents=True, exist_ok=True)
        self.user_key = self.ssh_dir / "id_ed25519"
        if not self.user_key.exists():
            _keygen(self.user_key)
        self.authorized_keys = root / "authorized_keys"
        self.authorized_keys.write_text((self.ssh_dir / "id_ed25519.pub").read_text())
        self.known_hosts = self.ssh_dir / "known_hosts"
        self.known_hosts.touch()
        self.servers: dict[str, SshdServer] = {}

    def add_server(self, alias: str = "testhost", trust: bool = True, extra: str = "") -> SshdServer:
        srv = SshdServer(self.root, alias)
        srv.write_config(self.authorized_keys, extra)
        srv.start()
        self.servers[alias] = srv
        if trust:
            with self.known_hosts.open("a") as f:
                f.write(srv.host_key_line() + "\n")
        self._write_client_config()
        return srv

    def _write_client_config(self) -> None:
        blocks = []
        for alias, srv in self.servers.items():
            blocks.append(
                f"""Host {alias}
    HostName 127.0.0.1
    Port {srv.port}
    User {srv.user}
    IdentityFile {self.user_key}
    UserKnownHostsFile {self.known_hosts}
"""
            )
        (self.ssh_dir / "config").write_text("\n".join(blocks))

    def ssh_argv(self, alias: str) -> list[str]:
        """argv prefix for the OpenSSH client (which ignores $HOME: pass -F)."""
        return ["ssh", "-F", str(self.ssh_dir / "config"), "-o", "BatchMode=yes", alias]

    def profile_toml(self, alias: str, name: str | None = None, extra: str = "") -> str:
        return f'name = "{name or alias}"\naddress = "{alias}"\nworkdir = "{self.root / ("work-" + alias)}"\n{extra}'

    def stop(self) -> None:
        for srv in self.servers.values():
            srv.stop()
