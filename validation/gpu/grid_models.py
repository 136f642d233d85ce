#!/usr/bin/env python3
"""The checkpoints of the GPU differential grid (validation/gpu/README.md): tiny_eagle3_gpu.py's (hidden 256, 4 heads
of 64 for FlashAttention 3, vocab 512, draft vocab 128) plus one target per architecture of the grid and the drafter
variants of the CPU grid (validation/differential.py), built the same way, seeded, no network.

    python3 grid_models.py OUT_DIR          # on the device (the image's torch and transformers) and on the CPU
                                            # machine (the serve venv's python), to scan the same checkpoints

Targets: target-<name> for every name of GRID_TARGETS (target-llama is tiny_eagle3_gpu's agreeing `target`, 8
layers; the others 4 layers, random, as in the CPU grid); target-random / drafter-random for the random pair.
Drafters: drafter-<variant> for every variant of DRAFTERS (drafter-agree is tiny_eagle3_gpu's), and those of the
methods' cells (cells.py METHOD_CELLS: EAGLE-1, DFlash, DSpark, Medusa, MLPSpeculator, a draft model of another
vocabulary).
Prints one JSON line: what it wrote, the transformers version, and what it could not build (with why).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tiny_eagle3_gpu as t3  # noqa: E402
from cells import DRAFTERS, GRID_TARGETS, NUM_SPEC  # noqa: E402

LAYERS = 4


def target_config(name: str, layers: int = LAYERS):
    import transformers as tf

    ids = dict(bos_token_id=t3.BOS, eos_token_id=t3.EOS, pad_token_id=t3.PAD, tie_word_embeddings=False)
    common = dict(vocab_size=t3.VOCAB, hidden_size=t3.HIDDEN, intermediate_size=t3.INTER, num_hidden_layers=layers,
                  num_attention_heads=t3.HEADS, num_key_value_heads=t3.KV_HEADS, head_dim=t3.HEAD_DIM,
                  max_position_embeddings=t3.MAX_POS, **ids)
    return {
        "qwen2": lambda: tf.Qwen2Config(**common),
        "qwen3": lambda: tf.Qwen3Config(**common),
        "qwen3moe": lambda: tf.Qwen3MoeConfig(**common, num_experts_per_tok=2, moe_intermediate_size=128,
                                              num_experts=4),
        # tied, as every Gemma checkpoint: vLLM 0.26.0's GemmaForCausalLM asserts config.tie_word_embeddings
        # (vllm/model_executor/models/gemma.py), which the first GPU round's untied target met before any gate
        "gemma": lambda: tf.GemmaConfig(**dict(common, tie_word_embeddings=True)),
        "gpt2": lambda: tf.GPT2Config(vocab_size=t3.VOCAB, n_positions=t3.MAX_POS, n_embd=t3.HIDDEN, n_layer=LAYERS,
                                      n_head=t3.HEADS, n_inner=t3.INTER, **ids),
    }[name]()


def build_llava(path: Path, tok, seed: int) -> None:
    """LLaVA (LlavaForConditionalGeneration) over a Llama text model of the grid's shapes, in llava-hf's key layout,
    with validation/multimodal_targets.py's processor: "<image>" is token 511."""
    # multimodal_targets builds on tiny_eagle3's shapes: imported by tiny_eagle3_gpu, the GPU ones
    sys.path.insert(0, str(HERE.parent))
    import multimodal_targets as mm

    try:
        mm.build("llava", path, seed)
        return
    except ImportError:  # transformers 4: no *ImageProcessorPil classes; the same files with the 4.x classes
        pass
    import transformers as tf

    torch.manual_seed(seed)
    config = mm.mm_config("llava")
    config.architectures = ["LlavaForConditionalGeneration"]
    model = tf.LlavaForConditionalGeneration(config).float().eval()
    from safetensors.torch import save_file

    path.mkdir(parents=True, exist_ok=True)
    state = {}
    for k, v in model.state_dict().items():
        for old, new in (("vision_tower.vision_model.", "vision_tower.vision_model."),
                         ("model.vision_tower.", "vision_tower.vision_model."),
                         ("model.multi_modal_projector.", "multi_modal_projector."),
                         ("model.language_model.", "language_model.model."), ("lm_head.", "language_model.lm_head.")):
            if k.startswith(old):
                k = new + k[len(old):]
                break
        state[k] = v.contiguous()
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(str(path))
    tokenizer = mm.fast_tokenizer(mm.mm_tokenizer(["<image>"]))
    sizes = dict(size={"shortest_edge": mm.IMAGE_SIZE}, crop_size={"height": mm.IMAGE_SIZE, "width": mm.IMAGE_SIZE})
    proc = tf.LlavaProcessor(image_processor=tf.CLIPImageProcessor(**sizes), tokenizer=tokenizer,
                             patch_size=mm.PATCH, vision_feature_select_strategy="default", image_token="<image>",
                             num_additional_image_tokens=1)
    proc.save_pretrained(str(path))


