"""What the stages of one smoke launch share (run.py runs them): the options, the SSH connection to each node (one
for a launch on one node; the head's and each worker's for a multi-node launch, fleet/smoke.py), the timeline every
stage notes its events on, and the stop that ends the run early with a verdict."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..core.types import SmokeVerdict
from ..results.outcome import Event
from . import RUNS_DIR
from .prompts import Prompt
from .remote import Remote, Transport

# Of no kind: --prompts chat|code|maths|all sends prompts whose acceptance is reported per kind (prompts.py).
DEFAULT_PROMPTS = tuple(Prompt(p) for p in ("The capital of France is", "def fibonacci(n):",
                                            "Speculative decoding makes inference faster by"))


class SmokeView(Protocol):
    """Where a smoke launch shows its progress as it happens (live.py)."""

    def event(self, event: Event) -> None: ...

    def line(self, text: str) -> None: ...


@dataclass(frozen=True)
class SmokeOptions:
    host: str  # the node, as ssh names it; the head of a multi-node launch
    argv: tuple[str, ...]  # the launch command, as the user would type it on the node (the head's)
    ssh_config: str | None = None  # ssh -F; None: ~/.ssh/config
    runs_dir: str = RUNS_DIR  # on the remote
    launch_anyway: bool = False  # launch even when the preflight scan says BLOCKED
    check_lossless: bool = False  # relaunch without the drafter and compare greedy tokens
    ready_timeout: float = 1800.0
    lease: int = 120  # seconds without a heartbeat before the remote watchdog stops the launch
    reconnect_within: float = 60.0  # how long a dropped connection is retried
    stop_grace: int = 15  # seconds between SIGTERM and SIGKILL
    prompts: tuple[Prompt, ...] = DEFAULT_PROMPTS
    max_tokens: int = 32
    out_dir: Path = Path("reports")  # where the log is copied to
    workers: tuple[str, ...] = ()  # the other nodes of a multi-node launch, in node-rank order (fleet/smoke.py)

    @property
    def hosts(self) -> tuple[str, ...]:
        """Every node of the launch, the head first."""
        return (self.host, *self.workers)


class Stop(Exception):
    """Ends the smoke early with a verdict."""

    def __init__(self, verdict: SmokeVerdict, reason: str):
        super().__init__(reason)
        self.verdict, self.reason = verdict, reason


class Session:
    """One smoke launch's options, its connection to each node (``remote``: the head's, the only one of a launch on
    one node), and its timeline."""

    def __init__(self, options: SmokeOptions, view: SmokeView):
        self.options, self.view = options, view
        self.remotes: dict[str, Transport] = {host: Remote(host, options.ssh_config) for host in options.hosts}
        self.remote = self.remotes[options.host]
        self.started = time.monotonic()
        self.timeline: list[Event] = []
        self._lock = threading.Lock()  # the nodes of a multi-node launch are probed and stopped from threads

    def close(self) -> None:
        for remote in self.remotes.values():
            remote.close()

    def note(self, phase: str, text: str, at: float | None = None) -> None:
        """An event on the timeline, at ``at`` (monotonic; default now), shown at once."""
        event = Event(round((at or time.monotonic()) - self.started, 2), phase, text)
        with self._lock:
            self.timeline.append(event)
            self.view.event(event)
