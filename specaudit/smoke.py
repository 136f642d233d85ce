"""Stage: the smoke launch. Audit the remote engine first, launch it detached, watch its log live against the
crash signatures, exercise it once ready (answers, acceptance from /metrics, optionally losslessness), and
stop its whole process group whatever happens.

Everything crosses one multiplexed SSH connection (remote.py). On the remote, a launch lives in a run
directory: ``log`` (the engine's output), ``pid`` (its process group), ``rc`` (its exit status),
``heartbeat`` (touched by every poll) and a watchdog that stops the group when the heartbeat goes stale for
``lease`` seconds: a launch survives a dropped connection long enough to be picked up again, and never
outlives specaudit for long.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import queue
import shutil
import signal
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Protocol

from .cache import cache_dir, slug
from .checkpoint import read_checkpoint
from .diagnose import agreement as diagnose_agreement
from .diagnose import root_cause
from .engines import ENGINES
from .errors import SpecauditError
from .evaluate import scan as run_scan
from .launch import parse_launch_command, strip_assignments, without_speculation
from .locate import EngineTree, locate_directory
from .metrics import Acceptance, ServingProfile, acceptance, load_serving
from .remote import RUNS_DIR, Remote, SSHError, bash_command, quote_command
from .result import Answer, Event, Lossless, Preflight, ScanResult, SmokeResult, SmokeVerdict, Verdict
from .signatures import (
    SERVER_UP,
    Explanation,
    classify,
    clean_line,
    load_crash_signatures,
    load_milestones,
    load_signatures,
    load_wrappers,
    match_line,
)
from .target import Launch, Target, load_model, method_of
from .tracebacks import TracebackReader

POLL_SECONDS = 1.0
# After a fatal line, the lines still on their way (the rest of a traceback, the wrappers) are taken in this long
# before the root cause is classified (bench/smoke_bench.py measures the whole wait).
SETTLE_SECONDS = 1.0
HEARTBEAT_SECONDS = 5.0  # also while a long request is in flight: the lease must not run out under it
# Both engines' OpenAI servers take these extras: greedy, exactly max_tokens tokens, and the token ids back
# (vllm/entrypoints/openai/completion/protocol.py; sglang/srt/entrypoints/openai/protocol.py).
COMPLETION = {"temperature": 0, "ignore_eos": True, "return_token_ids": True}
DEFAULT_PROMPTS = ("The capital of France is", "def fibonacci(n):", "Speculative decoding makes inference faster by")

# Remote scripts, run by bash whatever the login shell is; their arguments arrive as literal words.
# A process group lives while it has a process that is not a zombie: a zombie holds no memory and no GPU,
# and where the node's PID 1 does not reap orphans (some containers) it never goes away.
_ALIVE = r'''
alive() { ps -eo pgid=,stat= | awk -v pg="$1" '$1 == pg && $2 !~ /^Z/ {found = 1} END {exit !found}'; }
'''
_PROBE = r'''
program=$1; shift
found=$(command -v "$program") || { echo "$program: not found on the remote PATH" >&2; exit 127; }
case ${found##*/} in
  python*) python=$found ;;
  *) python=$(sed -n '1s/^#![[:space:]]*//p' "$found") ;;  # a console script: its interpreter
esac
exec $python - "$@"
'''
_LAUNCH = r'''
run=$1 lease=$2 grace=$3 watchdog=$4 command=$5; shift 5
mkdir -p "$run"
printf '%s\n' "$command" > "$run/command"
touch "$run/heartbeat"
setsid bash -c 'echo $$ > "$0/pid"; "$@"; echo $? > "$0/rc"' "$run" env "$@" > "$run/log" 2>&1 < /dev/null &
for _ in $(seq 200); do [ -s "$run/pid" ] && break; sleep 0.05; done
setsid bash -c "$watchdog" specaudit-watchdog "$run" "$lease" "$grace" > /dev/null 2>&1 < /dev/null &
cat "$run/pid"
'''
_WATCHDOG = _ALIVE + r'''
run=$1 lease=$2 grace=$3
echo $$ > "$run/watchdog.pid"
pg=$(cat "$run/pid")
while alive "$pg"; do
  age=$(( $(date +%s) - $(stat -c %Y "$run/heartbeat" 2>/dev/null || echo 0) ))
  if [ "$age" -gt "$lease" ]; then
    echo "specaudit watchdog: no word from specaudit for $age s (lease $lease s): stopping process group $pg" >> "$run/log"
    kill -TERM -- "-$pg" 2>/dev/null
    for _ in $(seq "$grace"); do alive "$pg" || break; sleep 1; done
    kill -KILL -- "-$pg" 2>/dev/null
    break
  fi
  sleep 1
done
'''
_POLL = _ALIVE + r'''
touch "$1/heartbeat"
pg=$(cat "$1/pid")
if alive "$pg"; then echo alive; else echo "exited $(cat "$1/rc" 2>/dev/null)"; fi
'''
_STOP = _ALIVE + r'''
run=$1 grace=$2
wd=$(cat "$run/watchdog.pid" 2>/dev/null) && kill -- "-$wd" 2>/dev/null
pg=$(cat "$run/pid" 2>/dev/null) || { echo "nothing was started"; exit 0; }
if alive "$pg"; then
  kill -TERM -- "-$pg" 2>/dev/null
  for _ in $(seq $((grace * 10))); do alive "$pg" || break; sleep 0.1; done
  if alive "$pg"; then
    kill -KILL -- "-$pg" 2>/dev/null; sleep 0.5
    echo "killed process group $pg (still running $grace s after SIGTERM)"
  else
    echo "stopped process group $pg (SIGTERM)"
  fi
else
  echo "process group $pg had exited"
fi
if alive "$pg"; then echo "LEFT RUNNING: processes of group $pg"; fi
'''


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
    prompts: tuple[str, ...] = DEFAULT_PROMPTS
    max_tokens: int = 32
    out_dir: Path = Path("reports")  # where the log is copied to


class _Stop(Exception):
    """Ends the smoke early with a verdict."""

    def __init__(self, verdict: str, reason: str):
        super().__init__(reason)
        self.verdict, self.reason = verdict, reason


@dataclass(frozen=True)
class _Run:
    directory: str  # on the remote
    pgid: int
    command: tuple[str, ...]


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
            arrived.put((line, milestone, time.monotonic()))
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
                    line, milestone, at = item
                    view.line(line)
                    if milestone:
                        passed.append((milestone, at))
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


class Heartbeat(threading.Thread):
    """Touches the heartbeat of the current run every few seconds, whatever the main thread waits on."""

    def __init__(self, remote: Remote, runs: list):
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


class Smoke:
    """One smoke launch: its stages, run in order by ``run()``; teardown always follows."""

    def __init__(self, options: SmokeOptions, view: SmokeView):
        self.options, self.view = options, view
        self.command = parse_launch_command(list(options.argv))
        self.engine = self.command.engine
        self.serving: ServingProfile = load_serving(self.engine)
        self.port = int(self.command.options.get("port") or self.serving.default_port)
        self.remote = Remote(options.host, options.ssh_config)
        self.started = time.monotonic()
        self.started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.timeline: list[Event] = []
        self.teardown_notes: list[str] = []
        self.runs: list[_Run] = []  # launched and not yet stopped
        self.launches = 0
        self.watch: LogWatch | None = None
        self.heartbeat = Heartbeat(self.remote, self.runs)
        self.local_port: int | None = None
        self.runs_dir = options.runs_dir
        self.log_copies: list[str] = []  # each launch's log, copied back at teardown
        self._exit_status: int | None = None  # the engine's, when it exited on its own
        self.preflight_result: Preflight | None = None
        self.scan_result: ScanResult | None = None

    # -- the timeline -------------------------------------------------------------------------------

    def note(self, phase: str, text: str, at: float | None = None) -> None:
        event = Event(round((at or time.monotonic()) - self.started, 2), phase, text)
        self.timeline.append(event)
        self.view.event(event)

    # -- the whole run ------------------------------------------------------------------------------

    def run(self) -> SmokeResult:
        verdict, reason = SmokeVerdict.PASSED, ""
        answers, figures, lossless, cause, exit_status = [], None, None, None, None
        try:
            self.note("connect", f"ssh {self.options.host}")
            self.remote.connect()
            self.preflight()
            watch = self.launch(self.options.argv)
            self.wait_ready(watch)
            answers, figures = self.exercise(watch, measure=True)
            if self.options.check_lossless:
                lossless = self.check_lossless(answers)
            verdict, reason = self._judge(answers, figures, lossless)
        except _Stop as stop:
            verdict, reason = stop.verdict, stop.reason
        except KeyboardInterrupt:
            verdict, reason = SmokeVerdict.INTERRUPTED, "interrupted (Ctrl-C)"
        except SSHError as exc:
            verdict, reason = SmokeVerdict.UNREACHABLE, str(exc)
        finally:
            with _no_interrupts():
                self.teardown()
        root = agreement = None
        if self.watch is not None:
            explanation = self.watch.explanation()
            cause, exit_status = explanation.cause, self._exit_status
            came_up = verdict in (SmokeVerdict.PASSED, SmokeVerdict.FLAGGED)  # a crash on the first request failed
            root = root_cause(explanation, self.scan_result, exit_status) if verdict == SmokeVerdict.FAILED else None
            if came_up or verdict == SmokeVerdict.FAILED:  # the launch ran its course: its outcome is known
                agreement = diagnose_agreement(self.scan_result, root, came_up)
            reason = root.summary if root is not None else reason
        return SmokeResult(
            host=self.options.host, command=list(self.options.argv), engine=self.engine,
            target=self.command.model, started=self.started_at, verdict=verdict,
            reason=reason, preflight=self.preflight_result, scan=self.scan_result, timeline=self.timeline, cause=cause,
            root=root, agreement=agreement,
            engine_exit=exit_status, last_lines=self.watch.lines[-20:] if self.watch else [], answers=answers,
            acceptance=figures, lossless=lossless, teardown=self.teardown_notes, logs=self.log_copies,
            seconds=round(time.monotonic() - self.started, 2),
        )

    def _judge(self, answers: list[Answer], figures: Acceptance | None, lossless: Lossless | None) -> tuple[str, str]:
        wrong = [a for a in answers if not a.ok]
        if wrong:
            return SmokeVerdict.FAILED, f"{len(wrong)} of {len(answers)} answers are wrong: {wrong[0].problem}"
        if lossless is not None and not lossless.identical:
            return SmokeVerdict.FLAGGED, f"not lossless: {lossless.differences[0]}"
        if figures is not None and figures.flags:
            return SmokeVerdict.FLAGGED, figures.flags[0]
        rate = f"acceptance rate {figures.acceptance_rate:.3f}" if figures and figures.acceptance_rate is not None else ""
        return SmokeVerdict.PASSED, f"ready, {len(answers)} answers right" + (f", {rate}" if rate else "")

    # -- preflight ----------------------------------------------------------------------------------

    def preflight(self) -> None:
        self.note("preflight", "remote Python, engine, GPUs, port, leftovers")
        spec = self.command.speculative
        paths = [[p, r] for p, r in ((self.command.model, self.command.options.get("revision")),
                                     (spec.get("model"), spec.get("revision"))) if p]
        profile = ENGINES[self.engine]
        request = {"package": profile.package, "distributions": list(profile.distributions), "port": self.port,
                   "runs_dir": self.runs_dir, "checkpoints": paths}
        info = json.loads(self._probe("info", request).decode())
        self.runs_dir = info["runs_dir"]  # expanded on the remote
        preflight = self.preflight_result = _preflight_of(info, self.port, self.engine)
        self.note("preflight", f"{preflight.python}; {preflight.engine} at {preflight.engine_root}")
        if preflight.problems:
            raise _Stop(SmokeVerdict.BLOCKED, "; ".join(preflight.problems))
        scan = self.scan_result = self.scan(info)
        self.note("scan", f"{scan.verdict} ({len(scan.blocking)} blocking gate(s)) in {scan.seconds:.1f} s")
        if scan.verdict == Verdict.BLOCKED and not self.options.launch_anyway:
            first = scan.blocking[0]
            raise _Stop(SmokeVerdict.BLOCKED, f"the static scan says BLOCKED: {first.title} ({first.location}); "
                                              "nothing launched (--launch-anyway to launch regardless)")

    def _probe(self, command: str, request: dict) -> bytes:
        program, env = strip_assignments(list(self.options.argv))
        source = resources.files("specaudit").joinpath("remote_probe.py").read_text()
        env_prefix = quote_command(["env", *env]) + " " if env else ""
        proc = self.remote.run(env_prefix + bash_command(_PROBE, program[0], command, json.dumps(request)),
                               input=source, timeout=300, check=False)
        if proc.returncode != 0:
            lines = proc.stderr.decode(errors="replace").strip().splitlines()
            raise _Stop(SmokeVerdict.BLOCKED, f"preflight failed on {self.options.host}: "
                                              f"{lines[-1] if lines else f'exit status {proc.returncode}'}")
        return proc.stdout

    def scan(self, info: dict) -> ScanResult:
        """The static scan of the remote engine's own files, for the target and drafter named on the remote."""
        tree = self._mirror_engine(info["engine"])
        checkpoints = info["checkpoints"]
        model, draft = self.command.model, self.command.speculative.get("model")
        target = None
        if model and checkpoints[model].get("error") and "hub" in checkpoints[model]:
            # A Hub id the node has not cached: the engine downloads it; its config is the Hub's, read from here.
            try:
                target = load_model(model, self.command.options.get("revision"))
            except SpecauditError as exc:
                raise _Stop(SmokeVerdict.BLOCKED, str(exc)) from None
        if model and checkpoints[model].get("config") is not None:
            hub = checkpoints[model].get("hub")
            where = f"{hub['snapshot']}/config.json, from the node's Hub cache" if hub else f"{model}/config.json"
            source = f"{self.options.host}:{where}"
            try:
                config = json.loads(checkpoints[model]["config"])
            except ValueError as exc:
                raise _Stop(SmokeVerdict.BLOCKED, f"{source}: malformed JSON ({exc})") from None
            if not isinstance(config, dict):
                raise _Stop(SmokeVerdict.BLOCKED, f"{source}: expected a JSON object")
            revision = self.command.options.get("revision")
            target = Target(name=f"{model}@{revision}" if revision else model, source=source, config=config)
        drafter = None
        if draft and checkpoints[draft].get("config") is not None:
            drafter = replace(read_checkpoint(str(self._mirror_checkpoint(draft, checkpoints[draft]))),
                              path=f"{self.options.host}:{draft}")
        launch = Launch(target=target, method=method_of(self.command.speculative, draft), engine=self.engine,
                        draft=draft, drafter=drafter, speculative=self.command.speculative,
                        options=self.command.options)
        return run_scan(tree, launch)

    def _mirror_engine(self, engine: dict) -> EngineTree:
        """The remote engine's ``.py`` files, copied once per content (the probe's fingerprint)."""
        name = f"{self.engine}-{engine['version']}-{engine['fingerprint'][:16]}"
        dest = cache_dir("remote", slug(self.options.host)) / name
        if not (dest / ".complete").exists():
            self.note("scan", "copying the remote engine's .py files (once per release)")
            profile = ENGINES[self.engine]
            data = self._probe("pack", {"package": profile.package, "distributions": list(profile.distributions)})
            staging = dest.with_name(dest.name + ".partial")
            shutil.rmtree(staging, ignore_errors=True)  # what an interrupted copy left
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
                archive.extractall(staging, filter="data")
            (staging / ".complete").write_text(engine["package_dir"] + "\n")
            staging.rename(dest)
        tree = locate_directory(dest, self.engine)
        return EngineTree(tree.engine, tree.version, tree.root, f"{self.options.host}:{engine['root']}")

    def _mirror_checkpoint(self, path: str, checkpoint: dict) -> Path:
        """config.json and the safetensors files, as sparse files holding only headers and index tensors."""
        key = hashlib.sha256(json.dumps([path, checkpoint], sort_keys=True).encode()).hexdigest()[:16]
        dest = cache_dir("remote", "checkpoints", key)
        (dest / "config.json").write_text(checkpoint["config"], encoding="utf-8")
        for name, entry in checkpoint["files"].items():
            if "text" in entry:
                (dest / name).write_text(entry["text"], encoding="utf-8")
                continue
            with open(dest / name, "wb") as fh:
                fh.write(base64.b64decode(entry["header"]))
                for start, data in entry["ranges"]:
                    fh.seek(start)
                    fh.write(base64.b64decode(data))
                fh.truncate(entry["size"])
        return dest

    # -- launch and watch ---------------------------------------------------------------------------

    def launch(self, argv: tuple[str, ...] | list[str]) -> LogWatch:
        self.launches += 1
        stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-{self.launches}"
        directory = os.path.join(self.runs_dir, stamp)
        quoted = quote_command(list(argv))
        out = self.remote.run(bash_command(_LAUNCH, directory, str(self.options.lease), str(self.options.stop_grace),
                                           _WATCHDOG, quoted, *argv), timeout=60)
        pgid = int(out.stdout.decode().strip().splitlines()[-1])
        self.runs.append(_Run(directory, pgid, tuple(argv)))
        self.note("launch", f"process group {pgid} on {self.options.host}, log {directory}/log")
        self.watch = LogWatch(self.remote, f"{directory}/log", self.engine)
        self.watch.start()
        if self.local_port is None:
            self.local_port = self.remote.forward(self.port)
            self.heartbeat.start()
        return self.watch

    def wait_ready(self, watch: LogWatch) -> None:
        """Until /health answers 200 and the server lists a model; stop at the first fatal log line."""
        deadline = time.monotonic() + self.options.ready_timeout
        next_poll = 0.0
        while True:
            self._pump(watch, 0.2)
            now = time.monotonic()
            if now >= next_poll:
                next_poll = now + POLL_SECONDS
                self._check_alive(watch)
                if _get(self.local_port, self.serving.health, timeout=1)[0] == 200 and self._served_model():
                    self._pump(watch, 0.0)  # the lines that came before the answer go first in the timeline
                    self.note("ready", f"/health 200 after {now - self.started:.1f} s")
                    return
            if now > deadline:
                raise _Stop(SmokeVerdict.FAILED, f"not ready within {self.options.ready_timeout:.0f} s "
                                                 f"(last milestone: {watch.reached[-1] if watch.reached else 'none'})")

    def _take(self, watch: LogWatch, timeout: float) -> None:
        """Show the lines that arrived, and put the milestones among them on the timeline."""
        for milestone, at in watch.pump(timeout, self.view):
            self.note("engine", milestone, at)

    def _pump(self, watch: LogWatch, timeout: float) -> None:
        self._take(watch, timeout)
        if watch.fatal_at is not None:
            self._fail_from_log(watch)
        if watch.ended:
            self._regain(watch)

    def _settle(self, watch: LogWatch, until: float) -> None:
        """Take in the lines still on their way (the end of a traceback) until ``until`` (monotonic)."""
        while time.monotonic() < until and not watch.ended:
            self._take(watch, max(0.0, until - time.monotonic()))

    def _fail_from_log(self, watch: LogWatch) -> None:
        self._settle(watch, watch.fatal_at + SETTLE_SECONDS)
        self._fail(watch, "the engine crashed")

    def _fail(self, watch: LogWatch, otherwise: str) -> None:
        """Stop with the root cause the log shows (see diagnose.py)."""
        explanation = watch.explanation()
        root = root_cause(explanation, self.scan_result, self._exit_status)
        first = explanation.crash or explanation.cause
        self.note("crash", (root.summary if root else otherwise) + (f" (log line {first.line_number})" if first else ""))
        raise _Stop(SmokeVerdict.FAILED, root.summary if root else otherwise)

    def _check_alive(self, watch: LogWatch) -> None:
        """One round trip: touch the heartbeat and ask whether the process group lives."""
        try:
            state = self.remote.run(bash_command(_POLL, self.runs[-1].directory), timeout=30).stdout.decode().split()
        except SSHError:
            self._regain(watch)
            return
        if state and state[0] == "exited":
            self._exit_status = int(state[1]) if len(state) > 1 and state[1].lstrip("-").isdigit() else None
            self._settle(watch, time.monotonic() + 1.5)
            self.note("exit", f"the engine exited with status {self._exit_status}")
            self._fail(watch, f"the engine exited with status {self._exit_status} and its log shows no root cause; "
                              "its last lines are in the report")

    def _regain(self, watch: LogWatch) -> None:
        """The stream ended: the connection dropped. Reopen it and pick up the log where it stopped."""
        self.note("connection", "lost; reconnecting")
        watch.stop()
        if not self.remote.reconnect(self.options.reconnect_within):
            raise SSHError(f"lost the connection to {self.options.host} and could not reconnect within "
                           f"{self.options.reconnect_within:.0f} s; the remote watchdog stops the launch "
                           f"{self.options.lease} s after the last heartbeat")
        self.note("connection", "regained; the launch kept running")
        watch.start()

    def _served_model(self) -> str | None:
        status, body = _get(self.local_port, "/v1/models", timeout=5)
        try:
            return json.loads(body)["data"][0]["id"] if status == 200 else None
        except (ValueError, KeyError, IndexError, TypeError):
            return None

    # -- requests -----------------------------------------------------------------------------------

    def exercise(self, watch: LogWatch, measure: bool) -> tuple[list[Answer], Acceptance | None]:
        """Real requests through the forward; the answers checked; the acceptance of exactly these requests."""
        model = self._served_model()
        before = _get(self.local_port, "/metrics", timeout=10)[1] if measure else ""
        answers = []
        for prompt in self.options.prompts:
            answers.append(self._ask(watch, model, prompt))
            self._pump(watch, 0.0)  # an engine can answer 200 and die on the request
        self.note("requests", f"{sum(a.ok for a in answers)} of {len(answers)} answers right")
        if not measure:
            return answers, None
        self._check_alive(watch)
        after = _get(self.local_port, "/metrics", timeout=10)[1]
        method = method_of(self.command.speculative, self.command.speculative.get("model"))
        figures = acceptance(before, after, self.serving, method)
        if figures.acceptance_rate is not None:
            self.note("metrics", f"acceptance rate {figures.acceptance_rate:.3f}, mean acceptance length "
                                 f"{figures.mean_acceptance_length or 0:.2f}")
        return answers, figures

    def _ask(self, watch: LogWatch, model: str | None, prompt: str) -> Answer:
        """One completion; while it is in flight the log is still watched, so a crash ends the wait at once."""
        body = {"model": model, "prompt": prompt, "max_tokens": self.options.max_tokens, **COMPLETION}
        reply: list[tuple[int, str]] = []
        request = threading.Thread(target=lambda: reply.append(_post(self.local_port, "/v1/completions", body, 600)),
                                   daemon=True)
        request.start()
        while request.is_alive():
            request.join(0.2)
            self._pump(watch, 0.0)
        status, text = reply[0]
        return check_answer(prompt, status, text, self.options.max_tokens)

    def check_lossless(self, answers: list[Answer]) -> Lossless:
        """Greedy tokens with the drafter and without it must be identical: relaunch without it and compare."""
        self.note("lossless", "relaunching without the drafter")
        self._stop_runs()
        watch = self.launch(tuple(without_speculation(list(self.options.argv))))
        self.wait_ready(watch)
        plain, _ = self.exercise(watch, measure=False)
        lossless = compare_answers(answers, plain)
        self.note("lossless", "identical" if lossless.identical else f"{len(lossless.differences)} prompt(s) differ")
        return lossless

    # -- teardown -----------------------------------------------------------------------------------

    def teardown(self) -> None:
        self.heartbeat.stop()
        if self.watch is not None:
            self.watch.stop()
        if self.runs and not self.remote.alive() and not self.remote.reconnect(min(10.0, self.options.reconnect_within)):
            self._teardown_note(f"could not reach {self.options.host}: the remote watchdog stops the launch "
                                f"{self.options.lease} s after the last heartbeat")
        else:
            self._stop_runs()
        self.remote.close()

    def _teardown_note(self, text: str) -> None:
        self.teardown_notes.append(text)
        self.note("teardown", text)

    def _stop_runs(self) -> None:
        while self.runs:
            run = self.runs.pop()
            try:
                out = self.remote.run(bash_command(_STOP, run.directory, str(self.options.stop_grace)),
                                      timeout=self.options.stop_grace + 30)
                for line in out.stdout.decode().strip().splitlines():
                    self._teardown_note(line)
                log = self.remote.run(f"cat {quote_command([run.directory + '/log'])} && "
                                      f"rm -rf {quote_command([run.directory])}", timeout=120).stdout
                self.log_copies.append(str(self._keep_log(run, log)))
            except SpecauditError as exc:
                self._teardown_note(f"stopping {run.directory} failed: {exc}")

    def _keep_log(self, run: _Run, log: bytes) -> Path:
        self.options.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.options.out_dir / f"smoke-{slug(self.options.host)}-{os.path.basename(run.directory)}.log"
        path.write_bytes(log)
        self._teardown_note(f"log copied to {path}; run directory removed from the remote")
        return path


