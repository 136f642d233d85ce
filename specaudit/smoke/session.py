"""What the stages of one smoke launch share (smoke.py runs them): the options, the SSH connection, the
timeline every stage notes its events on, and the stop that ends the run early with a verdict."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..core.types import SmokeVerdict
from ..results.outcome import Event
from .prompts import Prompt
from .remote import RUNS_DIR, Remote

# Of no kind: --prompts chat|code|maths|all sends prompts whose acceptance is reported per kind (prompts.py).
DEFAULT_PROMPTS = tuple(Prompt(p) for p in ("The capital of France is", "def fibonacci(n):",
                                            "Speculative decoding makes inference faster by"))


class SmokeView(Protocol):
    """Where a smoke launch shows its progress as it happens (live.py)."""

    def event(self, event: Event) -> None: ...

    def line(self, text: str) -> None: ...


@dataclass(frozen=True)
class SmokeOptions:
    host: str
    argv: tuple[str, ...]  # the launch command, as the user would type it on the node
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


class Stop(Exception):
    """Ends the smoke early with a verdict."""

    def __init__(self, verdict: SmokeVerdict, reason: str):
        super().__init__(reason)
        self.verdict, self.reason = verdict, reason


class Session:
    """One smoke launch's options, its connection to the node, and its timeline."""

    def __init__(self, options: SmokeOptions, view: SmokeView):
        self.options, self.view = options, view
        self.remote = Remote(options.host, options.ssh_config)
        self.started = time.monotonic()
        self.timeline: list[Event] = []

    def note(self, phase: str, text: str, at: float | None = None) -> None:
        """An event on the timeline, at ``at`` (monotonic; default now), shown at once."""
        event = Event(round((at or time.monotonic()) - self.started, 2), phase, text)
        self.timeline.append(event)
        self.view.event(event)
