"""SGLang's own EAGLE-3 drafter checks (rules/sglang/drafter-*.yaml), on tiny drafters written at test time and judged
against the real SGLang 0.5.8, 0.5.17 and 0.5.23 trees. What each check stands on is read from the release's code (the
fc the drafter's module builds, where the release reads the aux layer ids, what the target captures); the source of
each fact is given where it is tested. The GPU grid's cells these checks decide: validation/gpu-differential.md."""

from __future__ import annotations

import ast
import textwrap

import numpy as np
import pytest
from test_drafter import DRAFT, TARGET, draft_tensors, write_checkpoint

from specaudit.launch.checkpoint import read_checkpoint
from specaudit.launch.request import Launch
from specaudit.launch.target import load_model
from specaudit.scan.audit import analyze, audit
from specaudit.scan.drafter.engine_code import captured_layers

from conftest import engine_tree

RELEASES = ["0.5.8", "0.5.17", "0.5.23"]
FC, AUX, VOCAB = "sglang-eagle3-drafter-fc-input-width", "sglang-eagle3-drafter-aux-layer-ids", \
    "sglang-eagle3-drafter-vocab-maps"
_analyses: dict[str, object] = {}


def judged(tmp_path, release: str, draft: dict | None = None, tensors: dict | None = None, target: dict | None = None):
    """An EAGLE3 launch of the tiny drafter on the tiny Llama target (8 layers of 64), on the release: the findings
    of SGLang's drafter checks, and the scan."""
    if release not in _analyses:
        _analyses[release] = analyze(engine_tree(f"sglang=={release}"), platform="cuda")
    target_dir = write_checkpoint(tmp_path / "target", {**TARGET, **(target or {})}, None)
    draft_dir = write_checkpoint(tmp_path / "draft", {**DRAFT, **(draft or {})}, draft_tensors(**(tensors or {})))
    launch = Launch(load_model(str(target_dir)), method="eagle3", engine="sglang", draft=str(draft_dir),
                    drafter=read_checkpoint(str(draft_dir)))
    result = audit(_analyses[release], launch)
    return {f.rule_id: f for f in result.findings if f.rule_id.startswith("sglang-eagle3-drafter-")}, result


@pytest.mark.parametrize("release", RELEASES)
def test_a_good_drafter_passes_every_check(tmp_path, release):
    findings, result = judged(tmp_path, release, {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 5]}})
    assert result.verdict == "READY", [(f.rule_id, f.why) for f in result.findings if f.status != "passes"]
    assert {rule: f.status for rule, f in findings.items()} == {FC: "passes", AUX: "passes", VOCAB: "passes"}
    # set_eagle3_layers_to_capture (models/llama.py): `[val + 1 for val in layer_ids]`
    assert "3 aux hidden states (layers [2, 4, 6])" in findings[AUX].why


@pytest.mark.parametrize("release", RELEASES)
def test_an_fc_of_two_states_fails_the_weight_load(tmp_path, release):
    # models/llama_eagle3.py LlamaModel.__init__ builds fc with hidden_size_in (target_hidden_size, 64) x 3 inputs;
    # model_loader/weight_utils.py default_weight_loader refuses the checkpoint's [32, 128].
    findings, result = judged(tmp_path, release, tensors={"fc_inputs": 128})
    assert result.blocking[0].rule_id == FC
    assert "= 192 inputs" in findings[FC].why and "128" in findings[FC].why
    assert findings[FC].error == "AssertionError: Attempted to load weight (torch.Size([32, 128])) into parameter " \
                                 "(torch.Size([32, 192]))"


@pytest.mark.parametrize("release,fc", [("0.5.8", "blocks"), ("0.5.17", "passes"), ("0.5.23", "passes")])
def test_the_fc_width_is_what_the_release_builds(tmp_path, release, fc):
    # Four aux layers in eagle_config, an fc of 4 x 64. models/llama_eagle3.py LlamaModel.__init__: 0.5.8
    # `self.fc = torch.nn.Linear(self.hidden_size_in * 3, ...)`; 0.5.17 and 0.5.23 `self.hidden_size_in *
    # self.num_aux_hidden_states`, num_aux_hidden_states = len(eagle_config["eagle_aux_hidden_state_layer_ids"]).
    findings, _ = judged(tmp_path, release, {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 1, 2, 3]}},
                         {"fc_inputs": 256})
    assert findings[FC].status == fc, findings[FC].why
    assert ("* 3" if release == "0.5.8" else "num_aux_hidden_states") in findings[FC].why
    if fc == "passes":
        assert findings[AUX].status == "passes" and "layers [1, 2, 3, 4]" in findings[AUX].why


