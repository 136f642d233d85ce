"""vLLM's parallel drafters through the method seam: DFlash (``dflash``), DSpark (``dspark``) and P-EAGLE (an EAGLE-3
head launched with ``parallel_drafting: true``), on real release trees, at the engine's own lines.

Facts from the releases' source (read, not run):
- vllm/config/speculative.py: ``dflash`` in SpeculativeMethod from 0.20.0, ``dspark`` from 0.26.0 (0.17.0 has neither;
  ``parallel_drafting: bool = False`` from 0.17.0). __post_init__ infers dflash from "dflash" in the drafter's path,
  sets ``parallel_drafting = True`` for dflash and dspark, and (0.33.0) raises "dspark_draft_topk is only supported by
  DSpark" for another method, "dspark_draft_topk must be between 1 and the draft vocabulary size" past it. 0.26.0
  requires num_speculative_tokens for a Qwen3 DSpark draft (no n_predict); 0.33.0 defaults it to block_size. 0.20.0's
  _verify_args holds dflash to the aux-hidden-state model-type list ("dflash is only supported for [...] models").
- EAGLEConfig (transformers_utils/configs/eagle.py) renames a dflash drafter's architectures DFlash{arch}; the registry
  has DFlashDraftModel (0.20.0 on) and Qwen3DSparkModel (0.26.0 on), no DFlashQwen3ForCausalLM key.
- qwen3_dflash.py: fc = (target_hidden_size or hidden_size) x len(dflash_config.target_layer_ids) (0.20.0, 0.26.0,
  else the draft's num_hidden_layers) or x the number of layer ids the runner reads (0.33.0 _get_dflash_fc_input_size);
  combine_hidden_states raises "DFlash drafter expects N concatenated aux hidden features" (0.26.0 on).
- The runner's aux-layer reader: V1 GPUModelRunner._get_eagle3_aux_layers_from_config (dflash_config.target_layer_ids as
  they are in 0.20.0, + 1 in 0.26.0 and 0.33.0), V2 eagle3_utils.get_eagle3_aux_layers_from_config (+ 1; DSpark's
  target_layer_ids too). The target (Qwen3, Llama) keeps ids 0 to num_hidden_layers (`idx + 1` after each layer).
- The mask token: V1 SpecDecodeBaseProposer._init_parallel_drafting_params (0.20.0, 0.26.0: dflash_config.mask_token_id,
  pard_token, ptd_token_id; 0.33.0 also mask_token_id, dspark_noise_token_id), V2 get_parallel_drafting_token_id (all five).
- llama_eagle3.py load_weights: "mask_hidden not found in weights but model is configured for parallel drafting".
- vllm/config/vllm.py VllmConfig.use_v2_model_runner: 0.26.0 returns True for dspark before its MoE test; 0.26.0 and
  0.33.0 list "parallel drafting for EAGLE speculative decoding" among V2's unsupported features (V1, with a warning);
  0.33.0 _validate_v1_model_runner raises "Model Runner V1 does not support: dspark speculative decoding", met where
  V1 is taken (no Triton: --platform cpu), and _validate_v2_model_runner refuses P-EAGLE where V2 is forced.
"""

from __future__ import annotations

import ast
import json
from dataclasses import replace

import pytest

from specaudit.core.types import Status, Verdict
from specaudit.launch.checkpoint import Checkpoint, TensorInfo
from specaudit.launch.request import Launch
from specaudit.launch.target import load_model, load_preset
from specaudit.play.player import LiteralScope, answer, call
from specaudit.play.values import Raised, Unknown
from specaudit.scan.audit import audit
from specaudit.scan.facts import ReleaseModules
from specaudit.scan.runner import LaunchFacts, Source, refusal
from specaudit.scan.trace import load_path_spec

from conftest import engine_analysis

analysis = engine_analysis  # one analysis of each release per session (conftest)

SPECULATIVE = "vllm/config/speculative.py"


def launch(speculative: dict, preset: str = "qwen3", drafter: Checkpoint | None = None, target=None,
           **options) -> Launch:
    method = str(speculative["method"]).lower() if speculative.get("method") else None
    return Launch(target or load_preset(preset), method=method, draft=speculative.get("model"), drafter=drafter,
                  speculative=speculative, options=options)


