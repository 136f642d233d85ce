"""The forms a pasted failure takes, each read by explain as the failure it is (specaudit/explain/tracebacks.py), and
the known-failures table (rules/signatures/known-*.yaml, specaudit/launch/known.py). The lines are the engines'
own formats: vLLM's per-process logger prefix `(Worker_TP0 pid=N) ERROR MM-DD HH:MM:SS [file.py:N] ` (vllm/logger.py),
SGLang's `[YYYY-MM-DD HH:MM:SS TP0] ` (sglang/srt/utils.py configure_logger), Python's traceback and chaining
texts, pydantic-core's "N validation error for X" form, PyTorch's "CUDA error: ..." echo.
"""

from __future__ import annotations

import re

import pytest

from specaudit.explain.diagnose import root_cause
from specaudit.explain.signatures import (
    classify,
    load_crash_signatures,
    load_release_markers,
    load_signatures,
    load_wrappers,
    needles_of,
)
from specaudit.launch.known import known_failures, launch_features, load_known_failures

SIGNATURES = load_signatures()
CRASHES = load_crash_signatures()
KNOWN = load_known_failures()
WORKER = "(Worker_TP0 pid=407628) ERROR 06-04 10:14:43 [multiproc_executor.py:522] "


def explain(lines: list[str], known=None):
    explanation = classify(lines, SIGNATURES, "-", load_wrappers(), release=load_release_markers(), crashes=CRASHES,
                           known=KNOWN if known is None else known)
    return explanation, root_cause(explanation, None)


def test_frames_without_a_header_are_a_traceback_of_their_process():
    explanation, root = explain([
        WORKER + '  File "/usr/lib/python3.12/site-packages/vllm/v1/spec_decode/eagle.py", line 144, in propose',
        WORKER + "    hidden_states = self.model(",
        WORKER + "ZeroDivisionError: division by zero"])
    crash = explanation.crash
    assert crash.exception == "ZeroDivisionError" and crash.process == "(Worker_TP0 pid=407628)"
    assert [f.function for f in crash.frames] == ["propose"] and explanation.exit_code == 1
    assert root.by == "traceback" and "raised in propose at vllm/v1/spec_decode/eagle.py:144" in root.summary


@pytest.mark.parametrize("line, exception", [
    ("torch.AcceleratorError: CUDA error: unspecified launch failure", "torch.AcceleratorError"),
    ("KeyError: 'embed_tokens.weight'", "KeyError"),
    ("  ValueError: too many values to unpack (expected 2)", "ValueError"),
    (WORKER + "AssertionError", "AssertionError"),
])
def test_a_lone_exception_line_is_a_failed_launch(line, exception):
    explanation, root = explain(["INFO 06-04 10:14:40 [core.py:1] starting", line])
    assert explanation.exit_code == 1 and explanation.crash.exception == exception
    assert explanation.crash.frames == () and explanation.crash.line_number == 2


@pytest.mark.parametrize("line, text", [
    # pasted as Markdown inline code
    ("`AttributeError: 'EagleLlama4ForCausalLM' object has no attribute 'lm_head' `",
     "AttributeError: 'EagleLlama4ForCausalLM' object has no attribute 'lm_head'"),
    # a logger's repr(e) (vLLM's V0 engine.py: logger.exception(repr(e)))
    ("ERROR 12-25 15:08:47 engine.py:135] IndexError('Error in model execution: tuple index out of range')",
     "IndexError: Error in model execution: tuple index out of range"),
])
def test_markdown_code_and_an_exception_s_repr_are_exception_lines(line, text):
    explanation, _ = explain([line])
    assert explanation.crash.text == text and explanation.exit_code == 1


def test_a_traceback_cut_off_before_its_exception_is_a_failure_but_not_before_a_whole_one():
    header = "Traceback (most recent call last):"
    frame = '  File "/x/vllm/v1/engine/core.py", line 502, in __init__'
    explanation, root = explain([header, frame, "    super().__init__("])
    assert explanation.exit_code == 1 and explanation.crash.exception == "Traceback"
    assert "cut off before its exception line" in root.summary
    # a later whole traceback is the root cause, not the cut-off one
    explanation, _ = explain([header, frame, "```", header, frame, "ValueError: the real one"])
    assert explanation.crash.text == "ValueError: the real one"
    # a consequence line before it names the failure better than frames without an exception
    explanation, root = explain(["(EngineCore_DP0 pid=1) ERROR 09-18 12:03:12 [core.py:712] EngineCore failed to start.",
                                 "(EngineCore_DP0 pid=1) ERROR 09-18 12:03:12 [core.py:712] " + header,
                                 "(EngineCore_DP0 pid=1) ERROR 09-18 12:03:12 [core.py:712] " + frame])
    assert root.by == "signature" and root.signature.signature == "vllm-engine-core-failed"


