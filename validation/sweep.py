"""Sweep: every vLLM release from 0.8.5 (the first with EAGLE-3) and SGLang releases from 0.4.4 (the last patch
of each minor), each scanned for the five bundled presets. Writes validation/sweep.md: the verdict and the
blocking (or unknown) gates of every cell, and how the path was traced (runner, entry points missing).

    python validation/sweep.py                 # all releases (downloads the .py files of each wheel once)
    python validation/sweep.py vllm==0.14.0    # some releases only, printed, sweep.md left as it is
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from specaudit.core.errors import SpecauditError
from specaudit.launch.request import Launch
from specaudit.launch.target import load_preset, presets
from specaudit.scan.audit import scan
from specaudit.tree.locate import locate

VLLM = ["0.8.5", "0.8.5.post1", "0.9.0", "0.9.0.1", "0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.1.1", "0.10.2",
        "0.11.0", "0.11.1", "0.11.2", "0.12.0", "0.13.0", "0.14.0", "0.14.1", "0.15.0", "0.15.1", "0.16.0", "0.17.0",
        "0.17.1", "0.18.0", "0.18.1", "0.19.0", "0.19.1", "0.20.0", "0.20.1", "0.20.2", "0.21.0", "0.22.0", "0.22.1",
        "0.23.0", "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0",
        "0.32.0", "0.33.0"]
SGLANG = ["0.4.4.post4", "0.4.5.post3", "0.4.6.post5", "0.4.7.post1", "0.4.8.post1", "0.4.9.post6", "0.4.10.post2",
          "0.5.1.post3", "0.5.2", "0.5.3.post3", "0.5.4.post3", "0.5.5.post3", "0.5.6.post2", "0.5.7", "0.5.8",
          "0.5.8.post1", "0.5.9", "0.5.10.post1", "0.5.11", "0.5.12.post1", "0.5.13.post1", "0.5.14", "0.5.15.post1",
          "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"]
OUT = Path(__file__).with_name("sweep.md")


def cell(result) -> str:
    gates = [f"{'?' if f.status == 'unknown' else '✗'} `{f.rule_id}` {f.file.rsplit('/', 1)[-1]}:{f.line}"
             for f in result.findings if f.status in ("blocks", "unknown")]
    return f"**{result.verdict}**" + ("<br>" + "<br>".join(gates) if gates else "")


def sweep(requirements: list[str]) -> list[str]:
    names = presets()
    rows = [f"| release | runner | {' | '.join(names)} |", "|---|---|" + "---|" * len(names)]
    counts: dict[str, int] = {}
    for requirement in requirements:
        started = time.perf_counter()
        try:
            tree = locate(requirement)
        except SpecauditError as exc:
            rows.append(f"| {requirement} | | {exc} |")
            continue
        results = [scan(tree, Launch(load_preset(name))) for name in names]
        for result in results:
            counts[result.verdict] = counts.get(result.verdict, 0) + 1
        runner = results[0].path.runner or ""
        rows.append(f"| {requirement} | {runner} | " + " | ".join(cell(r) for r in results) + " |")
        print(f"{requirement}: {[r.verdict for r in results]} ({time.perf_counter() - started:.1f} s)", flush=True)
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    return [f"{len(requirements)} releases × {len(names)} presets: {summary}.", ""] + rows


def main() -> None:
    chosen = sys.argv[1:]
    requirements = chosen or [f"vllm=={v}" for v in VLLM] + [f"sglang=={v}" for v in SGLANG]
    lines = sweep(requirements)
    if chosen:
        print("\n".join(lines))
        return
    header = ["# Sweep: the scan's verdict for each release and preset", "",
              "Regenerate with `python validation/sweep.py`. ✗ a blocking gate, ? a gate that could not be decided "
              "(UNKNOWN). `path-*` gates are found by tracing the EAGLE-3 path with no rule naming them.", ""]
    OUT.write_text("\n".join(header + lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