def checkpoint(path: str, config: dict, shapes: dict) -> Checkpoint:
    file = f"{path}/model.safetensors"
    return Checkpoint(path, config, {name: TensorInfo(name, "BF16", shape, file, 0, 0) for name, shape in shapes.items()})


def parallel_draft(path: str, architecture: str, fc_inputs: int, layers: int = 5, **keys) -> Checkpoint:
    """A drafter of Qwen3-8B (36 layers, hidden 4096) as z-lab's Qwen3-8B-DFlash-b16 ships it: five non-causal layers,
    the target's hidden states at target_layer_ids [1, 9, 17, 25, 33], mask token 151669, no embeddings (shared)."""
    config = {"architectures": [architecture], "model_type": "qwen3", "hidden_size": 4096, "num_hidden_layers": layers,
              "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288,
              "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
              "hidden_act": "silu", "tie_word_embeddings": False, "layer_types": ["full_attention"] * layers, **keys}
    shapes = {"fc.weight": (4096, fc_inputs), "hidden_norm.weight": (4096,), "norm.weight": (4096,)}
    for i in range(layers):
        shapes |= {f"layers.{i}.self_attn.q_proj.weight": (4096, 4096), f"layers.{i}.mlp.down_proj.weight": (4096, 12288)}
    return checkpoint(path, config, shapes)


def dflash(fc_inputs: int = 5 * 4096, layer_ids: list[int] | None = None, mask: int | None = 151669,
           architecture: str = "DFlashDraftModel", path: str = "/d/z-lab/Qwen3-8B-DFlash-b16", **keys) -> Checkpoint:
    dflash_config: dict = {"target_layer_ids": layer_ids if layer_ids is not None else [1, 9, 17, 25, 33]}
    if mask is not None:
        dflash_config["mask_token_id"] = mask
    return parallel_draft(path, architecture, fc_inputs, block_size=16, dflash_config=dflash_config, **keys)


def dspark(layers: int = 5, noise: int | None = 151669, layer_ids: list[int] | None = None, **keys) -> Checkpoint:
    """A Qwen3 DSpark drafter (Qwen3DSparkModel, the architecture 0.26.0 and 0.33.0 both register): block size 7, a
    Markov head, the target layers and noise token at the top of its config."""
    config = {"block_size": 7, "markov_rank": 256, "markov_head_type": "vanilla",
              "target_layer_ids": layer_ids or [1, 9, 17, 25, 33], **keys}
    if noise is not None:
        config["dspark_noise_token_id"] = noise
    return parallel_draft("/d/dspark_qwen3_8b_block7", "Qwen3DSparkModel", 5 * 4096, layers, **config)


def peagle(token_key: str | None = "ptd_token_id", mask_hidden: bool = True) -> Checkpoint:
    """An EAGLE-3 head trained for parallel drafting, as amazon's P-EAGLE checkpoints ship one, for Llama-3.1-8B: fc of
    3 x 4096, the mask slots' token and their hidden state (mask_hidden, fc's width)."""
    config = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 4096,
              "num_hidden_layers": 4, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
              "vocab_size": 128256, "draft_vocab_size": 128256, "max_position_embeddings": 131072,
              "rms_norm_eps": 1e-05, "rope_theta": 500000.0}
    if token_key:
        config[token_key] = 128002
    shapes = {"fc.weight": (4096, 3 * 4096), "midlayer.self_attn.q_proj.weight": (4096, 8192), "norm.weight": (4096,),
              "lm_head.weight": (128256, 4096)}
    if mask_hidden:
        shapes["mask_hidden"] = (1, 3 * 4096)
    return checkpoint("/d/P-EAGLE-Llama-3.1-8B", config, shapes)


def dflash_launch(drafter: Checkpoint, **speculative) -> Launch:
    return launch({"method": "dflash", "model": drafter.path, "num_speculative_tokens": 15, **speculative},
                  drafter=drafter)


def dspark_launch(drafter: Checkpoint, preset: str = "qwen3", **speculative) -> Launch:
    return launch({"method": "dspark", "model": drafter.path, "num_speculative_tokens": 7, **speculative},
                  preset=preset, drafter=drafter)


def peagle_launch(drafter: Checkpoint, parallel: bool = True) -> Launch:
    speculative = {"method": "eagle3", "model": drafter.path, "num_speculative_tokens": 7}
    if parallel:
        speculative["parallel_drafting"] = True
    # Served at 8192 positions: the head's context is not what these tests are about.
    return launch(speculative, preset="llama3", drafter=drafter, **{"max-model-len": 8192})


