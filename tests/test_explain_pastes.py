"""Pastes read as people paste them (tracebacks.py): each form on a few lines, read by the traceback reader without
an atlas; the atlas's part (a line with no exception type, a wrapper quoting its cause) is in test_atlas.py."""

from __future__ import annotations

from specaudit.explain.signatures import classify, load_wrappers
from specaudit.explain.tracebacks import ARGUMENT_ERROR

FRAME = '  File "/usr/lib/python3.12/site-packages/vllm/config/speculative.py", line 1609, in __post_init__'
SOURCE = "    raise ValueError("


def crash(lines: list[str]):
    return classify(lines, [], "-", load_wrappers()).crash


def test_torch_rank_tags_are_stripped_from_each_line():
    root = crash([f"[rank0]: {line}" for line in ("Traceback (most recent call last):", FRAME, SOURCE,
                                                  "ValueError: num_speculative_tokens:5 must be divisible")])
    assert root.exception == "ValueError" and root.frames[0].line == 1609


def test_timestamps_and_logger_prefixes_are_stripped():
    stamp = "2026-06-04T10:14:40.123456789Z "  # kubectl logs --timestamps
    root = crash([stamp + "Traceback (most recent call last):", stamp + FRAME, stamp + SOURCE,
                  stamp + "ValueError: bad"])
    assert (root.exception, root.message, len(root.frames)) == ("ValueError", "bad", 1)
    for prefix in ("ERROR:vllm.engine:", "ERROR [core.py:712] ", "2026-06-04 10:14:40,123 ERROR 06-04 10:14:40 "
                                                                  "[core.py:712] "):
        assert crash([prefix + "RuntimeError: Engine core failed"]).text == "RuntimeError: Engine core failed", prefix


def test_text_before_the_exception_type_is_not_the_exception():
    root = crash(["When I launch with --speculative-config I get ValueError: num_speculative_tokens:5 must be "
                  "divisible by n_predict=3"])
    assert root.exception == "ValueError" and root.message.startswith("num_speculative_tokens:5")
    assert crash(["The Error Handling section says nothing here"]) is None  # no "Error: " after a type


def test_a_message_wrapped_by_the_paste_goes_on_over_its_next_lines_and_stops_at_the_next_thing():
    root = crash(["ValueError: Eagle3 is only supported for ['llama', 'qwen'] models. Got self.target_model_co",
                  "nfig.hf_text_config.model_type='kimi_k2'", "", "anything after a blank line"])
    assert root.message.endswith("self.target_model_co") and root.continued == (
        "nfig.hf_text_config.model_type='kimi_k2'",)
    frames_after = crash(["KeyError: 'x'", FRAME])
    assert frames_after.continued == ()
    another = classify(["KeyError: 'x'", "then the worker said RuntimeError: y"], [], "-", load_wrappers())
    assert another.crash.continued == ()  # the next exception line is one of its own


def test_a_frame_wrapped_inside_its_file_name_is_rejoined():
    root = crash(["Traceback (most recent call last):",
                  '  File "/usr/lib/python3.12/site-packages/vllm/con',
                  'fig/speculative.py", line 1609, in __post_init__', SOURCE, "ValueError: bad"])
    assert root.frames[0].file.endswith("vllm/config/speculative.py") and root.frames[0].function == "__post_init__"


def test_argparse_refusing_an_argument_is_a_failure():
    explanation = classify(["usage: vllm serve [-h] [--speculative-config SPECULATIVE_CONFIG]",
                            "vllm serve: error: argument --speculative-config: invalid loads value: "
                            "\"{'method': 'eagle3'}\""], [], "-", load_wrappers())
    assert explanation.exit_code == 1 and explanation.crash.exception == ARGUMENT_ERROR
    assert explanation.crash.message.startswith("argument --speculative-config: invalid loads value")


def test_lines_with_no_exception_type_are_looked_up_a_bounded_number_of_times():
    from specaudit.explain.raise_sites import MAX_BARE_CHARS, MAX_BARE_LOOKUPS, bare_line

    class Counting:  # an atlas that knows no message and counts what it is asked
        asked = 0

        def lookup(self, text):
            Counting.asked += 1
            return []

    raised = bare_line(Counting())  # type: ignore[arg-type]
    classify(["a line that no engine raises, long enough to ask"] * (MAX_BARE_LOOKUPS * 3)
             + ["x" * (MAX_BARE_CHARS + 1)], [], "-", load_wrappers(), bare=raised)
    assert Counting.asked == MAX_BARE_LOOKUPS
