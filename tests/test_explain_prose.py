"""Errors as people paste them in prose, titles and Markdown (tracebacks.py), and the fixes explain derives for a
located line (raise_sites.py, knobs.py): each form on a few made-up lines, read without an atlas where the reader
alone decides; the forms come from tests/fixtures/logs/public2 (issue 38), the lines here are not its logs."""

from __future__ import annotations

import pytest

from specaudit.explain.fixes import _computed
from specaudit.explain.knobs import knob_of, said_knobs
from specaudit.explain.raise_sites import _distinct, _python_own
from specaudit.explain.signatures import classify, load_signatures, load_wrappers, match_line
from specaudit.explain.tracebacks import CUT_OFF

FRAME = '  File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 2001, in load_model'


def crash(lines: list[str], bare=None):
    return classify(lines, [], "-", load_wrappers(), bare=bare).crash


@pytest.mark.parametrize("line", [
    "[Bug] AssertionError: Currently the backend does not support speculative decoding.",
    "[Bug]: my server fails with AssertionError: Currently the backend does not support speculative decoding.",
    "1. Fixes AssertionError: Currently the backend does not support speculative decoding.",
    "- AssertionError: Currently the backend does not support speculative decoding.",
    "> ## AssertionError: Currently the backend does not support speculative decoding.",
])
def test_an_error_after_a_title_tag_or_markdown_marks_is_read(line):
    found = crash([line])
    assert found.exception == "AssertionError"
    assert found.message == "Currently the backend does not support speculative decoding."


def test_an_error_in_an_inline_code_span_ends_where_the_span_does():
    found = crash(["However, I got `AssertionError: Speculative decoding not yet supported for RayGPU backend.` "
                   "when I start it"])
    assert (found.exception, found.message) == ("AssertionError",
                                                "Speculative decoding not yet supported for RayGPU backend.")
    title = crash(["[Speculative decoding]: `AttributeError: 'NoneType' object has no attribute 'numel'` when x"])
    assert title.message == "'NoneType' object has no attribute 'numel'"
    whole = crash(["`KeyError: 'embed_tokens.weight'`"])  # a whole line in a span, as before
    assert whole.text == "KeyError: 'embed_tokens.weight'"


def test_prose_and_bracketed_log_lines_without_an_error_stay_no_crash():
    assert crash(["[Bug]: speculative decoding is slow on H100", "1. Launch the server", "> it hangs", "- no error",
                  "[W1206 10:00:00.1 ProcessGroupNCCL.cpp:9] Warning: something"]) is None


def test_a_message_quoted_in_a_title_is_looked_up_as_a_raise_whole_message():
    known = {"Prompt logprob is not supported by multi step workers": "ValueError"}
    found = crash(['[Bug]: "Prompt logprob is not supported by multi step workers" for ngram'], bare=known.get)
    assert (found.exception, found.message) == ("ValueError", "Prompt logprob is not supported by multi step workers")
    assert crash(['[Bug]: "a quoted phrase nobody prints" somewhere'], bare=known.get) is None
    # a title that says something failed, quoting what no engine raises: the title's failure (titles.py), no raise's
    said = crash(['[Bug]: "a quoted phrase nobody raises" somewhere'], bare=known.get)
    assert said is not None and said.exception == "issue title"


def test_an_assertion_error_without_a_message_is_named_by_the_assert_above_it():
    lone = crash(["assert all(vocab_sizes[0] == v for v in vocab_sizes)", "AssertionError"])
    assert lone.text == "AssertionError: assert all(vocab_sizes[0] == v for v in vocab_sizes)"
    framed = crash(["Traceback (most recent call last):", FRAME, "    assert self.drafter is not None",
                    "           ^^^^^^^^^^^^^^^^^^^^^^^^", "AssertionError"])
    assert framed.message == "assert self.drafter is not None"
    other = crash(["x = 1", "AssertionError"])  # no assert statement above: no message made up
    assert other.text == "AssertionError"


