"""Launches of every method users run, on vLLM 0.34.0, 0.33.0, 0.26.0, 0.20.0, 0.8.4 and SGLang 0.5.23, 0.5.17,
each held against the method seam's contract: a method specaudit does not model gets no verdict (UNKNOWN), a method
the release lacks is BLOCKED by that alone, and no launch of another method is judged by EAGLE-3's checks. Writes
validation/methods.md, each row with the engine's line and error that stop the launch.

    python validation/methods.py
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from specaudit.launch.checkpoint import Checkpoint, TensorInfo  # noqa: E402
from specaudit.launch.request import Launch  # noqa: E402
from specaudit.launch.target import load_preset  # noqa: E402
from specaudit.results.scan import ScanResult  # noqa: E402
from specaudit.scan.audit import Analysis, analyze, audit  # noqa: E402
from specaudit.tree.locate import locate  # noqa: E402

PRESETS = ("llama3", "qwen3", "deepseek-v3", "kimi-k2", "kimi-k2.5")

# (method family, speculative config, the verdict read from the engine's code where it is the same on every preset,
# by release where the releases differ: {"vllm==0.34.0": ..., "*": every other}): vLLM's spellings. A drafter named
# by a Hub id has no config.json here (the scan is offline): what depends on it is unknown, never READY.
VLLM = [
    ("mtp", {"method": "mtp", "num_speculative_tokens": 1}, None),
    ("mtp", {"method": "deepseek_mtp", "num_speculative_tokens": 1}, None),
    ("mtp", {"method": "mtp"}, None),
    ("eagle-1", {"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 3}, None),
    ("eagle-1", {"model": "yuhuili/EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 3}, None),
    ("draft model", {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct",
                     "num_speculative_tokens": 3}, None),  # the vocabularies decide: 128256 against the target's
    ("draft model", {"model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 3}, None),
    ("ngram", {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}, "READY"),
    ("ngram", {"model": "ngram", "num_speculative_tokens": 3}, "READY"),
    ("ngram", {"method": "ngram", "prompt_lookup_min": 5, "prompt_lookup_max": 2, "num_speculative_tokens": 3},
     "BLOCKED"),
    ("ngram", {"method": "ngram", "prompt_lookup_max": 0, "num_speculative_tokens": 3}, "BLOCKED"),
    ("ngram", {"method": "ngram"}, "BLOCKED"),
    # arctic-inference, not readable here; 0.34.0's SuffixSpeculatorConfig.configure checks only its bounds
    ("suffix", {"method": "suffix", "num_speculative_tokens": 3}, {"vllm==0.34.0": "READY", "*": "UNKNOWN"}),
    ("dflash", {"method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16", "num_speculative_tokens": 8}, "UNKNOWN"),
    ("dspark", {"method": "dspark", "num_speculative_tokens": 3}, None),  # UNKNOWN; not in 0.20.0: BLOCKED
    # No layer ids: refused by the proposer; a preset that is a snapshot of some keys cannot say the target's config
    # has none of its own.
    ("extract_hidden_states", {"method": "extract_hidden_states", "num_speculative_tokens": 1}, "BLOCKED|UNKNOWN"),
    ("extract_hidden_states", {"method": "extract_hidden_states", "num_speculative_tokens": 1,
                               "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": [1, 2]}}},
     None),  # the target's aux-state interface decides
    ("custom class", {"model": "my_pkg.proposers.MyProposer", "num_speculative_tokens": 3}, "UNKNOWN|BLOCKED"),
    ("custom class", {"model": "MyProposer", "method": "custom_class", "num_speculative_tokens": 3}, "BLOCKED"),
    ("medusa", {"method": "medusa", "model": "/models/medusa-llama3-8b", "num_speculative_tokens": 4}, None),
    ("medusa", {"method": "medusa", "model": "/models/medusa-llama3-8b", "num_speculative_tokens": 6}, "BLOCKED"),
    ("mlp_speculator", {"model": "/models/llama3-8b-accelerator", "num_speculative_tokens": 3}, None),
    # 0.34.0 has no MLPSpeculator: its architecture is in no registry, which the draft's ModelConfig refuses, past
    # what the method's resolution plays (the model class's declared speculator is not known): UNKNOWN there
    ("mlp_speculator", {"model": "/models/llama3-8b-accelerator", "num_speculative_tokens": 4},
     {"vllm==0.34.0": "BLOCKED|UNKNOWN", "*": "BLOCKED"}),
    # the draft's 14 heads against the draft TP (ModelConfig.verify_with_parallel_config): 4 does not divide them
    ("draft model", {"model": "/models/Qwen2.5-0.5B-Instruct", "num_speculative_tokens": 3}, None,
     {"tensor-parallel-size": 4}),
    ("draft model", {"model": "/models/Qwen2.5-0.5B-Instruct", "num_speculative_tokens": 3}, None,
     {"tensor-parallel-size": 2}),
    ("eagle-3", {"method": "eagle3", "model": "org/EAGLE3-drafter", "num_speculative_tokens": 3}, None),
    ("eagle-3", {"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}, None),
    ("eagle-3", {"method": "eagle3", "model": "org/drafter", "num_speculative_tokens": -3}, "BLOCKED"),
]
SGLANG = [
    ("mtp", {"method": "nextn"}, None),
    ("eagle-1", {"method": "eagle", "model": "lmsys/sglang-EAGLE-LLaMA3-Instruct-8B"}, None),
    ("standalone", {"method": "standalone", "model": "meta-llama/Llama-3.2-1B-Instruct"}, None),
    ("ngram", {"method": "ngram"}, "READY"),
    ("dflash", {"method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16"}, "UNKNOWN"),
    ("uno", {"method": "uno"}, "BLOCKED"),  # no --uno-lora-path (0.5.17 has no UNO: BLOCKED by its list)
    ("dspark", {"method": "dspark", "model": "x/Qwen3-8B-DSpark"}, None),  # the target's vocabulary decides
    ("dspark", {"method": "dspark", "model": "x/Qwen3-8B-DSpark"}, "BLOCKED", {"pp_size": 2}),
    ("eagle-3", {"method": "eagle3", "model": "org/EAGLE3-drafter"}, None),
]


def _checkpoint(path: str, config: dict, shapes: dict[str, tuple[int, ...]]) -> Checkpoint:
    """A drafter as the Hub ships it: its config.json's keys and its tensors' names and shapes (no data)."""
    return Checkpoint(path, config, {n: TensorInfo(n, "BF16", s, f"{path}/model.safetensors", 0, 0)
                                     for n, s in shapes.items()})


_LLAMA3 = {"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
           "rms_norm_eps": 1e-05, "rope_theta": 500000.0}
# The drafters the launches name, with the keys their config.json has on the Hub (read there, kept here: the
# validation runs offline). What the scan would read from the Hub cache, or from --draft DIR.
DRAFTERS = {
    "yuhuili/EAGLE-LLaMA3-Instruct-8B": _checkpoint(
        "yuhuili/EAGLE-LLaMA3-Instruct-8B", {**_LLAMA3, "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
                                             "num_hidden_layers": 1, "intermediate_size": 14336,
                                             "max_position_embeddings": 8192},
        {"fc.weight": (4096, 8192), "layers.0.self_attn.q_proj.weight": (4096, 4096)}),
    "meta-llama/Llama-3.2-1B-Instruct": _checkpoint(
        "meta-llama/Llama-3.2-1B-Instruct", {**_LLAMA3, "architectures": ["LlamaForCausalLM"], "hidden_size": 2048,
                                             "num_hidden_layers": 16, "intermediate_size": 8192,
                                             "max_position_embeddings": 131072, "tie_word_embeddings": True},
        {"model.embed_tokens.weight": (128256, 2048), "model.norm.weight": (2048,)}),
    "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B": _checkpoint(
        "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", {**_LLAMA3, "architectures": ["LlamaForCausalLMEagle3"],
                                                "hidden_size": 4096, "num_hidden_layers": 1,
                                                "intermediate_size": 14336, "max_position_embeddings": 2048},
        {"fc.weight": (4096, 12288), "lm_head.weight": (128256, 4096), "midlayer.self_attn.q_proj.weight": (4096, 8192)}),
}
# The same head converted for SGLang: its config names SGLang's class (models/llama_eagle.py: no rewrite of a draft's
# LlamaForCausalLM to it exists), its fc and layer are the original's.
DRAFTERS["lmsys/sglang-EAGLE-LLaMA3-Instruct-8B"] = _checkpoint(
    "lmsys/sglang-EAGLE-LLaMA3-Instruct-8B", {**DRAFTERS["yuhuili/EAGLE-LLaMA3-Instruct-8B"].config,
                                              "architectures": ["LlamaForCausalLMEagle"]},
    {"fc.weight": (4096, 8192), "layers.0.self_attn.q_proj.weight": (4096, 4096)})
# A DSpark draft for Qwen3-8B with its own mask token id (tests/test_methods_sglang.py: SGLang's dspark_config.py).
DRAFTERS["x/Qwen3-8B-DSpark"] = _checkpoint(
    "x/Qwen3-8B-DSpark", {"architectures": ["DSparkDraftModel"], "model_type": "qwen3", "hidden_size": 4096,
                          "num_hidden_layers": 2, "vocab_size": 151936, "block_size": 7, "markov_rank": 16,
                          "markov_head_type": "vanilla", "mask_token_id": 151669}, {})
# Hand-made, with the keys and tensor names vLLM's loaders read (tests/test_methods_legacy.py, test_methods_vllm.py):
# four Medusa heads and a three-stage MLPSpeculator for Llama-3-8B, and Qwen2.5-0.5B-Instruct's keys (14 heads).
DRAFTERS["/models/medusa-llama3-8b"] = _checkpoint(
    "/models/medusa-llama3-8b", {"architectures": ["MedusaModel"], "model_type": "medusa", "hidden_size": 4096,
                                 "vocab_size": 128256, "num_heads": 4, "num_hidden_layers": 1},
    {n: s for i in range(4) for n, s in ((f"blocks.{i}.layers.0.weight", (4096, 4096)),
                                         (f"lm_heads.{i}.weight", (128256, 4096)))})
DRAFTERS["/models/llama3-8b-accelerator"] = _checkpoint(
    "/models/llama3-8b-accelerator", {"architectures": ["MLPSpeculatorPreTrainedModel"], "model_type": "mlp_speculator",
                                      "emb_dim": 4096, "inner_dim": 0, "n_predict": 3, "vocab_size": 128256,
                                      "top_k_tokens_per_head": [4, 4, 4], "tie_weights": False},
    {n: s for i in range(3) for n, s in ((f"emb.{i}.weight", (128256, 4096)), (f"proj.{i}.weight", (4096, 4096)),
                                         (f"head.{i}.weight", (128256, 4096)), (f"ln.{i}.weight", (4096,)),
                                         (f"ln.{i}.bias", (4096,)))})
DRAFTERS["/models/Qwen2.5-0.5B-Instruct"] = _checkpoint(
    "/models/Qwen2.5-0.5B-Instruct", {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
                                      "vocab_size": 151936, "num_hidden_layers": 24, "num_attention_heads": 14,
                                      "num_key_value_heads": 2, "intermediate_size": 4864,
                                      "max_position_embeddings": 32768, "tie_word_embeddings": True},
    {"model.embed_tokens.weight": (151936, 896), "model.norm.weight": (896,)})

RELEASES = {"vllm==0.34.0": VLLM, "vllm==0.33.0": VLLM, "vllm==0.26.0": VLLM, "vllm==0.20.0": VLLM, "vllm==0.8.4": VLLM,
            "sglang==0.5.23": SGLANG, "sglang==0.5.17": SGLANG}
EAGLE3_RULES = ("vllm-eagle3", "sglang-eagle3")  # EAGLE-3's own rules and drafter checks
REFUSED_BEFORE = ("method-not-in-release", "vllm-architecture-registered", "sglang-architecture-registered")


def _engine_line(finding) -> str:
    """The rule, and the engine's own line and error where the finding has them: the row says where the engine
    stops the launch, not only which rule named it."""
    where = f" `{finding.file}:{finding.line}`" if finding.line else ""
    error = " ".join((finding.error or "").split())
    error = error if len(error) <= 110 else error[:107] + "..."
    return f"{finding.rule_id}{where}" + (f" {error.replace('|', '/')}" if error else "")


def launches_of(release: str) -> list[tuple]:
    """The launch definitions this script runs on a release: its own list where it covers the release, else its
    engine's (the list of the releases it covers of that engine), for a release no run has covered yet
    (validation/new_release.py)."""
    engine = release.partition("==")[0]
    return RELEASES.get(release) or next(v for r, v in RELEASES.items() if r.partition("==")[0] == engine)


@dataclass(frozen=True)
class Held:
    """One launch's scan, held against the method seam's contract."""

    family: str
    speculative: dict
    expected: str | None  # for this release
    options: dict
    preset: str
    result: ScanResult
    ok: bool  # it holds the contract
    first: str  # the first gate that blocks or is unknown, as _engine_line writes it; "-" where none


def hold(analysis: Analysis, definition: tuple, preset: str) -> Held:
    """Scan one launch of this script (a definition of VLLM or SGLANG, on a preset) on an analysed release, and hold
    it against the contract."""
    family, speculative, expected, *options = definition
    if isinstance(expected, dict):
        expected = expected.get(f"{analysis.tree.engine.name}=={analysis.tree.version}", expected["*"])
    methods_of = {rule.id: rule.methods for rule in analysis.rules}
    method = str(speculative["method"]).lower() if speculative.get("method") else None
    result = audit(analysis, Launch(load_preset(preset), method=method, engine=analysis.tree.engine.name,
                                    draft=speculative.get("model"), drafter=DRAFTERS.get(speculative.get("model", "")),
                                    speculative=speculative, options=options[0] if options else {}))
    m = result.method
    # An EAGLE-3 rule judges another method's launch only where it names that method too (DFlash's
    # drafter needs the same aux-state interface of the target).
    judged_by_eagle3 = [f.rule_id for f in result.findings if f.rule_id.startswith(EAGLE3_RULES)
                        and m.method not in methods_of.get(f.rule_id, ("*",))]
    stops = [f for f in result.findings if f.status in ("blocks", "unknown")]
    # The release or the target refused before any method's gate (a method the release lacks, a target
    # it does not register): the expected answer of the method's own gates does not apply.
    before = bool(stops) and result.verdict == "BLOCKED" and stops[0].rule_id in REFUSED_BEFORE
    ok = (m.method == "eagle3" or not judged_by_eagle3) and (m.modeled or result.verdict != "READY") \
        and (expected is None or before or result.verdict in expected.split("|"))
    return Held(family, speculative, expected, options[0] if options else {}, preset, result, ok,
                _engine_line(stops[0]) if stops else "-")


def main() -> int:
    rows, broken = [], 0
    counts: dict[str, int] = {}
    for release, launches in RELEASES.items():
        analysis = analyze(locate(release))
        for definition in launches:
            for preset in PRESETS:
                held = hold(analysis, definition, preset)
                counts[held.family] = counts.get(held.family, 0) + 1
                m = held.result.method
                broken += not held.ok
                flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in held.options.items())
                rows.append(f"| {release} | {held.family} | `{json.dumps(held.speculative)}`{' ' + flags if flags else ''} "
                            f"| {preset} | {m.method or '?'} | "
                            f"{'modeled' if m.modeled else 'not modeled'} | {held.result.verdict} | "
                            f"{held.expected or '-'} | {held.first} | {'ok' if held.ok else '**contract broken**'} |")
    out = ["# Method seam: launches of every method against its contract", "",
           "Made by `python validation/methods.py`. A launch holds the contract when no EAGLE-3 rule judged a "
           "launch of another method, a method specaudit does not model is never READY, and where the engine's "
           "answer is the same on every preset (read from its code: the expected column), the verdict is that "
           "answer. The drafters named by Hub ids are given the keys and tensor shapes their Hub config.json and "
           "weights have (the script runs offline).", "",
           f"{len(rows)} launches, {broken} breaking the contract. By method family: "
           + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ".", "",
           "| release | family | speculative config | target | engine runs | specaudit | verdict | expected "
           "| first gate that blocks or is unknown: its rule, the engine's line and error | contract |",
           "|---|---|---|---|---|---|---|---|---|---|", *rows, ""]
    Path(__file__).with_name("methods.md").write_text("\n".join(out))
    print(f"{len(rows)} launches, {broken} breaking the contract")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
