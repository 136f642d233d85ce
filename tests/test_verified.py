"""A release newer than the one the rules were verified on (rules/verified.yaml): a gate whose code of its shape is
not found there may have moved, so the scan says UNKNOWN for it, never passes it; on the verified release, the same
code not found is the gate gone.

The gate: vllm-architecture-registered, whose shape is the raise in vLLM 0.34.0's
vllm/model_executor/models/registry.py `_ModelRegistry._raise_for_unsupported` ("... are not supported for now"),
one site in 0.34.0. Rewording that message is the gate's code moving out of the rule's shape.
"""

from __future__ import annotations

from dataclasses import replace

from specaudit.core.types import Status, Verdict
from specaudit.launch.request import Launch
from specaudit.launch.target import load_preset
from specaudit.scan.audit import analyze, audit
from specaudit.scan.ruleset import load_rules, load_verified

from conftest import engine_tree

REGISTRY = "vllm/model_executor/models/registry.py"
RULE = "vllm-architecture-registered"


def reworded(tree) -> dict[str, bytes]:
    source = (tree.root / REGISTRY).read_text(encoding="utf-8")
    assert source.count("are not supported for now") == 1
    return {REGISTRY: source.replace("are not supported for now", "cannot be loaded yet").encode()}


def launch() -> Launch:
    return Launch(load_preset("kimi-k2.5"), method="eagle3")


def test_the_record_names_the_release_and_the_rules_with_sites_in_it():
    verified = load_verified("vllm")
    assert verified is not None and verified.release == "0.34.0"
    assert RULE in verified.with_sites
    assert verified.with_sites <= {r.id for r in load_rules("vllm")}
    assert verified.unverified("0.35.0") and verified.unverified("0.34.1")
    assert not verified.unverified("0.34.0") and not verified.unverified("0.33.0") and not verified.unverified("unknown")
    assert not verified.unverified("0.34.0+cu130") and verified.unverified("0.34.1.dev3")


def test_a_gate_not_found_on_a_newer_release_is_unknown_and_on_the_verified_one_is_gone():
    tree = engine_tree("vllm==0.34.0")
    moved = reworded(tree)
    newer = audit(analyze(replace(tree, version="0.35.0"), overlay=moved), launch())
    unknown = [f for f in newer.findings if f.rule_id == RULE]
    assert [f.status for f in unknown] == [Status.UNKNOWN]
    assert "0.35.0" in unknown[0].why and "0.34.0" in unknown[0].why
    assert newer.verdict == Verdict.UNKNOWN

    verified = audit(analyze(tree, overlay=moved), launch())
    assert not [f for f in verified.findings if f.rule_id == RULE]
    assert verified.verdict == Verdict.READY


def test_a_newer_release_with_the_gate_s_code_in_place_is_judged_as_the_verified_one():
    tree = engine_tree("vllm==0.34.0")
    newer = audit(analyze(replace(tree, version="0.35.0")), launch())
    assert [f.status for f in newer.findings if f.rule_id == RULE] == [Status.PASSES]
    assert newer.verdict == Verdict.READY
