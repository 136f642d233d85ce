"""Drafter checkpoint checks, on tiny EAGLE-3 drafters written at test time (shaped like the public ones:
fc, midlayer.*, norm, lm_head, d2t, t2d), one good and one for each way of being wrong, judged against a
real vLLM tree."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

import specaudit.launch.checkpoint as checkpoint
from specaudit.core.errors import SpecauditError
from specaudit.launch.checkpoint import LocalFile, read_checkpoint, read_header
from specaudit.launch.request import Launch
from specaudit.launch.target import load_model
from specaudit.scan.audit import scan
from specaudit.scan.index import build_index
from specaudit.scan.ruleset import load_rules

from conftest import vllm_tree
from helpers import assert_one_line_error, specaudit

TARGET = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
          "num_hidden_layers": 8, "vocab_size": 1000, "max_position_embeddings": 4096}
DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 32,
         "target_hidden_size": 64, "num_hidden_layers": 1, "vocab_size": 1000, "draft_vocab_size": 100,
         "max_position_embeddings": 4096}


def draft_tensors(fc_inputs=192, draft_vocab=100, target_vocab=1000, d2t=None):
    f32 = np.float32
    return {
        "fc.weight": np.zeros((32, fc_inputs), f32),
        "midlayer.hidden_norm.weight": np.ones(32, f32),
        "midlayer.input_layernorm.weight": np.ones(32, f32),
        "midlayer.self_attn.q_proj.weight": np.zeros((32, 64), f32),
        "midlayer.mlp.gate_proj.weight": np.zeros((64, 32), f32),
        "norm.weight": np.ones(32, f32),
        "lm_head.weight": np.zeros((draft_vocab, 32), f32),
        # draft id i is target id 5 * i: d2t holds the offsets 4 * i
        "d2t": np.array(d2t if d2t is not None else [4 * i for i in range(draft_vocab)], np.int64),
        "t2d": np.zeros(target_vocab, np.bool_),
    }


def write_checkpoint(directory: Path, config: dict, tensors: dict | None, shards: int = 1) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    if tensors is None:
        return directory
    if shards == 1:
        save_file(tensors, str(directory / "model.safetensors"))
        return directory
    names = sorted(tensors)
    weight_map = {}
    for shard in range(shards):
        file = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[shard::shards]}
        save_file(part, str(directory / file))
        weight_map.update({n: file for n in part})
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return directory


@pytest.fixture
def target_dir(tmp_path):
    return write_checkpoint(tmp_path / "target", TARGET, None)


def audit(target_dir, draft_dir, version="0.14.0", **speculative):
    drafter = read_checkpoint(str(draft_dir))
    options = speculative.pop("options", {})
    launch = Launch(load_model(str(target_dir)), draft=str(draft_dir), drafter=drafter,
                    speculative=speculative, options=options)
    result = scan(vllm_tree(version), launch)
    return {f.rule_id.removeprefix("vllm-eagle3-"): f for f in result.findings if "draft" in f.rule_id}, result


def test_a_good_drafter_passes_every_check(tmp_path, target_dir):
    findings, result = audit(target_dir, write_checkpoint(tmp_path / "draft", DRAFT, draft_tensors(), shards=2))
    assert result.verdict == "READY"
    checks = {r.id.removeprefix("vllm-eagle3-") for r in load_rules("vllm")
              if r.kind == "drafter_contract" and "eagle3" in r.methods
              and not r.id.startswith("vllm-degrades-")}  # what degrades: tests/test_degraded.py
    checks.discard("drafter-draft-tensor-parallel")  # no draft TP size given: nothing to check
    checks.discard("vllm-drafter-tokenizer")  # no tokenizer.json on either side, one vocab_size: nothing to compare
    checks -= {"vllm-dflash-drafter-mask-token", "vllm-peagle-drafter-mask-hidden"}  # P-EAGLE's, under parallel_drafting
    assert checks | {"draft-class"} == set(findings)
    assert {f.status for f in findings.values()} == {"passes"}
    assert "64 x 3 = 192" in findings["drafter-fc-input-width"].why
    assert "3 aux hidden states (layers [2, 4, 5])" in findings["drafter-aux-layer-ids"].why


@pytest.mark.parametrize("case,config,tensors,speculative,rule,numbers", [
    ("fc concatenates two layers", {}, {"fc_inputs": 128}, {}, "drafter-fc-input-width", ["128", "192"]),
    ("four aux layers declared, fc built for three", {"eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]}, {}, {},
     "drafter-aux-layer-ids", ["4 aux hidden states", "256", "fc takes 192"]),
    # vLLM's default (2, L // 2, L - 3) is (2, 3, 3) for 6 layers: the target keeps two hidden states.
    ("the default aux layers of a shallow target repeat an id", {}, {}, {"target": {"num_hidden_layers": 6}},
     "drafter-aux-layer-ids", ["2 aux hidden states", "layers [2, 3]", "128", "fc takes 192"]),
    ("trained for another target", {"target_hidden_size": 48}, {"fc_inputs": 144}, {},
     "drafter-target-hidden-size", ["48", "64"]),
    ("aux layer past the target's last", {"eagle_aux_hidden_state_layer_ids": [2, 4, 9]}, {}, {},
     "drafter-aux-layer-ids", ["[9]", "8 layers"]),
    ("the checkpoint's fc built for another width than its config says", {"target_hidden_size": 48}, {}, {},
     "drafter-fc-input-width", ["48 x 3 = 144", "192"]),
    ("d2t shorter than the draft vocab", {}, {"d2t": [0] * 90}, {}, "drafter-vocab-maps", ["90", "100"]),
    ("d2t maps outside the target vocab", {}, {"d2t": [4 * i for i in range(99)] + [950]}, {},
     "drafter-vocab-maps", ["99 -> 1049", "1000"]),
    ("max positions below the served length", {"max_position_embeddings": 2048}, {},
     {"options": {"max-model-len": "4096"}}, "drafter-max-positions", ["2048", "4096"]),
    ("draft TP neither 1 nor the target's", {}, {}, {"draft_tensor_parallel_size": 2, "options": {"tensor-parallel-size": "4"}},
     "drafter-draft-tensor-parallel", ["draft_tensor_parallel_size = 2", "tensor_parallel_size = 4"]),
    ("an architecture the release does not register", {"architectures": ["Qwen2ForCausalLM"]}, {}, {},
     "draft-class", ["Eagle3Qwen2ForCausalLM"]),
])
def test_each_way_of_being_wrong_blocks_with_both_numbers(tmp_path, target_dir, case, config, tensors,
                                                          speculative, rule, numbers):
    draft = write_checkpoint(tmp_path / "draft", {**DRAFT, **config}, draft_tensors(**tensors))
    target = speculative.pop("target", None)
    if target:
        target_dir = write_checkpoint(tmp_path / "target-changed", {**TARGET, **target}, None)
    findings, result = audit(target_dir, draft, **speculative)
    assert result.verdict == "BLOCKED"
    finding = findings[rule]
    assert finding.status == "blocks", finding.why
    text = finding.why + " " + finding.code + " " + (finding.error or "")
    for number in numbers:
        assert number in text, (number, text)


def test_017_release_accepts_only_its_llama_eagle3_class():
    # vllm/v1/spec_decode/eagle.py 0.17: `if self.method == "eagle3": assert isinstance(self.model,
    # Eagle3LlamaForCausalLM)`; 0.33's llm_base_proposer.py accepts a tuple that adds the DeepseekV2 drafter.
    rule = [r for r in load_rules("vllm") if r.id == "vllm-eagle3-draft-class"]
    for version, accepted in (("0.17.0", ["Eagle3LlamaForCausalLM"]),
                              ("0.33.0", ["Eagle3LlamaForCausalLM", "Eagle3DeepseekV2ForCausalLM"])):
        sites = build_index(vllm_tree(version), rules=rule).sites["vllm-eagle3-draft-class"]
        assert len(sites) == 1 and sites[0].details.accepted[:len(accepted)] == accepted


def test_large_header_is_read_without_touching_tensor_data(tmp_path, monkeypatch):
    # 20,000 tensors (a header of a few MB, like a sharded 1T-parameter checkpoint's) over 64 GB of data:
    # a sparse file, so only the header is real. The read must be the header and nothing else.
    header = {f"model.layers.{i // 10}.w{i % 10}": {"dtype": "BF16", "shape": [4096, 409],
                                                   "data_offsets": [i * 3350528, (i + 1) * 3350528]}
              for i in range(20_000)}
    raw = json.dumps(header).encode()
    path = tmp_path / "big.safetensors"
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        fh.truncate(8 + len(raw) + 20_000 * 3350528)
    read = []
    real_open = open

    class Counting:
        def __init__(self, fh):
            self.fh = fh

        def read(self, n=-1):
            data = self.fh.read(n)
            read.append(len(data))
            return data

        def seek(self, offset):
            return self.fh.seek(offset)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    monkeypatch.setattr(checkpoint, "open", lambda *a, **k: Counting(real_open(*a, **k)), raising=False)
    tensors = read_header(LocalFile(path))
    assert len(tensors) == 20_000
    assert sum(read) == 8 + len(raw)  # the header only, not a byte of the 64 GB


@pytest.mark.parametrize("damage,message", [
    ("truncate", "truncated"),
    ("lie", "the header lies about fc.weight"),
    ("no-config", "no config.json"),
    ("no-weights", "no *.safetensors or *.bin weights"),
])
def test_bad_checkpoints_are_one_clear_line(tmp_path, target_dir, damage, message):
    draft = write_checkpoint(tmp_path / "draft", DRAFT, draft_tensors())
    weights = draft / "model.safetensors"
    if damage == "truncate":
        weights.write_bytes(weights.read_bytes()[:-100])
    elif damage == "lie":
        data = weights.read_bytes()
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + length])
        header["fc.weight"]["data_offsets"][1] += 4
        raw = json.dumps(header).encode()
        weights.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + length:])
    elif damage == "no-config":
        (draft / "config.json").unlink()
    else:
        weights.unlink()
    with pytest.raises(SpecauditError, match=message.replace("*", r"\*")):
        read_checkpoint(str(draft))
    proc = specaudit("scan", str(vllm_tree("0.14.0").root), "--model", str(target_dir), "--draft", str(draft),
                     env_cache=tmp_path / "cache")
    assert_one_line_error(proc, message)


@pytest.mark.parametrize("version", ["0.14.0", "0.33.0"])
def test_checks_stand_where_the_launch_meets_them(tmp_path, version):
    """A d2t of another length fails the drafter's weight load, which EagleProposer.load_model does (get_model /
    _get_model) before it shares the target's embeddings: on a GPT-2 target, whose model has no embed_tokens
    (llm_base_proposer.py / eagle.py raise AttributeError), the drafter's check comes first. Repeated default
    aux layers (6 layers: (2, 3, 3)) fail the drafter's first forward, after the model runner's own gates."""
    target = write_checkpoint(tmp_path / "target", {**TARGET, "architectures": ["GPT2LMHeadModel"],
                                                     "model_type": "gpt2", "num_hidden_layers": 6}, None)
    draft = write_checkpoint(tmp_path / "draft", DRAFT, draft_tensors(d2t=[0] * 90))
    findings, result = audit(target, draft, version)
    order = [f.rule_id for f in result.blocking]
    assert findings["drafter-vocab-maps"].step > 0  # placed at the landmark, not at the end of its phase
    if result.path.runner == "v2":
        # 0.33.0 runs GPT-2 on Model Runner V2 (VllmConfig.use_v2_model_runner): its load_model sets the target's
        # aux layers (eagle3_utils.set_eagle3_aux_hidden_state_layers raises for a target without the interface)
        # before its speculator loads the drafter, as the H200 showed for vLLM 0.26.0 (validation/
        # gpu-differential.md, gpt2--d2t-short).
        assert order[0] == "path-raise" and "eagle3_utils.py" in result.blocking[0].file
        assert order.index("vllm-eagle3-drafter-vocab-maps") < order.index("vllm-eagle3-drafter-aux-layer-ids")
    else:
        assert order.index("vllm-eagle3-drafter-vocab-maps") < order.index("path-raise")
        assert order[-1] == "vllm-eagle3-drafter-aux-layer-ids"
        assert "vllm-eagle3-interface" in order


def test_every_at_names_a_landmark_of_the_path_file():
    from specaudit.scan.trace import load_path_spec

    for engine in ("vllm", "sglang"):
        landmarks = {m.name for m in load_path_spec(engine).landmarks}
        for rule in load_rules(engine):
            assert rule.at is None or rule.at in landmarks, (rule.id, rule.at)


def test_a_target_config_without_its_layer_count_leaves_the_aux_states_unknown(tmp_path):
    """Without num_hidden_layers the default aux layers cannot be computed: UNKNOWN, never a silent pass."""
    target = write_checkpoint(tmp_path / "target", {k: v for k, v in TARGET.items() if k != "num_hidden_layers"}, None)
    findings, result = audit(target, write_checkpoint(tmp_path / "draft", DRAFT, draft_tensors()))
    assert findings["drafter-aux-layer-ids"].status == "unknown"
    assert result.verdict == "UNKNOWN"
