"""The smoke launch. Audit the remote engine first (preflight.py), launch it detached (launcher.py), watch
its log live against the crash signatures until it is ready (watch.py), exercise it (exercise.py: answers,
acceptance from /metrics, optionally losslessness), and stop its whole process group whatever happens. This
module runs those stages in order and gives the verdict.

Everything crosses one multiplexed SSH connection (remote.py); the remote side's shell lives in
``specaudit/scripts/``. A launch across several nodes (fleet/smoke.py) is this class with two stages of its own: the
preflight of every node (the fleet audit) and a launch of each node's part of the command.
"""

from __future__ import annotations

import time

from ..core.errors import SpecauditError
from ..core.types import SmokeVerdict
from ..explain.diagnose import agreement as diagnose_agreement
from ..explain.diagnose import root_cause
from ..launch.command import parse_launch_command, without_speculation
from ..launch.request import method_of
from ..results.outcome import Acceptance, Answer, Lossless, SmokeResult
from ..results.scan import ScanResult
from ..tree.provenance import launch_provenance
from .exercise import Exercise, Server, compare_answers
from .interrupts import interrupts_ignored
from .launcher import Launcher, Run
from .metrics import load_serving
from .preflight import RemoteEngine
from .remote import SSHError
from .session import Session, SmokeOptions, SmokeView, Stop
from .watch import Watch