@pytest.mark.parametrize("line", [
    "Loading weights took 3.2 seconds",
    "Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:44",
    "    raise ValueError(",
    "The above exception was the direct cause of the following exception:",
])
def test_lines_that_only_look_like_exceptions_are_not(line):
    explanation, _ = explain([line])
    assert explanation.crash is None


def test_a_log_of_warnings_only_exits_0_and_says_so():
    # a logger's WARNING line is the engine going on, even when it quotes an error text
    explanation, root = explain([
        "(APIServer pid=2) INFO 10-06 18:54:28 [api_server.py:1] vLLM API server version 0.11.0",
        "(APIServer pid=2) WARNING 10-06 18:54:29 [config.py:1] KeyError: 'rope_scaling' ignored",
        "(APIServer pid=2) WARNING 10-06 18:54:29 [cuda.py:1] CUDA error: out of memory at a probe; retrying"])
    assert explanation.exit_code == 0 and root is None and explanation.crash is None
    assert explanation.matches[0].signature == "log-warning" and "not a failure" in explanation.matches[0].title
    assert all(not m.root for m in explanation.matches)
    from specaudit.report.lines import no_signature

    assert no_signature(explanation) == ("No sign of a failed launch or request in this log; the known lines below "
                                         "are not failures")


def test_pydantic_form_reads_the_value_error_into_the_message():
    explanation, root = explain([
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
        "  Value error, num_speculative_tokens must be provided with speculative model unless the draft model config "
        "contains an n_predict parameter. [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]",
        "    For further information visit https://errors.pydantic.dev/2.11/v/value_error"])
    assert explanation.crash.message == ("1 validation error for SpeculativeConfig: Value error, num_speculative_tokens "
                                         "must be provided with speculative model unless the draft model config "
                                         "contains an n_predict parameter.")
    # the field's name on its own line (a Literal refused): the line under it is read
    explanation, _ = explain(["pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
                              "method", "  Input should be 'ngram' or 'eagle3' [type=literal_error, input_value='x']"])
    assert explanation.crash.message.endswith(": Input should be 'ngram' or 'eagle3'")
    explanation, _ = explain(["  Value error, Eagle3 is only supported for ['llama'] models. Got "
                              "self.target_model_config.hf_text_config.model_type='kimi_k2' [type=value_error"])
    assert explanation.exit_code == 1 and explanation.cause.signature == "vllm-eagle3-allowlist"


def test_sglang_scheduler_prefix_opens_a_traceback():
    explanation, root = explain([
        "[2025-02-12 07:00:41 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/python/sglang/srt/speculative/eagle_worker.py", line 124, in __init__',
        "    super().__init__(",
        "RuntimeError: boom in the draft worker",
        "[2025-02-12 07:00:41] Received sigquit from a child process. It usually means the child failed."])
    assert explanation.crash.text == "RuntimeError: boom in the draft worker"
    assert explanation.crash.frames[-1].function == "__init__" and explanation.crash.line_number == 1


def test_a_log_joined_into_one_line_reads_as_the_lines_it_joined():
    lines = ["(APIServer pid=135812) Traceback (most recent call last):",
             '(APIServer pid=135812)   File "/x/site-packages/vllm/config/speculative.py", line 380, in __post_init__',
             "(APIServer pid=135812)     raise NotImplementedError(",
             "(APIServer pid=135812) NotImplementedError: Speculative decoding with draft model is not supported yet."]
    apart, _ = explain(lines)
    joined, _ = explain([" ".join(lines)])
    assert apart.crash.text == joined.crash.text and apart.crash.frames == joined.crash.frames
    # with no process tag, split before each frame and before the exception
    bare, _ = explain(['Traceback (most recent call last): File "/x/vllm/a.py", line 3, in f     g() '
                       'File "/x/vllm/b.py", line 9, in g     raise KeyError(k) KeyError: \'fc.weight\''])
    assert bare.crash.text == "KeyError: 'fc.weight'" and [f.function for f in bare.crash.frames] == ["f", "g"]


def test_in_a_chain_the_first_exception_is_the_root_cause():
    explanation, root = explain([
        '  File "/x/vllm/worker/model_runner.py", line 717, in execute_model',
        "    model_executable = self.graph_runners[graph_batch_size]",
        "KeyError: 8", "",
        "The above exception was the direct cause of the following exception:", "",
        "Traceback (most recent call last):",
        '  File "/x/vllm/worker/model_runner_base.py", line 116, in _wrapper',
        "RuntimeError: Error in model execution: 8"])
    assert explanation.crash.text == "KeyError: 8" and root.summary.startswith("KeyError: 8")


