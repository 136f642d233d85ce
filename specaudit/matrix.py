"""Targets x engine releases: from which release does a target just work, and what opens it on the release a
user has. Each cell is a scan (scan/audit.py): each tree analysed once, each target judged against it; a blocked
cell is tried with the patch bundle that covers it (patch.plan, in memory) and judged again on the tree with the
bundle's edits. The trees are scanned side by side in worker processes, each as it arrives from its fetch.
Computes the answers once; every report format renders them.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sized
from dataclasses import dataclass, replace
from typing import Any

from packaging.version import InvalidVersion, Version

from .core.errors import SpecauditError
from .core.types import Verdict
from .launch.request import DEFAULT_METHOD, Launch, method_of
from .launch.target import Target
from .patch.bundles import Bundle, OutOfRange, load_bundles, plan, select_bundle
from .patch.synthesize import ShapeRefused, synthesize, target_named
from .results.matrix import Answer, Cell, Gate, Matrix
from .results.scan import ScanResult
from .scan.audit import Analysis, analyze, audit
from .scan.index import WorkerPool, ignore_interrupts, share_parsing
from .tree.locate import EngineTree

# Trees scanned side by side at most, a worker process each: each holds one tree's index and its syntax trees.
MAX_WORKERS = 4


def build_matrix(trees: Iterable[EngineTree], targets: list[str], platform: str = "cuda",
                 speculative: dict[str, Any] | None = None) -> Matrix:
    """Every target on every tree, each launched with ``speculative`` (the speculative config; none: an EAGLE-3
    launch). A target is named as ``patch --target`` takes one (synthesize.target_named): a preset, its Hub id, or
    an architecture. ``trees`` may still be arriving (locate_all yields each release as its fetch ends): each is
    scanned as it comes, side by side with the others where there are cores for it."""
    presets = [target_named(name) for name in targets]
    names = [preset.name for preset in presets]
    speculative = dict(speculative or {})
    rows = sorted(_rows(trees, presets, platform, speculative),
                  key=lambda row: (row.tree.engine.name, _version(row.tree.version)))
    ordered = [row.tree for row in rows]
    cells = [cell for row in rows for cell in row.cells]
    results = [result for row in rows for result in row.results]
    return Matrix(names, [t.label for t in ordered], cells, [_answer(name, ordered, cells) for name in names], results,
                  method_of(speculative) or "")


@dataclass(frozen=True)
class _Row:
    """One tree's cells, a target each, and the scans they come from."""

    tree: EngineTree
    cells: tuple[Cell, ...]
    results: tuple[ScanResult, ...]


def _rows(trees: Iterable[EngineTree], targets: list[Target], platform: str,
          speculative: dict[str, Any]) -> list[_Row]:
    """Each tree's row, begun as the tree arrives: in worker processes, a tree each, where there are cores and
    trees for more than one; else here, one after another."""
    workers = min(os.cpu_count() or 1, MAX_WORKERS, len(trees) if isinstance(trees, Sized) else MAX_WORKERS)
    if workers < 2:
        return [_row(tree, targets, platform, speculative) for tree in trees]
    with WorkerPool(workers, functools.partial(_worker_init, workers)) as pool:
        pool.start()  # before the first tree is asked for: the fetches that yield them are threads
        futures = [pool.executor().submit(_row, tree, targets, platform, speculative) for tree in trees]
        return [future.result() for future in futures]


def _worker_init(workers: int) -> None:
    ignore_interrupts()
    share_parsing(workers)  # the trees are the unit of work: the other cores are the other workers'


def _row(tree: EngineTree, targets: list[Target], platform: str, speculative: dict[str, Any]) -> _Row:
    """The tree analysed once and each target's launch judged against it; a blocked cell is tried with the
    bundle that covers it, each bundle planned (its edits analysed with it) once, whatever targets it covers."""
    analysis = analyze(tree, platform=platform)
    patched: dict[str, Analysis | str] = {}
    synthesized: dict[str, _Synthesis] = {}
    cells, results = [], []
    for target in targets:
        launch = Launch(target, method=method_of(speculative), speculative=speculative)
        result = audit(analysis, launch)
        results.append(result)
        cells.append(_patched(analysis, launch, result, _cell(target.name, tree, result), patched, synthesized))
    return _Row(tree, tuple(cells), tuple(results))


def _cell(target: str, tree: EngineTree, result: ScanResult) -> Cell:
    shown = result.degrading if result.verdict == Verdict.DEGRADED else result.blocking
    return Cell(target, tree.label, result.verdict, tuple(Gate(f.rule_id, f.title, f.location) for f in shown))


