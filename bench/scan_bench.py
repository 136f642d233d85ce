"""Scan benchmark: specaudit scan of a real vLLM release, cold (empty index cache) and warm, beside
`grep -rn SupportsEagle3` over the same tree, in one run. Prints wall times, ratios and peak RSS.

    python bench/scan_bench.py                 # vLLM 0.33.0 (about 3,200 files), fetched into the cache
    python bench/scan_bench.py vllm==0.17.0 --runs 5

Targets on a 2-core machine: cold <= 3 s, warm <= 0.4 s, peak RSS <= 500 MB.
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
sys.path.insert(0, str(ROOT))

from specaudit.locate import locate  # noqa: E402


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MB (the process and its pool workers), and stdout."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("release", nargs="?", default="vllm==0.33.0")
    parser.add_argument("--target", default="kimi-k2.5")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    tree = locate(args.release)
    files = sum(1 for _ in tree.package_dir.rglob("*.py"))
    size = sum(p.stat().st_size for p in tree.package_dir.rglob("*.py")) / 1e6
    print(f"{tree.label}: {files} .py files, {size:.0f} MB at {tree.root}  (cpus: {os.cpu_count()})")

    grep = [timed(["grep", "-rn", "SupportsEagle3", str(tree.package_dir)]) for _ in range(args.runs)]
    grep_wall = statistics.median(w for w, _, _ in grep)
    grep_lines = len(grep[0][2].splitlines())

    scan = [sys.executable, "-m", "specaudit.cli", "scan", str(tree.root), "--target", args.target]
    cold, warm = [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "SPECAUDIT_CACHE": cache, "PYTHONPATH": str(ROOT)}
            cold.append(timed(scan, env))  # empty index cache
            for _ in range(args.runs):
                warm.append(timed(scan, env))
    verdict = next(line for line in cold[0][2].splitlines() if line.split()[:1] in (["READY"], ["BLOCKED"], ["UNKNOWN"]))

    def row(name: str, runs: list, target: str) -> str:
        wall = statistics.median(w for w, _, _ in runs)
        rss = max(r for _, r, _ in runs)
        return f"{name:<28}{wall:>9.3f} s{wall / grep_wall:>10.1f}x{rss:>10.0f} MB   {target}"

    print(f"\n{'':<28}{'wall':>11}{'vs grep':>11}{'peak RSS':>13}   target")
    print(f"{'grep -rn SupportsEagle3':<28}{grep_wall:>9.3f} s{1:>10.1f}x{max(r for _, r, _ in grep):>10.0f} MB"
          f"   ({grep_lines} lines)")
    print(row("specaudit scan, cold", cold, "<= 3 s, <= 500 MB"))
    print(row("specaudit scan, warm", warm, "<= 0.4 s"))
    print(f"\nmedian of {args.runs} (cold) and {args.runs * args.runs} (warm) runs; verdict: {verdict.strip()}")


if __name__ == "__main__":
    main()
