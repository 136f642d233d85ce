"""How soon specaudit smoke names the root cause of a crash after the engine writes it, and what each poll costs.

A real sshd on 127.0.0.1 (tests/loopback_sshd.py) serves a remote log. The crash of each real launch log in
tests/fixtures/logs (from its root traceback to the end of the log, wrappers and shutdown included) is written
to a fresh remote log at a random moment, as an engine prints it; the bench times it from the write to its root
cause classified (diagnose.root_cause against the vLLM 0.32.0 scan, platform cpu), with the settling wait that
smoke gives a traceback to end. Side by side:

  specaudit   one multiplexed connection, ``tail -F`` streaming the log, each line read as it arrives
  baseline    what a hand-rolled watcher does: every POLL seconds a new ``ssh host tail`` (one handshake each),
              classifying what it read once a fatal line is in

    python bench/smoke_bench.py [--trials N] [--poll 2]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from specaudit.explain.diagnose import root_cause  # noqa: E402
from specaudit.explain.signatures import classify, explain_file, load_signatures, load_wrappers  # noqa: E402
from specaudit.results.scan import ScanResult  # noqa: E402
from specaudit.scan.audit import scan  # noqa: E402
from specaudit.smoke.remote import Remote  # noqa: E402
from specaudit.smoke.watch import SETTLE_SECONDS, LogWatch  # noqa: E402
from specaudit.tree.locate import locate  # noqa: E402

from loopback_sshd import start_sshd  # noqa: E402

LOGS = ROOT / "tests/fixtures/logs"
SIGNATURES, WRAPPERS = load_signatures(["vllm"]), load_wrappers(["vllm"])  # what the baseline watcher matches


class Quiet:
    def event(self, event):
        pass

    def line(self, text):
        pass


def crashes() -> list[tuple[str, str]]:
    """(log name, what the engine printed from its root traceback on) of every real log with a crash."""
    found = []
    for log in sorted(LOGS.glob("*.log")):
        explanation = explain_file(str(log))
        first = explanation.crash or explanation.cause
        if first is not None:
            lines = log.read_text(encoding="utf-8").splitlines()[first.line_number - 1:]
            found.append((log.name, "\n".join(line for line in lines if not line.startswith("# exit status")) + "\n"))
    return found


def specaudit_trial(remote: Remote, log: Path, text: str, gates: ScanResult) -> tuple[float | None, str]:
    """Seconds from the write to the root cause; None for a crash with no fatal line (no signature, no wrapper:
    smoke learns of it when the engine exits, by its poll)."""
    log.write_text("INFO starting\n")
    watch = LogWatch(remote, str(log), "vllm")
    watch.start()
    time.sleep(random.uniform(0.3, 1.5))  # the stream is up; the crash comes at some moment
    with log.open("a") as fh:
        written = time.monotonic()
        fh.write(text)
    while watch.fatal_at is None and time.monotonic() < written + 10:
        watch.pump(0.01, Quiet())
    if watch.fatal_at is None:
        watch.stop()
        return None, "not seen live: no fatal line (smoke learns of it by its exit poll)"
    while time.monotonic() < watch.fatal_at + SETTLE_SECONDS:
        watch.pump(0.01, Quiet())
    root = root_cause(watch.explanation(), gates)
    classified = time.monotonic()
    watch.stop()
    return classified - written, f"classified by {root.by}" if root else "no root cause"


def baseline_trial(config: str, host: str, log: Path, text: str, gates: ScanResult, poll: float) -> tuple[float, int]:
    """A poller that runs on its own clock: the crash lands at a random moment between two of its polls."""
    log.write_text("INFO starting\n")
    written: list[float] = []

    def write() -> None:
        time.sleep(random.uniform(0.3, 1.5))
        with log.open("a") as fh:
            written.append(time.monotonic())
            fh.write(text)

    writer = threading.Thread(target=write)
    writer.start()
    handshakes = 0
    while True:
        out = subprocess.run(["ssh", "-F", config, "-o", "BatchMode=yes", host, f"cat {log}"], capture_output=True).stdout
        handshakes += 1
        explanation = classify(out.decode().splitlines(), SIGNATURES, str(log), WRAPPERS)
        if written and (explanation.crash or explanation.cause):
            root_cause(explanation, gates)
            writer.join()
            return time.monotonic() - written[0], handshakes
        time.sleep(poll)


def row(name: str, values: list[float], extra: str) -> str:
    return (f"{name:<10} median {statistics.median(values):7.4f} s   max {max(values):7.4f} s   "
            f"(n={len(values)})   {extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=0, help="crashes written (default: each real crash once)")
    parser.add_argument("--poll", type=float, default=2.0, help="the baseline's poll interval")
    args = parser.parse_args()
    random.seed(0)
    blocks = crashes()
    gates = scan(locate("vllm==0.32.0"), None, platform="cpu")
    ours, theirs, how, handshakes = [], [], {}, 0
    with tempfile.TemporaryDirectory(prefix="specaudit-bench-") as tmp:
        server = start_sshd(Path(tmp) / "sshd")
        remote = Remote(server.alias, str(server.config))
        try:
            remote.connect()
            for trial in range(args.trials or len(blocks)):
                name, text = blocks[trial % len(blocks)]
                seconds, by = specaudit_trial(remote, Path(tmp) / f"ours-{trial}.log", text, gates)
                how[name] = by
                if seconds is None:
                    continue
                ours.append(seconds)
                seconds, polls = baseline_trial(str(server.config), server.alias, Path(tmp) / f"theirs-{trial}.log",
                                                text, gates, args.poll)
                theirs.append(seconds)
                handshakes += polls
        finally:
            remote.close()
            server.stop()
    print(f"crash written to the remote log -> root cause classified ({len(blocks)} real crashes, sshd on 127.0.0.1, "
          f"settling {SETTLE_SECONDS:g} s)")
    print(row("specaudit", ours, f"{remote.handshakes} handshake, {remote.round_trips} remote commands for all trials"))
    print(row("baseline", theirs, f"{handshakes} handshakes (a new ssh every {args.poll:g} s)"))
    for name, by in sorted(how.items()):
        print(f"  {name:<48} {by}")


if __name__ == "__main__":
    main()