def run_smoke(options: SmokeOptions, view: SmokeView) -> SmokeResult:
    return Smoke(options, view).run()


def _preflight_of(info: dict, port: int, engine_name: str) -> Preflight:
    engine = info["engine"]
    problems = []
    if engine is None:
        problems.append(f"{engine_name} is not installed for {info['python']['executable']}")
    if info["port_in_use"]:
        problems.append(f"port {port} is already in use on {info['hostname']}")
    for leftover in info["leftovers"]:
        problems.append(f"an earlier launch still runs: process group {leftover['pgid']} ({leftover['run']}): "
                        f"stop it with kill -- -{leftover['pgid']}")
    for path, checkpoint in info["checkpoints"].items():
        # A hub id ("org/name") is the engine's to download; a path must be there.
        if path.startswith(("/", "~", ".")) and (checkpoint.get("error") or checkpoint.get("config") is None):
            problems.append(checkpoint.get("error") or f"{path}: no config.json on {info['hostname']}")
    gpus = info["gpus"] or {}
    record = (engine or {}).get("record") or {}
    return Preflight(
        hostname=info["hostname"], python=f"{info['python']['executable']} ({info['python']['version']})",
        engine=f"{engine_name} {engine['version']}" if engine else f"{engine_name}: not installed",
        engine_root=engine["root"] if engine else "",
        modified_files=record.get("modified", []) + [f"{m} (missing)" for m in record.get("missing", [])],
        gpus=_rows(gpus.get("gpus"), ("index", "uuid", "name", "memory_used_mib", "memory_total_mib", "memory_free_mib")),
        gpu_processes=_rows(gpus.get("processes"), ("gpu_uuid", "pid", "process_name", "used_memory_mib")),
        nvidia_smi=info["gpus"] is not None, port=port, port_in_use=bool(info["port_in_use"]),
        leftovers=info["leftovers"], problems=problems,
        models=[_model_line(path, checkpoint) for path, checkpoint in info["checkpoints"].items()],
    )


