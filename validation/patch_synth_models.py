#!/usr/bin/env python3
"""Tiny agreeing targets of two families vLLM 0.32.0 does not support for EAGLE-3 (validation/patch_synth_cpu.py):
GPT-2 and Qwen2-MoE, 8 layers of hidden 128 and tests/runtime/tiny_eagle3.py's 512-token tokenizer, whose greedy
output is always " x" and whose residual stream is the token embedding all the way down (every attention output
and MLP/expert down projection zero), so tiny_eagle3's agreeing EAGLE-3 drafter (fc sums dim 0 of the three aux
states) proposes " x" from them and every draft is accepted when the aux states reach it as built.

Run with the engine venv's python:  VENV/bin/python validation/patch_synth_models.py OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Qwen2MoeConfig, Qwen2MoeForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests/runtime"))
import tiny_eagle3 as t3  # noqa: E402

LAYERS = 8


def gpt2(agree: int) -> GPT2LMHeadModel:
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=t3.VOCAB, n_positions=t3.MAX_POS, n_embd=t3.HIDDEN, n_layer=LAYERS,
                                       n_head=t3.HEADS, bos_token_id=t3.BOS, eos_token_id=t3.EOS))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("attn.c_proj.weight", "attn.c_proj.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")):
                p.zero_()
        model.transformer.wpe.weight.zero_()
        wte = model.transformer.wte.weight  # tied to the head: " x"'s row reads dim 0 three times as strongly
        wte.mul_(0.02)
        wte[:, 0] = 1.0
        wte[agree, 0] = 3.0
    return model


def qwen2_moe(agree: int) -> Qwen2MoeForCausalLM:
    torch.manual_seed(0)
    config = Qwen2MoeConfig(vocab_size=t3.VOCAB, hidden_size=t3.HIDDEN, intermediate_size=t3.INTER, num_hidden_layers=LAYERS,
                            num_attention_heads=t3.HEADS, num_key_value_heads=t3.KV_HEADS, max_position_embeddings=t3.MAX_POS,
                            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                            shared_expert_intermediate_size=64, tie_word_embeddings=False,
                            bos_token_id=t3.BOS, eos_token_id=t3.EOS)
    model = Qwen2MoeForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.mul_(0.1) if p.dim() > 1 else None
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                p.zero_()
        model.model.embed_tokens.weight[:, 0] = 1.0
        head = model.lm_head.weight
        head[:, 0] = 0.0
        head[agree, 0] = 10.0
    return model


def main() -> int:
    out = Path(sys.argv[1])
    tok, vocab = t3.build_tokenizer()
    agree = vocab["Ġx"]
    for name, model in (("target-gpt2", gpt2(agree)), ("target-qwen2moe", qwen2_moe(agree))):
        path = out / name
        model.to(torch.float32).save_pretrained(path, safe_serialization=True)
        t3.save_tokenizer(tok, str(path))
        print(json.dumps({"wrote": str(path), "architectures": model.config.architectures}))
    t3.save_drafter(t3.drafter_tensors(agree, agree=True, seed=1), str(out / "drafter-agree"))
    print(json.dumps({"wrote": str(out / "drafter-agree")}))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