def blocking(result) -> list[tuple[str, str, int]]:
    return [(f.rule_id, f.file, f.line) for f in result.blocking]


def finding(result, rule_id: str):
    return next(f for f in result.findings if f.rule_id == rule_id)


def target_dir(tmp_path, config: dict):
    path = tmp_path / f"target-{config['model_type']}"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return load_model(str(path))


# -- DFlash ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("release, runner", [("vllm==0.20.0", "v1"), ("vllm==0.26.0", "v2"), ("vllm==0.33.0", "v2")])
def test_a_dflash_drafter_the_release_takes_is_ready_and_every_check_of_it_passes(release, runner):
    result = audit(analysis(release), dflash_launch(dflash()))
    assert result.method.method == "dflash" and result.method.modeled
    assert result.verdict == Verdict.READY, blocking(result)
    assert result.path.runner == runner
    own = {f.rule_id: f for f in result.findings if f.rule_id.startswith("vllm-dflash")}
    assert set(own) == {"vllm-dflash-draft-architecture-registered", "vllm-dflash-drafter-fc-input-width",
                        "vllm-dflash-drafter-mask-token", "vllm-dflash-drafter-target-layer-ids"}
    assert {f.status for f in own.values()} == {Status.PASSES}
    assert "20480 inputs" in own["vllm-dflash-drafter-fc-input-width"].why
    # None of EAGLE-3's drafter checks judges a DFlash head (its fc is not 3 x hidden).
    assert not any(f.rule_id.startswith("vllm-eagle3-drafter") for f in result.findings)


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_dflash_is_inferred_from_the_drafter_s_path(release):
    drafter = dflash()
    result = audit(analysis(release), launch({"model": drafter.path, "num_speculative_tokens": 15}, drafter=drafter))
    assert result.method.requested is None and result.method.method == "dflash" and result.method.modeled
    assert any("self.method = 'dflash'" in step for step in result.method.how)
    assert result.verdict == Verdict.READY, blocking(result)


def test_dflash_on_a_release_without_it_is_blocked_by_the_method_list():
    result = audit(analysis("vllm==0.17.0"), dflash_launch(dflash()))
    assert result.verdict == Verdict.BLOCKED
    assert result.blocking[0].rule_id == "method-not-in-release" and "'dflash'" in result.blocking[0].why


def test_a_dspark_value_with_method_dflash_is_refused_at_its_line():
    result = audit(analysis("vllm==0.33.0"), dflash_launch(dflash(), dspark_draft_topk=4))
    first = result.blocking[0]
    assert (first.rule_id, first.file) == ("method-resolution-raises", SPECULATIVE)
    assert first.error == "ValueError: dspark_draft_topk is only supported by DSpark"


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_a_dflash_fc_of_another_width_is_blocked_at_the_weight_load(release):
    result = audit(analysis(release), dflash_launch(dflash(fc_inputs=3 * 4096)))
    assert [f.rule_id for f in result.blocking] == ["vllm-dflash-drafter-fc-input-width"]
    assert "torch.Size([4096, 12288])to a parameter of size torch.Size([4096, 20480])" in result.blocking[0].error


@pytest.mark.parametrize("release, verdict", [
    ("vllm==0.20.0", Verdict.READY),  # ids as they are: 36 is the output of the last of 36 layers, which is kept
    ("vllm==0.26.0", Verdict.BLOCKED),  # ids + 1: 37 is past the target's layers
    ("vllm==0.33.0", Verdict.BLOCKED),
])
def test_target_layer_ids_out_of_the_target_s_range_are_judged_as_the_release_reads_them(release, verdict):
    result = audit(analysis(release), dflash_launch(dflash(layer_ids=[1, 9, 17, 25, 36])))
    assert result.verdict == verdict, blocking(result)
    layers = finding(result, "vllm-dflash-drafter-target-layer-ids")
    if verdict == Verdict.BLOCKED:
        assert layers.status == Status.BLOCKS and "ids [37] are outside the target's 36 layers" in layers.why
        assert layers.error.startswith("ValueError: DFlash drafter expects 20480 concatenated aux hidden features but "
                                       "received 16384")
    else:
        assert layers.status == Status.PASSES and "[1, 9, 17, 25, 36]" in layers.why