class Smoke:
    """One smoke launch: its stages, run in order by ``run()``; teardown always follows."""

    def __init__(self, options: SmokeOptions, view: SmokeView):
        self.options = options
        # The launch command is read before the session opens its ways in: bad input leaves nothing behind.
        self.command = parse_launch_command(list(options.argv))
        self.engine = self.command.engine
        self.serving = load_serving(self.engine)
        self.port = _port(self.command.options.get("port"), self.serving.default_port)
        self.session = Session(options, view)
        self.started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.remote_engine = RemoteEngine(self.session, self.command, self.port)
        self.launcher = Launcher(self.session)
        self.watch: Watch | None = None  # the latest launch's

    def run(self) -> SmokeResult:
        verdict, reason = SmokeVerdict.PASSED, ""
        answers: list[Answer] = []
        figures: Acceptance | None = None
        lossless: Lossless | None = None
        try:
            self.preflight()
            exercise = self._exercise()
            watch = self.launch(self.options.argv)
            watch.wait_ready(exercise.server.ready)
            answers, figures = exercise.run(watch, measure=True)
            if self.options.check_lossless:
                lossless = self.check_lossless(exercise, answers)
            verdict, reason = _judge(answers, figures, lossless)
        except Stop as stop:
            verdict, reason = stop.verdict, stop.reason
        except KeyboardInterrupt:
            verdict, reason = SmokeVerdict.INTERRUPTED, "interrupted (Ctrl-C)"
        except SSHError as exc:
            verdict, reason = SmokeVerdict.UNREACHABLE, str(exc)
        finally:
            with interrupts_ignored():
                self.teardown()
        return self._result(verdict, reason, answers, figures, lossless)

    def preflight(self) -> None:
        """Reach the node, probe it and scan its engine; stop before the launch on what the preflight finds."""
        self.session.note("connect", f"ssh {self.options.host}")
        self.session.remote.connect()
        self.remote_engine.preflight()

    def _exercise(self) -> Exercise:
        """The requests, through a loopback port forwarded to the server's (for every launch of this smoke)."""
        server = Server(self.session.remote.forward(self.port), self.serving)
        # The method the preflight scan resolved from the node's own engine; as named where the scan could not tell.
        scanned = self.remote_engine.scan.method if self.remote_engine.scan else None
        method = (scanned.method if scanned else None) or method_of(self.command.speculative) or "default"
        return Exercise(self.session, server, method)

    def launch(self, argv: tuple[str, ...] | list[str]) -> Watch:
        run = self.launcher.launch(argv, self.remote_engine.runs_dir)
        return self.watch_runs([run], {run.host: self.remote_engine.scan})

    def watch_runs(self, runs: list[Run], scans: dict[str, ScanResult | None]) -> Watch:
        self.watch = Watch(self.session, runs, self.engine, scans)
        self.watch.start()
        return self.watch

    def check_lossless(self, exercise: Exercise, answers: list[Answer]) -> Lossless:
        """Greedy tokens with the drafter and without it must be identical: relaunch without it and compare."""
        self.session.note("lossless", "relaunching without the drafter")
        self.launcher.stop_runs()
        watch = self.launch(tuple(without_speculation(list(self.options.argv))))
        watch.wait_ready(exercise.server.ready)
        plain, _ = exercise.run(watch, measure=False)
        lossless = compare_answers(answers, plain)
        self.session.note("lossless", "identical" if lossless.identical else f"{len(lossless.differences)} prompt(s) differ")
        return lossless

    def teardown(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        self.launcher.teardown()
        self.session.close()

    def _result(self, verdict: SmokeVerdict, reason: str, answers: list[Answer], figures: Acceptance | None,
                lossless: Lossless | None) -> SmokeResult:
        """The outcome; for a launch that ran its course, its root cause and the scan's prediction against it."""
        scan = self.remote_engine.scan
        cause = exit_status = root = agreement = None
        if self.watch is not None:
            part = self.watch.root_part()  # the head's, unless another node's log holds the root cause
            scan = part.scan if part.scan is not None else scan
            explanation = part.log.explanation()
            cause, exit_status = explanation.cause, part.exit_status
            came_up = verdict in (SmokeVerdict.PASSED, SmokeVerdict.FLAGGED)  # a crash on the first request failed
            root = root_cause(explanation, scan, exit_status) if verdict == SmokeVerdict.FAILED else None
            if came_up or verdict == SmokeVerdict.FAILED:  # the launch ran its course: its outcome is known
                helped = None if figures is None or figures.acceptance_rate is None else not figures.flags
                agreement = diagnose_agreement(scan, root, came_up, helped)
            reason = root.summary if root is not None else reason
        return SmokeResult(
            host=self.options.host, command=list(self.options.argv), engine=self.engine,
            target=self.command.model, started=self.started_at, verdict=verdict, reason=reason,
            preflight=self.remote_engine.record, scan=self.remote_engine.scan, timeline=self.session.timeline,
            cause=cause, root=root,
            agreement=agreement, engine_exit=exit_status,
            last_lines=self.watch.root_part().log.lines[-20:] if self.watch else [],
            answers=answers, acceptance=figures, lossless=lossless, teardown=self.launcher.teardown_notes,
            logs=self.launcher.log_copies, seconds=round(time.monotonic() - self.session.started, 2),
            provenance=launch_provenance(scan),
        )


def _port(value: object, default: int) -> int:
    """The launch command's --port, as the engine's argument parser would take it."""
    try:
        port = int(str(value)) if value not in (None, "") else default
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        raise SpecauditError(f"--port {value}: not a TCP port (1 to 65535)")
    return port


def run_smoke(options: SmokeOptions, view: SmokeView) -> SmokeResult:
    return Smoke(options, view).run()


def _judge(answers: list[Answer], figures: Acceptance | None, lossless: Lossless | None) -> tuple[SmokeVerdict, str]:
    """The verdict of a launch that came up and answered."""
    wrong = [a for a in answers if not a.ok]
    if wrong:
        return SmokeVerdict.FAILED, f"{len(wrong)} of {len(answers)} answers are wrong: {wrong[0].problem}"
    if lossless is not None and not lossless.identical:
        return SmokeVerdict.FLAGGED, f"not lossless: {lossless.differences[0]}"
    if figures is not None and figures.flags:
        return SmokeVerdict.FLAGGED, figures.flags[0]
    rate = f"acceptance rate {figures.acceptance_rate:.3f}" if figures and figures.acceptance_rate is not None else ""
    return SmokeVerdict.PASSED, f"ready, {len(answers)} answers right" + (f", {rate}" if rate else "")
