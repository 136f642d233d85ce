"""The message atlas on real release trees (vLLM 0.17.0, 0.33.0 and 0.34.0, SGLang 0.5.23): a line formatted as the
engine formats it, with concrete values, is located at the raise site read in the release's source (cited at each
test), with the engine, the releases, the guard's values and the fix."""

from __future__ import annotations

import pytest

from specaudit.explain.atlas_build import load_atlas
from specaudit.explain.diagnose import explain
from specaudit.explain.raise_sites import locate
from specaudit.results.outcome import Frame

from conftest import engine_tree

SITE_PACKAGES = "/usr/lib/python3.12/site-packages/"


@pytest.fixture(scope="module")
def atlas():
    return load_atlas([engine_tree(r) for r in ("vllm==0.17.0", "vllm==0.33.0", "vllm==0.34.0", "sglang==0.5.23")])


# vllm-0.33.0 vllm/config/speculative.py:1604-1612, in SpeculativeConfig.__post_init__:
#     elif (self.num_speculative_tokens > n_predict and self.num_speculative_tokens % n_predict != 0):
#         raise ValueError(f"num_speculative_tokens:{self.num_speculative_tokens}" f" must be divisible by {n_predict=}")
# the same text in vllm-0.17.0 vllm/config/speculative.py:547 and, rewritten as spec.num_speculative_tokens, in
# vllm-0.34.0 vllm/v1/worker/gpu/spec_decode/speculator_config.py:288.
DIVISIBLE = "num_speculative_tokens:5 must be divisible by n_predict=3"


def test_a_lone_line_is_located_at_its_raise_sites_with_its_engine_guard_values_and_fix(atlas):
    found = locate(atlas, DIVISIBLE, exception="ValueError")
    sites = {(s.location, s.function) for s in found.sites}
    assert ("vllm/config/speculative.py:1609", "SpeculativeConfig.__post_init__") in sites
    assert ("vllm/v1/worker/gpu/spec_decode/speculator_config.py:288",
            "DraftModelSpeculatorConfig.resolve_num_speculative_tokens") in sites
    assert found.engine == "vllm" and found.releases == "vllm 0.17.0-0.34.0"
    assert dict(found.holes)["n_predict"] == "3"
    assert found.fixes[0].startswith('--speculative-config key "num_speculative_tokens": at most n_predict')


def test_a_frame_at_the_raise_line_pins_the_release(atlas):
    frame = Frame(SITE_PACKAGES + "vllm/config/speculative.py", 1609, "__post_init__")
    found = locate(atlas, DIVISIBLE, (frame,), "ValueError")
    assert found.sites[0].location == "vllm/config/speculative.py:1609" and found.releases == "vllm 0.33.0"
    assert found.sites[0].guard == "self.num_speculative_tokens > n_predict and self.num_speculative_tokens % " \
                                   "n_predict != 0"


def test_a_release_the_log_names_narrows_the_range(atlas):
    assert locate(atlas, DIVISIBLE, exception="ValueError", version="0.17.0").releases == "vllm 0.17.0"


# sglang-0.5.23 sglang/srt/arg_groups/speculative_hook.py:175-177:
#     if cfg.speculative_use_block_verification:
#         if cfg.speculative_algorithm not in ("EAGLE", "EAGLE3", "DFLASH", "DSPARK"):
#             raise ValueError("--speculative-use-block-verification only supports EAGLE / EAGLE3 / NEXTN / DFLASH / DSPARK.")
def test_an_sglang_line_is_sglang_and_its_fix_is_the_flag_the_guard_compares(atlas):
    found = locate(atlas, "--speculative-use-block-verification only supports EAGLE / EAGLE3 / NEXTN / DFLASH / "
                          "DSPARK.", exception="ValueError")
    assert found.engine == "sglang" and found.releases == "sglang 0.5.23"
    assert found.sites[0].location == "sglang/srt/arg_groups/speculative_hook.py:177"
    assert found.fixes == ("--speculative-algorithm: one of ('EAGLE', 'EAGLE3', 'DFLASH', 'DSPARK')",)