def test_a_log_with_only_a_consequence_is_still_a_failed_launch():
    # vllm/v1/engine/utils.py prints it after a core process died; the cause is in a log that was not pasted
    explanation, root = explain(["RuntimeError: Engine core initialization failed. See root cause above. "
                                 "Failed core proc(s): {}"])
    assert explanation.exit_code == 1 and explanation.crash.exception == "RuntimeError"
    explanation, root = explain(["EngineCore failed to start."])
    assert explanation.exit_code == 1 and explanation.cause.signature == "vllm-engine-core-failed"


def test_a_device_assert_is_the_root_cause_before_its_python_echo():
    explanation, root = explain([
        "../aten/src/ATen/native/cuda/Indexing.cu:1231: indexSelectSmallIndex: block: [21,0,0], thread: [7,0,0] "
        "Assertion `srcIndex < srcSelectDimSize` failed.",
        "RuntimeError: CUDA error: device-side assert triggered"])
    cause = explanation.cause
    assert cause.signature == "cuda-device-assert" and cause.line_number == 1
    assert cause.fields["kernel"] == "indexSelectSmallIndex" and cause.fields["assertion"] == "srcIndex < srcSelectDimSize"
    assert "d2t" in cause.hint and "max_position_embeddings" in cause.hint
    echo = next(m for m in explanation.matches if m.signature == "cuda-device-side-assert-echo")
    assert echo.line_number == 2 and root.signature is cause


def test_the_code_a_crash_passes_through_outranks_the_text_of_its_line():
    # vllm/v1/worker/gpu/spec_decode/mtp/speculator.py loads the MTP draft (vLLM 0.27); default_loader.py raises
    explanation, _ = explain([
        'File ".../vllm/v1/worker/gpu/spec_decode/mtp/speculator.py", line 18, in load_draft_model',
        'File ".../vllm/model_executor/model_loader/default_loader.py", line 467, in track_weights_loading',
        "ValueError: Following weights were not initialized from checkpoint: {'model.layers.16.hnorm.weight'}"])
    assert explanation.cause.signature == "vllm-mtp-weights-uninitialized"
    assert explanation.cause.fields["method"] == "mtp"
    # the same text from another model's load is the general signature
    explanation, _ = explain(["ValueError: Following weights were not initialized from checkpoint: {'lm_head.weight'}"])
    assert explanation.cause.signature == "vllm-weights-uninitialized"


def test_signatures_name_the_method_whose_launches_print_them():
    explanation, _ = explain(["AssertionError: Only 1 nextn layer is supported"])
    assert explanation.cause.signature == "sglang-nextn-layers" and explanation.cause.fields["method"] == "NEXTN"
    explanation, _ = explain(["ValueError: Target and draft model should have the same vocabulary size. Target model "
                              "vocab_size=152064. Draft model vocab_size=151936. Using models with different "
                              "tokenizers can cause out-of-bounds errors during speculative decoding."])
    assert explanation.cause.fields == {"target_vocab": "152064", "draft_vocab": "151936", "method": "draft_model"}


# -- known failures --------------------------------------------------------------------------------------------


def test_a_known_failure_names_its_thread_and_fix_in_explain():
    # vllm-project/vllm#21177: EAGLE-3 with --kv-cache-dtype fp8 on v0.9.2
    explanation, root = explain(["RuntimeError: query and key must have the same dtype"])
    cause = explanation.cause
    assert cause.signature == "vllm-known-eagle3-fp8-kv-dtype" and cause.root
    assert "https://github.com/vllm-project/vllm/issues/21177" in cause.title and "--kv-cache-dtype fp8" in cause.hint
    assert root.by == "signature" and explanation.exit_code == 1
    # a log naming a release the thread does not report it in: not that known failure, as far as anyone knows
    explanation, _ = explain(["INFO 07-18 18:03:49 [api_server.py:1] vLLM API server version 0.11.0",
                              "RuntimeError: query and key must have the same dtype"],
                             known=KNOWN)
    assert explanation.crash is not None and not any(m.signature.startswith("vllm-known") for m in explanation.matches)


def test_a_known_failure_is_listed_beside_a_general_signature_of_its_line():
    explanation, _ = explain(["torch.AcceleratorError: CUDA error: an illegal memory access was encountered"])
    assert explanation.cause.signature == "cuda-illegal-memory-access"
    listed = {m.signature for m in explanation.matches if not m.root}
    assert {"sglang-known-glm52-nvfp4-eagle-graph-capture", "sglang-known-hicache-spec-cuda-graph"} <= listed


@pytest.mark.parametrize("failure", KNOWN, ids=[f.id for f in KNOWN])
def test_each_known_failure_has_its_thread_releases_and_examples(failure):
    repo = {"vllm": "https://github.com/vllm-project/vllm/", "sglang": "https://github.com/sgl-project/sglang/"}
    assert failure.thread.startswith(repo[failure.engine]) and failure.fix and failure.seen_in
    assert str(failure.releases), "a PEP 440 specifier (it parses); an empty one would match every release"
    assert failure.examples and failure.counterexamples
    assert all(failure.pattern.search(line) for line in failure.examples)
    assert not any(failure.pattern.search(line) for line in failure.counterexamples)
    features = {f for engine in ("vllm", "sglang") for f in _feature_names(engine)}
    assert set(failure.features) <= features, "every feature it names is one launch_features can tell"


