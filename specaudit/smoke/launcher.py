"""The smoke's launch and teardown. On the remote, a launch lives in a run directory: ``log`` (the
engine's output), ``pid`` (its process group), ``rc`` (its exit status), ``heartbeat`` (touched by every poll)
and a watchdog that stops the group when the heartbeat goes stale for ``lease`` seconds: a launch survives a
dropped connection long enough to be picked up again, and never outlives specaudit for long. Teardown stops
the whole group, copies its log back and removes the run directory.

A multi-node launch (fleet/smoke.py) is one run on each node, each over that node's own connection, with its own
watchdog and lease; teardown stops them all, the nodes side by side.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core.cache import inside, slug, write_atomic
from ..core.errors import SpecauditError
from .interrupts import interrupts_deferred
from .remote import SSHError, Transport, bash_command, quote_command, remote_script
from .session import Session

HEARTBEAT_SECONDS = 5.0  # also while a long request is in flight: the lease must not run out under it

_LAUNCH = remote_script("launch")
_WATCHDOG = remote_script("alive", "watchdog")
_STOP = remote_script("alive", "stop")


@dataclass(frozen=True)
class Run:
    directory: str  # on the remote
    pgid: int
    command: tuple[str, ...]
    host: str = ""  # the node it runs on
    remote: Transport | None = field(default=None, compare=False, repr=False)  # the way in to that node


class Heartbeat(threading.Thread):
    """Touches the heartbeat of every running run every few seconds (one command a node), whatever the main thread
    waits on."""

    def __init__(self, runs: list[Run]):
        super().__init__(daemon=True)
        self.runs = runs
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(HEARTBEAT_SECONDS):
            by_node: dict[str, list[Run]] = {}
            for run in list(self.runs):
                by_node.setdefault(run.host, []).append(run)
            for runs in by_node.values():
                assert runs[0].remote is not None  # the launcher gives every run its way in
                # A dropped connection: the main thread regains it, or the lease runs out.
                with contextlib.suppress(SpecauditError):
                    runs[0].remote.run("touch " + quote_command([r.directory + "/heartbeat" for r in runs]), timeout=30)

    def stop(self) -> None:
        self.stopped.set()


class Launcher:
    """The launches of one smoke on the remote: started detached, their lease kept, and stopped."""

    def __init__(self, session: Session):
        self.session = session
        self.runs: list[Run] = []  # launched and not yet stopped
        self.launches = 0
        self.heartbeat = Heartbeat(self.runs)
        self.teardown_notes: list[str] = []
        self.log_copies: list[str] = []  # each launch's log, copied back when it is stopped
        self.kept: dict[str, str] = {}  # run directory -> its log's local copy
        self._lock = threading.Lock()

    def launch(self, argv: tuple[str, ...] | list[str], runs_dir: str, host: str | None = None) -> Run:
        """Start ``argv`` on ``host`` (default: the head) in a new run directory under ``runs_dir`` (as that node
        expands it), its watchdog beside it."""
        options = self.session.options
        host = host or options.host
        remote = self.session.remotes[host]
        self.launches += 1
        stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-{self.launches}"
        directory = os.path.join(runs_dir, stamp)
        with interrupts_deferred():  # a group started must be recorded, for the teardown to stop it
            out = remote.run(bash_command(_LAUNCH, directory, str(options.lease), str(options.stop_grace), _WATCHDOG,
                                          quote_command(list(argv)), *argv), timeout=60)
            run = Run(directory, int(out.stdout.decode().strip().splitlines()[-1]), tuple(argv), host, remote)
            self.runs.append(run)
        self.session.note("launch", f"process group {run.pgid} on {host}, log {directory}/log")
        if self.launches == 1:
            self.heartbeat.start()
        return run

    def teardown(self) -> None:
        """Stop what runs on every node, unless a node cannot be reached: then its watchdog will."""
        options = self.session.options
        self.heartbeat.stop()
        for host in list(dict.fromkeys(r.host for r in self.runs)):
            remote = self.session.remotes[host]
            if not remote.alive() and not remote.reconnect(min(10.0, options.reconnect_within)):
                self.runs[:] = [r for r in self.runs if r.host != host]
                self._note(f"could not reach {host}: the remote watchdog stops the launch there "
                           f"{options.lease} s after the last heartbeat")
        self.stop_runs()

    def stop_runs(self) -> None:
        """Stop every run's process group, copy its log back and remove its run directory: the nodes side by side,
        each node's runs latest first."""
        by_node: dict[str, list[Run]] = {}
        while self.runs:
            run = self.runs.pop()
            by_node.setdefault(run.host, []).append(run)
        if len(by_node) <= 1:
            for runs in by_node.values():
                self._stop(runs)
            return
        threads = [threading.Thread(target=self._stop, args=(runs,)) for runs in by_node.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _stop(self, runs: list[Run]) -> None:
        grace = self.session.options.stop_grace
        for run in runs:
            remote = run.remote or self.session.remotes[run.host]
            where = f" on {run.host}" if self.session.options.workers else ""
            try:
                out = _once_more(remote, bash_command(_STOP, run.directory, str(grace)), grace + 30)
                for line in out.stdout.decode().strip().splitlines():
                    self._note(line + where)
                log = _once_more(remote, f"cat {quote_command([run.directory + '/log'])} && "
                                         f"rm -rf {quote_command([run.directory])}", 120).stdout
                self.log_copies.append(str(self._keep_log(run, log)))
            except SpecauditError as exc:
                self._note(f"stopping {run.directory}{where} failed: {exc}")

    def _keep_log(self, run: Run, log: bytes) -> Path:
        out_dir = self.session.options.out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        # Written as every report is: a name of one safe component, inside --out, through a file of its own (a symlink
        # planted at the name is replaced, never followed).
        path = inside(out_dir, out_dir / f"{slug(f'smoke-{run.host}-{os.path.basename(run.directory)}')}.log")
        write_atomic(path, log)
        self.kept[run.directory] = str(path)
        self._note(f"log copied to {path}; run directory removed from {run.host}")
        return path

    def _note(self, text: str) -> None:
        with self._lock:
            self.teardown_notes.append(text)
        self.session.note("teardown", text)


def _once_more(remote: Transport, script: str, timeout: float) -> subprocess.CompletedProcess:
    """A teardown command, sent again over a regained connection where ssh itself failed on it (exit 255): both are
    idempotent, and a launch left running or a run directory left behind is what teardown exists to prevent."""
    try:
        return remote.run(script, timeout=timeout)
    except SSHError:
        if not remote.reconnect(10.0):
            raise
        return remote.run(script, timeout=timeout)
