"""SARIF 2.1.0 output of real scans, validated offline against the OASIS schema (draft-04; a copy of
../shared/schemas/sarif-schema-2.1.0.json in tests/fixtures/schemas)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from specaudit.report import to_sarif
from specaudit.report.sarif import MAX_RUNS
from specaudit.results.scan import Comparison

from conftest import vllm_scan
from helpers import specaudit

SCHEMA = json.loads((Path(__file__).parent / "fixtures/schemas/sarif-schema-2.1.0.json").read_text())


def sarif(report) -> dict:
    document = json.loads(to_sarif(report))
    jsonschema.Draft4Validator(SCHEMA).validate(document)
    return document


def test_017_kimi_k25_gives_its_three_gates_as_errors_at_their_lines():
    run, = sarif(vllm_scan("0.17.0", "kimi-k2.5"))["runs"]
    # The three gates of tests/test_vllm_facts.py, in launch order.
    assert [r["ruleId"] for r in run["results"]] == [
        "vllm-eagle3-model-type-allowlist", "vllm-eagle3-image-token-read", "vllm-eagle3-interface"]
    assert {r["level"] for r in run["results"]} == {"error"}
    locations = [r["locations"][0]["physicalLocation"] for r in run["results"]]
    assert [loc["artifactLocation"]["uri"] for loc in locations] == [
        "vllm/config/speculative.py", "vllm/v1/spec_decode/eagle.py", "vllm/v1/worker/gpu_model_runner.py"]
    assert {loc["artifactLocation"]["uriBaseId"] for loc in locations} == {"ENGINE_TREE"}
    assert "supports_eagle3(self.get_model())" in locations[2]["region"]["snippet"]["text"]
    rules = run["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == [r["ruleId"] for r in run["results"]]
    assert all(r["ruleIndex"] == i for i, r in enumerate(run["results"]))
    assert run["properties"]["verdict"] == "BLOCKED" and run["properties"]["release"] == "0.17.0"


def test_a_gate_keeps_its_fingerprint_across_releases_and_each_release_is_a_run():
    """0.17.0 and 0.17.1 hold the same allowlist statement: the same fingerprint, whatever its line."""
    document = sarif(Comparison([vllm_scan("0.17.0", "kimi-k2.5"), vllm_scan("0.17.1", "kimi-k2.5")]))
    fingerprints = [{r["ruleId"]: r["partialFingerprints"]["specauditGate/v1"] for r in run["results"]}
                    for run in document["runs"]]
    assert len(fingerprints) == 2
    assert fingerprints[0]["vllm-eagle3-model-type-allowlist"] == fingerprints[1]["vllm-eagle3-model-type-allowlist"]
    assert len({run["automationDetails"]["id"] for run in document["runs"]}) == 2


def test_a_ready_scan_has_no_results_and_a_comparison_stays_within_githubs_run_limit():
    ready = vllm_scan("0.33.0", "kimi-k2.5")
    run, = sarif(ready)["runs"]
    assert run["results"] == [] and run["properties"]["verdict"] == "READY"
    assert len(sarif(Comparison([ready] * (MAX_RUNS + 3)))["runs"]) == MAX_RUNS


@pytest.mark.network  # the CLI fetches vllm==0.17.0
def test_the_cli_writes_sarif(tmp_path):
    proc = specaudit("scan", "vllm==0.17.0", "--target", "kimi-k2.5", "--format", "sarif", "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    written, = tmp_path.glob("*.sarif")
    jsonschema.Draft4Validator(SCHEMA).validate(json.loads(written.read_text()))