def _feature_names(engine: str) -> set[str]:
    from specaudit.launch.known import load_features

    return {feature.name for feature in load_features(engine)}


def test_known_failures_of_a_launch_cell():
    # vllm#21177 was seen on 0.9.2 with EAGLE-3 and an FP8 KV cache
    ids = [f.id for f in known_failures("vllm", "0.9.2", {"kv_cache_fp8", "cuda_graphs"}, "eagle3")]
    assert ids == ["vllm-known-eagle3-fp8-kv-dtype"]
    assert not known_failures("vllm", "0.9.2", {"cuda_graphs"}, "eagle3")  # without the FP8 KV cache
    assert not known_failures("vllm", "0.10.0", {"kv_cache_fp8"}, "eagle3")  # a release no thread reports
    assert not known_failures("vllm", "0.9.2", {"kv_cache_fp8"}, "ngram")  # another method
    # sglang PR 33892: the guard is in 0.5.23 (multi_layer_eagle_worker_v2.py:983), 0.5.8 has no such call
    assert [f.id for f in known_failures("sglang", "0.5.15", {"dp_attention"}, "EAGLE3")] == \
        ["sglang-known-eagle3-dp-attention-idle-batch"]
    assert not known_failures("sglang", "0.5.23", {"dp_attention"}, "EAGLE3")
    assert not known_failures("sglang", "not-a-version", {"dp_attention"}, "EAGLE3")


@pytest.mark.network
def test_a_scan_warns_of_the_known_failures_of_its_launch_s_cell(tmp_path):
    # The same cell as above (vllm#21177), read from a launch command: the warning stands beside the verdict, in
    # the result every format renders.
    import json

    from specaudit.launch.command import parse_launch_command
    from specaudit.launch.request import Launch
    from specaudit.launch.target import load_preset
    from specaudit.scan.audit import scan

    from conftest import engine_tree

    command = parse_launch_command(["python3", "-m", "vllm.entrypoints.openai.api_server", "--kv-cache-dtype", "fp8",
                                    "--speculative-config", json.dumps({"method": "eagle3", "model": "org/d",
                                                                        "num_speculative_tokens": 3})])
    launch = Launch(load_preset("llama3"), method="eagle3", engine="vllm", draft="org/d",
                    speculative=command.speculative, options=command.options)
    result = scan(engine_tree("vllm==0.9.2"), launch)
    assert [k.id for k in result.known_failures] == ["vllm-known-eagle3-fp8-kv-dtype"]
    assert "https://github.com/vllm-project/vllm/issues/21177" in result.known_failures[0].hint
    plain = scan(engine_tree("vllm==0.9.2"), Launch(load_preset("llama3")))
    assert plain.known_failures == []


def test_launch_features_from_a_command_s_options():
    assert launch_features("vllm", {"--kv-cache-dtype": "fp8_e4m3", "--pipeline-parallel-size": "2"}) == \
        {"kv_cache_fp8", "pipeline_parallel", "cuda_graphs"}
    assert launch_features("vllm", {"enforce_eager": True, "kv-cache-dtype": "auto", "pp": 1}) == set()
    assert launch_features("sglang", {"enable-dp-attention": True, "disable-cuda-graph": True}) == {"dp_attention"}


# -- speed: a pattern runs only on the lines that hold its literals ---------------------------------------------


@pytest.mark.parametrize("pattern, needles", [
    # the longest literal of each branch
    ("Model (?P<m>\\w+) does not|'(?P<u>\\w+)' object has no attribute 'x'", (" does not", "' object has no attribute 'x'")),
    ("an illegal memory access was encountered|cudaErrorIllegalAddress",
     ("an illegal memory access was encountered", "cudaErrorIllegalAddress")),
    # the parser factors WARNING|WARN into WARN(?:ING|): every match holds WARN
    ("^(?:\\([^()]*pid=\\d+\\) )?(?:WARNING|WARN) \\d\\d-\\d\\d ", ("WARN",)),
    ("\\d+ \\w+", (" ",)),
    ("\\d+\\w+", ()),
    ("(?i)cuda error", ()),
])
def test_needles_of_alternations(pattern, needles):
    assert needles_of(re.compile(pattern)) == needles


def test_every_signature_has_a_needle():
    # a pattern with none would be searched in every line of a 200 MB log
    assert [s.id for s in SIGNATURES + CRASHES if not needles_of(s.pattern)] == []