def test_a_dflash_drafter_naming_no_layer_ids_meets_the_target_s_default_layers():
    # No target_layer_ids: the runner reads none, the target captures its default (2, L // 2, L - 3), and the fc
    # (the draft's 5 layers x 4096, 0.20.0) takes 5 states.
    result = audit(analysis("vllm==0.20.0"), dflash_launch(replace(dflash(), config={
        **dflash().config, "dflash_config": {"mask_token_id": 151669}})))
    layers = finding(result, "vllm-dflash-drafter-target-layer-ids")
    assert layers.status == Status.BLOCKS and "layers [2, 18, 33]" in layers.why and "default layers" in layers.why


@pytest.mark.parametrize("release, where, accepted", [
    ("vllm==0.20.0", "vllm/v1/spec_decode/llm_base_proposer.py", "`pard_token`, `ptd_token_id`, or "
                                                                  "`dflash_config.mask_token_id`"),
    ("vllm==0.33.0", "vllm/v1/worker/gpu/spec_decode/utils.py", "`dflash_config.mask_token_id`, `mask_token_id`, "
                                                                 "`dspark_noise_token_id`, `pard_token`, or"),
])
def test_a_dflash_drafter_without_a_mask_token_is_blocked_by_its_runner_s_reader(release, where, accepted):
    result = audit(analysis(release), dflash_launch(dflash(mask=None)))
    (refused,) = result.blocking
    assert (refused.rule_id, refused.file) == ("vllm-dflash-drafter-mask-token", where)
    assert refused.error.startswith("ValueError: ") and accepted in refused.error


def test_a_mask_token_past_the_vocabulary_is_blocked():
    result = audit(analysis("vllm==0.33.0"), dflash_launch(dflash(mask=200000)))
    assert [f.rule_id for f in result.blocking] == ["vllm-dflash-drafter-mask-token"]
    assert "outside the draft's vocabulary (0 to 151935)" in result.blocking[0].why


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_a_dflash_drafter_of_an_architecture_the_release_does_not_register_is_blocked(release):
    # EAGLEConfig renames Qwen3ForCausalLM to DFlashQwen3ForCausalLM, which no registry dict holds.
    result = audit(analysis(release), dflash_launch(dflash(architecture="Qwen3ForCausalLM")))
    registered = finding(result, "vllm-dflash-draft-architecture-registered")
    assert registered.status == Status.BLOCKS and "DFlashQwen3ForCausalLM" in registered.why


def test_a_dflash_head_that_samples_from_the_anchor_is_refused_by_the_v2_speculator():
    drafter = dflash()
    drafter = replace(drafter, config={**drafter.config, "dflash_config": {**drafter.config["dflash_config"],
                                                                            "sample_from_anchor": True}})
    result = audit(analysis("vllm==0.33.0"), dflash_launch(drafter))
    (refused,) = result.blocking
    assert refused.file == "vllm/v1/worker/gpu/spec_decode/dflash/speculator.py"
    assert "sample_from_anchor=True is not supported for DFlash" in refused.error


def test_a_target_without_aux_hidden_states_blocks_dflash_on_either_runner(tmp_path):
    # V1 (0.20.0): GPUModelRunner.load_model's SupportsEagle3 check, which DFlash meets too; Qwen3-Next lacks it there.
    v1 = audit(analysis("vllm==0.20.0"), launch({"method": "dflash", "model": "/d/z-lab/Qwen3-8B-DFlash-b16",
                                                 "num_speculative_tokens": 15}, preset="qwen3-next", drafter=dflash()))
    assert "vllm-eagle3-interface" in [f.rule_id for f in v1.blocking]
    # V2 (0.26.0, 0.33.0): set_eagle3_aux_hidden_state_layers raises for GPT-2, which DFlash's aux states need.
    gpt2 = target_dir(tmp_path, {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 4096,
                                 "n_layer": 36, "hidden_size": 4096, "num_hidden_layers": 36, "vocab_size": 151936})
    for release in ("vllm==0.26.0", "vllm==0.33.0"):
        result = audit(analysis(release), launch({"method": "dflash", "model": "/d/z-lab/Qwen3-8B-DFlash-b16",
                                                  "num_speculative_tokens": 15}, drafter=dflash(), target=gpt2))
        assert result.path.runner == "v2"
        assert ("path-raise", "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py") in \
            [(f.rule_id, f.file) for f in result.blocking]
        assert "Model does not support EAGLE3 interface" in result.blocking[0].error


