"""SARIF 2.1.0, for code scanning (GitHub's and others'): a scan's, a comparison's or a matrix's.

One run per engine release (per release and target, for a matrix). A result is a gate that blocks the launch
or a finding that the launch will run with a drafter that does not help (level ``error``; its ``status`` property
says which), a gate the scan could not decide, or a warning that the drafter helps less than it could on some
requests (``warning``; ``status`` unknown or warns); gates that pass are left out, as code scanning
lists problems. Locations are relative to the engine tree (``uriBaseId`` ENGINE_TREE: the directory holding the
package), or to the drafter checkpoint for the checks of its files. A result's partial fingerprint leaves the
line out, so that a gate keeps its identity when the lines above it move in the next release.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..core.errors import SpecauditError
from ..core.types import Finding, Status
from ..results.scan import Comparison, Provenance, ScanResult
from .renderer import Renderer

if TYPE_CHECKING:
    from ..fleet.results import FleetResult
    from ..results.matrix import Matrix
    from ..results.outcome import Explanation, SmokeResult

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
MAX_RUNS = 20  # GitHub code scanning: runs per file
MAX_RESULTS = 25_000  # GitHub code scanning: results per run
TREE_BASE = "ENGINE_TREE"
DRAFTER_BASE = "DRAFTER_CHECKPOINT"
LEVEL = {Status.BLOCKS: "error", Status.DEGRADES: "error", Status.UNKNOWN: "warning", Status.WARNS: "warning"}
_NO_LOCATIONS = "SARIF holds the code locations of a scan, not a launch's: write json, md or html"


class Sarif(Renderer[str]):
    def scan(self, result: ScanResult) -> str:
        return _log([result])

    def comparison(self, comparison: Comparison) -> str:
        return _log(comparison.results)

    def matrix(self, matrix: Matrix) -> str:
        return _log(matrix.results)

    def explanation(self, explanation: Explanation) -> str:
        raise SpecauditError(_NO_LOCATIONS)

    def smoke(self, result: SmokeResult) -> str:
        raise SpecauditError(_NO_LOCATIONS)

    def fleet(self, result: FleetResult) -> str:
        # The nodes' engines, each scan once (nodes that share a scan share its run).
        return _log([n.scan for n in result.nodes if n.scan is not None and not n.scanned_on])


def _log(results: list[ScanResult]) -> str:
    log = {"$schema": SCHEMA, "version": "2.1.0", "runs": [_run(r) for r in results[:MAX_RUNS]]}
    return json.dumps(log, indent=2) + "\n"


def _run(result: ScanResult) -> dict[str, Any]:
    reported = [f for f in result.findings if f.status in LEVEL][:MAX_RESULTS]
    first: dict[str, Finding] = {}  # each rule's first result describes the rule
    for finding in reported:
        first.setdefault(finding.rule_id, finding)
    rule_ids = list(first)
    return {
        "tool": {"driver": {
            "name": "specaudit", "version": __version__, "semanticVersion": __version__,
            "rules": [_rule(finding) for finding in first.values()],
        }},
        "originalUriBaseIds": _bases(result),
        "automationDetails": {"id": f"specaudit/{result.tree.engine}-{result.tree.version}/"
                                    f"{result.launch.target if result.launch else 'landscape'}"},
        "results": [_result(f, rule_ids.index(f.rule_id)) for f in reported],
        "invocations": [_invocation(result.provenance)] if result.provenance else [],
        "properties": _properties(result),
    }


def _bases(result: ScanResult) -> dict[str, Any]:
    draft = result.launch.draft if result.launch else None
    return {
        TREE_BASE: {"description": {"text": f"{result.tree.engine} {result.tree.version} ({result.tree.origin})"}},
        DRAFTER_BASE: {"description": {"text": f"the drafter checkpoint {draft}" if draft else "no drafter checkpoint"}},
    }


def _properties(result: ScanResult) -> dict[str, Any]:
    tree, launch = result.tree, result.launch
    return {"verdict": result.verdict, "engine": tree.engine, "release": tree.version, "origin": tree.origin,
            "platform": tree.platform, "target": launch.target if launch else None,
            "method": launch.method if launch else None, "draft": launch.draft if launch else None}


def _invocation(p: Provenance) -> dict[str, Any]:
    return {"commandLine": p.command, "startTimeUtc": p.time.replace("+00:00", "Z"), "executionSuccessful": True,
            "properties": {"specaudit": p.specaudit, "source": p.source, "bundlesApplied": list(p.bundles),
                           "modifiedFiles": list(p.modified), "editedInMemory": list(p.in_memory)}}


def _rule(finding: Finding) -> dict[str, Any]:
    return {
        "id": finding.rule_id,
        "name": "".join(part.capitalize() for part in finding.rule_id.replace("_", "-").split("-")),
        "shortDescription": {"text": finding.title},
        "help": {"text": finding.hint or finding.title},
        "properties": {"phase": finding.phase},
    }


def _result(finding: Finding, rule_index: int) -> dict[str, Any]:
    text = finding.why.rstrip(".") + "." + (f" The engine would print: {finding.error}" if finding.error else "")
    return {
        "ruleId": finding.rule_id,
        "ruleIndex": rule_index,
        "level": LEVEL[finding.status],
        "message": {"text": text},
        "locations": [_location(finding)],
        "partialFingerprints": {"specauditGate/v1": _fingerprint(finding)},
        "properties": {"phase": finding.phase, "status": finding.status,
                       **({"alsoAt": list(finding.also)} if finding.also else {})},
    }


def _location(finding: Finding) -> dict[str, Any]:
    # A drafter check names a file of the checkpoint ("host:dir/config.json" or "dir/config.json") at line 0.
    if finding.line <= 0:
        name = finding.file.rsplit("/", 1)[-1]
        return {"physicalLocation": {"artifactLocation": {"uri": name, "uriBaseId": DRAFTER_BASE}},
                "message": {"text": finding.file}}
    region: dict[str, Any] = {"startLine": finding.line}
    if finding.code:
        region["snippet"] = {"text": finding.code}
    return {"physicalLocation": {"artifactLocation": {"uri": finding.file, "uriBaseId": TREE_BASE},
                                 "region": region}}


def _fingerprint(finding: Finding) -> str:
    code = " ".join(finding.code.split())
    return hashlib.sha256(f"{finding.rule_id}\0{finding.file}\0{code}".encode()).hexdigest()[:32]