def eagle1_tensors(agree_token: int, fc_states: int, seed: int) -> dict[str, torch.Tensor]:
    """An EAGLE-1 head in the names vLLM 0.26.0's llama_eagle.py loads (each prefixed `model.`): embed_tokens, fc
    (hidden x fc_states*hidden: 2 is EAGLE-1's [embedding, hidden state]) and one decoder layer without
    input_layernorm (deleted for layer 0). Built as drafter-agree is: o_proj and down_proj zero, so the head's output
    is fc's; fc's row 0 reads dim 0 of the target's hidden state (1.0 there in every target embedding), which the
    target's lm_head turns into the agreeing token: it proposes what target-llama emits."""
    rnd = t3.normal(seed, True)
    q_out, kv_out, hidden = t3.HEADS * t3.HEAD_DIM, t3.KV_HEADS * t3.HEAD_DIM, t3.HIDDEN
    fc = rnd(hidden, fc_states * hidden)
    fc[0, :] = 0.0
    fc[:, hidden] = 0.0
    fc[0, hidden] = 1.0
    p = "layers.0."
    t = {"embed_tokens.weight": rnd(t3.VOCAB, hidden), "fc.weight": fc,
         p + "self_attn.q_proj.weight": rnd(q_out, hidden), p + "self_attn.k_proj.weight": rnd(kv_out, hidden),
         p + "self_attn.v_proj.weight": rnd(kv_out, hidden), p + "self_attn.o_proj.weight": torch.zeros(hidden, q_out),
         p + "post_attention_layernorm.weight": torch.ones(hidden),
         p + "mlp.gate_proj.weight": rnd(t3.INTER, hidden), p + "mlp.up_proj.weight": rnd(t3.INTER, hidden),
         p + "mlp.down_proj.weight": torch.zeros(hidden, t3.INTER)}
    return {k: v.contiguous() for k, v in t.items()}


def save_eagle1(path: Path, agree_token: int, fc_states: int) -> None:
    """An EAGLE-1 drafter as yuhuili/EAGLE-LLaMA3-Instruct-8B ships one: a one-layer LlamaForCausalLM config (vLLM's
    EAGLEConfig renames it EagleLlamaForCausalLM), the tensors of eagle1_tensors."""
    from safetensors.torch import save_file

    path.mkdir(parents=True, exist_ok=True)
    save_file(eagle1_tensors(agree_token, fc_states, t3.SEED + 300 + fc_states), str(path / "model.safetensors"),
              metadata={"format": "pt"})
    config = {k: v for k, v in t3.drafter_config().items() if k not in ("draft_vocab_size", "target_hidden_size")}
    config["architectures"] = ["LlamaForCausalLM"]
    (path / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))


