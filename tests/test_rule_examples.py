"""Every rule's own code examples, run as tests (as Fixit runs VALID/INVALID cases).

An example gives `code`; it expects `sites` (default 1) and, for the first site, the `details` it lists.
`judged` cases evaluate that site against a target's text model type (for kinds that judge from the
site alone).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from specaudit.core import engines
from specaudit.launch.request import Launch
from specaudit.launch.target import Target
from specaudit.scan.facts import module_info, parse
from specaudit.scan.gates import KINDS
from specaudit.scan.match import SHAPES, find_sites
from specaudit.scan.ruleset import load_rules

from conftest import vllm_tree
from helpers import ROOT

ENGINES = sorted(engines.ENGINES)
CASES = [(rule, example) for engine in ENGINES for rule in load_rules(engine) for example in rule.examples]


def test_every_kind_has_a_shape_and_a_judge():
    assert set(SHAPES) == {name for name, kind in KINDS.items() if not kind.siteless}


@pytest.mark.network
def test_a_warm_scan_judges_without_importing_libcst(tmp_path):
    """The kinds (gates.py) judge cached sites; only (re)indexing a file needs its shapes (match.py) and libcst,
    which costs more to import than a warm scan takes."""
    tree = vllm_tree("0.17.0")
    command = [sys.executable, "-X", "importtime", "-m", "specaudit.cli", "scan", str(tree.root), "--target", "kimi-k2.5"]
    env = {**os.environ, "SPECAUDIT_CACHE": str(tmp_path), "PYTHONPATH": str(ROOT)}
    cold = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    warm = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert cold.returncode == warm.returncode == 1, warm.stderr[-2000:]  # BLOCKED both times
    assert "| libcst" in cold.stderr  # the cold scan did parse sites: the probe can see libcst come in
    imported = [line.rsplit("|", 1)[-1].strip() for line in warm.stderr.splitlines() if line.startswith("import time:")]
    assert "specaudit.scan.gates" in imported and not any(name.startswith("libcst") for name in imported)


def test_every_rule_has_positive_and_negative_examples():
    for engine in ENGINES:
        for rule in load_rules(engine):
            if KINDS[rule.kind].siteless:
                continue  # checkpoint checks: their fixtures are in tests/test_drafter.py
            expected = [example.get("sites", 1) for example in rule.examples]
            assert any(n >= 1 for n in expected), f"{rule.id} has no example the rule finds"
            assert 0 in expected, f"{rule.id} has no example the rule must not find"


@pytest.mark.parametrize("rule,example", CASES, ids=[f"{r.id}:{e['name']}" for r, e in CASES])
def test_rule_example(rule, example):
    source = textwrap.dedent(example["code"])
    tree = parse(source.encode(), "example.py")
    kind = KINDS[rule.kind]
    sites = find_sites(tree, source, module_info(tree, "example.py"), "example.py", (rule,))[rule.id]
    assert len(sites) == example.get("sites", 1), [s.code for s in sites]
    if not sites:
        return
    for key, value in (example.get("details") or {}).items():
        assert getattr(sites[0].details, key) == value, key
    for case in example.get("judged", ()):
        target = Target("example", "example", {"model_type": case["target"]["model_type"]})
        finding = kind.judge(rule, sites[0], _SiteOnlyJudge(Launch(target)))
        assert finding.status == case["status"], finding.why
        if "error" in case:
            assert finding.error == case["error"]


class _SiteOnlyJudge:
    """Kinds judged here read only the launch's method and target (the rest of scan.judge.Judge is not asked)."""

    def __init__(self, launch):
        self.method = launch.method
        self.target = launch.target


@pytest.mark.parametrize("params,message", [
    ({"subjct": "hf_text_config.model_type"}, "params.subject is missing"),
    ({"subject": "hf_text_config.model_type", "method_atribute": "method"},
     "params.method_atribute is not a parameter of kind model_type_allowlist"),
    ({"subject": ["hf_text_config.model_type"]}, "params.subject must be a string"),
])
def test_a_misspelt_parameter_is_refused_when_the_rule_loads(tmp_path, params, message):
    """A rule file with a typo in its params fails at load, naming the file and the key, not later in matching."""
    import yaml

    from specaudit.core.errors import SpecauditError

    rule = {"id": "typo", "engine": "vllm", "kind": "model_type_allowlist", "phase": "speculative_config",
            "methods": ["eagle3"], "title": "t", "files": ["vllm/config/speculative.py"], "hint": "h", "params": params}
    (tmp_path / "typo.yaml").write_text(yaml.safe_dump(rule))
    with pytest.raises(SpecauditError) as raised:
        load_rules("vllm", tmp_path)
    assert str(raised.value).startswith(str(tmp_path / "typo.yaml")) and message in str(raised.value)
