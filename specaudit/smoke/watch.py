"""The smoke's wait. The launched engine's log is streamed live and held against the crash signatures
line by line; its milestones go on the timeline; a crash, the engine's exit or a dropped connection is acted
on at once, until the server answers.

A multi-node launch (fleet/smoke.py) is watched as one: each node's log streamed over its own connection, each
node's process group polled, and the first failure on any node ends the wait. Its root cause is read across the
logs (diagnose.root_log): a worker's crash, not the head's wrapper that only says a worker died.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..core.types import SmokeVerdict
from ..explain.diagnose import root_cause, root_log
from ..explain.signatures import (
    SERVER_UP,
    classify,
    clean_line,
    load_crash_signatures,
    load_dying,
    load_milestones,
    load_signatures,
    load_wrappers,
    match_line,
)
from ..explain.tracebacks import TracebackReader
from ..results.outcome import Explanation
from ..results.scan import ScanResult
from .gpu import GpuLines
from .launcher import Run
from .remote import SSHError, Transport, bash_command, quote_command, remote_script
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

    def __init__(self, remote: Transport, log: str, engine: str, label: str = ""):
        self.remote, self.log, self.label = remote, log, label  # label: the node, on a multi-node launch's lines
        self.signatures = load_signatures([engine])
        self.milestones = load_milestones([engine])
        self.wrappers = load_wrappers([engine])
        self.dying = load_dying([engine])  # lines that say a process dies of the traceback that follows them
        self.crash_signatures = load_crash_signatures([engine])
        self.tracebacks = TracebackReader()  # a wrapper's traceback is the engine saying its start-up failed
        self.lines: list[str] = []
        self.offset = 0  # bytes received
        self.fatal_at: float | None = None  # when the first root-cause line arrived (monotonic)
        self.crashed_at: float | None = None  # when its first traceback ended (monotonic)
        self.dies = False  # a line said a process dies of the next traceback: that one ends the launch
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
            self.dies = self.dies or any(d.search(line) for d in self.dying)
            crashes = len(self.tracebacks.crashes)
            self.tracebacks.feed(len(self.lines), line)
            wrapped = len(self.tracebacks.crashes) > crashes and (self.dies or any(
                w.search(self.tracebacks.crashes[-1].text) for w in self.wrappers))
            if (hit and hit[0].root or wrapped) and self.fatal_at is None:
                self.fatal_at = time.monotonic()
            if len(self.tracebacks.crashes) > crashes and self.crashed_at is None:
                self.crashed_at = time.monotonic()
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
                    view.line(f"{self.label}| {line}" if self.label else line)
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


@dataclass
class Part:
    """One node's process group of a launch, under watch: its log, its scan, and its exit status once it exited."""

    host: str
    remote: Transport
    run_directory: str
    log: LogWatch
    scan: ScanResult | None
    exit_status: int | None = None  # the engine's, when it exited on its own
    exited: bool = False

    @property
    def failed_at(self) -> float | None:
        """When its first fatal line or traceback arrived here (monotonic); None while its log shows neither."""
        times = [t for t in (self.log.fatal_at, self.log.crashed_at) if t is not None]
        return min(times) if times else None

    @property
    def failed(self) -> bool:
        return self.failed_at is not None or self.exited


