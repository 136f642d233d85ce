"""The message atlas (specaudit/explain/atlas*.py): its size on disk, its build time per release, and the time of
one line's lookup, each release built into a cold temporary atlas cache.

  cold         the release alone, every file parsed
  after prev   built after the release before it in the list: the files whose bytes it shares not parsed again
  lookup       one line looked up in the merged atlas of all of them (median of 200), and the merged atlas's load
               (and the read of a raising function's callers, done where a located raise's own conditions name no knob)

    python bench/atlas_bench.py                                   # vllm 0.17.0 0.33.0 0.34.0, sglang 0.5.23
    python bench/atlas_bench.py vllm==0.26.0 vllm==0.32.0

The releases are fetched into the user cache like scan's. Goal: a lookup under 50 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specaudit.tree.locate import locate  # noqa: E402

LINES = ("num_speculative_tokens:5 must be divisible by n_predict=3",
         "Worker failed with error 'Model does not support EAGLE3 interface but aux_hidden_state_outputs was "
         "requested', please check the stack trace above for the root cause",
         "'>' not supported between instances of 'NoneType' and 'int'",
         # a message the paste cut (words left out after its first hole): found by its leading part (atlas.leading)
         "max_num_scheduled_tokens is set to -1792, which does not allow any tokens to be scheduled")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("releases", nargs="*", default=["vllm==0.17.0", "vllm==0.33.0", "vllm==0.34.0",
                                                        "sglang==0.5.23"])
    args = parser.parse_args()
    trees = [locate(spec) for spec in args.releases]  # in the user cache, before it is moved below
    with tempfile.TemporaryDirectory(prefix="atlas-bench-") as scratch:
        from specaudit.explain import atlas_build
        from specaudit.explain.raise_sites import locate as locate_line

        print(f"{'release':<16} {'files':>6} {'templates':>9} {'MB':>6} {'cold s':>7} {'after prev s':>12}")
        for i, tree in enumerate(trees):
            os.environ["SPECAUDIT_CACHE"] = str(Path(scratch) / f"cold-{i}")
            cold = time.monotonic()
            (built,), _ = atlas_build.refresh([tree])
            cold = time.monotonic() - cold
            os.environ["SPECAUDIT_CACHE"] = str(Path(scratch) / "shared")
            after = time.monotonic()
            atlas_build.refresh([tree])
            after = time.monotonic() - after
            files = sum(1 for _ in tree.package_dir.rglob("*.py"))
            print(f"{tree.label:<16} {files:>6} {built.templates:>9} {built.bytes / 1e6:>6.2f} {cold:>7.1f} "
                  f"{after:>12.1f}")
        start = time.monotonic()
        merged = atlas_build.load_atlas(trees)
        print(f"merged: {len(merged)} templates, "
              f"{sum(p.stat().st_size for p in (Path(scratch) / 'shared' / 'atlas').glob('merged-*')) / 1e6:.2f} MB, "
              f"built in {time.monotonic() - start:.2f} s")
        start = time.monotonic()
        merged = atlas_build.load_atlas(trees)
        print(f"merged atlas loaded from the cache in {time.monotonic() - start:.2f} s")
        start = time.perf_counter()
        found = [merged.callers(merged.entry(i)) for i in range(len(merged))]  # format 7: each parsed when asked for
        print(f"callers of each of the {len(merged)} templates' functions read in "
              f"{(time.perf_counter() - start) / len(merged) * 1e6:.1f} us each ({merged.functions_called} functions "
              f"with callers, {sum(map(len, found))} callers in all)")
        for line in LINES:
            times = []
            for _ in range(200):
                start = time.perf_counter()
                found = locate_line(merged, line)
                times.append(time.perf_counter() - start)
            where = found.sites[0].location if found else "not located"
            print(f"lookup {statistics.median(times) * 1000:6.2f} ms median, {max(times) * 1000:6.2f} ms max: "
                  f"{line[:60]!r} -> {where}")


if __name__ == "__main__":
    main()
