"""The fix of a located raise from the conditions on the way to it and what reaches them (explain/fixes.py, issue 38):
engine code in, a pasted line, the fixes out; then the forms on real pasted lines of the worked-on corpus
(tests/fixtures/logs/public2, not held out), each on two releases that have the template."""

from __future__ import annotations

from pathlib import Path

import pytest

from specaudit.explain.atlas import Atlas
from specaudit.explain.atlas_build import _merge, _parse, load_atlas
from specaudit.explain.diagnose import located
from specaudit.explain.raise_sites import bare_line, locate
from specaudit.explain.signatures import explain_file

from conftest import engine_tree

CORPUS = Path(__file__).parent / "fixtures" / "logs" / "public2"


def fixes(code: str, line: str, exception: str = "ValueError", engine: str = "vllm") -> tuple[str, ...]:
    """The fixes explain derives for ``line`` against an atlas of ``code`` alone (one file of one release)."""
    rows, fields, *_ = _parse(code.encode())
    atlas = Atlas(_merge([{"engine": engine, "version": "1.0.0", "files": {f"{engine}/config/x.py": ["d", rows, fields]}}]))
    found = locate(atlas, line, exception=exception)
    assert found is not None, line
    return found.fixes


SPECULATIVE = """
class SpeculativeConfig:
    num_speculative_tokens: int = 1
    method: str = "eagle"

    def __post_init__(self):
        n_predict = getattr(self.draft_model_config.hf_config, "n_predict", None)
        if n_predict is not None:
            if self.num_speculative_tokens > n_predict and self.num_speculative_tokens % n_predict != 0:
                raise ValueError(f"num_speculative_tokens:{self.num_speculative_tokens} must be divisible by {n_predict=}")
"""


def test_a_comparison_gives_its_other_side_and_a_condition_no_comparison_turns_round_the_nearest_values():
    found = fixes(SPECULATIVE, "num_speculative_tokens:5 must be divisible by n_predict=3")
    assert found[0] == ('--speculative-config key "num_speculative_tokens": at most n_predict = 3 '
                        "(self.num_speculative_tokens is 5, n_predict is 3 here)")
    # 4 is above 3 and not a multiple of it: the nearest values that avoid the raise are 3 and 6
    assert '--speculative-config key "num_speculative_tokens": 3 or 6 (the nearest to 5 on which the conditions on ' \
           "the way do not all hold)" in found
    # n_predict reached the condition from the drafter's config.json (getattr(hf_config, "n_predict", None)): 1 divides
    # 5, and 5 is not above 5
    assert found[2] == "`n_predict` in the drafter's config.json: 1 or 5 (the nearest to 3 on which the conditions on " \
                       "the way do not all hold)"
    assert len(found) == 3  # not the condition further out that chose the way: "if n_predict is not None"


def test_a_condition_further_out_is_the_fix_where_the_guard_reads_no_knob():
    code = """
class SpeculativeConfig:
    num_speculative_tokens: int = 1

    def __post_init__(self):
        n_predict = getattr(self.draft_model_config.hf_config, "n_predict", None)
        if n_predict is not None:
            if self.layer_count_of_the_drafter() % 2:
                raise ValueError(f"the drafter's layers do not fit its n_predict={n_predict} here")
"""
    # n_predict reached the condition from the drafter's config.json (getattr(hf_config, "n_predict", None))
    assert fixes(code, "the drafter's layers do not fit its n_predict=3 here") == (
        "`n_predict` in the drafter's config.json: unset (None) (n_predict is 3 here)",)


def test_the_printed_numbers_that_do_not_raise_there_solve_nothing():
    found = fixes(SPECULATIVE, "num_speculative_tokens:6 must be divisible by n_predict=3")  # 6 % 3 == 0: not this way
    assert not any("nearest" in fix for fix in found)


def test_a_name_read_from_an_environment_variable_is_fixed_with_a_module_set_written_out():
    code = """
SUPPORTED_BACKENDS = frozenset({"FLASH_ATTN", "TRITON_ATTN", "FLASHINFER"})

def check_backend(vllm_config):
    backend = vllm_config.attention_backend or envs.VLLM_ATTENTION_BACKEND
    if backend not in SUPPORTED_BACKENDS:
        raise ValueError(f"Attention backend {backend} does not support speculative decoding here")
"""
    found = fixes(code, "Attention backend XFORMERS does not support speculative decoding here")
    assert found == ("the environment variable VLLM_ATTENTION_BACKEND: one of SUPPORTED_BACKENDS = ['FLASHINFER', "
                     "'FLASH_ATTN', 'TRITON_ATTN'] (backend is XFORMERS here)",)


def test_a_flag_guarded_by_an_environment_variable_is_fixed_by_setting_it():
    code = """
class EngineArgs:
    enable_chunked_prefill: bool = False

    def create_engine_config(self):
        if not envs.VLLM_USE_V1:
            if self.enable_chunked_prefill:
                raise ValueError("Chunked prefill with speculative decoding needs the V1 engine")
"""
    found = fixes(code, "Chunked prefill with speculative decoding needs the V1 engine")
    assert found == ("--enable-chunked-prefill: unset (false)", "the environment variable VLLM_USE_V1: set (true)")


def test_an_elif_chain_of_values_is_one_fix_and_turning_speculation_off_is_none():
    code = """
class SpeculativeConfig:
    method: str = "eagle"

class Runner:
    def __init__(self):
        if self.speculative_config:
            if self.speculative_config.method == "ngram":
                pass
            elif self.speculative_config.method == "medusa":
                pass
            else:
                raise ValueError(f"Unknown speculative decoding method: {self.speculative_config.method}")
"""
    assert fixes(code, "Unknown speculative decoding method: mlp_speculator") == (
        "--speculative-config key \"method\": one of 'ngram', 'medusa' (self.speculative_config.method is "
        "mlp_speculator here)",)


