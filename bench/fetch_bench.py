"""Fetching a release for the scan, each way into its own cold temporary cache, side by side:

  ranges        specaudit's way: the wheel's .py files and metadata read by HTTP range requests (fetch.py)
  pip download  its fallback: the whole wheel by ``pip download`` (pip's HTTP cache off), then extracted

Prints the bytes each transferred, its requests and wall time, and whether the two trees are identical.

    python bench/fetch_bench.py                  # vllm==0.33.0 (a 336 MB wheel)
    python bench/fetch_bench.py sglang==0.5.23

Goal: ranges transfer <= 5% of the bytes pip downloads.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specaudit.tree.fetch import fetch_by_ranges  # noqa: E402
from specaudit.tree.locate import REQUIREMENT, WHEEL_PLATFORMS, download_release  # noqa: E402


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else None for p in root.rglob("*")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("release", nargs="?", default="vllm==0.33.0")
    args = parser.parse_args()
    match = REQUIREMENT.match(args.release)
    if match is None:
        parser.error(f"{args.release}: write a release like vllm==0.33.0")
    dist, version = match["dist"], match["version"]
    os.environ["PIP_NO_CACHE_DIR"] = "1"  # cold for pip too: its HTTP cache would serve a wheel fetched before
    with tempfile.TemporaryDirectory(prefix="specaudit-fetch-bench-") as tmp:
        ranged, whole = Path(tmp) / "ranges", Path(tmp) / "pip"
        start = time.perf_counter()
        result = fetch_by_ranges(dist, version, ranged, WHEEL_PLATFORMS)
        ranges_seconds = time.perf_counter() - start
        start = time.perf_counter()
        download_release(dist, version, whole)
        pip_seconds = time.perf_counter() - start
        ours, theirs = snapshot(ranged), snapshot(whole)
    share = result.transferred / result.wheel_bytes
    print(f"{args.release}: {result.wheel} ({result.wheel_bytes:,} bytes), {result.members:,} members the scan reads")
    print(f"{'ranges':<13} {result.transferred:>13,} bytes  {result.requests:>3} requests  {ranges_seconds:7.2f} s   "
          f"({share:.2%} of pip's bytes, its index page included)")
    print(f"{'pip download':<13} {result.wheel_bytes:>13,} bytes  {'':>3}           {pip_seconds:7.2f} s   "
          f"(the wheel; its index page not counted)")
    print(f"trees identical: {'yes' if ours == theirs else 'NO'} ({len(ours):,} files and directories)"
          f"   goal ranges <= 5% of the bytes: {'met' if share <= 0.05 else 'NOT met'}")


if __name__ == "__main__":
    main()
