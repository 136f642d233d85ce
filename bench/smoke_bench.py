"""How soon specaudit smoke names a crash after the engine writes it, and what each poll costs.

A real sshd on 127.0.0.1 (tests/loopback_sshd.py) serves a remote log. Real crash lines (the first root-cause
line of each log in tests/fixtures/logs) are appended to it at random moments; the bench times each from the
write to its classification. Side by side:

  specaudit   one multiplexed connection, ``tail -F`` streaming the log, each line matched as it arrives
  baseline    what a hand-rolled watcher does: every POLL seconds a new ``ssh host tail`` (one handshake each)

    python bench/smoke_bench.py [--trials 10] [--poll 2]
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

from loopback_sshd import start_sshd  # noqa: E402
from specaudit.remote import Remote  # noqa: E402
from specaudit.signatures import explain_file, load_signatures, match_line  # noqa: E402
from specaudit.smoke import LogWatch  # noqa: E402


class Quiet:
    def event(self, event):
        pass

    def line(self, text):
        pass


def crash_lines() -> list[str]:
    lines = []
    for log in sorted((ROOT / "tests/fixtures/logs").glob("*.log")):
        cause = explain_file(str(log)).cause
        if cause:
            lines.append(cause.line)
    return lines


class Writer:
    """Appends the crash lines to the log at random moments, one at a time, as an engine would."""

    def __init__(self, log: Path, lines: list[str], trials: int):
        self.log, self.lines, self.trials = log, lines, trials
        self.written: list[float] = []
        self.found: list[float] = []

    def run(self) -> None:
        for trial in range(self.trials):
            time.sleep(random.uniform(0.3, 2.5))
            with self.log.open("a") as fh:
                self.written.append(time.monotonic())
                fh.write(f"INFO noise line {trial}\n{self.lines[trial % len(self.lines)]}\n")
            while len(self.found) <= trial:
                time.sleep(0.01)

    def latencies(self) -> list[float]:
        return [found - written for found, written in zip(self.found, self.written)]


def specaudit_latencies(remote: Remote, log: Path, lines: list[str], trials: int) -> list[float]:
    watch = LogWatch(remote, str(log), "vllm")
    watch.start()
    time.sleep(1.0)  # the stream is up
    writer = Writer(log, lines, trials)
    thread = threading.Thread(target=writer.run)
    thread.start()
    while len(writer.found) < trials:
        watch.pump(0.01, Quiet())
        if watch.fatal_at is not None:
            writer.found.append(watch.fatal_at)
            watch.fatal_at = None
    thread.join()
    watch.stop()
    return writer.latencies()


def baseline_latencies(config: str, host: str, log: Path, lines: list[str], trials: int, poll: float) -> tuple[list[float], int]:
    signatures = load_signatures(["vllm"])
    offset, handshakes = log.stat().st_size, 0
    writer = Writer(log, lines, trials)
    thread = threading.Thread(target=writer.run)
    thread.start()
    while len(writer.found) < trials:
        out = subprocess.run(["ssh", "-F", config, "-o", "BatchMode=yes", host, f"tail -c +{offset + 1} {log}"],
                             capture_output=True).stdout
        handshakes += 1
        offset += len(out)
        for line in out.decode().splitlines():
            hit = match_line(line, signatures)
            if hit and hit[0].root:
                writer.found.append(time.monotonic())
        time.sleep(poll)
    thread.join()
    return writer.latencies(), handshakes


def row(name: str, values: list[float], extra: str) -> str:
    return (f"{name:<10} median {statistics.median(values):7.4f} s   max {max(values):7.4f} s   "
            f"(n={len(values)})   {extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--poll", type=float, default=2.0, help="the baseline's poll interval")
    args = parser.parse_args()
    random.seed(0)
    lines = crash_lines()
    with tempfile.TemporaryDirectory(prefix="specaudit-bench-") as tmp:
        server = start_sshd(Path(tmp) / "sshd")
        log = Path(tmp) / "engine.log"
        log.write_text("INFO starting\n")
        remote = Remote(server.alias, str(server.config))
        try:
            remote.connect()
            ours = specaudit_latencies(remote, log, lines, args.trials)
            theirs, handshakes = baseline_latencies(str(server.config), server.alias, log, lines, args.trials, args.poll)
        finally:
            remote.close()
            server.stop()
    print(f"crash line written to the remote log -> classified ({len(lines)} real crash lines, sshd on 127.0.0.1)")
    print(row("specaudit", ours, f"{remote.handshakes} handshake, {remote.round_trips} remote command for all trials"))
    print(row("baseline", theirs, f"{handshakes} handshakes (a new ssh every {args.poll:g} s)"))


if __name__ == "__main__":
    main()