def test_frames_cut_off_at_both_ends_are_a_failure_named_by_their_innermost_statement():
    tail = crash([FRAME, "    self.drafter.load_model(self.model)",
                  '  File "/usr/lib/python3.12/site-packages/vllm/v1/spec_decode/eagle.py", line 90, in load_model',
                  "    self.attn = torch.empty(", "torch.O"])
    assert tail.exception == CUT_OFF and "at self.attn = torch.empty(" in tail.message and "'torch.O'" in tail.message
    one = crash(['  File "/x/vllm/compilation/piecewise_backend.py", line 186, in __call__',
                 "    assert range_entry is not None, ("])
    assert one.exception == CUT_OFF and one.message.endswith("at assert range_entry is not None, (")
    stack = classify(["Stack (most recent call last):", FRAME, "    self.load()", "INFO done"], [], "-",
                     load_wrappers())
    assert stack.crash is None and stack.exit_code == 0  # a logger's stack_info is no failure


def test_a_pasted_block_indented_as_a_whole_goes_on_over_its_indented_lines():
    found = crash(["    ValueError: There is no module or parameter named 'layers.0.conv'",
                   "    in DraftModel. The available parameters are: {...}", "", "    unrelated"])
    assert found.continued == ("in DraftModel. The available parameters are: {...}",)
    flush = crash(["ValueError: no module named 'x'", "    in DraftModel"])  # an indented line under a flush one
    assert flush.continued == ()


def test_a_kernel_assert_a_paste_wrapped_before_its_assertion_is_the_device_signature():
    signatures = load_signatures()
    for line in ("Assertion `srcIndex < srcSelectDimSize` failed.",
                 "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1524: indexSelectSmallIndex: block: [1,0,0], "
                 "thread: [2,0,0] Assertion `srcIndex < srcSelectDimSize` failed."):
        hit = match_line(line, signatures)
        assert hit is not None and hit[0].id == "cuda-device-assert", line
    glibc = "python3: ../nptl/pthread_mutex_lock.c:81: __pthread_mutex_lock: Assertion `mutex->__owner == 0' failed."
    hit = match_line(glibc, signatures)
    assert hit is None or hit[0].id != "cuda-device-assert"


FIELDS = {"SpeculativeConfig": frozenset({"method", "num_speculative_tokens", "tensor_parallel_size"}),
          "EngineArgs": frozenset({"max_model_len", "tensor_parallel_size", "cp_kv_cache_interleave_size"}),
          "ServerArgs": frozenset({"speculative_num_steps", "speculative_num_draft_tokens", "page_size"})}


@pytest.mark.parametrize(("name", "function", "knob"), [
    # SGLang's workers copy the speculative flags onto themselves: the flag, whoever reads it
    ("self.speculative_num_draft_tokens", "MultiLayerEagleDraftWorker.__init__", "--speculative-num-draft-tokens"),
    ("self.speculative_num_steps", "EAGLEWorker.draft", "--speculative-num-steps"),
    # a layer's own attribute of a flag's name that is not a speculative one stays no knob
    ("self.page_size", "FlashAttentionBackend.__init__", None),
    ("self.draft.speculative_num_steps", "EAGLEWorker.draft", None),
])
def test_a_speculative_flag_read_off_a_worker_is_the_flag(name, function, knob):
    assert knob_of(name, function, FIELDS) == knob


def test_the_knobs_a_message_names_are_its_fixes_with_the_value_it_gives():
    assert said_knobs("Head size 288 is not supported. Set VLLM_USE_V1=0 to use another attention backend.",
                      FIELDS) == [("the environment variable VLLM_USE_V1", "0")]
    assert said_knobs("MTP with cp_kv_cache_interleave_size > 1 is not supported in X.", FIELDS) == [
        ("--cp-kv-cache-interleave-size", "at most 1")]
    assert said_knobs("please adjust num_speculative_tokens or the --max-model-len", FIELDS) == [
        ("--max-model-len", ""), ('--speculative-config key "num_speculative_tokens"', "")]
    assert said_knobs("tensor_parallel_size is 4", FIELDS) == [("--tensor-parallel-size", "")]  # a flag first
    assert said_knobs("the method is not known and page size is 16", FIELDS) == []  # no name with an underscore