def _model_line(path: str, checkpoint: dict) -> str:
    """Where the node will load a model from, and whether a Hub id's weights are already there."""
    hub = checkpoint.get("hub")
    if hub is None:
        return checkpoint.get("error") or f"{path}: a directory on the node"
    if "snapshot" not in hub:
        return f"{path}: not in the node's Hub cache ({hub['cache']}): the engine downloads it at launch"
    weights = "weights cached" if hub["weights_cached"] else \
        "weights NOT cached: the engine downloads them at launch, inside the launch time"
    return f"{path}: the node's Hub cache, snapshot {hub['snapshot']}; {weights}"


def _rows(table, names: tuple[str, ...]) -> list[dict[str, str]]:
    return [dict(zip(names, row)) for row in table] if isinstance(table, list) else []


def check_answer(prompt: str, status: int, text: str, max_tokens: int) -> Answer:
    """An answer is right when it is a completion without an error body and of exactly max_tokens tokens
    (the requests ask for ignore_eos): a 200 alone proves little."""
    try:
        data = json.loads(text)
    except ValueError:
        return Answer(prompt, False, "", None, None, f"HTTP {status}, not JSON: {text[:200]!r}")
    if status != 200 or not isinstance(data, dict) or "error" in data or data.get("object") == "error":
        error = data.get("error", data) if isinstance(data, dict) else data
        message = error.get("message", error) if isinstance(error, dict) else error
        return Answer(prompt, False, "", None, None, f"HTTP {status} with an error: {str(message)[:300]}")
    choices = data.get("choices") or []
    if not choices:
        return Answer(prompt, False, "", None, None, "no choices in the answer")
    choice, usage = choices[0], data.get("usage") or {}
    tokens, produced = choice.get("token_ids"), usage.get("completion_tokens")
    problem = ""
    if produced is not None and produced != max_tokens:
        problem = f"{produced} tokens instead of {max_tokens} (finish_reason {choice.get('finish_reason')})"
    elif not choice.get("text") and not tokens:
        problem = "an empty answer"
    return Answer(prompt, not problem, choice.get("text") or "", tokens, produced, problem)