@pytest.mark.parametrize("release", RELEASES)
def test_sglang_reads_the_aux_ids_only_from_eagle_config(tmp_path, release):
    # 0.5.8 model_executor/model_runner.py ModelRunner.__init__, 0.5.17 and 0.5.23 model_executor/
    # model_runner_components/spec_aux_hidden_state.py _resolve_eagle_aux_hidden_state:
    # `eagle_aux_hidden_state_layer_ids = eagle_config["eagle_aux_hidden_state_layer_ids"]`, None where that raises.
    # The target's default for None (models/llama.py set_eagle3_layers_to_capture): [2, L // 2, L - 3] = [2, 2, 1] on
    # 4 layers, two distinct ones; the GPU grid's qwen2--aux-inside, qwen3--agree, qwen3moe--aux-inside on 0.5.17.
    shallow = {"num_hidden_layers": 4}
    findings, result = judged(tmp_path, release, {"eagle_aux_hidden_state_layer_ids": [0, 1, 2]}, target=shallow)
    assert result.blocking[0].rule_id == AUX
    assert "2 aux hidden states (layers [1, 2])" in findings[AUX].why
    assert "reads no ids where the drafter config declares them: eagle_aux_hidden_state_layer_ids" in findings[AUX].why
    assert findings[AUX].error.startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied (tokens x 128")
    assert findings[AUX].file.endswith("model_runner.py" if release == "0.5.8" else "spec_aux_hidden_state.py")
    findings, result = judged(tmp_path, release, {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 1, 2]}},
                              target=shallow)
    assert findings[AUX].status == "passes", findings[AUX].why


@pytest.mark.parametrize("release", ["0.5.17"])
def test_the_last_layers_id_is_never_kept(tmp_path, release):
    # set_eagle3_layers_to_capture captures `val + 1`, the input of the next layer; LlamaModel.forward keeps it in
    # `for i in range(self.start_layer, self.end_layer): if i in self.layers_to_capture`, so id L - 1 is never kept.
    findings, _ = judged(tmp_path, release, {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}},
                         target={"num_hidden_layers": 4})
    assert findings[AUX].status == "blocks"
    assert "layers [4] are outside the target's 4 layers" in findings[AUX].why


@pytest.mark.parametrize("release", RELEASES)
def test_d2t_shorter_than_the_draft_vocab_blocks_and_a_longer_one_does_not(tmp_path, release):
    # models/llama_eagle3.py load_weights: `self.hot_token_id = loaded_weight + torch.arange(loaded_weight.shape[0])`,
    # t2d skipped; speculative/eagle_worker*.py `topk_index = self.hot_token_id[topk_index]`: draft ids past d2t's end
    # index out of bounds (the GPU grid's llama--d2t-short on 0.5.17); a longer d2t is never read past the draft vocab.
    findings, result = judged(tmp_path, release, tensors={"d2t": [0] * 90})
    assert result.blocking[0].rule_id == VOCAB
    assert "d2t has 90 entries, the draft vocab is 100" in findings[VOCAB].why
    assert "device-side assert" in findings[VOCAB].error
    findings, result = judged(tmp_path, release, tensors={"d2t": [4 * i for i in range(100)] + [0] * 20,
                                                          "target_vocab": 900})
    assert findings[VOCAB].status == "passes", findings[VOCAB].why  # and t2d of another vocab: not loaded


@pytest.mark.parametrize("release", RELEASES)
def test_the_facts_the_vocab_rule_states_hold_in_the_release(release):
    source = (engine_tree(f"sglang=={release}").root / "sglang/srt/models/llama_eagle3.py").read_text()
    assert "self.hot_token_id = loaded_weight + torch.arange(loaded_weight.shape[0])" in source
    assert 'if "t2d" in name:\n                continue' in source


def test_captured_layers_reads_both_branches_and_every_shape():
    def capture(code: str, ids, layers):
        function = ast.parse(textwrap.dedent(code)).body[0]
        assert isinstance(function, ast.FunctionDef)
        return captured_layers(function, ids, layers)

    llama = """
        def set_eagle3_layers_to_capture(self, layer_ids=None):
            if not self.pp_group.is_last_rank:
                return
            if layer_ids is None:
                num_layers = self.config.num_hidden_layers
                self.model.layers_to_capture = [2, num_layers // 2, num_layers - 3]
            else:
                self.model.layers_to_capture = [val + 1 for val in layer_ids]
        """
    assert capture(llama, None, 4) == [2, 2, 1]
    assert capture(llama, [1, 4, 20], 8) == [2, 5, 21]
    moe = """
        def set_eagle3_layers_to_capture(self, layer_ids=None):
            self.capture_aux_hidden_states = True
            if layer_ids is not None:
                self.model.set_eagle3_layers_to_capture([val + 1 for val in layer_ids])
            else:
                num_layers = self.config.num_hidden_layers
                self.model.set_eagle3_layers_to_capture([2, num_layers // 2, num_layers - 3])
        """
    assert capture(moe, None, 48) == [2, 24, 45] and capture(moe, [0], 48) == [1]
    assert capture("def set_eagle3_layers_to_capture(self, layer_ids):\n    self.ids = layer_ids\n", None, 8) is None


# -- EAGLE with a head of its own (EAGLE-1) -----------------------------------------------------------------------------