def test_a_remedy_is_worked_out_from_the_numbers_the_message_printed():
    holes = {"self.speculative_num_steps": "5", "self.speculative_num_draft_tokens": "8", "name": "x"}
    assert _computed("self.speculative_num_steps + 1", holes) == 6
    assert _computed("at most self.speculative_num_steps * 2 - 1", holes) == 9
    assert _computed("one of supported_sizes", holes) is None  # not arithmetic on printed numbers
    assert _computed("3", holes) is None  # a constant needs no working out
    assert _computed("name + 1", holes) is None and _computed("self.speculative_num_steps // 0", holes) is None


def test_the_same_fix_from_several_tied_sites_is_given_once_worked_out_first():
    assert _distinct(["--a: b + 1 (b is 5 here)", "--a: b + 1 = 6 (b is 5 here)", "--c: set"]) == (
        "--a: b + 1 = 6 (b is 5 here)", "--c: set")


def test_a_template_that_copies_pythons_own_message_is_not_where_the_line_came_from():
    assert _python_own(("'", "cls", "' object has no attribute '", "name", "'"))
    assert _python_own(("", "a", " not supported between instances of ", "b", ""))
    assert not _python_own(("Target model does not have 'model' attribute: ", "x", " object has no attribute"))
    assert not _python_own(("Eagle3 is only supported for ", "x", " models"))


SHAPES = "RuntimeError: The size of tensor a (96) must match the size of tensor b (90) at non-singleton dimension 1"


def _classified(lines: list[str]):
    return classify(lines, load_signatures(), "-", load_wrappers())


def test_a_vllm_signature_is_no_root_cause_of_an_sglang_paste():
    sglang_frames = _classified(["Traceback (most recent call last):",
                                 '  File "/sgl-workspace/sglang/python/sglang/srt/speculative/eagle_worker.py", line 9, '
                                 "in draft", "    x = y", SHAPES])
    assert sglang_frames.cause is None and sglang_frames.crash.text == SHAPES
    assert any(m.signature == "vllm-drafter-vocab-mismatch" and not m.root for m in sglang_frames.matches)
    said = _classified([f"[Bug] model X with sglang {SHAPES}"])
    assert said.cause is None and said.crash.text == SHAPES
    vllm = _classified([f"[Bug] model X with vllm {SHAPES}"])  # the signature's own engine: it stays the cause
    assert vllm.cause is not None and vllm.cause.signature == "vllm-drafter-vocab-mismatch"


def test_a_generic_text_signature_names_a_root_only_within_the_code_it_is_about():
    def traceback(path: str, function: str) -> list[str]:
        return ["Traceback (most recent call last):", f'  File "/x/site-packages/vllm/{path}", line 215, in {function}',
                "    self.b[index] = b", SHAPES]
    lora = _classified(traceback("lora/layers.py", "set_lora"))
    assert lora.cause is None and lora.crash.text == SHAPES  # torch's text, raised loading a LoRA adapter
    drafter = _classified(traceback("v1/spec_decode/eagle.py", "load_model"))
    assert drafter.cause is not None and drafter.cause.signature == "vllm-drafter-vocab-mismatch"
    lone = _classified([SHAPES])  # no frames to tell: the signature as before
    assert lone.cause is not None and lone.cause.signature == "vllm-drafter-vocab-mismatch"


def test_an_assert_statement_prose_says_failed_is_an_assertion_error():
    found = crash(["[Bug]: 4xH800 MTP, assert error, assert (m.num_reqs * (self.num_spec + 1) <= m.num_actual_tokens"])
    assert found.text == "AssertionError: assert (m.num_reqs * (self.num_spec + 1) <= m.num_actual_tokens"
    assert crash(["we assert that the failure is rare"]) is None  # an assert word, no statement said to fail