def save_llama_draft(path: Path, tok, vocab: int, seed: int) -> None:
    """A random 2-layer Llama of the grid's widths and another vocabulary size (the tokenizer is the target's)."""
    import transformers as tf

    torch.manual_seed(seed)
    config = tf.LlamaConfig(vocab_size=vocab, hidden_size=t3.HIDDEN, intermediate_size=t3.INTER, num_hidden_layers=2,
                            num_attention_heads=t3.HEADS, num_key_value_heads=t3.KV_HEADS, head_dim=t3.HEAD_DIM,
                            max_position_embeddings=t3.MAX_POS, bos_token_id=t3.BOS, eos_token_id=t3.EOS,
                            pad_token_id=t3.PAD, tie_word_embeddings=False)
    config.architectures = ["LlamaForCausalLM"]
    tf.AutoModelForCausalLM.from_config(config).float().save_pretrained(str(path), safe_serialization=True)
    t3.save_tokenizer(tok, str(path))


# DFlash and DSpark drafters (cells.py METHOD_CELLS on target-qwen3, 4 layers): 2 draft layers reading the hidden
# states of target layers 1 and 3, an fc of 2 x hidden; the mask slots' token is <pad> (the grid's tokenizer has no
# spare id). Real checkpoints (z-lab/Qwen3-8B-DFlash-b16) ship one target layer id per draft layer, no embed_tokens
# and no lm_head (vLLM shares the target's).
DFLASH_LAYERS = 2
DFLASH_TARGET_LAYERS = [1, 3]


def dflash_tensors(fc_in: int, seed: int, markov_rank: int | None = None) -> dict[str, torch.Tensor]:
    """A Qwen3 DFlash backbone in the names vLLM 0.26.0's qwen3_dflash.py loads (DFlashQwen3ForCausalLM.load_weights
    prefixes `model.`; DFlashQwen3Model's mapper stacks q/k/v and gate/up): fc (hidden x fc_in), hidden_norm, norm
    and DFLASH_LAYERS decoder layers with q_norm / k_norm per head; with markov_rank, qwen3_dspark.py's
    DSparkMarkovHead (markov_w1: vocab x rank embedding, markov_w2: vocab x rank head)."""
    rnd = t3.normal(seed, True)
    q_out, kv_out, hidden = t3.HEADS * t3.HEAD_DIM, t3.KV_HEADS * t3.HEAD_DIM, t3.HIDDEN
    t = {"fc.weight": rnd(hidden, fc_in), "hidden_norm.weight": torch.ones(hidden), "norm.weight": torch.ones(hidden)}
    for i in range(DFLASH_LAYERS):
        p = f"layers.{i}."
        t.update({p + "input_layernorm.weight": torch.ones(hidden), p + "post_attention_layernorm.weight":
                  torch.ones(hidden), p + "self_attn.q_proj.weight": rnd(q_out, hidden),
                  p + "self_attn.k_proj.weight": rnd(kv_out, hidden), p + "self_attn.v_proj.weight": rnd(kv_out, hidden),
                  p + "self_attn.o_proj.weight": rnd(hidden, q_out), p + "self_attn.q_norm.weight":
                  torch.ones(t3.HEAD_DIM), p + "self_attn.k_norm.weight": torch.ones(t3.HEAD_DIM),
                  p + "mlp.gate_proj.weight": rnd(t3.INTER, hidden), p + "mlp.up_proj.weight": rnd(t3.INTER, hidden),
                  p + "mlp.down_proj.weight": rnd(hidden, t3.INTER)})
    if markov_rank:
        t["markov_head.markov_w1.weight"] = rnd(t3.VOCAB, markov_rank)
        t["markov_head.markov_w2.weight"] = rnd(t3.VOCAB, markov_rank)
    return {k: v.contiguous() for k, v in t.items()}


def save_draft_head(path: Path, tensors: dict[str, torch.Tensor], config: dict) -> None:
    from safetensors.torch import save_file

    path.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))


