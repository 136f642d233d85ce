"""An issue title pasted with no error line (explain/titles.py, issue 38): engine code in, a title, what its words
settle out; then the title read from a paste as explain_file reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from specaudit.explain.atlas import Atlas
from specaudit.explain.atlas_build import _merge, _parse
from specaudit.explain.diagnose import root_cause
from specaudit.explain.signatures import explain_file
from specaudit.explain.titles import (
    TITLE,
    read_title,
    title_located,
    title_near,
    title_of,
    title_words,
    untagged_title,
)

VLLM = '''
class EngineArgs:
    pipeline_parallel_size: int = 1
    tensor_parallel_size: int = 1

class GPUModelRunner:
    def __init__(self, vllm_config):
        if self.speculative_config.method == "eagle3" and vllm_config.parallel_config.pipeline_parallel_size > 1:
            raise ValueError("EAGLE3 with pipeline parallel is not supported.")
        if self.tensor_parallel_size > 8:
            raise ValueError(f"Tensor parallel size {self.tensor_parallel_size} is too large for the drafter")
        logger.info("Loading the drafter model weights")
'''

SGLANG = '''
class ServerArgs:
    enable_dp_attention: bool = False

    def _handle_speculative_decoding(self):
        if self.speculative_algorithm == "NGRAM" and self.enable_dp_attention:
            raise ValueError("Currently ngram speculative decoding does not support dp attention.")
        if self.page_size > 1:
            raise ValueError("Ngram speculative decoding only supports page size 1.")
'''


def atlas() -> Atlas:
    releases = []
    for engine, code, version in (("vllm", VLLM, "0.20.0"), ("sglang", SGLANG, "0.5.8")):
        rows, fields, *_ = _parse(code.encode())
        releases.append({"engine": engine, "version": version, "files": {f"{engine}/x.py": ["d", rows, fields]}})
    return Atlas(_merge(releases))


def test_a_title_is_a_first_line_with_a_tag_that_says_something_failed():
    assert title_of("[Bug]: EAGLE3 crashes with pipeline parallel") == "EAGLE3 crashes with pipeline parallel"
    assert title_of("[Speculative decoding] ngram fails with dp attention") == "ngram fails with dp attention"
    # no tag: a log's line, Python's, a paste's own or code, not a title
    assert title_of("The above exception was the direct cause of the following exception:") is None
    assert title_of("I got this error when launching the server:") is None
    assert title_of("ERROR 06-04 10:14:43 [core.py:712] EngineCore failed to start.") is None
    assert title_of("assert draft_token_ids.ndim == 1, 'the drafter failed'") is None
    assert title_of("[Feature]: support EAGLE3 with pipeline parallel") is None  # no failure said
    assert title_of("[rank0]: RuntimeError raised in the worker") is None  # a rank tag is no title's
    assert title_of("[TP0] scheduler failed") is None  # nor SGLang's
    assert title_of("[Bug]: " + "EAGLE3 crashes " * 40) is None  # prose, not a title
    assert title_of("[Bug]: fails") is None  # too short to read


# Public titles with no tag, as their threads have them: a sentence that names an error is read as a title
# (sgl-project/sglang#3362, #22930); one that names none, a question or a change, is not (#6768, and the pull request
# #36593's title).
@pytest.mark.parametrize("title, read", [
    ("run eagle speculative decodeing error!", True),
    ("EAGLE speculative decoding CUDA graph crash when using KVTC (shared graph memory pool conflict)", True),
    ("How to run EAGLE3 for Llama 3.3 70B instruct", False),
    ("Fix EAGLE3 startup without draft model", False),
])
def test_an_untagged_title_is_read_where_it_is_a_sentence_naming_an_error(title, read):
    assert untagged_title(title) == (title if read else None)
    assert title_of(title, lambda text: True) == (title if read else None)
    assert title_of(title) is None  # with no atlas to hold its words: a line with no tag is not read


def test_an_untagged_sentence_naming_an_error_is_read_only_where_the_atlas_holds_its_words():
    near = title_near(atlas())
    assert title_of("EAGLE3 with pipeline parallel crashes on startup", near) is not None
    assert title_of("we assert that the failure is rare", near) is None  # prose: no engine message holds its words


def test_an_untagged_title_pasted_alone_is_read_by_its_words(tmp_path: Path):
    log = tmp_path / "title.log"
    log.write_text("EAGLE3 with pipeline parallel crashes on startup\n")
    assert explain_file(str(log)).crash is None  # without the atlas
    explanation = explain_file(str(log), None, None, title_near(atlas()))
    assert explanation.crash is not None and explanation.crash.exception == TITLE and explanation.exit_code == 1
    from dataclasses import replace

    from specaudit.explain.diagnose import located
    explanation = replace(explanation, located=located(explanation, atlas()))
    root = root_cause(explanation, None)
    assert root is not None and root.by == "issue title"
    # the message nearest its words, as the site writes it
    assert "nearest vllm's raise ValueError 'EAGLE3 with pipeline parallel is not supported.' at vllm/x.py" in \
        root.summary


def test_a_titles_words_leave_out_stop_words_and_exception_names_and_keep_abbreviations():
    assert title_words("[Bug] DP attention with EAGLE worker raises AttributeError") == \
        ["DP", "attention", "eagle", "worker"]  # an abbreviation is two to four capitals
    assert title_words("EagleLlamaModel crashes because self.drafter is missing") == \
        ["eagle", "llama", "drafter", "missing"]  # "model": in every other message, a stop word


def test_a_title_that_rewords_a_message_is_nearest_it_with_its_engine_and_fix():
    reading = read_title(atlas(), "EAGLE3 with pipeline parallel crashes on startup")
    assert reading.engine == "vllm" and reading.engine_by == "by its words"
    assert reading.near[0].entry.template.parts == ("EAGLE3 with pipeline parallel is not supported.",)
    found = title_located(atlas(), "EAGLE3 with pipeline parallel crashes on startup")
    assert found is not None and found.sites[0].function == "GPUModelRunner.__init__"
    assert "--pipeline-parallel-size: at most 1" in found.fixes
    assert found.holes == ()  # a title prints no values
    assert found.releases == "vllm 0.20.0 (by the title's words alone)"


def test_an_abbreviation_is_read_as_the_flag_it_abbreviates():
    # PP: pipeline_parallel_size, a flag of EngineArgs; the title says neither "pipeline" nor "parallel"
    reading = read_title(atlas(), "EAGLE3 is not supported on PP>1")
    assert reading.near and reading.near[0].entry.template.parts[0].startswith("EAGLE3 with pipeline parallel")
    assert "PP" in reading.near[0].words


def test_the_engine_a_title_names_is_the_engine_read():
    reading = read_title(atlas(), "sglang: ngram speculative decoding crashes with dp attention")
    assert reading.engine == "sglang" and reading.engine_by == "named in the title"
    assert reading.near[0].entry.template.parts == ("Currently ngram speculative decoding does not support dp attention.",)
    found = title_located(atlas(), "sglang: ngram speculative decoding crashes with dp attention")
    assert found is not None and "--enable-dp-attention: unset (false)" in found.fixes


def test_a_title_no_message_holds_is_read_as_unsettled():
    assert title_located(atlas(), "Segfault in the tokenizer on long prompts") is None
    # words two messages of both engines hold alike: no engine settled, and no fix from a partial match
    reading = read_title(atlas(), "speculative decoding crashes with drafter")
    assert reading.engine is None or all(n.score < 0.75 for n in reading.near)


def test_a_paste_that_is_only_a_title_is_a_failure_read_by_its_words(tmp_path: Path):
    log = tmp_path / "title.log"
    log.write_text("[Bug]: EAGLE3 with pipeline parallel crashes on startup\n")
    explanation = explain_file(str(log))
    assert explanation.crash is not None and explanation.crash.exception == TITLE
    assert explanation.exit_code == 1
    from dataclasses import replace

    from specaudit.explain.diagnose import located
    explanation = replace(explanation, located=located(explanation, atlas()))
    root = root_cause(explanation, None)
    assert root is not None and root.by == "issue title"
    assert root.summary.startswith("an issue title, with no error line: 'EAGLE3 with pipeline parallel crashes")
    assert "nearest vllm's raise ValueError 'EAGLE3 with pipeline parallel is not supported.' at vllm/x.py" in \
        root.summary
    assert "a title does not show the exception, where it was raised or the release" in root.summary


def test_a_title_above_an_error_line_or_a_log_with_no_tagged_title_is_no_title(tmp_path: Path):
    log = tmp_path / "with-error.log"
    log.write_text("[Bug]: EAGLE3 crashes\n\nValueError: EAGLE3 with pipeline parallel is not supported.\n")
    crash = explain_file(str(log)).crash
    assert crash is not None and crash.exception == "ValueError"
    healthy = tmp_path / "healthy.log"
    healthy.write_text("INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.20.0\n"
                       "INFO 01-01 00:00:01 [launcher.py:1] Available routes are: /health\n")
    explanation = explain_file(str(healthy))
    assert explanation.crash is None and explanation.exit_code == 0
