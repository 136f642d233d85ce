"""Tiny multimodal EAGLE-3 targets for the differential grid (validation/differential.py), built with the engine
venv's python: a LLaVA (LlavaForConditionalGeneration, whose vLLM 0.32.0 class implements SupportsEagle3) and a
LLaVA-NeXT (LlavaNextForConditionalGeneration, whose class does not).

Text model: tiny_eagle3's shapes (hidden 128, vocab 512), 8 layers, random weights, seeded; its text config names
its architecture, as llava-hf's checkpoints do. Tokenizer: tiny_eagle3's byte-level BPE with its last merge
(id 511) replaced by the special token "<image>", so the vocab stays 512. Weights are saved in llava-hf's key
layout, which vLLM's LLaVA loaders read.

Serving either needs torchvision (vllm/model_executor/models/llava.py imports pixtral.py, which imports
transformers' image_processing_pixtral); the serve venv has none, so the grid launches them with PYTHONPATH on
an overlay: PyPI's torchvision installed with --no-deps --target, and validation/torchvision_overlay's
sitecustomize.py, which defines the torchvision::nms/qnms schemas when its CUDA extension does not load.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests/runtime"))
import tiny_eagle3 as t3  # noqa: E402

LAYERS = 8


def mm_tokenizer(specials: list[str]):
    """tiny_eagle3's tokenizer, the last len(specials) merge tokens swapped for `specials` (ids 512-k..511)."""
    from tokenizers import AddedToken, Tokenizer

    tok, _ = t3.build_tokenizer()
    data = json.loads(tok.to_str())
    vocab, merges = data["model"]["vocab"], data["model"]["merges"]
    first = t3.VOCAB - len(specials)
    for _ in specials:  # the last merges are the last vocab entries (letter pairs): nothing depends on them
        merges.pop()
    for piece in [p for p, i in vocab.items() if i >= first]:
        del vocab[piece]
    for i, s in enumerate(specials):
        vocab[s] = first + i
    tok = Tokenizer.from_str(json.dumps(data))
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    assert tok.get_vocab_size() == t3.VOCAB, tok.get_vocab_size()
    assert [tok.token_to_id(s) for s in specials] == list(range(first, t3.VOCAB))
    return tok


def fast_tokenizer(tok, **extra):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", model_max_length=t3.MAX_POS, **extra)


IDS = dict(bos_token_id=t3.BOS, eos_token_id=t3.EOS, pad_token_id=t3.PAD)
TEXT = dict(vocab_size=t3.VOCAB, hidden_size=t3.HIDDEN, intermediate_size=t3.INTER, num_hidden_layers=LAYERS,
            num_attention_heads=t3.HEADS, num_key_value_heads=t3.KV_HEADS, head_dim=t3.HEAD_DIM,
            max_position_embeddings=t3.MAX_POS, tie_word_embeddings=False, **IDS)

IMAGE = 511  # "<image>"
PATCH, IMAGE_SIZE = 14, 56   # CLIP tower 56x56 / patch 14 -> 16 patches (+CLS, dropped by "default")
PINPOINTS = [[56, 56], [56, 112], [112, 56], [112, 112]]  # LLaVA-NeXT anyres grid


def mm_config(name: str):
    import transformers as tf

    vision = tf.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                 image_size=IMAGE_SIZE, patch_size=PATCH, projection_dim=32)
    text = tf.LlamaConfig(**TEXT)
    text.architectures = ["LlamaForCausalLM"]
    mm = dict(vision_config=vision, text_config=text, image_token_index=IMAGE,
              image_seq_length=16, projector_hidden_act="gelu", vision_feature_select_strategy="default",
              vision_feature_layer=-2, tie_word_embeddings=False, **IDS)
    if name == "llava":
        return tf.LlavaConfig(**mm)
    if name == "llavanext":
        return tf.LlavaNextConfig(**mm, image_grid_pinpoints=PINPOINTS)
    raise KeyError(name)


def save_processor(name: str, path: str) -> None:
    """Tokenizer (with "<image>" = 511) + processor_config.json (image processor nested in it, transformers 5)."""
    from transformers import LlavaNextProcessor, LlavaProcessor
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
    from transformers.models.llava_next.image_processing_pil_llava_next import LlavaNextImageProcessorPil

    tok = fast_tokenizer(mm_tokenizer(["<image>"]), extra_special_tokens={"image_token": "<image>"})
    sizes = dict(size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    common = dict(tokenizer=tok, patch_size=PATCH, vision_feature_select_strategy="default", image_token="<image>",
                  num_additional_image_tokens=1)
    if name == "llava":
        proc = LlavaProcessor(image_processor=CLIPImageProcessorPil(**sizes), **common)
    else:
        proc = LlavaNextProcessor(image_processor=LlavaNextImageProcessorPil(**sizes, image_grid_pinpoints=PINPOINTS),
                                  **common)
    proc.save_pretrained(path)


def hf_key(key: str) -> str:
    """transformers 5 module name -> llava-hf checkpoint name."""
    for old, new in (("model.vision_tower.", "vision_tower.vision_model."),
                     ("model.multi_modal_projector.", "multi_modal_projector."),
                     ("model.language_model.", "language_model.model."),
                     ("lm_head.", "language_model.lm_head."),
                     ("model.image_newline", "image_newline")):
        if key.startswith(old):
            return new + key[len(old):]
    raise KeyError(key)


CLASSES = {"llava": "LlavaForConditionalGeneration", "llavanext": "LlavaNextForConditionalGeneration"}


def build(name: str, path: Path, seed: int) -> None:
    """The target `name` (llava, llavanext) written to `path`: config, weights, tokenizer and processor."""
    import transformers as tf

    torch.manual_seed(seed)
    config = mm_config(name)
    cls = getattr(tf, CLASSES[name])
    config.architectures = [cls.__name__]
    model = cls(config).float().eval()
    # transformers 5's own save_pretrained writes the CLIP tower as "vision_tower.embeddings.*" (no
    # "vision_model."), which vLLM rejects ("There is no module or parameter named 'vision_tower.embeddings'").
    path.mkdir(parents=True, exist_ok=True)
    save_file({hf_key(k): v.contiguous() for k, v in model.state_dict().items()}, str(path / "model.safetensors"),
              metadata={"format": "pt"})
    config.save_pretrained(str(path))
    save_processor(name, str(path))
