#!/usr/bin/env python3
"""The checkpoints of the GPU differential grid (validation/gpu/README.md): tiny_eagle3_gpu.py's (hidden 256, 4 heads
of 64 for FlashAttention 3, vocab 512, draft vocab 128) plus one target per architecture of the grid and the drafter
variants of the CPU grid (validation/differential.py), built the same way, seeded, no network.

    python3 grid_models.py OUT_DIR          # on the device (the image's torch and transformers) and on the CPU
                                            # machine (the serve venv's python), to scan the same checkpoints

Targets: target-<name> for every name of GRID_TARGETS (target-llama is tiny_eagle3_gpu's agreeing `target`, 8
layers; the others 4 layers, random, as in the CPU grid); target-random / drafter-random for the random pair.
Drafters: drafter-<variant> for every variant of DRAFTERS (drafter-agree is tiny_eagle3_gpu's).
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
from cells import DRAFTERS, GRID_TARGETS  # noqa: E402

LAYERS = 4


def target_config(name: str):
    import transformers as tf

    ids = dict(bos_token_id=t3.BOS, eos_token_id=t3.EOS, pad_token_id=t3.PAD, tie_word_embeddings=False)
    common = dict(vocab_size=t3.VOCAB, hidden_size=t3.HIDDEN, intermediate_size=t3.INTER, num_hidden_layers=LAYERS,
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
    print(json.dumps({"out": str(out), "transformers": tf.__version__, "torch": torch.__version__,
                      "agree_token_id": agree_token, "wrote": wrote, "failed": failed}))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