def save_dflash(path: Path, target_layers: list[int], fc_states: int) -> None:
    """A DFlash drafter as z-lab ships one: a Qwen3 config (model_type qwen3, DFlashDraftModel, which vLLM's
    EAGLEConfig keeps for method "dflash") with dflash_config {target_layer_ids, mask_token_id} and block_size
    (k + 1; 0.26.0 reads no block size for DFlash); fc built for fc_states target states."""
    config = dict(target_config("qwen3", DFLASH_LAYERS).to_dict(), architectures=["DFlashDraftModel"],
                  block_size=NUM_SPEC + 1, dflash_config={"target_layer_ids": target_layers, "mask_token_id": t3.PAD})
    save_draft_head(path, dflash_tensors(fc_states * t3.HIDDEN, t3.SEED + 400 + fc_states), config)


def save_dspark(path: Path, block_size: int) -> None:
    """A Qwen3 DSpark drafter (Qwen3DSparkModel, the DeepSpec layout: target_layer_ids, mask_token_id, block_size,
    markov_rank at the top level) with dspark_block_size, which vLLM 0.26.0's SpeculativeConfig.__post_init__ holds
    num_speculative_tokens against. Without a dflash_config, DFlashQwen3Model builds fc for one target state per draft
    layer (DFLASH_LAYERS, as many as the target layer ids)."""
    config = dict(target_config("qwen3", DFLASH_LAYERS).to_dict(), architectures=["Qwen3DSparkModel"],
                  target_layer_ids=DFLASH_TARGET_LAYERS, mask_token_id=t3.PAD, markov_rank=32, block_size=block_size,
                  dspark_block_size=block_size)
    save_draft_head(path, dflash_tensors(DFLASH_LAYERS * t3.HIDDEN, t3.SEED + 500, markov_rank=32), config)


def save_medusa(path: Path, agree_token: int) -> None:
    """Medusa heads in vLLM 0.26.0's medusa.py names (blocks.{h}.layers.0: hidden x hidden, no bias; lm_heads.{h}),
    one per speculative token (MedusaConfig.num_lookahead_tokens sets num_heads to it), built to agree with
    target-llama: each block's linear is zero (x + silu(0) = x) and each lm_head is the target's, so every head
    proposes the token the target emits."""
    lm_head = t3.build_target(agree_token, True, t3.SEED)["lm_head.weight"]
    tensors = {}
    for h in range(NUM_SPEC):
        tensors[f"blocks.{h}.layers.0.weight"] = torch.zeros(t3.HIDDEN, t3.HIDDEN)
        tensors[f"lm_heads.{h}.weight"] = lm_head.clone()
    save_draft_head(path, tensors, {"architectures": ["MedusaModel"], "model_type": "medusa", "hidden_size": t3.HIDDEN,
                                    "vocab_size": t3.VOCAB, "num_heads": NUM_SPEC, "num_hidden_layers": 1})


def save_mlp_speculator(path: Path) -> None:
    """An MLPSpeculator (ibm-ai-platform/*-accelerator layout, vLLM 0.26.0's still-shipped mlp_speculator.py names:
    emb.{i} vocab x inner, proj.{i} inner x emb, ln.{i} weight and bias, head.{i} vocab x inner), a stage per
    speculative token; its
    class is commented out of 0.26.0's registry."""
    rnd = t3.normal(t3.SEED + 600, False)
    tensors = {}
    for i in range(NUM_SPEC):
        tensors.update({f"emb.{i}.weight": rnd(t3.VOCAB, t3.HIDDEN), f"proj.{i}.weight": rnd(t3.HIDDEN, t3.HIDDEN),
                        f"ln.{i}.weight": torch.ones(t3.HIDDEN), f"ln.{i}.bias": torch.zeros(t3.HIDDEN),
                        f"head.{i}.weight": rnd(t3.VOCAB, t3.HIDDEN)})
    save_draft_head(path, {k: v.contiguous() for k, v in tensors.items()}, {
        "architectures": ["MLPSpeculatorPreTrainedModel"], "model_type": "mlp_speculator", "emb_dim": t3.HIDDEN,
        "inner_dim": t3.HIDDEN, "vocab_size": t3.VOCAB, "n_predict": NUM_SPEC, "top_k_tokens_per_head": [1] * NUM_SPEC,
        "n_candidates": 1, "tie_weights": False, "scale_input": False})