def test_vllm_0_20_holds_dflash_to_its_model_type_list():
    result = audit(analysis("vllm==0.20.0"), launch({"method": "dflash", "model": "/d/z-lab/GLM-4.5-DFlash",
                                                     "num_speculative_tokens": 15}, preset="glm-4.5", drafter=dflash()))
    allowlist = finding(result, "vllm-eagle3-model-type-allowlist")
    assert allowlist.status == Status.BLOCKS and "dflash is only supported for" in allowlist.error


# -- DSpark ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("release", ["vllm==0.26.0", "vllm==0.33.0"])
def test_a_qwen3_dspark_drafter_is_ready_on_model_runner_v2(release):
    result = audit(analysis(release), dspark_launch(dspark()))
    assert result.method.method == "dspark" and result.method.modeled
    assert result.verdict == Verdict.READY, blocking(result)
    assert result.path.runner == "v2"
    own = {f.rule_id: f.status for f in result.findings if f.rule_id.startswith(("vllm-dflash-drafter", "vllm-dspark"))}
    assert own == dict.fromkeys(("vllm-dflash-drafter-fc-input-width", "vllm-dflash-drafter-mask-token",
                                 "vllm-dflash-drafter-target-layer-ids", "vllm-dspark-draft-class"), Status.PASSES)


def test_dspark_on_a_release_without_it_is_blocked_by_the_method_list():
    result = audit(analysis("vllm==0.20.0"), dspark_launch(dspark()))
    assert result.verdict == Verdict.BLOCKED and result.blocking[0].rule_id == "method-not-in-release"


@pytest.mark.parametrize("release, verdict", [("vllm==0.26.0", Verdict.BLOCKED), ("vllm==0.33.0", Verdict.READY)])
def test_dspark_s_token_count_defaults_to_its_block_size_from_0_33(release, verdict):
    drafter = dspark()
    result = audit(analysis(release), launch({"method": "dspark", "model": drafter.path}, drafter=drafter))
    assert result.verdict == verdict, blocking(result)
    if verdict == Verdict.BLOCKED:
        assert result.blocking[0].file == SPECULATIVE and "`num_speculative_tokens` was not provided" in \
            result.blocking[0].error


def test_a_dspark_top_k_past_the_draft_vocabulary_is_refused_at_its_line():
    result = audit(analysis("vllm==0.33.0"), dspark_launch(dspark(), dspark_draft_topk=200000))
    first = result.blocking[0]
    assert (first.rule_id, first.file) == ("method-resolution-raises", SPECULATIVE)
    assert first.error == "ValueError: dspark_draft_topk must be between 1 and the draft vocabulary size (151936)"


@pytest.mark.parametrize("release, verdict", [("vllm==0.26.0", Verdict.BLOCKED), ("vllm==0.33.0", Verdict.READY)])
def test_a_dspark_fc_is_built_as_each_release_builds_it(release, verdict):
    # Four layers, five target_layer_ids at the top of the config: 0.26.0's DFlashQwen3Model counts only dflash_config's
    # ids, so it builds fc for its 4 layers (16384) and the checkpoint's 20480 does not load; 0.33.0 counts the ids
    # the runner reads (5).
    result = audit(analysis(release), dspark_launch(dspark(layers=4)))
    assert result.verdict == verdict, blocking(result)
    fc = finding(result, "vllm-dflash-drafter-fc-input-width")
    assert fc.status == (Status.BLOCKS if verdict == Verdict.BLOCKED else Status.PASSES)
    if verdict == Verdict.BLOCKED:
        assert "16384" in fc.why and "20480" in fc.why


@pytest.mark.parametrize("release", ["vllm==0.26.0", "vllm==0.33.0"])
def test_a_dspark_drafter_without_a_noise_token_is_blocked(release):
    result = audit(analysis(release), dspark_launch(dspark(noise=None)))
    (refused,) = result.blocking
    assert (refused.rule_id, refused.file) == ("vllm-dflash-drafter-mask-token",
                                               "vllm/v1/worker/gpu/spec_decode/utils.py")


