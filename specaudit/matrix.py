"""Targets x engine releases: from which release does a target just work, and what opens it on the release a
user has. Each cell is a scan (evaluate.py); a blocked cell is tried with the patch bundle that covers it
(patch.plan, in memory) and scanned again with the bundle's edits. Computes the answers once; every report
format renders them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from packaging.version import InvalidVersion, Version

from .errors import SpecauditError
from .evaluate import scan
from .locate import EngineTree
from .patch import OutOfRange, load_bundles, plan, select_bundle
from .result import ScanResult
from .target import Launch, load_preset
from .types import ExitCode, Verdict


@dataclass(frozen=True)
class Gate:
    rule_id: str
    title: str
    location: str


@dataclass(frozen=True)
class Cell:
    target: str
    release: str  # "vllm 0.17.0"
    verdict: str
    blocking: tuple[Gate, ...]  # in the order the launch meets them
    bundle: str | None = None  # the bundle that covers this release for this target, when it is blocked
    bundle_target: str | None = None  # the name `specaudit patch --target` takes for it (kimi_k2)
    patched: str | None = None  # the verdict with the bundle's edits; None: no bundle, or it could not apply
    patch_problem: str = ""  # why the bundle could not be planned here


@dataclass(frozen=True)
class Answer:
    """For one target: per engine, the first release of the range from which it works unpatched (and stays
    working), and what to do on each release where it is not READY."""

    target: str
    works_from: tuple[str, ...]  # one release per engine where there is one
    remedies: dict[str, str]  # release -> "specaudit patch ..." or "upgrade to ..." or why neither


@dataclass
class Matrix:
    targets: list[str]
    releases: list[str]  # in version order, per engine
    cells: list[Cell]
    answers: list[Answer]
    results: list[ScanResult] = field(repr=False, default_factory=list)  # every cell's scan, for SARIF

    def cell(self, target: str, release: str) -> Cell:
        return next(c for c in self.cells if c.target == target and c.release == release)

    @property
    def exit_code(self) -> int:
        verdicts = {c.verdict for c in self.cells}
        return ExitCode.BLOCKED if Verdict.BLOCKED in verdicts else \
            ExitCode.UNKNOWN if Verdict.UNKNOWN in verdicts else ExitCode.READY

    def to_dict(self) -> dict[str, Any]:
        return {"targets": self.targets, "releases": self.releases, "cells": [asdict(c) for c in self.cells],
                "answers": [asdict(a) for a in self.answers], "exit_code": self.exit_code}


def build_matrix(trees: list[EngineTree], targets: list[str], platform: str = "cuda") -> Matrix:
    trees = sorted(trees, key=lambda t: (t.engine.name, _version(t.version)))
    launches = {name: Launch(load_preset(name)) for name in targets}
    names = [launch.target.name for launch in launches.values()]
    cells, results = [], []
    for tree in trees:
        for name, launch in zip(names, launches.values()):
            result = scan(tree, launch, platform=platform)
            results.append(result)
            cells.append(_patched(tree, name, _cell(name, tree, result), platform))
    releases = [t.label for t in trees]
    return Matrix(names, releases, cells, [_answer(name, trees, cells) for name in names], results)


def _cell(target: str, tree: EngineTree, result: ScanResult) -> Cell:
    return Cell(target, tree.label, result.verdict,
                tuple(Gate(f.rule_id, f.title, f.location) for f in result.blocking))


def _patched(tree: EngineTree, target: str, cell: Cell, platform: str) -> Cell:
    """The cell with the verdict that the bundle covering it gives, when it is blocked and one covers it."""
    if cell.verdict != Verdict.BLOCKED:
        return cell
    bundles = [b for b in load_bundles(tree.engine.name) if target in b.presets]
    try:
        bundle = select_bundle(bundles, bundles[0].target, tree.version) if bundles else None
    except OutOfRange:
        bundle = None
    if bundle is None:
        return cell
    try:
        edits = plan(tree, bundle).edits
    except SpecauditError as exc:
        return replace(cell, bundle=bundle.id, bundle_target=bundle.target, patch_problem=str(exc))
    after = scan(tree, Launch(load_preset(target)), overlay={rel: new for rel, (_, new) in edits.items()},
                 platform=platform)
    return replace(cell, bundle=bundle.id, bundle_target=bundle.target, patched=after.verdict)


def _answer(target: str, trees: list[EngineTree], cells: list[Cell]) -> Answer:
    remedies: dict[str, str] = {}
    works_from = []
    for engine in dict.fromkeys(t.engine.name for t in trees):
        row = [next(c for c in cells if c.target == target and c.release == t.label)
               for t in trees if t.engine.name == engine]
        # The first release from which every later one in the range is READY unpatched.
        stable = next((i for i in range(len(row)) if all(c.verdict == Verdict.READY for c in row[i:])), None)
        if stable is not None:
            works_from.append(row[stable].release)
        for i, c in enumerate(row):
            if c.verdict != Verdict.READY:
                remedies[c.release] = _remedy(c, row[i + 1:])
    return Answer(target, tuple(works_from), remedies)


def _remedy(cell: Cell, later: list[Cell]) -> str:
    if cell.patched == Verdict.READY:
        return f"specaudit patch --target {cell.bundle_target} (bundle {cell.bundle}) makes it READY"
    upgrade = next((c.release for c in later if c.verdict == Verdict.READY), None)
    bundle = f"bundle {cell.bundle} leaves it {cell.patched}" if cell.patched else \
        f"bundle {cell.bundle} does not apply: {cell.patch_problem}" if cell.bundle else "no bundle covers it"
    if upgrade:
        return f"upgrade to {upgrade} ({bundle})"
    if cell.verdict == Verdict.UNKNOWN:
        return f"undecided: {', '.join(g.title for g in cell.blocking) or 'see the scan'} ({bundle})"
    return f"no release of the range works ({bundle})"


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")
