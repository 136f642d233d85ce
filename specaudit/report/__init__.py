"""The reports of every stage's result (a scan, a comparison, a matrix, an explanation, a smoke launch) in
every format: the terminal (rich), markdown, HTML, JSON and SARIF. One renderer per format behind one interface
(renderer.py), each picking its method per result type in one place; they render the same result objects and
compute nothing, and the words they share are made once (lines.py)."""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from ..core.cache import inside, slug, write_atomic
from ..core.errors import SpecauditError
from ..results.scan import Comparison, ScanResult
from .lines import smoke_rows
from .renderer import Renderer, Report
from .terminal import Terminal, print_patch_status

if TYPE_CHECKING:
    from ..fleet.results import FleetResult
    from ..results.matrix import Matrix
    from ..results.outcome import Explanation, SmokeResult

__all__ = ["FORMATS", "RENDERERS", "SCAN_FORMATS", "Renderer", "Report", "check_out_dir", "print_patch_status",
           "print_report", "report_name", "smoke_rows", "to_html", "to_json", "to_markdown", "to_sarif", "write_report"]

class _Renderers(Mapping[str, Renderer[str]]):
    """The file formats' renderers, each imported when a report is first written in its format: a scan that writes
    none (the terminal's report only) does not import them."""

    _WHERE = {"json": ".json:Json", "md": ".markdown:Markdown", "html": ".html:Html", "sarif": ".sarif:Sarif"}

    def __init__(self) -> None:
        self._made: dict[str, Renderer[str]] = {}

    def __getitem__(self, fmt: str) -> Renderer[str]:
        if fmt not in self._made:
            module, _, name = self._WHERE[fmt].partition(":")
            self._made[fmt] = getattr(importlib.import_module(module, __name__), name)()
        return self._made[fmt]

    def __iter__(self) -> Iterator[str]:
        return iter(self._WHERE)

    def __len__(self) -> int:
        return len(self._WHERE)


RENDERERS: Mapping[str, Renderer[str]] = _Renderers()
FORMATS = ("json", "md", "html")
SCAN_FORMATS = (*FORMATS, "sarif")  # SARIF holds code locations: a scan's, not a launch's
TERMINAL = Terminal()


def to_json(report: Report) -> str:
    return RENDERERS["json"].render(report)


def to_markdown(report: Report) -> str:
    return RENDERERS["md"].render(report)


def to_html(report: Report) -> str:
    return RENDERERS["html"].render(report)


def to_sarif(report: Report) -> str:
    return RENDERERS["sarif"].render(report)


def print_report(report: Report, console: Console) -> None:
    console.print(TERMINAL.render(report))


def write_report(report: Report, fmt: str, out_dir: Path) -> Path:
    check_out_dir(out_dir)
    path = inside(out_dir, out_dir / f"{slug(report_name(report))}.{fmt}")
    # A report is shared and committed: paths under the home directory are written as a user writes them (not
    # where home is the root, or unset, as in many containers: every path would start with it).
    text = RENDERERS[fmt].render(report)
    home = str(Path.home()).rstrip("/") if os.environ.get("HOME", "").strip("/") else ""
    if home:
        text = text.replace(home + "/", "~/")
    try:
        write_atomic(path, text.encode("utf-8"))
    except OSError as exc:
        raise SpecauditError(f"{path}: cannot write the report ({exc.strerror})") from None
    return path


def check_out_dir(out_dir: Path) -> None:
    """The reports' directory exists (created if need be) and is writable: checked before the work, so a scan is
    not done for nothing."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecauditError(f"--out {out_dir}: cannot create it ({exc.strerror})") from None
    if not out_dir.is_dir() or not os.access(out_dir, os.W_OK | os.X_OK):
        raise SpecauditError(f"--out {out_dir}: not a writable directory")


class _FileName(Renderer[str]):
    """A report's file name, without the format's extension: what the report is about."""

    def scan(self, result: ScanResult) -> str:
        return _scan_name([result])

    def comparison(self, comparison: Comparison) -> str:
        return _scan_name(comparison.results)

    def explanation(self, explanation: Explanation) -> str:
        return "explain-" + slug(Path(explanation.log).name)

    def smoke(self, result: SmokeResult) -> str:
        stamp = re.sub(r"[^0-9T]", "", result.started)[:15]
        return f"smoke-{slug(result.host)}-{result.engine}-{slug(Path(result.target or '').name or 'launch')}-{stamp}"

    def matrix(self, matrix: Matrix) -> str:
        targets = "-".join(slug(t) for t in matrix.targets)
        return f"matrix-{targets}-{slug(matrix.releases[0])}-to-{slug(matrix.releases[-1])}"

    def fleet(self, result: FleetResult) -> str:
        stamp = re.sub(r"[^0-9T]", "", result.started)[:15]
        target = slug(Path(result.target or "").name or "launch")
        return f"fleet-{result.engine}-{target}-{len(result.nodes)}-nodes-{stamp}"


def _scan_name(results: list[ScanResult]) -> str:
    launch = results[0].launch
    target = launch.target if launch else "landscape"
    trees = "-".join(f"{r.tree.engine}-{r.tree.version}" for r in results)
    return f"scan-{trees}-{slug(Path(target).name or target)}"


report_name = _FileName().render
