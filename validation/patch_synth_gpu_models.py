#!/usr/bin/env python3
"""The checkpoints of the synthesized-bundle GPU round (validation/gpu/synth/, issue 42), at the GPU grid's sizes
(tiny_eagle3's "gpu" profile: hidden 256, 4 heads of 64, vocab 512, draft vocab 128):

- target-gpt2: validation/patch_synth_models.py's agreeing GPT-2 (8 layers; every attention and MLP output
  projection zero, so the residual stream is the token embedding all the way down; the tied head reads " x" from
  dim 0 three times as strongly as any other token);
- target-gemma: GemmaForCausalLM built the same way (tied, as vLLM 0.26.0's gemma.py asserts; o_proj and down_proj
  zero; every embedding row 1.0 on dim 0, " x"'s 3.0): its greedy output is always " x" too;
- drafter-agree: tiny_eagle3's agreeing EAGLE-3 drafter (fc sums dim 0 of the three aux states; its head's one
  proposal is " x"), so every draft is accepted when the aux states reach it as the target computed them.

Run on the device with the image's python (its torch and transformers):  python3 patch_synth_gpu_models.py OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ["TINY_EAGLE3_PROFILE"] = "gpu"
sys.path.insert(0, str(Path(__file__).resolve().parent))
import patch_synth_models as psm  # noqa: E402  (imports tiny_eagle3 at the gpu profile set above)
import torch  # noqa: E402

t3 = psm.t3


def gemma(agree: int):
    from transformers import GemmaConfig, GemmaForCausalLM

    torch.manual_seed(0)
    config = GemmaConfig(vocab_size=t3.VOCAB, hidden_size=t3.HIDDEN, intermediate_size=t3.INTER,
                         num_hidden_layers=psm.LAYERS, num_attention_heads=t3.HEADS, num_key_value_heads=t3.KV_HEADS,
                         head_dim=t3.HEAD_DIM, max_position_embeddings=t3.MAX_POS, tie_word_embeddings=True,
                         bos_token_id=t3.BOS, eos_token_id=t3.EOS, pad_token_id=t3.PAD)
    model = GemmaForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                p.zero_()
        embed = model.model.embed_tokens.weight  # tied to the head
        embed.mul_(0.02 / max(float(embed.std()), 1e-6))
        embed[:, 0] = 1.0
        embed[agree, 0] = 3.0
    return model


def main() -> int:
    out = Path(sys.argv[1])
    tok, vocab = t3.build_tokenizer()
    agree = vocab["Ġx"]
    wrote = {}
    for name, build in (("target-gpt2", psm.gpt2), ("target-gemma", gemma)):
        model = build(agree)
        model.to(torch.float32).save_pretrained(out / name, safe_serialization=True)
        t3.save_tokenizer(tok, str(out / name))
        wrote[name] = model.config.architectures
    t3.save_drafter(t3.drafter_tensors(agree, True, t3.SEED + 2), str(out / "drafter-agree"))
    import transformers

    print(json.dumps({"out": str(out), "wrote": wrote, "agree_token_id": agree, "hidden": t3.HIDDEN,
                      "transformers": transformers.__version__, "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
