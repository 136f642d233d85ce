"""The smoke's wait. The launched engine's log is streamed live and held against the crash signatures
line by line; its milestones go on the timeline; a crash, the engine's exit or a dropped connection is acted
on at once, until the server answers.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections.abc import Callable

from ..core.types import SmokeVerdict
from ..explain.diagnose import root_cause
from ..explain.signatures import (
    SERVER_UP,
    classify,
    clean_line,
    load_crash_signatures,
    load_milestones,
    load_signatures,
    load_wrappers,
    match_line,
)
from ..explain.tracebacks import TracebackReader
from ..results.outcome import Explanation
from ..results.scan import ScanResult
from .gpu import GpuLines
from .remote import Remote, SSHError, bash_command, quote_command, remote_script
from .session import Session, SmokeView, Stop

POLL_SECONDS = 1.0
# After a fatal line, the lines still on their way (the rest of a traceback, the wrappers) are taken in this long
# before the root cause is classified (bench/smoke_bench.py measures the whole wait).
SETTLE_SECONDS = 1.0

_POLL = remote_script("alive", "poll")


class LogWatch:
    """The remote log, streamed by ``tail -F`` over the master connection. A reader thread holds each line
    against the signatures the moment it arrives, whatever the main thread is waiting on; the stream picks up
    at the byte it stopped at when it is restarted after a drop."""

    def __init__(self, remote: Remote, log: str, engine: str):
        self.remote, self.log = remote, log
        self.signatures = load_signatures([engine])
        self.milestones = load_milestones([engine])
        self.wrappers = load_wrappers([engine])
        self.crash_signatures = load_crash_signatures([engine])
        self.tracebacks = TracebackReader()  # a wrapper's traceback is the engine saying its start-up failed
        self.lines: list[str] = []
        self.offset = 0  # bytes received
        self.fatal_at: float | None = None  # when the first root-cause line arrived (monotonic)
        self.reached: list[str] = []  # milestones seen, in order
        self.ended = False  # the stream stopped: the connection dropped
        self.gpu = GpuLines()  # the runner, attention backend and CUDA-graph capture the log names (smoke/gpu.py)
        self.gpu_notes: list[tuple[str, str, float]] = []  # (phase, text, when), taken by pump
        self._queue: queue.Queue = queue.Queue()
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        self.ended = False
        self._queue = queue.Queue()
        self._proc = self.remote.stream(f"exec tail -c +{self.offset + 1} -F {quote_command([self.log])} 2>/dev/null")
        self._reader = threading.Thread(target=self._read, args=(self._proc, self._queue), daemon=True)
        self._reader.start()

    def _read(self, proc: subprocess.Popen, arrived: queue.Queue) -> None:
        assert proc.stdout is not None  # Remote.stream pipes it
        for raw in proc.stdout:
            self.offset += len(raw)
            line = clean_line(raw.decode("utf-8", errors="replace"))
            self.lines.append(line)
            hit = match_line(line, self.signatures)
            crashes = len(self.tracebacks.crashes)
            self.tracebacks.feed(len(self.lines), line)
            wrapped = len(self.tracebacks.crashes) > crashes and any(
                w.search(self.tracebacks.crashes[-1].text) for w in self.wrappers)
            if (hit and hit[0].root or wrapped) and self.fatal_at is None:
                self.fatal_at = time.monotonic()
            milestone = next((m.name for m in self.milestones
                              if m.name not in self.reached and m.pattern.search(line)), None)
            if milestone:
                self.reached.append(milestone)
            arrived.put((line, milestone, time.monotonic(), self.gpu.feed(line)))
        arrived.put(None)

    def pump(self, timeout: float, view: SmokeView) -> list[tuple[str, float]]:
        """Show what arrived (waiting up to ``timeout`` for the first line); the milestones it passed, with
        the moment their line arrived."""
        passed = []
        try:
            item = self._queue.get(timeout=timeout)
            while True:
                if item is None:
                    self.ended = True
                else:
                    line, milestone, at, gpu = item
                    view.line(line)
                    if milestone:
                        passed.append((milestone, at))
                    self.gpu_notes += [(phase, text, at) for phase, text in gpu]
                item = self._queue.get_nowait()
        except queue.Empty:
            pass
        return passed

    def explanation(self) -> Explanation:
        """The log so far, classified: its root signature line and its root traceback."""
        up = [m.pattern for m in self.milestones if m.name == SERVER_UP]
        return classify(self.lines, self.signatures, self.log, self.wrappers, up, crashes=self.crash_signatures)

    def stop(self) -> None:
        if self._proc and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        if self._reader:
            self._reader.join(timeout=10)


class Watch:
    """One launch, watched from its start: every wait on it (for readiness, for an answer) takes in its log as
    it comes, and stops FAILED with the root cause (diagnose.py) when it crashes or exits."""

    def __init__(self, session: Session, run_directory: str, engine: str, scan: ScanResult | None):
        self.session, self.run_directory, self.scan = session, run_directory, scan
        self.log = LogWatch(session.remote, f"{run_directory}/log", engine)
        self.exit_status: int | None = None  # the engine's, when it exited on its own

    def start(self) -> None:
        self.log.start()

    def stop(self) -> None:
        self.log.stop()

    def wait_ready(self, ready: Callable[[], bool]) -> None:
        """Until ``ready()`` (the server answers); stop at the first fatal log line."""
        deadline = time.monotonic() + self.session.options.ready_timeout
        next_poll = 0.0
        while True:
            self.pump(0.2)
            now = time.monotonic()
            if now >= next_poll:
                next_poll = now + POLL_SECONDS
                self.check_alive()
                if ready():
                    self.pump(0.0)  # the lines that came before the answer go first in the timeline
                    self.session.note("ready", f"/health 200 after {now - self.session.started:.1f} s")
                    return
            if now > deadline:
                reached = self.log.reached
                raise Stop(SmokeVerdict.FAILED, f"not ready within {self.session.options.ready_timeout:.0f} s "
                                                f"(last milestone: {reached[-1] if reached else 'none'})")

    def pump(self, timeout: float) -> None:
        """Take in what arrived; act on a crash in it or on a dropped stream."""
        self._take(timeout)
        if self.log.fatal_at is not None:
            self._settle(self.log.fatal_at + SETTLE_SECONDS)
            self._fail("the engine crashed")
        if self.log.ended:
            self._regain()

    def check_alive(self) -> None:
        """One round trip: touch the heartbeat and ask whether the process group lives."""
        try:
            state = self.session.remote.run(bash_command(_POLL, self.run_directory), timeout=30).stdout.decode().split()
        except SSHError:
            self._regain()
            return
        if state and state[0] == "exited":
            self.exit_status = int(state[1]) if len(state) > 1 and state[1].lstrip("-").isdigit() else None
            self._settle(time.monotonic() + 1.5)
            self.session.note("exit", f"the engine exited with status {self.exit_status}")
            self._fail(f"the engine exited with status {self.exit_status} and its log shows no root cause; "
                       "its last lines are in the report")

    def _take(self, timeout: float) -> None:
        """Show the lines that arrived, and put the milestones among them on the timeline."""
        for milestone, at in self.log.pump(timeout, self.session.view):
            self.session.note("engine", milestone, at)
        notes, self.log.gpu_notes = self.log.gpu_notes, []
        for phase, text, at in notes:
            self.session.note(phase, text, at)
            path = self.scan.path if self.scan is not None else None
            if text.startswith("Model Runner") and path and path.runner in ("v1", "v2") \
                    and self.log.gpu.runner != path.runner:
                self.session.note("gpu", f"the engine took Model Runner {self.log.gpu.runner.upper()}, the scan "
                                         f"decided {path.runner.upper()} ({path.runner_reason})", at)

    def _settle(self, until: float) -> None:
        """Take in the lines still on their way (the end of a traceback) until ``until`` (monotonic)."""
        while time.monotonic() < until and not self.log.ended:
            self._take(max(0.0, until - time.monotonic()))

    def _fail(self, otherwise: str) -> None:
        """Stop with the root cause the log shows (see diagnose.py)."""
        explanation = self.log.explanation()
        root = root_cause(explanation, self.scan, self.exit_status)
        first = explanation.crash or explanation.cause
        self.session.note("crash", (root.summary if root else otherwise) +
                          (f" (log line {first.line_number})" if first else ""))
        raise Stop(SmokeVerdict.FAILED, root.summary if root else otherwise)

    def _regain(self) -> None:
        """The stream ended: the connection dropped. Reopen it and pick up the log where it stopped."""
        options = self.session.options
        self.session.note("connection", "lost; reconnecting")
        self.log.stop()
        if not self.session.remote.reconnect(options.reconnect_within):
            raise SSHError(f"lost the connection to {options.host} and could not reconnect within "
                           f"{options.reconnect_within:.0f} s; the remote watchdog stops the launch "
                           f"{options.lease} s after the last heartbeat")
        self.session.note("connection", "regained; the launch kept running")
        self.log.start()