@pytest.mark.parametrize("release", ["vllm==0.26.0", "vllm==0.33.0"])
def test_dspark_target_layers_out_of_range_are_blocked(release):
    result = audit(analysis(release), dspark_launch(dspark(layer_ids=[1, 9, 17, 25, 36])))
    assert [f.rule_id for f in result.blocking] == ["vllm-dflash-drafter-target-layer-ids"]


@pytest.mark.parametrize("release", ["vllm==0.26.0", "vllm==0.33.0"])
def test_a_dspark_launch_whose_draft_is_not_read_is_never_ready(release):
    # No drafter named: the draft is the target's checkpoint, rewritten into DeepSeek-V4's DSparkDraftModel, whose
    # weights the scan does not read.
    result = audit(analysis(release), launch({"method": "dspark", "num_speculative_tokens": 3}, preset="llama3"))
    assert result.verdict == Verdict.UNKNOWN
    unread = finding(result, "vllm-dspark-draft-class")
    assert unread.status == Status.UNKNOWN and "DSparkDraftModel" in unread.why and unread.file == SPECULATIVE
    # A drafter named by a Hub id whose config.json is not here.
    hub = audit(analysis(release), launch({"method": "dspark", "model": "org/dspark-drafter",
                                           "num_speculative_tokens": 7}))
    assert hub.verdict == Verdict.UNKNOWN and finding(hub, "vllm-dspark-draft-class").status == Status.UNKNOWN


@pytest.mark.parametrize("release, status", [("vllm==0.26.0", Status.UNKNOWN), ("vllm==0.33.0", Status.PASSES)])
def test_a_dspark_draft_model_of_model_type_qwen3_is_a_qwen3_dspark_draft_from_0_33(release, status):
    # 0.33.0's __post_init__ builds a DSparkDraftModel of model type qwen3 as Qwen3DSparkModel; 0.26.0 keeps only
    # Qwen3DSparkModel and Gemma4DSparkModel, and rewrites any other draft into DeepSeek-V4's.
    drafter = dspark()
    drafter = replace(drafter, config={**drafter.config, "architectures": ["DSparkDraftModel"]})
    result = audit(analysis(release), dspark_launch(drafter))
    assert finding(result, "vllm-dspark-draft-class").status == status
    if status == Status.PASSES:  # its fc and layers are then Qwen3DSparkModel's
        assert result.verdict == Verdict.READY, blocking(result)
        assert finding(result, "vllm-dflash-drafter-fc-input-width").status == Status.PASSES


# -- the model runner: DSpark only on V2, P-EAGLE only on V1 -------------------------------------------------------

def test_dspark_takes_v2_on_0_26_where_an_eagle3_launch_of_the_same_moe_target_takes_v1():
    a = analysis("vllm==0.26.0")
    eagle3 = audit(a, launch({"method": "eagle3", "model": "/d/eagle3", "num_speculative_tokens": 3},
                             preset="deepseek-v3"))
    assert eagle3.path.runner == "v1"  # DeepseekV3ForCausalLM is MoE and not a default-V2 architecture
    drafter = dspark()
    result = audit(a, dspark_launch(drafter, preset="deepseek-v3"))
    assert result.path.runner == "v2"
    assert "self.speculative_config.method == 'dspark'` is True" in result.path.runner_reason


def test_dspark_where_0_33_takes_model_runner_v1_is_refused_by_v1():
    # --platform cpu: no Triton, so use_v2_model_runner returns False; VllmConfig.__post_init__ then runs
    # _validate_v1_model_runner, which refuses DSpark.
    result = audit(analysis("vllm==0.33.0", "cpu"), dspark_launch(dspark()))
    assert result.path.runner == "v1" and "requires Triton" in result.path.runner_reason
    refused = result.blocking[0]  # before anything loads: what V1 would have read of the drafter does not matter
    assert (refused.rule_id, refused.file) == ("model-runner-refuses", "vllm/config/vllm.py")
    assert refused.error == "ValueError: Model Runner V1 does not support: dspark speculative decoding"
    assert "_validate_v1_model_runner" in refused.why
    # A DFlash launch there is not refused: V1 runs DFlash.
    assert audit(analysis("vllm==0.33.0", "cpu"), dflash_launch(dflash())).verdict == Verdict.READY


