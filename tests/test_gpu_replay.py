"""The logs of real CUDA launches on an H200 (tests/fixtures/logs/gpu/, from validation/gpu/logs/: vLLM 0.26.0 and
SGLang 0.5.17), replayed on the CPU through `explain` and through smoke's live log watcher, and smoke's GPU facts
and acceptance read from what the GPU really printed and served."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from specaudit.explain.diagnose import root_cause
from specaudit.explain.signatures import SERVER_UP, explain_file
from specaudit.scan.audit import scan
from specaudit.smoke.gpu import GpuLines, log_facts, parse_nvidia_smi, runner_seen
from specaudit.smoke.metrics import acceptance, load_serving, meta_acceptance
from specaudit.smoke.remote import Remote
from specaudit.smoke.watch import LogWatch

from conftest import engine_tree

GPU = Path(__file__).parent / "fixtures/logs/gpu"
_landscapes: dict = {}


def _landscape(engine: str):
    release = {"vllm": "vllm==0.26.0", "sglang": "sglang==0.5.17"}[engine]
    if release not in _landscapes:
        _landscapes[release] = scan(engine_tree(release), None, platform="cuda")
    return _landscapes[release]


def _root(engine: str, cell: str):
    explanation = explain_file(str(GPU / engine / f"{cell}.log"), [engine])
    return explanation, root_cause(explanation, _landscape(engine))


# What each launch did on the H200, read in its log by hand:
CRASHES = [
    # V2 (the log: "Using V2 Model Runner"): GPUModelRunner.load_model -> set_eagle3_aux_hidden_state_layers raises
    # RuntimeError("Model does not support EAGLE3 interface") at vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:19
    ("vllm", "gpt2--agree", "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:19", None),
    ("vllm", "gemma--agree", "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:19", None),
    # V1 (MoE): the 4-layer target keeps 2 distinct default aux layers, the drafter's fc wants 3 at the first forward
    ("vllm", "qwen3moe--agree", None, "vllm-eagle3-drafter-aux-layer-ids"),
    # the drafter's d2t of 127 entries into a 128 parameter while its weights load
    ("vllm", "llama--d2t-short", None, "vllm-eagle3-drafter-vocab-maps"),
    # SGLang's EAGLE worker v2 calls target.get_embed_and_head() (sglang/srt/speculative/eagle_worker_v2.py:273)
    ("sglang", "gpt2--agree", "sglang/srt/speculative/eagle_worker_v2.py:273", None),
]


@pytest.mark.parametrize("engine,cell,gate,signature_gate", CRASHES)
def test_explain_finds_the_root_cause_the_gpu_printed(engine, cell, gate, signature_gate):
    explanation, root = _root(engine, cell)
    assert root is not None and explanation.crash is not None
    if gate:
        assert root.by == "gate location" and root.gate is not None and root.gate.location == gate
    else:
        assert root.signature is not None and signature_gate in root.signature.gates


@pytest.mark.parametrize("engine,cell", [("vllm", "llama--agree"), ("vllm", "llama--agree--compiled"),
                                         ("vllm", "llama--ngram"), ("sglang", "llama--agree")])
def test_a_launch_that_served_shows_no_crash_before_it_was_stopped(engine, cell):
    # Every one served 2 completions, then got SIGTERM. vLLM 0.26.0 sometimes logs an EngineDeadError traceback
    # after "[shutdown] API server: shutdown triggered" (its process manager force-kills the EngineCore: the
    # llama--ngram log): a traceback of the shutdown, not of the launch.
    path = GPU / engine / f"{cell}.log"
    explanation = explain_file(str(path), [engine])
    lines = path.read_text(errors="replace").splitlines()
    stopped = next((i for i, line in enumerate(lines, 1) if "shutdown triggered" in line or "SIGTERM" in line),
                   len(lines))
    assert explanation.crash is None or explanation.crash.line_number > stopped
    assert explanation.cause is None or not explanation.cause.root or explanation.cause.line_number > stopped


def test_sglangs_narrow_fc_is_a_weight_shape_assertion_with_its_frame():
    # sglang/srt/model_loader/weight_utils.py default_weight_loader: "Attempted to load weight (torch.Size([256,
    # 384])) into parameter (torch.Size([256, 768]))"
    explanation, root = _root("sglang", "llama--fc-width")
    assert explanation.crash is not None and "torch.Size([256, 384])" in explanation.crash.text
    assert root is not None and root.frame is not None and root.frame.file.endswith("weight_utils.py")


# -- smoke's live log watcher, over a real sshd on 127.0.0.1, streaming the GPU's log as the node would -------------


class ShownLines:
    """A smoke view (session.SmokeView) that keeps the lines the watcher shows."""

    def __init__(self):
        self.lines: list[str] = []

    def event(self, event):
        pass

    def line(self, text):
        self.lines.append(text)


def _watched(sshd, engine: str, cell: str) -> LogWatch:
    remote = Remote(sshd.alias, str(sshd.config))
    remote.connect()
    path = GPU / engine / f"{cell}.log"
    watch, view = LogWatch(remote, str(path), engine), ShownLines()
    watch.start()
    total = path.read_bytes().count(b"\n")  # tail's lines (progress bars redraw with \r inside one)
    deadline = time.monotonic() + 30
    while len(view.lines) < total and time.monotonic() < deadline:
        watch.pump(0.2, view)
    watch.stop()
    remote.close()
    assert len(view.lines) == len(watch.lines) == total
    return watch


@pytest.mark.parametrize("cell,runner", [("llama--agree", "v2"), ("llama--ngram", "v1")])
def test_the_watcher_takes_a_served_gpu_log_to_server_up_and_names_its_runner(sshd, cell, runner):
    watch = _watched(sshd, "vllm", cell)
    assert watch.fatal_at is None
    assert SERVER_UP in watch.reached
    assert watch.gpu.runner == runner
    assert "FLASH_ATTN" in watch.gpu.backends  # "Using FLASH_ATTN attention backend out of potential backends"
    phases = [phase for phase, _, _ in watch.gpu_notes]
    assert phases.count("gpu") >= 2


def test_the_watcher_puts_cuda_graph_capture_on_the_timeline(sshd):
    # Without --enforce-eager vLLM 0.26.0 captured FULL and PIECEWISE graphs: "Graph capturing finished in 2 secs,
    # took 0.25 GiB" (llama--agree--compiled.log).
    watch = _watched(sshd, "vllm", "llama--agree--compiled")
    notes = [(phase, text) for phase, text, _ in watch.gpu_notes if phase == "cuda graphs"]
    assert notes == [("cuda graphs", "capturing (PIECEWISE)"), ("cuda graphs", "captured in 2 s, 0.25 GiB")]


@pytest.mark.parametrize("engine,cell,gate", [("vllm", "gpt2--agree", "vllm/v1/worker/gpu/spec_decode/eagle/"
                                                                      "eagle3_utils.py:19"),
                                              ("sglang", "gpt2--agree", "sglang/srt/speculative/"
                                                                        "eagle_worker_v2.py:273")])
def test_the_watcher_stops_at_the_crash_and_classifies_it_as_explain_does(sshd, engine, cell, gate):
    watch = _watched(sshd, engine, cell)
    assert watch.fatal_at is not None
    root = root_cause(watch.explanation(), _landscape(engine))
    assert root is not None and root.gate is not None and root.gate.location == gate


# SGLang 0.5.17 on the H200 (validation/gpu/smoke/logs/round1, a DeepSeek-V3 NextN target of hidden size 256): the
# scheduler logs "Scheduler hit an exception: Traceback ..." (managers/scheduler.py run_scheduler_process) over
# RuntimeError: fused_eh_norm: unsupported hidden_size=256 (sglang/kernels/ops/layernorm/fused_eh_norm.py:52), then
# waits 60 s for CUDA core dumps; 64 lines before, an INFO line quotes a handled "(ModuleNotFoundError: ...)".
NEXTN_256 = "nextn-deepseek-v3--hidden256"


def test_a_handled_failure_quoted_in_parentheses_is_not_the_root_cause():
    explanation = explain_file(str(GPU / "sglang" / f"{NEXTN_256}.log"), ["sglang"])
    assert explanation.crash is not None and explanation.crash.exception == "RuntimeError"
    assert "fused_eh_norm: unsupported hidden_size=256" in explanation.crash.text
    assert explanation.crash.frames[-1].file.endswith("fused_eh_norm.py")


def test_the_watcher_stops_at_the_traceback_a_dying_scheduler_announces(sshd):
    # No signature names the RuntimeError: the scheduler's own last words make its traceback the end of the launch,
    # so smoke does not wait out the 60 s core-dump pause for the process to exit.
    watch = _watched(sshd, "sglang", NEXTN_256)
    assert watch.fatal_at is not None and watch.crashed_at is not None
    assert watch.explanation().crash is not None and watch.explanation().crash.exception == "RuntimeError"


# -- the GPU facts and the figures smoke reads --------------------------------------------------------------------


def test_log_facts_of_the_compiled_launch():
    facts = log_facts((GPU / "vllm/llama--agree--compiled.log").read_text())
    assert facts.runner.runner == "v2" and facts.attention_backends[0] == "FLASH_ATTN"
    assert facts.capture is not None and set(facts.capture.modes) == {"FULL", "PIECEWISE"}
    assert (facts.capture.seconds, facts.capture.gib) == (2.0, 0.25)
    assert log_facts((GPU / "vllm/llama--agree.log").read_text()).capture is None  # --enforce-eager


def test_sglang_cuda_graph_capture_from_its_own_lines():
    # SGLang 0.5.17 without --disable-cuda-graph captured 4 graphs (target prefill 71.48 s / 0.18 GB, target verify
    # 3.65 s / 0.04 GB, draft prefill 1.56 s / 0.13 GB, draft decode 11.10 s / 0.04 GB), then died importing
    # deep_gemm (sglang/srt/layers/attention/dsa_backend.py, from eagle_worker_v2._capture_cuda_graphs): the trimmed
    # install carries no deep_gemm.
    text = (GPU / "sglang/llama--agree--compiled.log").read_text()
    facts = log_facts(text)
    assert facts.capture is not None
    assert facts.capture.modes == ("target prefill", "target verify", "draft prefill", "draft decode")
    assert facts.capture.seconds == pytest.approx(71.48 + 3.65 + 1.56 + 11.10)
    assert facts.capture.gib == pytest.approx(0.18 + 0.04 + 0.13 + 0.04)
    lines = GpuLines()
    notes = [n for line in text.splitlines() for n in lines.feed(line) if n[0] == "cuda graphs"]
    assert notes[:2] == [("cuda graphs", "capturing target prefill"),
                         ("cuda graphs", "captured target prefill in 71.48 s, 0.18 GB")]
    explanation = explain_file(str(GPU / "sglang/llama--agree--compiled.log"), ["sglang"])
    assert explanation.crash is not None and "deep_gemm" in explanation.crash.text


def test_the_runner_a_crashing_moe_launch_took_is_v1():
    # Qwen3-MoE on 0.26.0: V1 without a word (use_v2_model_runner returns False for a MoE model outside
    # DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES); the traceback runs through vllm/v1/worker/gpu_model_runner.py.
    seen = runner_seen((GPU / "vllm/qwen3moe--agree.log").read_text())
    assert seen.runner == "v1"


def test_nvidia_smi_while_four_engines_served():
    state = parse_nvidia_smi((GPU / "vllm/llama--agree.nvidia-smi.txt").read_text())
    assert state.gpus == (("NVIDIA H200", 7712, 143771),)
    assert state.driver == "580.159.04" and state.cuda == "13.0"
    assert len(state.processes) == 4 and all(p.name == "VLLM::EngineCore" for p in state.processes)


def test_vllm_acceptance_from_its_counters():
    # The agreeing drafter: 2 completions of 32 tokens, every draft token accepted (vllm:spec_decode_* counters).
    driver = json.loads((GPU / "vllm/llama--agree.json").read_text())
    figures = acceptance(driver["metrics_before"], (GPU / "vllm/llama--agree.metrics.txt").read_text(),
                         load_serving("vllm"), "eagle3")
    assert (figures.accepted_tokens, figures.draft_tokens, figures.acceptance_rate) == (48, 48, 1.0)
    assert figures.per_position == [1.0, 1.0, 1.0] and not figures.flags


def test_sglang_acceptance_from_meta_info_where_its_gauges_read_zero():
    # SGLang 0.5.17's /generate meta_info: spec_verify_ct 8, 24 drafts proposed and 24 correct, histogram
    # [0, 0, 0, 8]; its /metrics gauges sglang:spec_accept_rate/length read 0.0 once idle.
    driver = json.loads((GPU / "sglang/llama--agree.json").read_text())
    meta = json.loads(driver["generate"]["body"])["meta_info"]
    figures = meta_acceptance([meta], "eagle3", load_serving("sglang"))
    assert figures is not None
    assert (figures.drafts, figures.draft_tokens, figures.accepted_tokens) == (8, 24, 24)
    assert figures.acceptance_rate == 1.0 and figures.mean_acceptance_length == 4.0
    assert figures.per_position == [1.0, 1.0, 1.0] and not figures.flags
    # The gauges of that idle /metrics read 0.0; its counters (generated tokens less each request's first, over
    # sglang:spec_verify_calls_total) still give the warm-up requests' acceptance length, which smoke takes first.
    assert 'sglang:spec_accept_length{' in driver["metrics_before"] or "sglang:spec_accept_length " in \
        driver["metrics_before"]
    idle = acceptance("", driver["metrics_before"], load_serving("sglang"), "eagle3")
    assert idle.mean_acceptance_length == 4.0 and idle.source.startswith("counters")


def test_sglang_random_drafter_is_flagged_from_meta_info():
    driver = json.loads((GPU / "sglang/llama--random.json").read_text())
    meta = json.loads(driver["generate"]["body"])["meta_info"]
    figures = meta_acceptance([meta], "eagle3", load_serving("sglang"))
    assert figures is not None and figures.acceptance_rate == 0.0 and figures.per_position[0] == 0.0
    assert figures.flags


def test_gpu_lines_note_each_fact_once():
    lines = GpuLines()
    text = (GPU / "vllm/llama--ngram.log").read_text().splitlines()
    notes = [n for line in text for n in lines.feed(line)]
    assert notes[0] == ("gpu", "Model Runner V1: Model Runner V2 does not yet support ngram/ngram_gpu speculative "
                               "decoding; using the V1 model runner instead")
    assert len([n for n in notes if n[1].startswith("Model Runner")]) == 1
