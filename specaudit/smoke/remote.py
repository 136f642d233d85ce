"""The SSH transport of a smoke launch: one multiplexed OpenSSH connection for every command, stream and port
forward.

It drives the system ``ssh`` so that ``~/.ssh/config`` works exactly as it does for the user: aliases,
ProxyJump, IdentityFile, the agent, known_hosts and its host-key checks. One ControlMaster connection
carries everything, so a poll costs a round trip on an open connection, not a handshake. ``BatchMode``
makes a refused key or an unknown host fail at once instead of prompting.
"""

from __future__ import annotations

import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ..core.errors import SpecauditError
from ..core.types import ExitCode


class SSHError(SpecauditError):
    """The remote cannot be reached, refuses us, or is not who it was."""

    exit_code = ExitCode.SSH


# ssh's own messages (exit status 255), most specific first.
_SSH_FAILURES = (
    ("REMOTE HOST IDENTIFICATION HAS CHANGED",
     "the host key of {host} changed since it was recorded in known_hosts: refusing to connect (if the node was "
     "reinstalled, check the new key's fingerprint and update known_hosts: ssh-keygen -R HOST)"),
    ("Host key verification failed",
     "the host key of {host} cannot be verified (not in known_hosts?): connect once with ssh to check and record it"),
    ("Permission denied", "{host} refused our key: {line}"),
    ("Could not resolve hostname", "{line}"),
    ("Connection refused", "{host}: {line}"),
    ("timed out", "{host}: {line}"),
)


def ssh_failure(host: str, stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("@")]
    for needle, message in _SSH_FAILURES:
        for line in lines:
            if needle in line:
                return message.format(host=host, line=line)
        if needle in stderr:
            return message.format(host=host, line=needle)
    return f"{host}: ssh failed: {lines[-1] if lines else 'no message'}"


class Transport(ABC):
    """How commands reach a node: the interface the preflight (and the fleet) talk to. ``Remote`` is the system
    ``ssh``; another way in (``kubectl exec`` into a pod: fleet/kubectl.py) implements the same methods."""

    host: str
    round_trips: int  # commands sent
    handshakes: int  # connections opened

    @abstractmethod
    def connect(self) -> None:
        """Reach the node once; raise SSHError (exit code 7) with the reason when it cannot be reached."""

    @abstractmethod
    def run(self, script: str, input: str | bytes | None = None, timeout: float = 60,
            check: bool = True) -> subprocess.CompletedProcess:
        """Run a shell script (one command line for the node's shell) there; its stdout as bytes."""

    @abstractmethod
    def stream(self, script: str) -> subprocess.Popen:
        """A command whose stdout is read as it comes."""

    @abstractmethod
    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> int:
        """A loopback port here that reaches ``remote_host:remote_port`` as the node sees it."""

    @abstractmethod
    def close(self) -> None: ...

    def alive(self) -> bool:
        return True

    def reconnect(self, within: float) -> bool:
        return self.alive()


