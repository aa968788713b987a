from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sshd import SSHD, SshEnv

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def ssh_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SshEnv]:
    """A temp HOME with ssh client config; add servers with `ssh_env.add_server(alias)`."""
    if not (shutil.which("sshd") or Path(SSHD).exists()):
        pytest.fail("OpenSSH sshd is not installed: run scripts/test, which installs openssh-server")
    env = SshEnv(tmp_path)
    monkeypatch.setenv("HOME", str(env.home))
    yield env
    env.stop()


@pytest.fixture
def sshd(ssh_env: SshEnv):
    """One real sshd on 127.0.0.1, trusted in known_hosts, reachable as the alias 'testhost'."""
    return ssh_env.add_server("testhost")