@pytest.mark.parametrize("release", ["vllm==0.26.0", "vllm==0.33.0"])
def test_p_eagle_falls_back_to_v1_where_a_plain_eagle3_launch_takes_v2(release):
    sequential = audit(analysis(release), peagle_launch(peagle(), parallel=False))
    assert sequential.path.runner == "v2"
    parallel = audit(analysis(release), peagle_launch(peagle()))
    assert parallel.path.runner == "v1" and parallel.verdict == Verdict.READY, blocking(parallel)
    assert "parallel drafting for EAGLE speculative decoding; using the V1 model runner instead" in \
        parallel.path.runner_reason


def test_p_eagle_forced_onto_v2_is_refused_by_v2():
    # VLLM_USE_V2_MODEL_RUNNER=1 takes V2 whatever the launch; _validate_v2_model_runner then lists what V2 does not
    # support (the launch's environment is not read from a command line yet: the runner's own code, over the facts).
    a = analysis("vllm==0.33.0")
    choice = load_path_spec("vllm").runner
    facts = LaunchFacts("eagle3", speculative={"method": "eagle3", "parallel_drafting": True},
                        config=load_preset("llama3").config, text_config=load_preset("llama3").text_config,
                        env={"VLLM_USE_V2_MODEL_RUNNER": "1"})
    found = refusal(choice, Source(ReleaseModules(a.index).module_tree), facts, "v2")
    assert found is not None and found.certain and found.file == "vllm/config/vllm.py"
    assert found.error == ("ValueError: Model Runner V2 does not yet support: parallel drafting for EAGLE speculative "
                           "decoding")
    sequential = replace(facts, speculative={"method": "eagle3"})
    assert refusal(choice, Source(ReleaseModules(a.index).module_tree), sequential, "v2") is None


# -- P-EAGLE: EAGLE-3 under parallel_drafting ----------------------------------------------------------------------

@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_a_p_eagle_head_with_its_mask_token_and_mask_hidden_is_ready(release):
    result = audit(analysis(release), peagle_launch(peagle()))
    assert result.method.method == "eagle3" and result.verdict == Verdict.READY, blocking(result)
    assert finding(result, "vllm-peagle-drafter-mask-hidden").status == Status.PASSES
    assert finding(result, "vllm-dflash-drafter-mask-token").status == Status.PASSES


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_p_eagle_s_own_checks_judge_only_a_parallel_launch(release):
    result = audit(analysis(release), peagle_launch(peagle(token_key=None, mask_hidden=False), parallel=False))
    assert result.verdict == Verdict.READY, blocking(result)
    assert not any(f.rule_id in ("vllm-peagle-drafter-mask-hidden", "vllm-dflash-drafter-mask-token")
                   for f in result.findings)


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_a_p_eagle_head_without_its_mask_token_is_blocked_at_the_proposer(release):
    result = audit(analysis(release), peagle_launch(peagle(token_key=None)))
    (refused,) = result.blocking
    assert (refused.rule_id, refused.file) == ("vllm-dflash-drafter-mask-token", "vllm/v1/spec_decode/llm_base_proposer.py")
    assert refused.error.startswith("ValueError: For parallel drafting, the draft model config must have")


@pytest.mark.parametrize("release, verdict", [("vllm==0.26.0", Verdict.BLOCKED), ("vllm==0.33.0", Verdict.READY)])
def test_a_top_level_mask_token_id_is_read_by_v1_from_0_33(release, verdict):
    result = audit(analysis(release), peagle_launch(peagle(token_key="mask_token_id")))
    assert result.path.runner == "v1" and result.verdict == verdict, blocking(result)


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_a_head_without_mask_hidden_launched_in_parallel_is_blocked_at_its_weight_load(release):
    result = audit(analysis(release), peagle_launch(peagle(mask_hidden=False)))
    (refused,) = result.blocking
    assert (refused.rule_id, refused.file) == ("vllm-peagle-drafter-mask-hidden",
                                               "vllm/model_executor/models/llama_eagle3.py")
    assert refused.error == ("ValueError: mask_hidden not found in weights but model is configured for parallel "
                             "drafting. Please provide mask_hidden in the weights.")


# -- the player: a function of the release, code in and value out ------------------------------------------------

def played(source: str, *args, this: dict | None = None):
    """What the last function of ``source`` gives on these arguments (``this``: the fields of ``self``), as the
    drafter checks play the release's readers (play.player): its one value, else an Unknown that says why."""
    function = ast.parse(source).body[-1]
    assert isinstance(function, ast.FunctionDef)
    outcomes, _ = call(function, LiteralScope(), list(args), {}, fields={"self": this} if this is not None else None)
    return answer(outcomes, "m.py")