EAGLE1 = {"architectures": ["LlamaForCausalLMEagle"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1,
          "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000,
          "max_position_embeddings": 4096}
EAGLE1_RULES = ("sglang-draft-architecture-registered", "sglang-eagle-drafter-fc-input-width",
                "sglang-eagle-drafter-target-hidden-size")


def eagle1_tensors(hidden=64, fc_inputs=128):
    """An EAGLE-1 head as its checkpoints name it (yuhuili/EAGLE-LLaMA3-Instruct-8B: fc over the embedding beside
    the target's hidden state, one decoder layer; SGLang's LlamaForCausalLMEagle loads them under `model.`)."""
    f32 = np.float32
    return {"fc.weight": np.zeros((hidden, fc_inputs), f32), "fc.bias": np.zeros(hidden, f32),
            "layers.0.self_attn.q_proj.weight": np.zeros((hidden, hidden), f32),
            "layers.0.mlp.gate_proj.weight": np.zeros((128, hidden), f32),
            "embed_tokens.weight": np.zeros((1000, hidden), f32)}


def judged_eagle1(tmp_path, release: str, draft: dict | None = None, tensors: dict | None = None):
    """An EAGLE launch naming the head (--speculative-algorithm EAGLE --speculative-draft-model-path DIR) on the tiny
    Llama target: the findings of the rules that judge an EAGLE-1 head, and the scan."""
    if release not in _analyses:
        _analyses[release] = analyze(engine_tree(f"sglang=={release}"), platform="cuda")
    target_dir = write_checkpoint(tmp_path / "target", TARGET, None)
    draft_dir = write_checkpoint(tmp_path / "eagle1", {**EAGLE1, **(draft or {})}, eagle1_tensors(**(tensors or {})))
    launch = Launch(load_model(str(target_dir)), method="eagle", engine="sglang", draft=str(draft_dir),
                    drafter=read_checkpoint(str(draft_dir)),
                    speculative={"method": "eagle", "model": str(draft_dir)})
    result = audit(_analyses[release], launch)
    return {f.rule_id: f for f in result.findings if f.rule_id in EAGLE1_RULES}, result


@pytest.mark.parametrize("release", ["0.5.8", "0.5.23"])
def test_an_eagle1_head_of_the_targets_width_is_ready(tmp_path, release):
    # models/llama_eagle.py (0.5.8 and 0.5.23): EntryClass = [LlamaForCausalLMEagle]; LlamaModel.__init__
    # `self.fc = torch.nn.Linear(config.hidden_size * 2, config.hidden_size)`: 2 x 64 = 128 inputs.
    findings, result = judged_eagle1(tmp_path, release)
    assert result.method.method == "eagle" and result.method.modeled
    assert result.verdict == "READY", [(f.rule_id, f.status, f.why) for f in result.findings if f.status != "passes"]
    assert {rule: f.status for rule, f in findings.items()} == dict.fromkeys(EAGLE1_RULES, "passes")
    assert "= 128 inputs" in findings["sglang-eagle-drafter-fc-input-width"].why
    # NEXTN's own-layers check does not judge a head of its own
    assert not [f for f in result.findings if f.rule_id == "sglang-nextn-checkpoint-weights"]


@pytest.mark.parametrize("release", ["0.5.8", "0.5.23"])
def test_an_eagle1_head_whose_fc_is_not_twice_its_width_fails_the_weight_load(tmp_path, release):
    findings, result = judged_eagle1(tmp_path, release, tensors={"fc_inputs": 192})
    assert result.blocking[0].rule_id == "sglang-eagle-drafter-fc-input-width"
    assert findings["sglang-eagle-drafter-fc-input-width"].error == \
        "AssertionError: Attempted to load weight (torch.Size([64, 192])) into parameter (torch.Size([64, 128]))"


@pytest.mark.parametrize("release", ["0.5.8", "0.5.23"])
def test_an_eagle1_head_of_another_targets_width_fails_its_first_forward(tmp_path, release):
    # LlamaModel.forward: fc(cat(embeds, hidden_states)), both of the target's 64, into an fc built for 2 x 32.
    findings, result = judged_eagle1(tmp_path, release, {"hidden_size": 32}, {"hidden": 32, "fc_inputs": 64})
    assert findings["sglang-eagle-drafter-fc-input-width"].status == "passes"
    assert [f.rule_id for f in result.blocking] == ["sglang-eagle-drafter-target-hidden-size"]


@pytest.mark.parametrize("release", ["0.5.8", "0.5.23"])
def test_a_head_converted_for_vllm_names_an_architecture_sglang_does_not_register(tmp_path, release):
    # vLLM's EAGLE-1 class is EagleLlamaForCausalLM; SGLang's registry (models/registry.py) holds no such EntryClass.
    findings, result = judged_eagle1(tmp_path, release, {"architectures": ["EagleLlamaForCausalLM"]})
    first = result.blocking[0]
    assert (first.rule_id, first.file) == ("sglang-draft-architecture-registered", "sglang/srt/models/registry.py")
    assert "['EagleLlamaForCausalLM']" in first.why and "are not supported for now" in first.error
