"""The drafter's whole contract (issue 39, item 1): every tensor of an EAGLE-3 head and every head key of its config,
accounted for by the release's own drafter class (scan/drafter/contract.py), on two releases of each engine. Real
tensor names: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's (midlayer.*, fc.weight, norm.weight, lm_head.weight, d2t, t2d).

Facts from the releases' source (read, not run):
- SGLang 0.5.17 / 0.5.23 models/llama_eagle3.py LlamaForCausalLMEagle3.load_weights: midlayer -> layers.0, d2t taken
  as hot_token_id, t2d skipped (`continue`), and every other name loaded only `if param_name in params_dict`: a name
  the model does not build is passed over without a word. LlamaModel builds input_norm only under norm_before_fc.
  Neither release reads norm_before_residual.
- vLLM 0.26.0 / 0.33.0 llama_eagle3.py Eagle3LlamaForCausalLM.load_weights: t2d skipped, d2t renamed
  draft_id_to_target_id; "input_norm." dropped by the loader where LlamaModel's norm_before_fc is off
  (0.26.0 skip_substrs.append, 0.33.0 orig_to_new_substr[...] = None). Neither reads SGLang's fc "bias" key.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_degraded import HEAD, TRAINED, degrading, launch, yuhuili_head

from specaudit.core.types import Status, Verdict
from specaudit.scan.audit import audit

from conftest import engine_analysis

analysis = engine_analysis

RELEASES = [("vllm==0.26.0", None, "vllm-drafter-contract"), ("vllm==0.33.0", None, "vllm-drafter-contract"),
            ("sglang==0.5.17", "sglang", "sglang-drafter-contract"),
            ("sglang==0.5.23", "sglang", "sglang-drafter-contract")]


def contract(result, rule_id: str):
    return next(f for f in result.findings if f.rule_id == rule_id)


@pytest.mark.parametrize("release, engine, rule_id", RELEASES)
def test_every_tensor_of_a_well_formed_head_is_accounted_for(tmp_path, release, engine, rule_id):
    result = audit(analysis(release), launch(tmp_path, HEAD, "eagle3", engine))
    finding = contract(result, rule_id)
    assert result.verdict == Verdict.READY and finding.status == Status.PASSES, finding.why
    assert "t2d skipped at" in finding.code and "fc.weight loaded into model.fc.weight" in finding.code
    layer = "model.layers.0.self_attn.qkv_proj.weight" if engine else "model.midlayer.self_attn.q_proj.weight"
    assert f"midlayer.self_attn.q_proj.weight loaded into {layer}" in finding.code
    assert "d2t loaded into " + ("d2t" if engine else "draft_id_to_target_id") in finding.code


@pytest.mark.parametrize("release, engine, rule_id", RELEASES)
def test_a_norm_the_config_does_not_ask_for_is_never_loaded(tmp_path, release, engine, rule_id):
    # The head ships input_norm.weight (a norm before fc) and its config does not set norm_before_fc: the release
    # builds no input_norm and drops the tensor without a word. A partial loss: a warning with its share.
    result = audit(analysis(release), launch(tmp_path, HEAD, "eagle3", engine,
                                             {"input_norm.weight": np.ones(192, np.float32)}))
    finding = contract(result, rule_id)
    assert result.verdict == Verdict.READY and finding.status == Status.WARNS
    assert "does not load input_norm.weight" in finding.why and "1.0% of the drafter's parameters" in finding.why
    assert finding.file == ("sglang/srt/models/llama_eagle3.py" if engine else "vllm/model_executor/models/llama_eagle3.py")
    # With the flag that builds it, the norm loads.
    asked = audit(analysis(release), launch(tmp_path, {**HEAD, "eagle_config": {"norm_before_fc": True}}, "eagle3",
                                            engine, {"input_norm.weight": np.ones(192, np.float32)}))
    assert contract(asked, rule_id).status == Status.PASSES
    assert "input_norm.weight loaded into model.input_norm.weight" in contract(asked, rule_id).code


@pytest.mark.parametrize("release, engine, rule_id, key", [
    ("sglang==0.5.17", "sglang", "sglang-drafter-contract", "norm_before_residual"),
    ("sglang==0.5.23", "sglang", "sglang-drafter-contract", "norm_before_residual"),
    ("vllm==0.26.0", None, "vllm-drafter-contract", "bias"),
    ("vllm==0.33.0", None, "vllm-drafter-contract", "bias")])
def test_a_head_setting_the_release_never_reads_warns(tmp_path, release, engine, rule_id, key):
    result = audit(analysis(release), launch(tmp_path, {**HEAD, key: True}, "eagle3", engine))
    finding = contract(result, rule_id)
    assert result.verdict == Verdict.READY and finding.status == Status.WARNS
    assert f"sets {key} = True" in finding.why and "never reads" in finding.why
    # The other engine reads it: there it is accounted for as read.
    assert f"{key} ignored" in finding.code


@pytest.mark.parametrize("release, engine, rule_id", RELEASES[2:])
def test_sglang_passes_over_a_head_whose_names_it_does_not_build(tmp_path, release, engine, rule_id):
    # The head's tensors under its training wrapper's prefix (eagle_module.*): SGLang's load_weights finds none of them
    # in params_dict and loads nothing of the head's layers or fc; it runs with the values they were built with.
    wrapped = {f"eagle_module.{name}": value for name, value in
               {"fc.weight": np.zeros((64, 192), np.float32),
                "midlayer.mlp.gate_proj.weight": np.zeros((128, 64), np.float32),
                "midlayer.self_attn.q_proj.weight": np.zeros((64, 128), np.float32)}.items()}
    bare = {"fc.weight": None, "midlayer.mlp.gate_proj.weight": None, "midlayer.self_attn.q_proj.weight": None}
    result = audit(analysis(release), launch(tmp_path, HEAD, "eagle3", engine, {**bare, **wrapped}))
    assert result.verdict == Verdict.DEGRADED
    finding = degrading(result).get(rule_id) or contract(result, rule_id)
    assert finding.status == Status.DEGRADES and "the release loads none of eagle_module.fc.weight" in finding.why
    assert "which the model does not build" in finding.why and "predicted acceptance: near zero" in finding.why
    assert "if param_name in params_dict" in finding.code or finding.line > 0


@pytest.mark.parametrize("release", ["vllm==0.33.0", "vllm==0.34.0"])
def test_yuhuili_s_official_head_is_wholly_accounted_for_and_stays_ready(tmp_path, release):
    result = audit(analysis(release), yuhuili_head(tmp_path / "EAGLE3-LLaMA3.1-Instruct-8B", TRAINED))
    finding = contract(result, "vllm-drafter-contract")
    assert result.verdict == Verdict.READY and finding.status == Status.PASSES
    assert "(13 tensors" not in finding.why and "15 tensors" in finding.why  # 13 of f16, d2t, t2d


@pytest.mark.parametrize("release, argv", [
    ("vllm==0.33.0", ["vllm", "serve", "{target}", "--speculative-config",
                      '{{"method": "eagle3", "model": "{draft}", "num_speculative_tokens": 3}}']),
    ("sglang==0.5.23", ["python3", "-m", "sglang.launch_server", "--model-path", "{target}", "--speculative-algorithm",
                        "EAGLE3", "--speculative-draft-model-path", "{draft}", "--speculative-num-steps", "3"])])
def test_the_contract_is_judged_from_a_launch_command(tmp_path, release, argv):
    # Item 4: the target read from the command's --model / --model-path, the drafter from its speculative arguments.
    from specaudit.launch.command import parse_launch_command
    from specaudit.launch.request import launch_of

    given = launch(tmp_path, HEAD, "eagle3", None, {"input_norm.weight": np.ones(192, np.float32)})
    launched = launch_of(parse_launch_command([a.format(target=given.target.directory, draft=given.draft)
                                               for a in argv]))
    assert launched is not None
    rule_id = "sglang-drafter-contract" if release.startswith("sglang") else "vllm-drafter-contract"
    result = audit(analysis(release), launched)
    assert contract(result, rule_id).status == Status.WARNS and result.verdict == Verdict.READY
