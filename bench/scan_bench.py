"""Scan benchmark: specaudit scan of real engine releases, cold (empty index cache) and warm, beside a
grep for the EAGLE-3 contract over the same tree, in one run. Prints wall times, CPU seconds (user + sys of the
process and the workers it reaps), the wall ratio to grep and peak RSS: one table per release, the code of
--baseline beside this tree's.

    python bench/scan_bench.py                 # vLLM 0.33.0 (3,231 files) and SGLang 0.5.23 (4,719 files)
    python bench/scan_bench.py vllm==0.17.0 --runs 5
    python bench/scan_bench.py --baseline 6657f9b   # beside the code of another commit (here: before path tracing)

Targets on a 2-core machine, for this tree: a warm targeted scan at most the baseline's CPU time and at most 0.4 s
wall; cold (engine tree cached, index not) at most 3 s; peak RSS at most 80 MiB. Wall and CPU are medians, peak RSS
the largest of the runs. Each side's code runs from its own bytecode cache, filled by one untimed scan first, so
that no run pays for compiling the package it imports (see `bench`).
"""

from __future__ import annotations

import argparse
import contextlib
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

TARGET_WALL_WARM = 0.4  # s
TARGET_WALL_COLD = 3.0  # s
TARGET_RSS = 80  # MiB


def timed(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds (user + sys of the process and the children it reaped: its pool workers), peak RSS
    in MiB (the largest of them), and stdout."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("releases", nargs="*", default=["vllm==0.33.0", "sglang==0.5.23"])
    parser.add_argument("--target", default="kimi-k2.5")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", metavar="REV", help="Also time the scan of this git revision, side by side "
                        "(the two sides take turns, run by run).")
    parser.add_argument("--code", metavar="REV", help="Time this git revision as this tree (a checkout of its own: "
                        "edits made in the working tree while the bench runs do not reach it).")
    parser.add_argument("--warm-only", action="store_true", help="Time the warm scans only (each run's index is "
                        "still built by an untimed cold scan).")
    args = parser.parse_args()

    with contextlib.ExitStack() as stack:
        codes = {"this tree": ROOT}
        for name, revision in (("this tree", args.code), (args.baseline, args.baseline)):
            if revision and name:
                checkout = stack.enter_context(tempfile.TemporaryDirectory())
                subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", checkout, revision],
                               check=True, capture_output=True)
                stack.callback(subprocess.run, ["git", "-C", str(ROOT), "worktree", "remove", "--force", checkout],
                               capture_output=True)
                codes[name] = Path(checkout)
        for release in args.releases:
            bench(release, args.target, args.runs, codes, args.warm_only)
            print()


# What a person would grep for: the protocol's name (vLLM), the method the engine calls (SGLang).
GREP = {"vllm": "SupportsEagle3", "sglang": "set_eagle3_layers_to_capture"}