def compare_answers(with_drafter: list[Answer], without: list[Answer]) -> Lossless:
    differences = []
    for a, b in zip(with_drafter, without):
        left = a.token_ids if a.token_ids is not None and b.token_ids is not None else list(a.text)
        right = b.token_ids if a.token_ids is not None and b.token_ids is not None else list(b.text)
        if left != right:
            at = next((i for i, (x, y) in enumerate(zip(left, right)) if x != y), min(len(left), len(right)))
            unit = "token" if a.token_ids is not None and b.token_ids is not None else "character"
            differences.append(f"{a.prompt!r}: {unit} {at} differs ({left[at:at + 1]} with the drafter, "
                               f"{right[at:at + 1]} without)")
    return Lossless(not differences, min(len(with_drafter), len(without)), differences)


def _get(port: int | None, path: str, timeout: float) -> tuple[int, str]:
    return _http(f"http://127.0.0.1:{port}{path}", None, timeout)


def _post(port: int | None, path: str, body: dict, timeout: float) -> tuple[int, str]:
    return _http(f"http://127.0.0.1:{port}{path}", body, timeout)


def _http(url: str, body: dict | None, timeout: float) -> tuple[int, str]:
    """Status and body; status 0 when nothing answered (not listening yet, or the connection broke)."""
    import urllib.error  # here: urllib.request loads ssl and certifi, which a scan does not need
    import urllib.request

    headers = {"Content-Type": "application/json"} if body is not None else {}
    request = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None,
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return 0, str(exc)


@contextmanager
def _no_interrupts() -> Iterator[None]:
    """Teardown runs to its end: a second Ctrl-C (or a SIGTERM) must not leave the node half cleaned."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
