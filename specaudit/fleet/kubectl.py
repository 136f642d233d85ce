"""Pods reached through ``kubectl exec``: the same transport as a host reached through ``ssh`` (smoke/remote.py's
``Transport``), so that the preflight's probe runs in a pod as it runs on a node.

``kubectl`` is the user's, with its own kubeconfig, context and credentials; nothing here talks to a cluster but
through it. A command is given to the pod's ``sh -c`` as ssh gives it to the login shell; a port forward is
``kubectl port-forward``. A failure of kubectl itself (no such pod, no cluster, refused) is told apart from the
command's own exit status by kubectl's messages, and raised as the transport's SSHError (exit code 7: the node
cannot be reached).
"""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass, field

from ..core.errors import SpecauditError
from ..smoke.remote import SSHError, Transport, free_port

POD_PREFIX = "pod/"
# kubectl's own failures, as it prints them (its exit status is 1, as a failing command's may be).
_KUBECTL_FAILURES = ("Error from server", "error: ", "Unable to connect to the server", "error dialing backend",
                     "The connection to the server")


@dataclass(frozen=True)
class Cluster:
    """How kubectl is called: its path, and the context, namespace and container given on the command line."""

    kubectl: str = "kubectl"
    context: str | None = None
    namespace: str | None = None
    container: str | None = None

    def command(self, *args: str) -> list[str]:
        return [self.kubectl, *(["--context", self.context] if self.context else []),
                *(["--namespace", self.namespace] if self.namespace else []), *args]

    def pods(self, selector: str) -> list[str]:
        """The running pods a label selector picks, by name, in kubectl's order."""
        try:
            proc = subprocess.run(self.command("get", "pods", "--selector", selector, "--field-selector",
                                               "status.phase=Running", "--output",
                                               "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}"),
                                  capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise SpecauditError(f"{self.kubectl}: not found (install kubectl, or --kubectl PATH)") from None
        if proc.returncode != 0:
            raise SSHError(f"kubectl get pods --selector {selector}: {_last(proc.stderr)}")
        names = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
        if not names:
            raise SpecauditError(f"no running pod matches --selector {selector}")
        return names


@dataclass
class Kubectl(Transport):
    """A pod, reached through ``kubectl exec``; ``host`` is ``pod/NAME``."""

    host: str
    cluster: Cluster = field(default_factory=Cluster)
    round_trips: int = field(default=0, init=False)
    handshakes: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.pod = self.host.removeprefix(POD_PREFIX)
        self._forwards: list[subprocess.Popen] = []

    def _exec(self, script: str, stdin: bool) -> list[str]:
        container = ["--container", self.cluster.container] if self.cluster.container else []
        return self.cluster.command("exec", *(["-i"] if stdin else []), self.pod, *container, "--", "sh", "-c", script)

    def connect(self) -> None:
        self.run("true", timeout=60)
        self.handshakes += 1

    def run(self, script: str, input: str | bytes | None = None, timeout: float = 60,
            check: bool = True) -> subprocess.CompletedProcess:
        self.round_trips += 1
        try:
            proc = subprocess.run(self._exec(script, input is not None),
                                  input=input.encode() if isinstance(input, str) else input,
                                  stdin=None if input is not None else subprocess.DEVNULL, capture_output=True,
                                  timeout=timeout)
        except FileNotFoundError:
            raise SSHError(f"{self.cluster.kubectl}: not found (install kubectl, or --kubectl PATH)") from None
        except subprocess.TimeoutExpired:
            raise SSHError(f"{self.host}: no answer within {timeout:.0f} s") from None
        stderr = proc.stderr.decode(errors="replace")
        if proc.returncode != 0 and any(line.startswith(_KUBECTL_FAILURES) for line in stderr.splitlines()):
            raise SSHError(f"{self.host}: {_last(stderr)}")
        if check and proc.returncode != 0:
            raise SpecauditError(f"{self.host}: a command failed in the pod (exit {proc.returncode}): {_last(stderr)}")
        return proc

    def stream(self, script: str) -> subprocess.Popen:
        self.round_trips += 1
        return subprocess.Popen(self._exec(script, False), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)

    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> int:
        """``kubectl port-forward`` reaches the pod's own ports; another host as the pod sees it cannot be reached."""
        if remote_host not in ("127.0.0.1", "localhost"):
            raise SSHError(f"{self.host}: kubectl port-forward reaches the pod's own ports, not {remote_host}")
        local = free_port()
        proc = subprocess.Popen(self.cluster.command("port-forward", f"pod/{self.pod}", f"{local}:{remote_port}",
                                                     "--address", "127.0.0.1"),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._forwards.append(proc)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", local)) == 0:
                    return local
            time.sleep(0.1)
        raise SSHError(f"{self.host}: kubectl port-forward to port {remote_port} did not come up")

    def close(self) -> None:
        for proc in self._forwards:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self._forwards.clear()


def _last(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else "no message"
