"""A real OpenSSH server on 127.0.0.1 for the smoke tests and the bench: its own host key, a user key in an
authorized_keys file, and an ssh config whose Host alias names it, all under one temporary directory.

Nothing listens anywhere but loopback. The server runs as the current user, who is the only user it lets in.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


@dataclass
class LoopbackSSHD:
    directory: Path
    port: int
    process: subprocess.Popen
    alias: str = "gpu-node"

    @property
    def config(self) -> Path:
        return self.directory / "ssh_config"

    def client_config(self, name: str = "ssh_config", identity: Path | None = None,
                      known_hosts: Path | None = None) -> Path:
        """An ssh config as a user would write one: a Host alias, its key, its known_hosts."""
        path = self.directory / name
        path.write_text(
            f"Host {self.alias}\n"
            f"  HostName 127.0.0.1\n  Port {self.port}\n  User {getpass.getuser()}\n"
            f"  IdentityFile {identity or self.directory / 'id_user'}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {known_hosts or self.directory / 'known_hosts'}\n"
            "  StrictHostKeyChecking yes\n  LogLevel ERROR\n"
        )
        return path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def start_sshd(directory: Path, alias: str = "gpu-node", environment: dict[str, str] | None = None) -> LoopbackSSHD:
    """``environment``: variables sshd sets in every session (its SetEnv), as a node's own would have them: the fleet
    tests give each loopback "node" its own HOME, PATH and PYTHONPATH this way."""
    if not Path(SSHD).exists():
        raise RuntimeError("sshd is not installed (Debian: apt-get install openssh-server)")
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    keygen(directory / "host_key")
    keygen(directory / "id_user")
    (directory / "authorized_keys").write_text((directory / "id_user.pub").read_text())
    os.chmod(directory / "authorized_keys", 0o600)
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    port = _free_port()
    (directory / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {directory / 'host_key'}\n"
        f"AuthorizedKeysFile {directory / 'authorized_keys'}\nPidFile {directory / 'sshd.pid'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        "PermitRootLogin prohibit-password\nAllowTcpForwarding local\nMaxSessions 64\nMaxStartups 64\n"
        "ClientAliveInterval 5\nLogLevel ERROR\n"
        + ("SetEnv " + " ".join(f'"{k}={v}"' for k, v in environment.items()) + "\n" if environment else "")
    )
    process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(directory / "sshd_config")],
                               stdout=subprocess.DEVNULL,
                               stderr=open(directory / "sshd.log", "w"))  # noqa: SIM115 - held by sshd while it runs
    host_key = (directory / "host_key.pub").read_text().split()
    (directory / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    server = LoopbackSSHD(directory, port, process, alias)
    server.client_config()
    _wait_listening(port, process, directory / "sshd.log")
    return server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_listening(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited: {log.read_text().strip()}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"sshd did not listen on 127.0.0.1:{port}")