READER = '''
def aux(spec_config):
    hf_config = spec_config.draft_model_config.hf_config
    layer_ids = getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None)
    if not layer_ids:
        dflash_config = getattr(hf_config, "dflash_config", None)
        if dflash_config and isinstance(dflash_config, dict):
            layer_ids = [i + 1 for i in (dflash_config.get("target_layer_ids") or [])]
    if layer_ids and isinstance(layer_ids, (list, tuple)):
        return tuple(layer_ids)
    return None
'''


def spec(config: dict) -> dict:
    return {"draft_model_config": {"hf_config": config}}


def test_the_player_reads_a_config_as_the_engine_does():
    assert played(READER, spec({"dflash_config": {"target_layer_ids": [1, 9]}})) == (2, 10)
    assert played(READER, spec({"eagle_aux_hidden_state_layer_ids": [3]})) == (3,)
    assert played(READER, spec({})) is None


def test_the_player_raises_what_the_function_raises_and_knows_what_it_does_not_know():
    source = '''
def token(hf_config):
    if hasattr(hf_config, "pard_token"):
        return int(hf_config.pard_token)
    raise ValueError(f"no token in {hf_config.model_type}")
'''
    assert played(source, {"pard_token": "7"}) == 7
    with pytest.raises(Raised, match="ValueError: no token in llama"):
        played(source, {"model_type": "llama"})
    assert played("def f(c):\n    if c.unknown:\n        return 1\n    return 2", {}) == Unknown("c.unknown")
    # A statement whose value is not known, that nothing later reads, does not stop the play.
    assert played("def f(self):\n    self.buf = torch.zeros(3)\n    self.k = 4\n    return self.k", this={}) == 4


# -- the runner's own check of the launch, code in and refusal out ----------------------------------------------

RUNNER_CONFIG = '''
import pkg.envs as envs
class Config:
    @property
    def use_v2(self):
        if envs.VAR is not None:
            return envs.VAR
        return True

    def _unsupported_v1(self):
        unsupported = []
        if self.speculative_config.method == "dspark":
            unsupported.append("dspark speculative decoding")
        if self.model_config.kind == "diffusion":
            unsupported.append("diffusion models")
        return unsupported

    def _validate_v1(self):
        unsupported = self._unsupported_v1()
        if unsupported:
            raise ValueError(f"Model Runner V1 does not support: {', '.join(unsupported)}")
'''


def _runner(validate: dict[str, str]):
    from specaudit.scan.runner import RunnerChoice

    trees = {"pkg.config": (ast.parse(RUNNER_CONFIG), "pkg/config.py"),
             "pkg.envs": (ast.parse('import os\nVAR = os.getenv("VAR", None)\n'), "pkg/envs.py")}
    reads = (("self.speculative_config.method", "__method__"), ("self.model_config.kind", "__config__['kind']"))
    return RunnerChoice("VAR", "pkg.envs", "v2", "v1", "pkg.config:Config.use_v2", "v2", "v1", reads=reads,
                        validate=tuple(validate.items())), Source(trees.get)


def test_the_runner_s_check_refuses_with_the_engine_s_message_where_every_way_raises():
    choice, source = _runner({"v1": "_validate_v1"})
    found = refusal(choice, source, LaunchFacts("dspark", config={"kind": "dense"}), "v1")
    assert found is not None and found.certain and (found.file, found.line) == ("pkg/config.py", 21)
    assert found.error == "ValueError: Model Runner V1 does not support: dspark speculative decoding"
    assert "`self.speculative_config.method == 'dspark'` is True" in found.reason
    assert refusal(choice, source, LaunchFacts("eagle3", config={"kind": "dense"}), "v1") is None
    # What it reads and the launch does not fix: some ways raise, not every one.
    unsure = refusal(choice, source, LaunchFacts("eagle3"), "v1")
    assert unsure is not None and not unsure.certain
    # A runner without a check of its own, or a release without the method: nothing to say.
    assert refusal(choice, source, LaunchFacts("dspark"), "v2") is None
    assert refusal(_runner({"v1": "_validate_gone"})[0], source, LaunchFacts("dspark"), "v1") is None