def bench(release: str, target: str, runs: int, codes: dict[str, Path], warm_only: bool = False) -> None:
    tree = locate(release)
    files = sum(1 for _ in tree.package_dir.rglob("*.py"))
    size = sum(p.stat().st_size for p in tree.package_dir.rglob("*.py")) / 1e6
    print(f"{tree.label}: {files} .py files, {size:.0f} MB at {tree.root}  (cpus: {os.cpu_count()})")

    pattern = GREP[tree.engine.name]
    grep = [timed(["grep", "-rn", pattern, str(tree.package_dir)]) for _ in range(runs)]
    grep_wall = statistics.median(w for w, _, _, _ in grep)
    grep_lines = len(grep[0][3].splitlines())

    scan = [sys.executable, "-m", "specaudit.cli", "scan", str(tree.root), "--target", target]
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())  # the machine may be shared: said beside the figures
    timings: dict[str, tuple[list, list]] = {name: ([], []) for name in codes}
    with contextlib.ExitStack() as stack:
        envs: dict[str, dict[str, str]] = {}
        for name, code in codes.items():
            # The environment sets PYTHONDONTWRITEBYTECODE=1, under which every run would compile the package it
            # imports from source, the larger package paying more (and this tree's __pycache__, which other work
            # writes, would decide whether it does). An installed specaudit runs from bytecode: each side gets its own
            # cache outside the working tree, filled by one untimed cold scan, which the timed runs read.
            bytecode = stack.enter_context(tempfile.TemporaryDirectory())
            base = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
            envs[name] = base | {"PYTHONPATH": str(code), "PYTHONPYCACHEPREFIX": bytecode}
            # `python -m` puts the working directory first on sys.path, before PYTHONPATH: each side runs in its
            # own checkout, else a run from this tree's root would time this tree's code for the baseline too.
            imported = subprocess.run([sys.executable, "-c", "import specaudit; print(specaudit.__file__)"],
                                      env=envs[name], cwd=code, capture_output=True, text=True).stdout.strip()
            if not Path(imported).is_relative_to(code):
                raise SystemExit(f"{name}: specaudit imports from {imported or 'nowhere'}, not from {code}")
            with tempfile.TemporaryDirectory() as cache:
                timed(scan, {**envs[name], "SPECAUDIT_CACHE": cache}, code)
        # The sides take turns, run by run (cold, then its warm runs), so that a machine whose load changes while the
        # bench runs (other work on it) weighs on both alike: the figures are paired.
        for _ in range(runs):
            for name, code in codes.items():
                cold, warm = timings[name]
                with tempfile.TemporaryDirectory() as cache:
                    env = {**envs[name], "SPECAUDIT_CACHE": cache}
                    if not warm_only:
                        cold.append(timed(scan, env, code))  # empty index cache
                    else:
                        timed(scan, env, code)  # the index the warm runs read, untimed
                    for _ in range(runs):
                        warm.append(timed(scan, env, code))
    verdict = next((line for line in timings["this tree"][1][0][3].splitlines()
                    if line.split()[:1] in (["READY"], ["BLOCKED"], ["UNKNOWN"])), "no verdict line (did the scan fail?)")
    baseline = next((name for name in timings if name != "this tree"), None)
    baseline_cpu = statistics.median(c for _, c, _, _ in timings[baseline][1]) if baseline else None

    def row(name: str, runs: list, target: str) -> str:
        if not runs:
            return f"{name:<40}{'(not timed: --warm-only)':>32}"
        wall = statistics.median(w for w, _, _, _ in runs)
        cpu = statistics.median(c for _, c, _, _ in runs)
        rss = max(r for _, _, r, _ in runs)
        return f"{name:<40}{wall:>9.3f} s{cpu:>9.3f} s{wall / grep_wall:>10.1f}x{rss:>10.0f} MiB   {target}"

    def judged(runs: list, wall_limit: float, cpu_limit: float | None = None) -> str:
        """The runs' figures against the targets: "met", or the ones missed."""
        if not runs:
            return "not timed"
        missed = [what for what, over in (
            ("wall", statistics.median(w for w, _, _, _ in runs) > wall_limit),
            ("CPU", cpu_limit is not None and statistics.median(c for _, c, _, _ in runs) > cpu_limit),
            ("RSS", max(r for _, _, r, _ in runs) > TARGET_RSS)) if over]
        return f"missed: {', '.join(missed)}" if missed else "met"

    print(f"{'':<40}{'wall':>11}{'CPU':>11}{'vs grep':>11}{'peak RSS':>14}   target")
    print(f"{'grep -rn ' + pattern:<40}{grep_wall:>9.3f} s{statistics.median(c for _, c, _, _ in grep):>9.3f} s"
          f"{1:>10.1f}x{max(r for _, _, r, _ in grep):>10.0f} MiB   ({grep_lines} lines)")
    for name, (cold, warm) in timings.items():
        if name == "this tree":
            print(row("specaudit scan, cold", cold, f"wall <= {TARGET_WALL_COLD:g} s, RSS <= {TARGET_RSS} MiB: "
                      + judged(cold, TARGET_WALL_COLD)))
            cpu_target = f"CPU <= {baseline}'s {baseline_cpu:.3f} s" if baseline else "CPU <= the baseline's (no --baseline)"
            print(row("specaudit scan, warm", warm, f"wall <= {TARGET_WALL_WARM:g} s, {cpu_target}, RSS <= {TARGET_RSS} MiB: "
                      + judged(warm, TARGET_WALL_WARM, baseline_cpu)))
        else:
            print(row(f"specaudit scan, cold ({name})", cold, "(baseline)"))
            print(row(f"specaudit scan, warm ({name})", warm, "(baseline: the warm CPU bar)"))
    print(f"median of {runs} (cold) and {runs * runs} (warm) runs, the sides taking turns, after one untimed scan per "
          f"side; load average {load} before, {' '.join(f'{x:.1f}' for x in os.getloadavg())} after; "
          f"{target}: {verdict.strip()}")


if __name__ == "__main__":
    main()