class Watch:
    """One launch, watched from its start: every wait on it (for readiness, for an answer) takes in its log as
    it comes, and stops FAILED with the root cause (diagnose.py) when it crashes or exits. A multi-node launch is
    a part on each node (``parts``, the head's first), each with its own log and scan."""

    def __init__(self, session: Session, runs: list[Run], engine: str, scans: dict[str, ScanResult | None]):
        self.session = session
        several = len(runs) > 1
        self.parts = [Part(run.host, run.remote or session.remotes[run.host], run.directory,
                           LogWatch(run.remote or session.remotes[run.host], f"{run.directory}/log", engine,
                                    run.host if several else ""), scans.get(run.host))
                      for run in runs]
        self.wrappers = self.parts[0].log.wrappers

    def root_part(self) -> Part:
        """The part whose log holds the launch's root cause (diagnose.root_log); the head while none failed."""
        failed = [p for p in self.parts if p.failed]
        if len(failed) <= 1:
            return failed[0] if failed else self.parts[0]
        index = root_log([(p.log.explanation(), p.failed_at, p.exit_status) for p in failed], self.wrappers)
        return failed[index]

    def start(self) -> None:
        for part in self.parts:
            part.log.start()

    def stop(self) -> None:
        for part in self.parts:
            part.log.stop()

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
                reached = self.parts[0].log.reached
                waiting = [f"{p.host}: {p.log.reached[-1] if p.log.reached else 'none'}" for p in self.parts[1:]]
                raise Stop(SmokeVerdict.FAILED, f"not ready within {self.session.options.ready_timeout:.0f} s "
                                                f"(last milestone: {reached[-1] if reached else 'none'}"
                                                + (f"; on the other nodes: {', '.join(waiting)}" if waiting else "") + ")")

    def pump(self, timeout: float) -> None:
        """Take in what arrived on every node; act on a crash in it or on a dropped stream."""
        for i, part in enumerate(self.parts):
            self._take(part, timeout if i == 0 else 0.0)
        fatal = [p.log.fatal_at for p in self.parts if p.log.fatal_at is not None]
        if fatal:
            self._settle(min(fatal) + SETTLE_SECONDS)
            self._fail("the engine crashed")
        for part in self.parts:
            if part.log.ended:
                self._regain(part)

    def check_alive(self) -> None:
        """One round trip a node: touch the heartbeat and ask whether the process group lives."""
        for part in self.parts:
            try:
                state = part.remote.run(bash_command(_POLL, part.run_directory), timeout=30).stdout.decode().split()
            except SSHError:
                self._regain(part)
                continue
            if state and state[0] == "exited":
                part.exit_status = int(state[1]) if len(state) > 1 and state[1].lstrip("-").isdigit() else None
                part.exited = True
                self._settle(time.monotonic() + 1.5)
                where = f" on {part.host}" if len(self.parts) > 1 else ""
                self.session.note("exit", f"the engine exited{where} with status {part.exit_status}")
                self._fail(f"the engine exited{where} with status {part.exit_status} and its log shows no root "
                           "cause; its last lines are in the report")

    def _take(self, part: Part, timeout: float) -> None:
        """Show the lines that arrived, and put the milestones among them on the timeline."""
        where = f" ({part.host})" if len(self.parts) > 1 else ""
        for milestone, at in part.log.pump(timeout, self.session.view):
            self.session.note("engine", milestone + where, at)
        notes, part.log.gpu_notes = part.log.gpu_notes, []
        for phase, text, at in notes:
            self.session.note(phase, text + where, at)
            path = part.scan.path if part.scan is not None else None
            if text.startswith("Model Runner") and path and path.runner in ("v1", "v2") \
                    and part.log.gpu.runner != path.runner:
                self.session.note("gpu", f"the engine took Model Runner {part.log.gpu.runner.upper()}{where}, the "
                                         f"scan decided {path.runner.upper()} ({path.runner_reason})", at)

    def _settle(self, until: float) -> None:
        """Take in the lines still on their way (the end of a traceback, another node's) until ``until``."""
        while time.monotonic() < until and not any(p.log.ended for p in self.parts):
            for i, part in enumerate(self.parts):
                self._take(part, max(0.0, until - time.monotonic()) if i == 0 else 0.0)

    def _fail(self, otherwise: str) -> None:
        """Stop with the root cause the logs show (see diagnose.py), on the node where it is."""
        part = self.root_part()
        explanation = part.log.explanation()
        root = root_cause(explanation, part.scan, part.exit_status)
        first = explanation.crash or explanation.cause
        where = f"on {part.host}: " if len(self.parts) > 1 and root else ""
        self.session.note("crash", where + (root.summary if root else otherwise) +
                          (f" (log line {first.line_number})" if first else ""))
        raise Stop(SmokeVerdict.FAILED, where + root.summary if root else otherwise)

    def _regain(self, part: Part) -> None:
        """A stream ended: the connection dropped. Reopen it and pick up the log where it stopped."""
        options = self.session.options
        where = f" to {part.host}" if len(self.parts) > 1 else ""
        self.session.note("connection", f"lost{where}; reconnecting")
        part.log.stop()
        if not part.remote.reconnect(options.reconnect_within):
            raise SSHError(f"lost the connection to {part.host} and could not reconnect within "
                           f"{options.reconnect_within:.0f} s; the remote watchdog stops the launch "
                           f"{options.lease} s after the last heartbeat")
        self.session.note("connection", "regained; the launch kept running")
        part.log.start()
