"""HTML from the jinja2 templates in specaudit/templates/: self-contained (nothing fetched at view time), every
string from a log, a path or a config escaped."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from ..results.scan import Comparison, ScanResult
from . import lines
from .renderer import Renderer

if TYPE_CHECKING:
    from jinja2 import Environment

    from ..fleet.results import FleetResult
    from ..results.matrix import Matrix
    from ..results.outcome import Explanation, SmokeResult


class Html(Renderer[str]):
    def scan(self, result: ScanResult) -> str:
        return _page("scan.html", results=[result], comparison=None)

    def comparison(self, comparison: Comparison) -> str:
        return _page("scan.html", results=comparison.results, comparison=comparison)

    def explanation(self, explanation: Explanation) -> str:
        return _page("explain.html", e=explanation, root=explanation.root, agreement=None)

    def smoke(self, result: SmokeResult) -> str:
        return _page("smoke.html", r=result, root=result.root, agreement=result.agreement)

    def matrix(self, matrix: Matrix) -> str:
        return _page("matrix.html", m=matrix)

    def fleet(self, result: FleetResult) -> str:
        return _page("fleet.html", f=result)


def _page(template: str, **context: Any) -> str:
    return _environment().get_template(template).render(**context)


@cache
def _environment() -> Environment:
    from jinja2 import Environment, PackageLoader, select_autoescape  # here: only an HTML report needs jinja2

    env = Environment(loader=PackageLoader("specaudit.report", "templates"), autoescape=select_autoescape(["html"]))
    # The words the templates print, as every format prints them.
    env.globals.update(
        marks=lines.MARK, summary=lines.summary, method_line=lines.method_line, other_gates=lines.other_gates,
        shown_first=lines.shown_first, runs_label=lines.runs_label,
        absent_rules=lines.absent_rules,
        registered=lines.registered, gate_lines=lines.gate_lines, path_line=lines.path_line,
        platform_line=lines.platform_line, indexed_line=lines.indexed_line, source_link=lines.source_link,
        provenance_line=lines.provenance_line, release_provenance=lines.release_provenance, cell_line=lines.cell_line,
        launches_line=lines.launches_line, known_lines=lines.known_lines, no_contract=lines.no_contract,
        root_lines=lines.root_lines, no_signature=lines.no_signature, smoke_rows=lines.smoke_rows,
        timeline_spans=lines.timeline_spans, fleet_summary=lines.fleet_summary, node_rows=lines.node_rows,
        node_engine=lines.node_engine, node_scan=lines.node_scan, difference_line=lines.difference_line,
        check_line=lines.check_line, layout_line=lines.layout_line, node_columns=lines.NODE_COLUMNS,
        smoke_node_rows=lines.smoke_node_rows, smoke_fleet_lines=lines.smoke_fleet_lines)
    return env