def _patched(analysis: Analysis, launch: Launch, result: ScanResult, cell: Cell,
             patched: dict[str, Analysis | str], synthesized: dict[str, _Synthesis]) -> Cell:
    """The cell with the verdict that the bundle covering it gives, when it is blocked and one covers it, else the
    bundle synthesized for its architecture. ``patched``: the tree with each bundle's edits analysed (or why the
    bundle cannot be planned), by bundle id; ``synthesized``: what synthesis makes of each architecture."""
    if cell.verdict != Verdict.BLOCKED or launch.target is None:
        return cell
    tree, target = analysis.tree, launch.target
    # The bundles that open the gates of the method the release runs for this launch.
    method = result.method.method if result.method else DEFAULT_METHOD
    bundles = [b for b in load_bundles(tree.engine.name) if target.name in b.presets and b.method == method]
    try:
        bundle = select_bundle(bundles, bundles[0].target, tree.version) if bundles else None
    except OutOfRange:
        bundle = None
    if bundle is None:
        return _synthesized(analysis, launch, cell, method, patched, synthesized)
    if bundle.id not in patched:
        patched[bundle.id] = _with_bundle(analysis, bundle)
    after = patched[bundle.id]
    if isinstance(after, str):
        return replace(cell, bundle=bundle.id, bundle_target=bundle.target, patch_problem=after)
    verdict = audit(after, launch).verdict
    return replace(cell, bundle=bundle.id, bundle_target=bundle.target, patched=verdict)


@dataclass(frozen=True)
class _Synthesis:
    """What `patch --target ARCH` makes of an architecture on a release: a bundle (its id, the class its code comes
    from), or why its shape is refused; neither where the release does not register it or nothing blocks it."""

    bundle_id: str = ""
    donor: str = ""
    refused: str = ""


def _synthesized(analysis: Analysis, launch: Launch, cell: Cell, method: str | None,
                 patched: dict[str, Analysis | str], synthesized: dict[str, _Synthesis]) -> Cell:
    """No shipped bundle covers the cell: the one `specaudit patch --target ARCH --dry-run` would synthesize from the
    release's supported classes of the target's shape (patch/synthesize.py), planned, and the launch judged again
    on its edits; or why the target's shape is refused. Nothing where the release does not register the target."""
    import tempfile
    from pathlib import Path

    from .patch.bundles import load_bundle

    target = launch.target
    arch = (target.architectures or [""])[0] if target else ""
    if method != "eagle3" or target is None or not arch:
        return cell
    if arch not in synthesized:
        with tempfile.TemporaryDirectory(prefix="specaudit-synth-") as out:
            try:
                made = synthesize(analysis, target, Path(out))
                synthesized[arch] = _Synthesis(made.bundle_id, made.donor)
                patched[made.bundle_id] = _with_bundle(analysis, load_bundle(made.directory))
            except ShapeRefused as exc:
                synthesized[arch] = _Synthesis(refused=str(exc))
            except SpecauditError:  # not registered, or not blocked for a reason a bundle opens: nothing to name
                synthesized[arch] = _Synthesis()
    found = synthesized[arch]
    if found.refused:
        return replace(cell, patch_problem=f"no bundle can be synthesized: {found.refused}")
    if not found.bundle_id:
        return cell
    after = patched[found.bundle_id]
    if isinstance(after, str):
        return replace(cell, bundle=found.bundle_id, bundle_target=arch, synthesized_from=found.donor,
                       patch_problem=after)
    return replace(cell, bundle=found.bundle_id, bundle_target=arch, synthesized_from=found.donor,
                   patched=audit(after, launch).verdict)


def _with_bundle(analysis: Analysis, bundle: Bundle) -> Analysis | str:
    """The tree with the bundle's edits, analysed as planning checked it; or why the bundle cannot be planned."""
    try:
        return plan(analysis.tree, bundle, analysis).patched
    except SpecauditError as exc:
        return str(exc)


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
    synthesized = f", synthesized from {cell.synthesized_from}" if cell.synthesized_from else ""
    if cell.patched == Verdict.READY:
        return f"specaudit patch --target {cell.bundle_target} (bundle {cell.bundle}{synthesized}) makes it READY"
    upgrade = next((c.release for c in later if c.verdict == Verdict.READY), None)
    bundle = f"bundle {cell.bundle}{synthesized} leaves it {cell.patched}" if cell.patched else \
        f"bundle {cell.bundle}{synthesized} does not apply: {cell.patch_problem}" if cell.bundle else \
        f"no bundle covers it; {cell.patch_problem}" if cell.patch_problem else "no bundle covers it"
    if upgrade:
        return f"upgrade to {upgrade} ({bundle})"
    if cell.verdict == Verdict.DEGRADED:
        return f"runs, and the drafter will not help: {', '.join(g.title for g in cell.blocking)} (fix the drafter's " \
               "files or the launch as the scan says)"
    if cell.verdict == Verdict.UNKNOWN:
        return f"undecided: {', '.join(g.title for g in cell.blocking) or 'see the scan'} ({bundle})"
    return f"no release of the range works ({bundle})"


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")
