"""A cold matrix over every vLLM release of a range: wall time and bytes received, and what the same releases
would have cost as whole wheels (the baseline: ``pip download`` of each, before range fetching).

    python bench/matrix_bench.py                                   # kimi-k2.5 over '>=0.10,<0.34'
    python bench/matrix_bench.py --releases '>=0.17,<0.19'

Cold: a fresh empty specaudit cache (``SPECAUDIT_CACHE``), so every release is fetched and every tree indexed.
Bytes received are read from /proc/net/dev (every interface but loopback) around the run: keep the machine
otherwise quiet. The whole-wheel baseline is the sum of the wheels' sizes that the index lists (no download).
Goals (issue 14): <= 120 s and <= 1 GB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specaudit.fetch import _Http, _readable, find_wheel, pip_index_config, release_versions  # noqa: E402
from specaudit.locate import WHEEL_PLATFORMS  # noqa: E402


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--releases", default=">=0.10,<0.34")
    ap.add_argument("--target", default="kimi-k2.5")
    args = ap.parse_args()
    versions = release_versions("vllm", args.releases, WHEEL_PLATFORMS)
    with tempfile.TemporaryDirectory(prefix="specaudit-matrix-bench-") as cache:
        before, started = received(), time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "specaudit.cli", "matrix", "--target", args.target, "--engine",
                               "vllm", "--releases", args.releases], capture_output=True, text=True,
                              env={**os.environ, "SPECAUDIT_CACHE": cache}, cwd=ROOT)
        seconds, got = time.perf_counter() - started, received() - before
    if proc.returncode not in (0, 1, 3):
        print(proc.stderr, file=sys.stderr)
        return proc.returncode
    baseline = whole_wheels(versions)
    print(f"matrix --target {args.target} --engine vllm --releases '{args.releases}': {len(versions)} releases, cold")
    print(f"{'':14}{'received':>14}{'wall':>10}")
    print(f"{'specaudit':14}{got / 1e6:>11.1f} MB{seconds:>9.1f} s   (exit {proc.returncode})")
    print(f"{'whole wheels':14}{baseline / 1e6:>11.1f} MB{'-':>10}   (the wheels' sizes on the index; not downloaded)")
    print(f"goals: <= 120 s: {'met' if seconds <= 120 else 'not met'}; <= 1 GB: {'met' if got <= 1e9 else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
