"""specaudit matrix over real vLLM releases. The facts, from the scans of tests/test_vllm_facts.py and the
kimi_k2 bundle (patches/vllm/eagle3-kimi-k2): Kimi-K2.5 is not registered in 0.14.0 (the bundle cannot register
it), is blocked by three gates in 0.17.0 that the bundle opens, and is READY in 0.33.0; Llama 3 is READY in all."""

from __future__ import annotations

import json

import pytest

from specaudit.matrix import build_matrix
from specaudit.report import to_html, to_markdown, to_sarif

from conftest import vllm_tree
from helpers import specaudit


@pytest.fixture(scope="module")
def matrix():
    return build_matrix([vllm_tree(v) for v in ("0.33.0", "0.14.0", "0.17.0")], ["kimi-k2.5", "llama3"])


def test_the_releases_are_in_version_order_and_each_cell_is_a_scan(matrix):
    assert matrix.releases == ["vllm 0.14.0", "vllm 0.17.0", "vllm 0.33.0"]
    assert [c.verdict for c in matrix.cells if c.target == "kimi-k2.5"] == ["BLOCKED", "BLOCKED", "READY"]
    assert {c.verdict for c in matrix.cells if c.target == "llama3"} == {"READY"}
    assert [g.rule_id for g in matrix.cell("kimi-k2.5", "vllm 0.17.0").blocking] == [
        "vllm-eagle3-model-type-allowlist", "vllm-eagle3-image-token-read", "vllm-eagle3-interface"]
    assert len(matrix.results) == 6


def test_the_answers_name_the_first_working_release_and_what_opens_each_blocked_one(matrix):
    kimi, llama = matrix.answers
    assert kimi.works_from == ("vllm 0.33.0",) and llama.works_from == ("vllm 0.14.0",)
    patched = matrix.cell("kimi-k2.5", "vllm 0.17.0")
    assert (patched.bundle, patched.patched) == ("vllm-eagle3-kimi-k2", "READY")
    assert kimi.remedies["vllm 0.17.0"].startswith("specaudit patch --target kimi_k2 ")  # the bundle's target
    unregistered = matrix.cell("kimi-k2.5", "vllm 0.14.0")
    assert unregistered.blocking[0].rule_id == "vllm-architecture-registered"
    assert unregistered.patched == "BLOCKED"
    assert kimi.remedies["vllm 0.14.0"].startswith("upgrade to vllm 0.33.0")
    assert llama.remedies == {}


def test_every_format_renders_the_same_matrix(matrix):
    markdown = to_markdown(matrix)
    assert "works unpatched from **vllm 0.33.0**" in markdown
    assert "| vllm 0.17.0 | BLOCKED: EAGLE-3 target model-type allowlist +2; patched: READY | READY |" in markdown
    assert "<details>" in markdown
    assert "vllm 0.17.0: made by specaudit" in markdown  # each release's provenance
    assert json.loads(json.dumps(matrix.to_dict()))["answers"][0]["works_from"] == ["vllm 0.33.0"]
    runs = json.loads(to_sarif(matrix))["runs"]
    errors = [r["ruleId"] for run in runs for r in run["results"] if r["level"] == "error"]
    assert len(runs) == 6 and len(errors) == 2 + 3
    assert 'class="cell BLOCKED patchable"' in to_html(matrix)


def test_the_cli_exit_code_is_the_worst_cell(tmp_path):
    proc = specaudit("matrix", "--target", "llama3", "vllm==0.14.0", "vllm==0.33.0", "--format", "md",
                     "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "llama3: works unpatched from vllm 0.14.0" in proc.stdout
    assert len(list(tmp_path.glob("matrix-llama3-*.md"))) == 1


def test_each_engine_has_its_own_first_working_release():
    """Kimi-K2.5 on SGLang: 0.5.8 has no model module that provides its architecture, 0.5.23 does (the SGLang facts
    of tests/test_sglang_facts.py); no bundle covers SGLang."""
    from conftest import engine_tree

    trees = [engine_tree("sglang==0.5.23"), vllm_tree("0.33.0"), engine_tree("sglang==0.5.8")]
    kimi, = build_matrix(trees, ["kimi-k2.5"]).answers
    assert kimi.works_from == ("sglang 0.5.23", "vllm 0.33.0")
    assert kimi.remedies == {"sglang 0.5.8": "upgrade to sglang 0.5.23 (no bundle covers it)"}
