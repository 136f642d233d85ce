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

from specaudit.launch.request import Launch  # noqa: E402
from specaudit.launch.target import load_preset  # noqa: E402
from specaudit.scan.audit import analyze, audit  # noqa: E402
from specaudit.tree.locate import locate  # noqa: E402

PRESETS = ("llama3", "qwen3", "deepseek-v3", "kimi-k2", "kimi-k2.5")

# (method family, speculative config): vLLM's spellings.
VLLM = [
    ("mtp", {"method": "mtp", "num_speculative_tokens": 1}),
    ("mtp", {"method": "deepseek_mtp", "num_speculative_tokens": 1}),
    ("mtp", {"method": "mtp"}),
    ("eagle-1", {"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 3}),
    ("eagle-1", {"model": "yuhuili/EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 3}),
    ("draft model", {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 3}),
    ("draft model", {"model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 3}),
    ("ngram", {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}),
    ("ngram", {"model": "ngram", "num_speculative_tokens": 3}),
    ("ngram", {"method": "ngram", "prompt_lookup_min": 5, "prompt_lookup_max": 2, "num_speculative_tokens": 3}),
    ("suffix", {"method": "suffix", "num_speculative_tokens": 3}),
    ("dflash", {"method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16", "num_speculative_tokens": 8}),
    ("dspark", {"method": "dspark", "num_speculative_tokens": 3}),
    ("extract_hidden_states", {"method": "extract_hidden_states", "num_speculative_tokens": 1}),
    ("custom class", {"model": "my_pkg.proposers.MyProposer", "num_speculative_tokens": 3}),
    ("eagle-3", {"method": "eagle3", "model": "org/EAGLE3-drafter", "num_speculative_tokens": 3}),
    ("eagle-3", {"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}),
    ("eagle-3", {"method": "eagle3", "model": "org/drafter", "num_speculative_tokens": -3}),
]
SGLANG = [
    ("mtp", {"method": "nextn"}),
    ("eagle-1", {"method": "eagle", "model": "lmsys/sglang-EAGLE-LLaMA3-Instruct-8B"}),
    ("standalone", {"method": "standalone", "model": "meta-llama/Llama-3.2-1B-Instruct"}),
    ("ngram", {"method": "ngram"}),
    ("dflash", {"method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16"}),
    ("uno", {"method": "uno"}),
    ("eagle-3", {"method": "eagle3", "model": "org/EAGLE3-drafter"}),
]
RELEASES = {"vllm==0.33.0": VLLM, "vllm==0.20.0": VLLM, "sglang==0.5.23": SGLANG}
EAGLE3_ONLY = ("vllm-eagle3", "sglang-eagle3", "vllm-drafter", "vllm-draft", "path-")


def main() -> int:
    rows, broken = [], 0
    counts: dict[str, int] = {}
    for release, launches in RELEASES.items():
        analysis = analyze(locate(release))
        for family, speculative in launches:
            for preset in PRESETS:
                method = str(speculative["method"]).lower() if speculative.get("method") else None
                result = audit(analysis, Launch(load_preset(preset), method=method, draft=speculative.get("model"),
                                                speculative=speculative))
                counts[family] = counts.get(family, 0) + 1
                m = result.method
                judged_by_eagle3 = [f.rule_id for f in result.findings if f.rule_id.startswith(EAGLE3_ONLY)]
                ok = (m.modeled and m.method == "eagle3") or (
                    result.verdict != "READY" and not judged_by_eagle3)
                broken += not ok
                stops = [f.rule_id for f in result.findings if f.status in ("blocks", "unknown")]
                first = stops[0] if stops else "-"
                rows.append(f"| {release} | {family} | `{json.dumps(speculative)}` | {preset} | {m.method or '?'} | "
                            f"{result.verdict} | {first} | {'ok' if ok else '**contract broken**'} |")
    out = ["# Method seam: launches of every method against its contract", "",
           "Made by `python validation/methods.py`. A launch holds the contract when it is EAGLE-3 (the method "
           "specaudit models, judged by its path) or, for any other method, when its verdict is not READY and no "
           "EAGLE-3 rule or path gate judged it: UNKNOWN for a method specaudit does not model (or cannot tell), "
           "BLOCKED for a method the release lacks or a gate of every method.", "",
           f"{len(rows)} launches, {broken} breaking the contract. By method family: "
           + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ".", "",
           "| release | family | speculative config | target | engine runs | verdict "
           "| first gate that blocks or is unknown | contract |",
           "|---|---|---|---|---|---|---|---|", *rows, ""]
    Path(__file__).with_name("methods.md").write_text("\n".join(out))
    print(f"{len(rows)} launches, {broken} breaking the contract")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