def test_a_wrapper_quoting_a_failure_the_atlas_does_not_know_offers_no_fix_of_its_own_guard():
    from specaudit.explain.raise_sites import locate

    class Template:  # a wrapper whose guard reads a flag: "if not enable_x: raise RuntimeError(f'... {e!r} ...')"
        parts = ("Worker failed with error '", "e", "', please check the stack trace above for the root cause")
        remedies = (("self.enable_x", "set (true)"),)
        function, kind, exception, guard = "Executor.run", "raise", "RuntimeError", "not self.enable_x"

    class Entry:
        template, engine, file, literal, logged = Template, "vllm", "vllm/executor.py", 75, False
        releases, lines = ("0.17.0",), (10,)

    class Hit:
        entry, whole, rank, cut, literal, partial = Entry, True, (True, True, 75), (), 0, False
        holes = (("e", "'Runner' object has no attribute 'builder'"),)

    class Atlas:
        releases = {"vllm": ["0.17.0"]}
        fields = {"vllm": {"EngineArgs": frozenset({"enable_x"})}}

        def lookup(self, text):
            return [Hit] if text.startswith("Worker failed") else []

        def callers(self, entry):
            return ()

    found = locate(Atlas(), "Worker failed with error ''Runner' object has no attribute 'builder'', please check the "
                   "stack trace above for the root cause", exception="RuntimeError")
    assert found.quotes == "'Runner' object has no attribute 'builder'" and found.fixes == ()


def test_an_assert_without_a_message_is_a_template_of_its_statement():
    from specaudit.explain.templates import file_templates

    source = b"def f(x, ys):\n    assert all(y == x for y in ys_of_the_batch)\n    assert x is not None\n"
    found, _ = file_templates(source)
    assert [t.parts for t in found] == [("assert all((y == x for y in ys_of_the_batch))",)]  # the short one: no site
    bare = found[0]
    assert bare.kind == "assert" and bare.exception == "AssertionError" and bare.line == 2
    assert bare.guard == "not (all(y == x for y in ys_of_the_batch))"


def test_a_pasted_assert_statement_is_looked_up_as_ast_writes_it():
    from specaudit.explain.raise_sites import _as_written

    assert _as_written("assert all(y == x for y in ys)") == ["assert all((y == x for y in ys))"]
    assert _as_written("assert not (a > 0 and b > 0), (") == ["assert not (a > 0 and b > 0)"]
    assert _as_written("assert x is not None") == []  # already as ast writes it
    assert _as_written("assert (broken") == [] and _as_written("KeyError: 'x'") == []


HANDLED = ("OpenAI Responses API (/v1/responses) disabled: OpenAIServingResponses init failed (ModuleNotFoundError: No "
           "module named 'openai_harmony')")  # SGLang 0.5.17's line, tests/fixtures/logs/gpu/sglang/llama--agree.log


@pytest.mark.parametrize("prefix", ["[2026-12-06 20:12:11] ", "[2026-12-06 20:12:11 TP0] ", "[TP0] ",
                                    "INFO 12-06 20:12:11 [serving.py:88] ", "2026-12-06 20:12:11,512 - ",
                                    "(APIServer pid=7) WARNING 12-06 20:12:11 [api_server.py:9] "])
def test_an_exception_in_parentheses_on_an_engine_log_line_is_a_failure_it_handled(prefix):
    found = classify([prefix + HANDLED], [], "-", load_wrappers())
    assert found.crash is None and found.exit_code == 0


@pytest.mark.parametrize("line", [HANDLED, f"[Bug]: {HANDLED}", f"- {HANDLED}",
                                  "my launch stops: model init failed (ModuleNotFoundError: No module named 'vllm._C')"])
def test_an_exception_in_parentheses_pasted_without_a_logger_prefix_is_the_failure(line):
    found = classify([line], [], "-", load_wrappers())
    assert found.exit_code == 1 and found.crash.exception == "ModuleNotFoundError"
    assert found.crash.message in ("No module named 'openai_harmony'", "No module named 'vllm._C'")
