"""Scan benchmark: specaudit scan of real engine releases, cold (empty index cache) and warm, beside a
grep for the EAGLE-3 contract over the same tree, in one run. Prints wall times, ratios and peak RSS.

    python bench/scan_bench.py                 # vLLM 0.33.0 (3,231 files) and SGLang 0.5.23 (4,719 files)
    python bench/scan_bench.py vllm==0.17.0 --runs 5
    python bench/scan_bench.py --baseline 6657f9b   # beside the code of another commit (here: before path tracing)

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

from specaudit.tree.locate import locate  # noqa: E402


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
    parser.add_argument("releases", nargs="*", default=["vllm==0.33.0", "sglang==0.5.23"])
    parser.add_argument("--target", default="kimi-k2.5")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", metavar="REV", help="Also time the scan of this git revision, side by side.")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as checkout:
        codes = {"this tree": ROOT}
        if args.baseline:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", checkout, args.baseline],
                           check=True, capture_output=True)
            codes[args.baseline] = Path(checkout)
        try:
            for release in args.releases:
                bench(release, args.target, args.runs, codes)
                print()
        finally:
            if args.baseline:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", checkout], capture_output=True)


# What a person would grep for: the protocol's name (vLLM), the method the engine calls (SGLang).
GREP = {"vllm": "SupportsEagle3", "sglang": "set_eagle3_layers_to_capture"}


def bench(release: str, target: str, runs: int, codes: dict[str, Path]) -> None:
    tree = locate(release)
    files = sum(1 for _ in tree.package_dir.rglob("*.py"))
    size = sum(p.stat().st_size for p in tree.package_dir.rglob("*.py")) / 1e6
    print(f"{tree.label}: {files} .py files, {size:.0f} MB at {tree.root}  (cpus: {os.cpu_count()})")

    pattern = GREP[tree.engine.name]
    grep = [timed(["grep", "-rn", pattern, str(tree.package_dir)]) for _ in range(runs)]
    grep_wall = statistics.median(w for w, _, _ in grep)
    grep_lines = len(grep[0][2].splitlines())

    scan = [sys.executable, "-m", "specaudit.cli", "scan", str(tree.root), "--target", target]
    timings: dict[str, tuple[list, list]] = {}
    for name, code in codes.items():
        cold, warm = [], []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "SPECAUDIT_CACHE": cache, "PYTHONPATH": str(code)}
                cold.append(timed(scan, env))  # empty index cache
                for _ in range(runs):
                    warm.append(timed(scan, env))
        timings[name] = cold, warm
    cold = timings["this tree"][0]
    verdict = next(line for line in cold[0][2].splitlines() if line.split()[:1] in (["READY"], ["BLOCKED"], ["UNKNOWN"]))

    def row(name: str, runs: list, target: str) -> str:
        wall = statistics.median(w for w, _, _ in runs)
        rss = max(r for _, r, _ in runs)
        return f"{name:<40}{wall:>9.3f} s{wall / grep_wall:>10.1f}x{rss:>10.0f} MB   {target}"

    print(f"{'':<40}{'wall':>11}{'vs grep':>11}{'peak RSS':>13}   target")
    print(f"{'grep -rn ' + pattern:<40}{grep_wall:>9.3f} s{1:>10.1f}x{max(r for _, r, _ in grep):>10.0f} MB"
          f"   ({grep_lines} lines)")
    for name, (cold, warm) in timings.items():
        label = "" if name == "this tree" else f" ({name})"
        print(row(f"specaudit scan, cold{label}", cold, "<= 3 s, <= 500 MB"))
        print(row(f"specaudit scan, warm{label}", warm, "<= 0.4 s"))
    print(f"median of {runs} (cold) and {runs * runs} (warm) runs; {target}: {verdict.strip()}")


if __name__ == "__main__":
    main()