def main() -> int:
    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    import transformers as tf

    torch.manual_seed(t3.SEED)
    tok, vocab = t3.build_tokenizer()
    agree_token = vocab["Ġx"]
    wrote, failed = [], {}

    def made(name: str, build) -> None:
        try:
            build()
            wrote.append(name)
        except Exception as exc:  # one architecture the image's transformers lacks must not stop the grid
            failed[name] = "".join(traceback.format_exception_only(type(exc), exc)).strip()[-400:]

    made("target-llama", lambda: t3.save_target(t3.build_target(agree_token, True, t3.SEED), tok,
                                                str(out / "target-llama")))
    made("target-random", lambda: t3.save_target(t3.build_target(agree_token, False, t3.SEED + 1), tok,
                                                 str(out / "target-random")))
    for i, name in enumerate(GRID_TARGETS):
        if name in ("llama", "llava"):
            continue

        def plain(name: str = name, i: int = i) -> None:
            torch.manual_seed(t3.SEED + 100 + i)
            config = target_config(name)
            config.architectures = [GRID_TARGETS[name]]
            model = tf.AutoModelForCausalLM.from_config(config).float()
            model.save_pretrained(str(out / f"target-{name}"), safe_serialization=True)
            t3.save_tokenizer(tok, str(out / f"target-{name}"))
        made(f"target-{name}", plain)
    made("target-llava", lambda: build_llava(out / "target-llava", tok, t3.SEED + 200))

    agree = t3.drafter_tensors(agree_token, True, t3.SEED + 2)
    t3.save_drafter(agree, str(out / "drafter-agree"))
    t3.save_drafter(t3.drafter_tensors(agree_token, False, t3.SEED + 3), str(out / "drafter-random"))
    t3.save_broken_drafters(agree, out)
    wrote += ["drafter-agree", "drafter-random"] + [f"drafter-{d}" for d in DRAFTERS if d != "agree"]
    # the methods' cells (cells.py METHOD_CELLS), built after every checkpoint above, each from its own seed
    made("drafter-eagle1", lambda: save_eagle1(out / "drafter-eagle1", agree_token, 2))
    made("drafter-eagle1-fc3x", lambda: save_eagle1(out / "drafter-eagle1-fc3x", agree_token, 3))
    made("draft-vocab1024", lambda: save_llama_draft(out / "draft-vocab1024", tok, 1024, t3.SEED + 301))
    # round 5: the DFlash, DSpark, Medusa and MLPSpeculator cells
    made("drafter-dflash", lambda: save_dflash(out / "drafter-dflash", DFLASH_TARGET_LAYERS, 2))
    made("drafter-dflash-fc3x", lambda: save_dflash(out / "drafter-dflash-fc3x", DFLASH_TARGET_LAYERS, 3))
    made("drafter-dflash-layer-beyond", lambda: save_dflash(out / "drafter-dflash-layer-beyond", [1, 20], 2))
    made("drafter-dspark", lambda: save_dspark(out / "drafter-dspark", NUM_SPEC))
    made("drafter-dspark-block7", lambda: save_dspark(out / "drafter-dspark-block7", 7))
    made("drafter-medusa", lambda: save_medusa(out / "drafter-medusa", agree_token))
    made("drafter-mlp-speculator", lambda: save_mlp_speculator(out / "drafter-mlp-speculator"))
    print(json.dumps({"out": str(out), "transformers": tf.__version__, "torch": torch.__version__,
                      "agree_token_id": agree_token, "wrote": wrote, "failed": failed}))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
