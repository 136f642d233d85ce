"""Launches of every method users run, on vLLM 0.33.0, 0.20.0 and SGLang 0.5.23, each held against the method seam's
contract: a method specaudit does not model gets no verdict (UNKNOWN), a method the release lacks is BLOCKED by that
alone, and no launch of another method is judged by EAGLE-3's checks. Writes validation/methods.md.

    python validation/methods.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from specaudit.launch.checkpoint import Checkpoint, TensorInfo  # noqa: E402
from specaudit.launch.request import Launch  # noqa: E402
from specaudit.launch.target import load_preset  # noqa: E402
from specaudit.scan.audit import analyze, audit  # noqa: E402
from specaudit.tree.locate import locate  # noqa: E402

PRESETS = ("llama3", "qwen3", "deepseek-v3", "kimi-k2", "kimi-k2.5")

# (method family, speculative config, the verdict read from the engine's code where it is the same on every preset):
# vLLM's spellings. A drafter named by a Hub id has no config.json here (the scan is offline): what depends on it is
# unknown, never READY.
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
    ("suffix", {"method": "suffix", "num_speculative_tokens": 3}, "UNKNOWN"),  # arctic-inference: not readable here
    ("dflash", {"method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16", "num_speculative_tokens": 8}, "UNKNOWN"),
    ("dspark", {"method": "dspark", "num_speculative_tokens": 3}, None),  # UNKNOWN; not in 0.20.0: BLOCKED
    # No layer ids: refused by the proposer; a preset that is a snapshot of some keys cannot say the target's config
    # has none of its own.
    ("extract_hidden_states", {"method": "extract_hidden_states", "num_speculative_tokens": 1}, "BLOCKED|UNKNOWN"),
    ("extract_hidden_states", {"method": "extract_hidden_states", "num_speculative_tokens": 1,
                               "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": [1, 2]}}},
     None),  # the target's aux-state interface decides
    ("custom class", {"model": "my_pkg.proposers.MyProposer", "num_speculative_tokens": 3}, "UNKNOWN"),
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
    ("uno", {"method": "uno"}, "BLOCKED"),  # no --uno-lora-path
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
DRAFTERS["lmsys/sglang-EAGLE-LLaMA3-Instruct-8B"] = DRAFTERS["yuhuili/EAGLE-LLaMA3-Instruct-8B"]

RELEASES = {"vllm==0.33.0": VLLM, "vllm==0.20.0": VLLM, "sglang==0.5.23": SGLANG}
EAGLE3_RULES = ("vllm-eagle3", "sglang-eagle3")  # EAGLE-3's own rules and drafter checks


def main() -> int:
    rows, broken = [], 0
    counts: dict[str, int] = {}
    for release, launches in RELEASES.items():
        analysis = analyze(locate(release))
        for family, speculative, expected in launches:
            for preset in PRESETS:
                method = str(speculative["method"]).lower() if speculative.get("method") else None
                result = audit(analysis, Launch(load_preset(preset), method=method, draft=speculative.get("model"),
                                                drafter=DRAFTERS.get(speculative.get("model", "")),
                                                speculative=speculative))
                counts[family] = counts.get(family, 0) + 1
                m = result.method
                judged_by_eagle3 = [f.rule_id for f in result.findings if f.rule_id.startswith(EAGLE3_RULES)]
                ok = (m.method == "eagle3" or not judged_by_eagle3) and (m.modeled or result.verdict != "READY") \
                    and (expected is None or result.verdict in expected.split("|"))
                broken += not ok
                stops = [f.rule_id for f in result.findings if f.status in ("blocks", "unknown")]
                first = stops[0] if stops else "-"
                rows.append(f"| {release} | {family} | `{json.dumps(speculative)}` | {preset} | {m.method or '?'} | "
                            f"{'modeled' if m.modeled else 'not modeled'} | {result.verdict} | {expected or '-'} | "
                            f"{first} | {'ok' if ok else '**contract broken**'} |")
    out = ["# Method seam: launches of every method against its contract", "",
           "Made by `python validation/methods.py`. A launch holds the contract when no EAGLE-3 rule judged a "
           "launch of another method, a method specaudit does not model is never READY, and where the engine's "
           "answer is the same on every preset (read from its code: the expected column), the verdict is that "
           "answer. The drafters named by Hub ids are given the keys and tensor shapes their Hub config.json and "
           "weights have (the script runs offline).", "",
           f"{len(rows)} launches, {broken} breaking the contract. By method family: "
           + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ".", "",
           "| release | family | speculative config | target | engine runs | specaudit | verdict | expected "
           "| first gate that blocks or is unknown | contract |",
           "|---|---|---|---|---|---|---|---|---|---|", *rows, ""]
    Path(__file__).with_name("methods.md").write_text("\n".join(out))
    print(f"{len(rows)} launches, {broken} breaking the contract")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