# vllm-0.33.0 vllm/v1/executor/multiproc_executor.py:525 (0.34.0: :549): raise RuntimeError(f"Worker failed with error '{result}',
# please check the" " stack trace above for the root cause"), quoting gpu_model_runner.py:5173-5174 in
# _setup_eagle3_aux_hidden_state_outputs: if not supports_eagle3(self.get_model()): raise RuntimeError("Model does
# not support EAGLE3 interface but " "aux_hidden_state_outputs was requested")
def test_a_wrapper_quoting_its_cause_is_located_at_the_cause(atlas):
    found = locate(atlas, "Worker failed with error 'Model does not support EAGLE3 interface but "
                          "aux_hidden_state_outputs was requested', please check the stack trace above for the root "
                          "cause", exception="RuntimeError")
    assert found.quoted_by.location == "vllm/v1/executor/multiproc_executor.py:549"  # the newest release's line
    assert ("vllm/v1/worker/gpu_model_runner.py:5174", "GPUModelRunner._setup_eagle3_aux_hidden_state_outputs") in \
        {(s.location, s.function) for s in found.sites}
    assert found.sites[0].guard == "not supports_eagle3(self.get_model())"


def test_a_wrapper_quoting_what_no_template_makes_reports_the_quoted_failure(atlas):
    found = locate(atlas, "Worker failed with error ''Qwen2ForCausalLM' object has no attribute 'set_embed'', please "
                          "check the stack trace above for the root cause", exception="RuntimeError")
    assert found.sites[0].file == "vllm/v1/executor/multiproc_executor.py" and found.quoted_by is None
    assert found.quotes == "'Qwen2ForCausalLM' object has no attribute 'set_embed'"


def test_a_pydantic_validation_error_is_located_at_the_validators_raise(atlas):
    found = locate(atlas, f"1 validation error for SpeculativeConfig: Value error, {DIVISIBLE} [type=value_error, "
                          "input_value=ArgsKwargs((), {...}), input_type=ArgsKwargs]", exception="ValidationError")
    assert "vllm/config/speculative.py:1609" in {s.location for s in found.sites}


def test_a_message_wrapped_by_the_paste_is_located_rejoined(atlas):
    found = locate(atlas, "num_speculative_tokens:5 must be divisi", exception="ValueError",
                   continued=("ble by n_predict=3",))
    assert "vllm/config/speculative.py:1609" in {s.location for s in found.sites}


def test_a_line_no_template_makes_is_not_located(atlas):
    assert locate(atlas, "'>' not supported between instances of 'NoneType' and 'int'", exception="TypeError") is None
    # Python's own AttributeError, though vllm/lora/layers/base.py's __getattr__ words one like it: holes mostly
    assert locate(atlas, "'Qwen2ForCausalLM' object has no attribute 'set_embed'", exception="AttributeError") is None


# vllm-0.33.0 vllm/config/speculative.py:1614-1615: if self.num_speculative_tokens is None: raise ValueError("A
# speculative model was provided, but " "`num_speculative_tokens` was not provided")
def test_explain_reads_a_line_pasted_without_its_exception_type_as_the_engines_raise(tmp_path):
    engine_tree("vllm==0.33.0")  # in the tree cache, which explain's atlas is built from
    paste = tmp_path / "paste.log"
    paste.write_text("A speculative model was provided, but `num_speculative_tokens` was not provided\n")
    explanation = explain(str(paste))
    root = explanation.root
    assert explanation.exit_code == 1 and root.by == "raise site" and root.crash.exception == "ValueError"
    assert "vllm/config/speculative.py:1615" in {s.location for s in root.located.sites}
    assert root.located.fixes == ('--speculative-config key "num_speculative_tokens": set',)
