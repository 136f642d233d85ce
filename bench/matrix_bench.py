"""A cold matrix over every vLLM release of a range: wall time, CPU time and bytes received, and what the same
releases would have cost as whole wheels (the baseline: ``pip download`` of each, before range fetching).

    python bench/matrix_bench.py                                   # kimi-k2.5 over '>=0.10,<0.34'
    python bench/matrix_bench.py --releases '>=0.17,<0.19'
    python bench/matrix_bench.py --stages                          # and each stage alone, cold

Cold: a fresh empty specaudit cache (``SPECAUDIT_CACHE``), so every release is fetched and every tree indexed.
The matrix fetches and scans at once (each release is scanned as it lands); ``--stages`` then runs each alone:
the fetch of every release into another fresh cache, and the matrix over the trees it fetched with the index
cache emptied. CPU time is user + system of the run and every process it started: on a shared machine, the
figure that other work does not change much. Bytes received are read from /proc/net/dev (every interface but
loopback) around each run: keep the machine otherwise quiet. The whole-wheel baseline is the sum of the wheels'
sizes that the index lists (no download). Goals (issue 14): <= 120 s and <= 1 GB.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specaudit.tree.fetch import _Http, _readable, find_wheel, pip_index_config, release_versions  # noqa: E402
from specaudit.tree.locate import WHEEL_PLATFORMS  # noqa: E402


def received() -> int:
    """Bytes received on every interface but loopback, since boot."""
    total = 0
    for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
        name, _, fields = line.partition(":")
        if name.strip() != "lo":
            total += int(fields.split()[0])
    return total


def whole_wheels(versions: list[str]) -> int:
    """What downloading each release's wheel would transfer: the sizes of the wheels pip would pick (HEAD-free: the
    JSON index page lists sizes; a wheel whose size it does not list is left out and said so)."""
    config = pip_index_config()
    http = _Http(config)
    sizes = {}
    for index in config.index_urls:
        if not _readable(index):
            continue
        page = http.get(f"{index.rstrip('/')}/vllm/", {"Accept": "application/vnd.pypi.simple.v1+json"})
        if page and page[1].startswith("application/vnd.pypi.simple.v1+json"):
            import json

            sizes.update({f["filename"]: f.get("size") for f in json.loads(page[0])["files"]})
    total = 0
    for version in versions:
        wheel = find_wheel(http, config.index_urls, "vllm", version, WHEEL_PLATFORMS).filename
        total += sizes.get(wheel) or 0
    return total


@dataclass(frozen=True)
class Run:
    """One command, run cold: what it took."""

    seconds: float  # wall
    cpu: float  # user + system of the command and every process it started
    received: int  # bytes
    returncode: int
    stderr: str

    def row(self, name: str) -> str:
        return f"{name:34}{self.received / 1e6:>11.1f} MB{self.seconds:>9.1f} s{self.cpu:>9.1f} s"


def run(command: list[str], cache: Path) -> Run:
    """``command`` with ``cache`` as the specaudit cache."""
    before, started, usage = received(), time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "SPECAUDIT_CACHE": str(cache)},
                          cwd=ROOT)
    seconds, got, after = time.perf_counter() - started, received() - before, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    return Run(seconds, cpu, got, proc.returncode, proc.stderr)


def stages(matrix: list[str], versions: list[str], work: Path) -> list[tuple[str, Run]]:
    """The fetch alone, into a fresh cache; then the matrix over the trees it fetched, the index cache emptied."""
    cache = work / "stages"
    fetch = [sys.executable, "-c", "import sys; from specaudit.tree.locate import fetch_releases; fetch_releases(sys.argv[1:])",
             *(f"vllm=={v}" for v in versions)]
    fetched = run(fetch, cache)
    shutil.rmtree(cache / "index", ignore_errors=True)
    return [("  fetch alone", fetched), ("  index and scans alone (fetched)", run(matrix, cache))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--releases", default=">=0.10,<0.34")
    ap.add_argument("--target", default="kimi-k2.5")
    ap.add_argument("--stages", action="store_true", help="Also run the fetch alone and the scans alone, each cold.")
    args = ap.parse_args()
    versions = release_versions("vllm", args.releases, WHEEL_PLATFORMS)
    matrix = [sys.executable, "-m", "specaudit.cli", "matrix", "--target", args.target, "--engine", "vllm",
              "--releases", args.releases]
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="specaudit-matrix-bench-") as work:
        cold = run(matrix, Path(work) / "cold")
        if cold.returncode not in (0, 1, 3):
            print(cold.stderr, file=sys.stderr)
            return cold.returncode
        parts = stages(matrix, versions, Path(work)) if args.stages else []
    baseline = whole_wheels(versions)
    print(f"matrix --target {args.target} --engine vllm --releases '{args.releases}': {len(versions)} releases, cold, "
          f"{os.cpu_count()} cores (load average {load:.1f} before, {os.getloadavg()[0]:.1f} after)")
    print(f"{'':34}{'received':>14}{'wall':>11}{'CPU':>11}")
    print(f"{cold.row('specaudit')}   (exit {cold.returncode})")
    for name, part in parts:
        print(part.row(name))
    print(f"{'whole wheels':34}{baseline / 1e6:>11.1f} MB{'-':>11}{'-':>11}   (the wheels' sizes on the index; not "
          "downloaded)")
    seconds, got = cold.seconds, cold.received
    print(f"goals: <= 120 s: {'met' if seconds <= 120 else 'not met'}; <= 1 GB: {'met' if got <= 1e9 else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
