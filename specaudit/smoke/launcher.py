"""The smoke's launch and teardown. On the remote, a launch lives in a run directory: ``log`` (the
engine's output), ``pid`` (its process group), ``rc`` (its exit status), ``heartbeat`` (touched by every poll)
and a watchdog that stops the group when the heartbeat goes stale for ``lease`` seconds: a launch survives a
dropped connection long enough to be picked up again, and never outlives specaudit for long. Teardown stops
the whole group, copies its log back and removes the run directory.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.cache import slug
from ..core.errors import SpecauditError
from .remote import Remote, bash_command, quote_command, remote_script
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


class Heartbeat(threading.Thread):
    """Touches the heartbeat of the current run every few seconds, whatever the main thread waits on."""

    def __init__(self, remote: Remote, runs: list[Run]):
        super().__init__(daemon=True)
        self.remote, self.runs = remote, runs
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(HEARTBEAT_SECONDS):
            if self.runs:
                # A dropped connection: the main thread regains it, or the lease runs out.
                with contextlib.suppress(SpecauditError):
                    self.remote.run(f"touch {quote_command([self.runs[-1].directory + '/heartbeat'])}", timeout=30)

    def stop(self) -> None:
        self.stopped.set()


class Launcher:
    """The launches of one smoke on the remote: started detached, their lease kept, and stopped."""

    def __init__(self, session: Session):
        self.session = session
        self.runs: list[Run] = []  # launched and not yet stopped
        self.launches = 0
        self.heartbeat = Heartbeat(session.remote, self.runs)
        self.teardown_notes: list[str] = []
        self.log_copies: list[str] = []  # each launch's log, copied back when it is stopped

    def launch(self, argv: tuple[str, ...] | list[str], runs_dir: str) -> Run:
        """Start ``argv`` in a new run directory under ``runs_dir`` (on the remote), its watchdog beside it."""
        options = self.session.options
        self.launches += 1
        stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-{self.launches}"
        directory = os.path.join(runs_dir, stamp)
        out = self.session.remote.run(bash_command(_LAUNCH, directory, str(options.lease), str(options.stop_grace),
                                                   _WATCHDOG, quote_command(list(argv)), *argv), timeout=60)
        run = Run(directory, int(out.stdout.decode().strip().splitlines()[-1]), tuple(argv))
        self.runs.append(run)
        self.session.note("launch", f"process group {run.pgid} on {options.host}, log {directory}/log")
        if self.launches == 1:
            self.heartbeat.start()
        return run

    def teardown(self) -> None:
        """Stop what runs, unless the remote cannot be reached: then its watchdog will."""
        options = self.session.options
        self.heartbeat.stop()
        remote = self.session.remote
        if self.runs and not remote.alive() and not remote.reconnect(min(10.0, options.reconnect_within)):
            self._note(f"could not reach {options.host}: the remote watchdog stops the launch "
                       f"{options.lease} s after the last heartbeat")
        else:
            self.stop_runs()

    def stop_runs(self) -> None:
        """Stop every run's process group, copy its log back and remove its run directory."""
        grace = self.session.options.stop_grace
        while self.runs:
            run = self.runs.pop()
            try:
                out = self.session.remote.run(bash_command(_STOP, run.directory, str(grace)), timeout=grace + 30)
                for line in out.stdout.decode().strip().splitlines():
                    self._note(line)
                log = self.session.remote.run(f"cat {quote_command([run.directory + '/log'])} && "
                                              f"rm -rf {quote_command([run.directory])}", timeout=120).stdout
                self.log_copies.append(str(self._keep_log(run, log)))
            except SpecauditError as exc:
                self._note(f"stopping {run.directory} failed: {exc}")

    def _keep_log(self, run: Run, log: bytes) -> Path:
        out_dir = self.session.options.out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"smoke-{slug(self.session.options.host)}-{os.path.basename(run.directory)}.log"
        path.write_bytes(log)
        self._note(f"log copied to {path}; run directory removed from the remote")
        return path

    def _note(self, text: str) -> None:
        self.teardown_notes.append(text)
        self.session.note("teardown", text)