@dataclass
class Remote(Transport):
    """A host as the user's ssh names it, reached through one master connection."""

    host: str
    config_file: str | None = None  # ssh -F; None: the user's ~/.ssh/config
    connect_timeout: int = 15
    round_trips: int = field(default=0, init=False)  # commands sent over the master connection
    handshakes: int = field(default=0, init=False)  # master connections opened (1 unless it dropped)

    def __post_init__(self) -> None:
        # A short directory: a control socket's path must fit in 108 bytes.
        self._dir = Path(tempfile.mkdtemp(prefix="specaudit-ssh-"))
        self.control_path = self._dir / "master"
        self._forwards: list[tuple[int, str, int]] = []

    def _ssh(self, *options: str) -> list[str]:
        config = ["-F", self.config_file] if self.config_file else []
        return ["ssh", *config, "-o", f"ControlPath={self.control_path}", "-o", "BatchMode=yes",
                "-o", f"ConnectTimeout={self.connect_timeout}", "-o", "ServerAliveInterval=5",
                "-o", "ServerAliveCountMax=3", *options]

    def connect(self) -> None:
        """Open the master connection; the user's host-key and key checks apply, and fail with their reason."""
        # The master's stderr goes to a file: a pipe would be held open by the backgrounded master.
        with tempfile.TemporaryFile(mode="w+") as err:
            proc = subprocess.run(
                self._ssh("-o", "ControlMaster=yes", "-o", "ControlPersist=60", "-f", "-N", self.host),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, timeout=self.connect_timeout + 30,
            )
            err.seek(0)
            stderr = err.read()
        if proc.returncode != 0:
            raise SSHError(ssh_failure(self.host, stderr))
        self.handshakes += 1
        for local_port, remote_host, remote_port in self._forwards:
            self._request_forward(local_port, remote_host, remote_port)

    def alive(self) -> bool:
        if not self.control_path.exists():
            return False
        proc = subprocess.run(self._ssh("-O", "check", self.host), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
        return proc.returncode == 0

    def reconnect(self, within: float) -> bool:
        """After a drop: reopen the master, retrying until ``within`` seconds have passed."""
        deadline = time.monotonic() + within
        while True:
            try:
                if self.alive():
                    return True
                self._exit_master()
                self.connect()
                return True
            except (SSHError, subprocess.TimeoutExpired):
                if time.monotonic() >= deadline:
                    return False
                time.sleep(1.0)

    def run(self, script: str, input: str | bytes | None = None, timeout: float = 60,
            check: bool = True) -> subprocess.CompletedProcess:
        """Run a shell script on the remote over the master connection; its stdout as bytes."""
        self.round_trips += 1
        try:
            proc = subprocess.run(
                self._ssh("-o", "ControlMaster=no", self.host, "--", script),
                input=input.encode() if isinstance(input, str) else input,
                stdin=None if input is not None else subprocess.DEVNULL,
                capture_output=True, timeout=timeout,
                # A terminal's Ctrl-C reaches specaudit alone, which decides (a launch completes; see interrupts.py).
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            raise SSHError(f"{self.host}: no answer within {timeout:.0f} s") from None
        if proc.returncode == 255:
            raise SSHError(ssh_failure(self.host, proc.stderr.decode(errors="replace")))
        if check and proc.returncode != 0:
            tail = proc.stderr.decode(errors="replace").strip().splitlines()
            raise SpecauditError(f"{self.host}: a remote command failed (exit {proc.returncode}): "
                                 f"{tail[-1] if tail else 'no message'}")
        return proc

    def stream(self, script: str) -> subprocess.Popen:
        """A remote command whose stdout is read as it comes (``tail -F`` of a log)."""
        self.round_trips += 1
        return subprocess.Popen(self._ssh("-o", "ControlMaster=no", self.host, "--", script),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> int:
        """Forward a free loopback port here to ``remote_host:remote_port`` as the remote sees it."""
        local_port = free_port()
        self._request_forward(local_port, remote_host, remote_port)
        self._forwards.append((local_port, remote_host, remote_port))
        return local_port

    def _request_forward(self, local_port: int, remote_host: str, remote_port: int) -> None:
        spec = f"127.0.0.1:{local_port}:{remote_host}:{remote_port}"
        proc = subprocess.run(self._ssh("-O", "forward", "-L", spec, self.host), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise SSHError(f"{self.host}: cannot forward port {remote_port}: {proc.stderr.strip()}")

    def _exit_master(self) -> None:
        if self.control_path.exists():
            subprocess.run(self._ssh("-O", "exit", self.host), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=10)
        # A master that died leaves its socket behind, and a new master would not start over it.
        self.control_path.unlink(missing_ok=True)

    def close(self) -> None:
        try:
            self._exit_master()
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def quote_command(argv: list[str]) -> str:
    """A command line the remote shell gives back word for word: spaces, quotes and ``$(...)`` stay literal."""
    return " ".join(shlex.quote(word) for word in argv)


def bash_command(script: str, *args: str) -> str:
    """``bash -c SCRIPT ARGS...`` as one remote command line: whatever the login shell, bash runs the script and
    the arguments arrive as literal words."""
    return quote_command(["bash", "-c", script, "specaudit", *args])


def remote_script(*names: str) -> str:
    """The scripts ``specaudit/scripts/NAME.sh`` as one, in order: ``bash -c`` runs a single string, so the
    functions a script uses (``alive.sh``) are put before it, not sourced."""
    scripts = resources.files("specaudit.smoke") / "scripts"
    return "".join((scripts / f"{name}.sh").read_text() for name in names)
