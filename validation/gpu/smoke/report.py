#!/usr/bin/env python3
"""validation/gpu-smoke.md from what the GPU smoke rounds brought back (logs/, README.md beside this file).

    python validation/gpu/smoke/report.py                       # write validation/gpu-smoke.md from logs/
    python validation/gpu/smoke/report.py collect ROUND DIR...  # keep a round's unpacked <engine>.tgz under logs/ROUND/

collect keeps, per cell, what smoke left (terminal.txt: its live lines and terminal report; report.md and
report.html; the engine's logs as smoke copied them back; stderr.txt; cell.json: the driver's record) and a slimmed
report.json: smoke's JSON report with the static scan cut to its verdict, method and non-passing findings (the whole
scan is ~500 KB a cell: every finding of the release). The nvidia-smi snapshots, the driver's log and the stage files
are kept beside. Standard library only.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOGS = HERE / "logs"
OUT = HERE.parents[1] / "gpu-smoke.md"
sys.path.insert(0, str(HERE))
from cells import CELLS, command  # noqa: E402

KEEP_STATUS = ("blocks", "degrades", "undecided", "unknown")


def slim(report: dict) -> dict:
    scan = report.get("scan") or {}
    if scan:
        method = scan.get("method") or {}
        report["scan"] = {
            "verdict": scan.get("verdict"), "seconds": scan.get("seconds"), "files_indexed": scan.get("files_indexed"),
            "tree": scan.get("tree"), "method": {k: method.get(k) for k in ("requested", "method", "modeled", "how")},
            "findings": [{k: f.get(k) for k in ("rule_id", "title", "status", "file", "line", "why", "error")}
                         for f in scan.get("findings", []) if str(f.get("status")).lower() in KEEP_STATUS],
            "note": "slimmed by validation/gpu/smoke/report.py collect: passing and not-applicable findings dropped",
        }
    return report


def collect(round_name: str, sources: list[str]) -> None:
    for source in map(Path, sources):
        for engine_dir in [d for d in source.rglob("*") if d.is_dir() and d.name in ("vllm", "sglang")]:
            dest = LOGS / round_name / engine_dir.name
            dest.mkdir(parents=True, exist_ok=True)
            for item in sorted(engine_dir.iterdir()):
                if item.is_file():
                    shutil.copy(item, dest / item.name)
                    continue
                cell = dest / item.name
                cell.mkdir(exist_ok=True)
                logs = sorted(p for p in item.glob("smoke-localhost-*.log"))
                for n, log in enumerate(logs, 1):
                    shutil.copy(log, cell / f"engine-{n}.log")
                for name in ("terminal.txt", "stderr.txt", "cell.json"):
                    if (item / name).exists():
                        shutil.copy(item / name, cell / name)
                for ext in ("md", "html"):
                    for found in item.glob(f"smoke-localhost-*T*.{ext}"):
                        shutil.copy(found, cell / f"report.{ext}")
                for found in item.glob("smoke-localhost-*T*.json"):
                    (cell / "report.json").write_text(json.dumps(slim(json.loads(found.read_text())), indent=1) + "\n")
            stage = [d for d in source.rglob("stage") if d.is_dir()]
            for folder in stage:
                target = LOGS / round_name / "stage"
                target.mkdir(parents=True, exist_ok=True)
                for item in folder.iterdir():
                    shutil.copy(item, target / item.name)


def cells_of(round_dir: Path) -> list[tuple[str, Path]]:
    # the engines' smoke cells only (round 4 keeps its scans beside them: scan-local/, scan-sglang/)
    return [(engine.name, cell) for engine in sorted(round_dir.iterdir()) if engine.is_dir()
            and engine.name in ("vllm", "sglang") for cell in sorted(engine.iterdir()) if cell.is_dir()]


def _acceptance(report: dict) -> str:
    a = report.get("acceptance") or {}
    if not a or a.get("acceptance_rate") is None:
        return "-"
    per = ", ".join(f"{p:.2f}" for p in a.get("per_position") or [])
    kinds = a.get("by_kind") or {}
    kind = ("; by kind " + ", ".join(f"{k} {v:.2f}" if isinstance(v, (int, float)) else f"{k} {v}"
                                     for k, v in kinds.items())) if kinds else ""
    return (f"{a.get('accepted_tokens', 0):.0f} of {a.get('draft_tokens', 0):.0f} draft tokens, rate "
            f"{a['acceptance_rate']:.3f}, length {a.get('mean_acceptance_length') or 0:.2f}, per position [{per}] "
            f"({a.get('source', '')}){kind}")


def _phases(report: dict) -> str:
    """Seconds from launch to the engine's milestones, as smoke's timeline has them."""
    launch = next((e["seconds"] for e in report.get("timeline", []) if e["phase"] == "launch"), None)
    if launch is None:
        return "-"
    seen = []
    for event in report.get("timeline", []):
        if event["phase"] in ("engine", "gpu", "ready", "exit", "crash", "lossless") and len(seen) < 8:
            text = re.sub(r"\s+", " ", event["text"])[:60]
            seen.append(f"+{event['seconds'] - launch:.1f} s {text}")
    return "; ".join(seen) or "-"


DRIVER = re.compile(r"drive\.py|device\.sh|device-run\.sh|tee /root")  # the device call's own shell lines (drive.py)


def snapshot(path: Path) -> str:
    """What an nvidia-smi snapshot of drive.py says: the GPU's memory in use, its processes, the engine's processes
    still alive (round 1's files counted the call's own shell lines, which name the engine: left out here)."""
    text = path.read_text()
    used = re.search(r"(\d+)MiB\s*/\s*(\d+)MiB", text)
    gpu = "no GPU process" if "No running processes found" in text else "GPU processes listed"
    listed = text.split("# engine processes alive", 1)[1].splitlines()[1:] if "# engine processes alive" in text else []
    engine = [line for line in listed if line.strip() and not DRIVER.search(line)]
    return (f"{used.group(1)} of {used.group(2)} MiB in use, {gpu}, {len(engine)} engine process(es) alive"
            if used else "no nvidia-smi table")


def device_time(rounds: dict) -> list[str]:
    lines, total = [], 0
    for name, meta in rounds.items():
        seconds = meta.get("device_seconds") or {}
        if seconds:
            total += sum(seconds.values())
            lines.append(f"- {name}: {sum(seconds.values())} s (" + "; ".join(f"{k}: {v} s" for k, v in seconds.items())
                         + ")")
    return [*lines, f"- in all: {total} s over the rounds' sessions (1800 s a session)"] if lines else []


def render() -> str:
    out = ["# `specaudit smoke` on the lent GPU (an H200; round 2 an H100), over a real OpenSSH connection",
           "",
           "Made by `python validation/gpu/smoke/report.py` from `validation/gpu/smoke/logs/` (what the device calls "
           "brought back; the recipe and the calls: `validation/gpu/smoke/README.md`). Each cell is one "
           "`specaudit smoke localhost -- <launch>` run ON the GPU machine, against the sshd that the round started "
           "there on 127.0.0.1 (Debian 12's OpenSSH 9.2p1, carried): preflight over ssh, the remote engine's files "
           "mirrored and scanned, a detached launch under the watchdog, the log followed live, requests through "
           "an ssh port forward, /metrics or /generate's meta_info, teardown.",
           ""]
    rounds = json.loads((LOGS / "rounds.json").read_text()) if (LOGS / "rounds.json").exists() else {}
    out += ["## Device time (the lease's seconds, as `run` counted them)", "", *device_time(rounds), ""]
    kept = (d for d in LOGS.iterdir() if d.is_dir() and d.name != "sarif")
    for round_dir in sorted(kept, key=lambda d: (d.name.startswith("dry"), d.name)):  # the GPU's rounds first
        meta = rounds.get(round_dir.name, {})
        out += [f"## {round_dir.name}: {meta.get('what', '')}", ""]
        for line in meta.get("notes", []):
            out.append(f"- {line}")
        if meta.get("notes"):
            out.append("")
        rows = cells_of(round_dir)
        if not rows:
            continue
        out += ["| cell | smoke's verdict (exit) | built for | scan's prediction | prediction vs outcome | acceptance | "
                "smoke's seconds (GPU time of the cell) | from launch: what the log showed |",
                "|---|---|---|---|---|---|---|---|"]
        for _engine, cell in rows:
            report_file = cell / "report.json"
            driver = json.loads((cell / "cell.json").read_text()) if (cell / "cell.json").exists() else {}
            if not report_file.exists():
                out.append(f"| `{cell.name}` | no report (exit {driver.get('rc')}) | {driver.get('want', '')} | | | | "
                           f"{driver.get('wall_s', '')} | |")
                continue
            r = json.loads(report_file.read_text())
            scan = r.get("scan") or {}
            agreement = r.get("agreement") or {}
            agrees = {True: "agree", False: "DISAGREE", None: "-"}[agreement.get("agrees")]
            why = agreement.get("why") or ""
            reason = re.sub(r"\s+", " ", r.get("reason", ""))[:220].replace("|", "\\|")
            out.append(f"| `{cell.name}` | **{r['verdict']}** ({r['exit_code']}): {reason} | {driver.get('want', '')} | "
                       f"{scan.get('verdict', '-')} | {agrees}{': ' + why[:160].replace('|', chr(92) + '|') if why else ''} | "
                       f"{_acceptance(r)} | {r.get('seconds')} | {_phases(r).replace('|', chr(92) + '|')} |")
        out.append("")
        for engine_dir in sorted(d for d in round_dir.iterdir() if d.is_dir() and d.name != "stage"):
            for before in sorted(engine_dir.glob("*.before.txt")):
                after = before.with_name(before.name.replace(".before.", ".after."))
                if after.exists():
                    out.append(f"`{before.name.split('.')[0]}`: nvidia-smi before the smoke: {snapshot(before)}; "
                               f"2 s after it ended: {snapshot(after)}.")
                    out.append("")
        out += ["Commands (as smoke got them after `--`; MODELS is /root/m on the device):", ""]
        for _engine, cell in rows:
            c = CELLS.get(cell.name)
            driver = json.loads((cell / "cell.json").read_text()) if (cell / "cell.json").exists() else {}
            argv = driver.get("smoke_argv") or (["specaudit", "smoke", "localhost", *c["smoke"], "--",
                                                 *command(c, "/root/m", 0)] if c else [])
            out.append(f"- `{cell.name}`: `{shlex.join(argv)}`")
        out.append("")
    closing = HERE / "closing.md"
    if closing.exists():
        out += [closing.read_text().strip(), ""]
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "collect":
        collect(sys.argv[2], sys.argv[3:])
    else:
        OUT.write_text(render())
        print(f"wrote {OUT}")