def test_a_number_the_message_says_is_a_knob_is_solved_through_that_expression():
    code = """
class CompilationConfig:
    def adjust_sizes(self, uniform_decode_query_len: int, tensor_parallel_size: int):
        multiple_of = uniform_decode_query_len
        if tensor_parallel_size > 1 and self.pass_config.enable_sp:
            multiple_of = max(uniform_decode_query_len, tensor_parallel_size)
            if multiple_of % uniform_decode_query_len != 0 or multiple_of % tensor_parallel_size != 0:
                raise ValueError(f"no shapes a multiple of {uniform_decode_query_len} (num_speculative_tokens + 1) "
                                 f"and of {tensor_parallel_size} (tensor_parallel_size)")

class SpeculativeConfig:
    num_speculative_tokens: int = 1

class EngineArgs:
    tensor_parallel_size: int = 1
"""
    found = fixes(code, "no shapes a multiple of 3 (num_speculative_tokens + 1) and of 4 (tensor_parallel_size)")
    assert found == ('--speculative-config key "num_speculative_tokens": 1 or 3 (the nearest to 2 on which the '
                     "conditions on the way do not all hold)",
                     "--tensor-parallel-size: 3 or 6 (the nearest to 4 on which the conditions on the way do not all "
                     "hold)")  # not "at most 1" of the condition further out: the guard's own names are solved


def _corpus_fixes(log: str, releases: tuple[str, ...]) -> tuple[str, ...]:
    atlas = load_atlas([engine_tree(r) for r in releases])
    explanation = explain_file(str(CORPUS / log), None, bare_line(atlas))
    found = located(explanation, atlas)
    assert found is not None and found.sites
    return found.fixes


# vllm-0.17.0 and 0.20.0 vllm/config/compilation.py, CompilationConfig.adjust_cudagraph_sizes_for_spec_decode:
#     if tensor_parallel_size > 1 and self.pass_config.enable_sp:
#         multiple_of = max(uniform_decode_query_len, tensor_parallel_size)
#         if multiple_of % uniform_decode_query_len != 0 or multiple_of % tensor_parallel_size != 0:
#             raise ValueError(f"Can't determine cudagraph shapes that are both a multiple of {uniform_decode_query_len} "
#                              "(num_speculative_tokens + 1) required by spec-decode and {tensor_parallel_size} ...")
# quoted by multiproc_executor's "Worker failed with error '...'"; the thread (29036) settled on 3 speculative tokens.
@pytest.mark.parametrize("release", ["vllm==0.17.0", "vllm==0.20.0"])
def test_the_cudagraph_shapes_of_29036_are_fixed_with_the_speculative_tokens_the_thread_chose(release):
    found = _corpus_fixes("vllm-29036-mtp-sp-cudagraph-shapes-wrapper.log", (release,))
    assert found[0].startswith('--speculative-config key "num_speculative_tokens": 1 or 3 (the nearest to 2 ')
    assert found[1].startswith("--tensor-parallel-size: 3 or 6 (the nearest to 4 ")


# sglang-0.5.17 and 0.5.23 sglang/srt/speculative/multi_layer_eagle_worker_v2.py, MultiLayerEagleDraftWorker.__init__:
#     assert self.speculative_num_draft_tokens == self.speculative_num_steps + 1, (f"multi-layer EAGLE requires ...")
@pytest.mark.parametrize("release", ["sglang==0.5.17", "sglang==0.5.23"])
def test_an_equality_assert_of_36536_is_fixed_on_either_of_its_flags(release):
    found = _corpus_fixes("sglang-36536-multi-layer-eagle-draft-tokens-assert.log", (release,))
    assert found == ("--speculative-num-draft-tokens: self.speculative_num_steps + 1 = 6 "
                     "(self.speculative_num_draft_tokens is 8, self.speculative_num_steps is 5 here)",
                     "--speculative-num-steps: 7 (the nearest to 5 on which the conditions on the way do not all hold)")


# vllm-0.17.0 and 0.33.0 vllm/v1/worker/gpu_model_runner.py, GPUModelRunner.__init__: the else of the chain of the
# methods it builds a drafter for (ngram, suffix, medusa, extract_hidden_states, ...), raising "Unknown speculative
# decoding method: ..." (47825: mlp_speculator, which V1 dropped).
@pytest.mark.parametrize("release", ["vllm==0.17.0", "vllm==0.33.0"])
def test_the_unknown_method_of_47825_is_fixed_with_the_methods_the_chain_builds(release):
    found = _corpus_fixes("vllm-47825-mlp-speculator-unknown-method.log", (release,))
    method = [fix for fix in found if fix.startswith('--speculative-config key "method": one of ')]
    assert len(method) == 1 and all(m in method[0] for m in ("'suffix'", "'extract_hidden_states'"))


def test_what_reaches_a_condition_grows_it_within_bounds():
    from specaudit.explain.fixes import MAX_EXPANDED_NODES, _expand, _parse

    grows = {name: _parse(" + ".join([nxt] * 60)) for name, nxt in (("a", "b"), ("b", "c"), ("c", "d"))}
    expanded = _expand(_parse("a > 1"), grows)
    assert sum(1 for _ in __import__("ast").walk(expanded)) <= MAX_EXPANDED_NODES + 200
