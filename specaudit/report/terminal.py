"""The terminal format (rich): each result as a group of renderables, printed once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from ..core.types import Finding, SmokeVerdict, Status, Verdict
from ..results.scan import Comparison, Landscape, LaunchSummary, Provenance, ScanResult
from .lines import (
    MARK,
    NODE_COLUMNS,
    absent_rules,
    answer_lines,
    cell_line,
    check_line,
    difference_line,
    fleet_summary,
    gate_lines,
    indexed_line,
    known_lines,
    launches_line,
    layout_line,
    method_line,
    no_contract,
    no_signature,
    node_engine,
    node_rows,
    node_scan,
    other_gates,
    path_line,
    platform_line,
    provenance_line,
    registered,
    release_provenance,
    root_lines,
    runs_label,
    shown_first,
    smoke_fleet_lines,
    smoke_node_rows,
    smoke_rows,
    summary,
    without_controls,
)
from .renderer import Renderer, Report

if TYPE_CHECKING:
    from ..fleet.results import FleetResult
    from ..results.matrix import Matrix
    from ..results.outcome import Agreement, Explanation, RootCause, SignatureMatch, SmokeResult

STYLE: dict[str, str] = {Verdict.READY: "bold green", Verdict.BLOCKED: "bold red", Verdict.UNKNOWN: "bold yellow",
         Verdict.DEGRADED: "bold magenta",
         Verdict.LANDSCAPE: "bold cyan", SmokeVerdict.PASSED: "bold green", SmokeVerdict.FLAGGED: "bold yellow",
         SmokeVerdict.FAILED: "bold red", SmokeVerdict.UNREACHABLE: "bold red", SmokeVerdict.INTERRUPTED: "bold yellow"}
LANDSCAPE_ROWS = 60  # the terminal lists this many EAGLE-3 architectures; files list them all


def _m(value: object) -> str:
    """An input inside rich markup: its brackets escaped, so that `[/x]` or `[link=...]` is text, not a tag."""
    return escape(str(value))


def _row(table: Table, *cells: object) -> None:
    """A table row of inputs: cells are text, never markup."""
    table.add_row(*[cell if isinstance(cell, Text) else Text(str(cell)) for cell in cells])


class Terminal(Renderer[Group]):
    def render(self, report: Report) -> Group:
        return super().render(without_controls(report))

    def scan(self, result: ScanResult) -> Group:
        tree, launch = result.tree, result.launch
        out: list[RenderableType] = [
            f"[bold]specaudit scan[/]  {_m(tree.engine)} {_m(tree.version)}  [dim]{_m(tree.root)}[/]  ({_m(tree.origin)})"]
        if launch:
            out += _launch(result, launch)
        out += _rules_absent(result) + _candidates(result) + _landscape(result.landscape, full=launch is None)
        if result.skipped:
            out.append(f"[yellow]skipped {len(result.skipped)} file(s) it could not read:[/] " +
                       _m("; ".join(f"{p} ({why})" for p, why in result.skipped.items())))
        out += [Text(path_line(result), style="dim"), Text(platform_line(result), style="dim"),
                Text(provenance_line(result.provenance), style="dim"), Text(indexed_line(result), style="dim")]
        return Group(*out)

    def comparison(self, comparison: Comparison) -> Group:
        table = _table(["", *[_m(c) for c in comparison.columns]], title="side by side", show_lines=True)
        _row(table, "verdict", *[Text(r.verdict, style=STYLE[r.verdict]) for r in comparison.results])
        for phase, cells in comparison.rows():
            _row(table, phase.replace("_", " "), *["\n".join(gate_lines(cell)) or "-" for cell in cells])
        out: list[RenderableType] = [table]
        for result in comparison.results:
            out += [Rule(_m(f"{result.tree.engine} {result.tree.version}")), self.scan(result)]
        return Group(*out)

    def explanation(self, explanation: Explanation) -> Group:
        out: list[RenderableType] = [f"[bold]specaudit explain[/]  {_m(explanation.log)}  ({explanation.lines} lines)",
                                     *_root(explanation.root, None)]
        if explanation.scanned:
            out.append(Text(f"held against the scan of {explanation.scanned}", style="dim"))
        cause = explanation.cause
        out.append(no_signature(explanation) if cause is None else _cause_panel(cause))
        others = [m for m in explanation.matches if m is not cause]
        if others:
            table = _table(["line", "signature", "text"], title="other known lines")
            for match in others:
                _row(table, str(match.line_number), match.title + ("" if match.root else " (a consequence)"),
                     match.line.strip())
            out.append(table)
        return Group(*out, *_provenance(explanation.provenance))

    def smoke(self, result: SmokeResult) -> Group:
        out: list[RenderableType] = [
            Text.assemble(("specaudit smoke", "bold"), f"  {result.host}  {result.engine}  {result.started}  "
                                                       f"({result.seconds:.1f} s)"),
            Text(result.verdict, style=STYLE[result.verdict]) + Text(f"  {result.reason}"),
            *_root(result.root, result.agreement), *_crash(result)]
        figures = Table(show_header=False, box=None)
        for label, value in smoke_rows(result):
            figures.add_row(Text(label, style="bold"), Text(value, style="yellow" if label == "flag" else ""))
        out.append(figures)
        if result.nodes:
            nodes = _table(list(NODE_COLUMNS), title="nodes")
            for row in smoke_node_rows(result):
                _row(nodes, *row)
            out += [nodes, *[Text(line) for line in smoke_fleet_lines(result)]]
        out += [Text.assemble(("wrong answer", "red"), f" to {a.prompt!r}: {a.problem}") for a in result.answers
                if not a.ok]
        timeline = _table(["s", "phase", ""], title="timeline", box=None)
        for event in result.timeline:
            _row(timeline, f"{event.seconds:.1f}", event.phase, event.text)
        return Group(*out, timeline, *_provenance(result.provenance))

    def matrix(self, matrix: Matrix) -> Group:
        out: list[RenderableType] = [
            f"[bold]specaudit matrix[/]  {len(matrix.targets)} target(s) x {len(matrix.releases)} release(s), "
            f"{_m(launches_line(matrix))}"]
        out += [Text(line, style="" if line.startswith(" ") else "bold") for line in answer_lines(matrix)]
        table = _table(["release", *[_m(t) for t in matrix.targets]], show_lines=True)
        for release in matrix.releases:
            cells = [matrix.cell(t, release) for t in matrix.targets]
            _row(table, release, *[Text(cell_line(c), style=STYLE[c.verdict].replace("bold ", "")) for c in cells])
        return Group(*out, table, *[Text(line, style="dim") for line in release_provenance(matrix.results)])

    def fleet(self, result: FleetResult) -> Group:
        out: list[RenderableType] = [
            Text.assemble(("specaudit fleet", "bold"), f"  {len(result.nodes)} node(s)  {result.engine}  {result.started}  "
                                                       f"({result.seconds:.1f} s)"),
            Text(result.verdict, style=_style(result.verdict)) + Text(f"  {fleet_summary(result)}")]
        nodes = _table(["node", "verdict", "engine", "bundles", "GPUs", "scan"], title="nodes")
        for n in result.nodes:
            _row(nodes, f"{n.host} ({n.transport})", Text(n.verdict, style=_style(n.verdict)),
                 node_engine(n),
                 ", ".join(f"{b.bundle} ({b.state})" for b in n.bundles) or "-",
                 "-" if n.gpus is None else str(n.gpus), node_scan(n))
        out.append(nodes)
        if result.differences:
            table = _table(["aspect", "values (nodes)", ""], title="where the nodes differ")
            for d in result.differences:
                _row(table, d.aspect, difference_line(d), Text("must agree" if d.material else "shown", style="dim"))
            out.append(table)
        else:
            out.append(Text("the nodes agree on everything compared", style="green"))
        if result.arithmetic is not None:
            out += [Text(f"launch arithmetic: {layout_line(result.arithmetic)}", style="bold"),
                    *[Text("  " + check_line(c)) for c in result.arithmetic.checks],
                    *[Text(f"  {host}: {role}", style="dim") for host, role in result.arithmetic.roles.items()]]
        if result.parallel_gates:
            out.append(Text("gates that read the parallel sizes:", style="bold"))
            out += [Text(f"  {MARK[g.finding.status]} {g.finding.title} ({g.finding.location}) on {', '.join(g.hosts)}")
                    for g in result.parallel_gates]
        for n in result.nodes:
            details = Table(show_header=False, box=None, title=Text(n.host), title_justify="left")  # a name, not markup
            for label, value in node_rows(n):
                details.add_row(Text(label, style="bold"), Text(value))
            out.append(details)
        return Group(*out, *_provenance(result.provenance))


def _style(verdict: str) -> str:
    return STYLE.get(verdict, "bold red")  # UNREACHABLE: a node not reached


def _table(columns: list[str], **options) -> Table:
    table = Table(title_justify="left", **options)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _launch(result: ScanResult, launch: LaunchSummary) -> list[RenderableType]:
    """The launch judged, its verdict, the gates that block it and the others on the path."""
    out: list[RenderableType] = [
        f"target [bold]{_m(launch.target)}[/] ({_m(launch.source)}): architectures "
        f"{_m(', '.join(launch.architectures) or '-')}, text model type {_m(launch.text_model_type or '-')}"
        + (f", drafter {_m(launch.draft)}" if launch.draft else ""),
        Text(method_line(result)),
        *[Text(f"note: {note}", style="yellow") for note in launch.notes],
        *[Text(line, style="yellow") for line in known_lines(result)],
        Text(f"\n{result.verdict}", style=STYLE[result.verdict]) + Text(f"  {summary(result)}"),
        *[_finding_panel(finding, number) for number, finding in enumerate(shown_first(result), 1)]]
    others = other_gates(result)
    if others:
        table = _table(["", "gate", "where", "why"], title="other gates on the path", show_lines=False)
        for f in others:
            _row(table, MARK[f.status], f.title, f.location, f"{f.status}: {f.why}")
        out.append(table)
    return out


def _finding_panel(f: Finding, number: int) -> Panel:
    from rich.syntax import Syntax  # here: pygments is a tenth of a warm scan, and only a blocking gate shows code

    body = Group(
        Text.assemble(("where  ", "bold"), f"{f.location}  ", ("(" + f.phase.replace("_", " ") + ")", "dim"),
                      (f"; also at {', '.join(f.also)}" if f.also else "", "dim")),
        Syntax(f.code, "python", line_numbers=True, start_line=f.line, word_wrap=True) if f.line else Text(f.code),
        Text.assemble(("error  ", "bold"), (f.error or "-", "red")),
        Text.assemble(("why    ", "bold"), f.why),
        Text.assemble(("hint   ", "bold"), (f.hint, "green")),
    )
    color = _PANEL_COLOR.get(f.status, "red")
    return Panel(body, title=f"[bold {color}]{number}. {_m(f.title)}[/]  [dim]{_m(f.rule_id)}{runs_label(f)}[/]",
                 title_align="left")


_PANEL_COLOR = {Status.DEGRADES: "magenta", Status.WARNS: "yellow"}  # a finding shown in full that does not block


def _rules_absent(result: ScanResult) -> list[RenderableType]:
    absent = absent_rules(result)
    return [Text("not in this release (no code of that shape): " + ", ".join(f"{r.title} ({r.id})" for r in absent),
                 style="dim")] if absent else []


def _candidates(result: ScanResult) -> list[RenderableType]:
    if not result.candidates:
        return []
    table = _table(["where", "raises", "why"], title="unclassified candidate gates (no rule names them yet)")
    for c in result.candidates:
        _row(table, c.location, c.error or "-", c.why)
    return [table]


def _landscape(land: Landscape, full: bool) -> list[RenderableType]:
    """The method's landscape in two lines; in full (a table of what satisfies the contract) without a launch."""
    if no_contract(land):
        return [Text(f"\n{no_contract(land)}")]
    rows = registered(land)
    out: list[RenderableType] = [
        f"\n[bold]{_m(land.method)} landscape[/]: {_m(land.contract)} in this release: "
        f"{_m(', '.join(land.contract_members) or 'none found')}",
        Text(f"  {len(rows)} of {len(land.architectures)} registered architectures satisfy it; "
             f"{len(land.conforming_classes)} classes in the tree do, where `grep '{land.grep_pattern}'` finds "
             f"{len(land.grep_classes)} classes" + (f"; {len(land.unknown_classes)} unknown" if land.unknown_classes
                                                    else ""))]
    return out + _landscape_table(land) if full else out


def _landscape_table(land: Landscape) -> list[RenderableType]:
    rows = registered(land)
    table = _table(["architecture", "class", "where"], title=f"registered architectures that satisfy {_m(land.contract)}")
    for row in rows[:LANDSCAPE_ROWS]:
        _row(table, row.architecture, row.class_name, f"{row.file}:{row.line}")
    out: list[RenderableType] = [table]
    if len(rows) > LANDSCAPE_ROWS:
        out.append(f"  ... and {len(rows) - LANDSCAPE_ROWS} more (--format md|html|json lists all)")
    return out + [f"  [yellow]?[/] {_m(qualname)} {_m(_unknown_reason(land, qualname))}"
                  for qualname in land.unknown_classes]


def _unknown_reason(land: Landscape, qualname: str) -> str:
    return next((a.reason for a in land.architectures if f"{a.module}.{a.class_name}" == qualname), "")


def _root(root: RootCause | None, agreement: Agreement | None) -> list[RenderableType]:
    """A failed launch's root cause, and the scan's prediction against it."""
    out: list[RenderableType] = []
    if root is not None:
        first, *rest = root_lines(root)
        out.append(Panel(Group(Text(first, style="red"), Text("\n".join(rest), style="dim")),
                         title="[bold red]root cause of the failed launch[/]", title_align="left"))
    if agreement is not None:
        out.append(Text(agreement.line, style={True: "green", False: "bold red", None: "dim"}[agreement.agrees]))
    if agreement is not None and agreement.bug_report:
        out.append(Panel(Text(agreement.bug_report), title="a finding about specaudit: paste it into a bug report",
                         title_align="left"))
    return out


def _cause_panel(cause: SignatureMatch) -> Panel:
    body = Group(
        Text.assemble(("line   ", "bold"), str(cause.line_number), ("  " + cause.signature, "dim")),
        Text("\n".join(cause.context), style="dim"),
        Text.assemble(("error  ", "bold"), (cause.line.strip(), "red")),
        *_gate_and_hint(cause),
    )
    return Panel(body, title=f"[bold red]root cause: {_m(cause.title)}[/]", title_align="left")


def _crash(result: SmokeResult) -> list[RenderableType]:
    """The smoke launch's first fatal line with its context, else the log's last lines when it failed."""
    cause = result.cause
    if cause:
        body = Group(Text("\n".join(cause.context), style="dim"), *_gate_and_hint(cause))
        return [Panel(body, title=f"[bold red]{_m(cause.title)}[/] (log line {cause.line_number})", title_align="left")]
    if result.last_lines and result.verdict == SmokeVerdict.FAILED:
        return [Panel(Text("\n".join(result.last_lines[-12:]), style="dim"), title="last lines of the log",
                      title_align="left")]
    return []


def _gate_and_hint(cause: SignatureMatch) -> list[Text]:
    return [Text.assemble(("gate   ", "bold"), cause.gate or "- (not a gate of the EAGLE-3 path)"),
            Text.assemble(("hint   ", "bold"), (cause.hint, "green"))]


def _provenance(p: Provenance | None) -> list[RenderableType]:
    return [Text(provenance_line(p), style="dim")] if p else []


def print_patch_status(tree, state, rows, console: Console) -> None:
    """`specaudit patch --status`: the bundles applied to a tree, and its files that differ from the wheel."""
    console.print(f"[bold]specaudit patch --status[/]  {_m(tree.label)}  [dim]{_m(tree.root)}[/]")
    if state["bundles"]:
        for bundle, info in sorted(state["bundles"].items()):
            console.print(f"applied: [bold]{_m(bundle)}[/] ({_m(', '.join(info['changes']))})")
    else:
        console.print("no bundle applied")
    if not rows:
        console.print("every file is as the wheel installed it (RECORD hashes match)")
        return
    table = _table(["file", "state", "bundle", ""], title="files that differ from the wheel")
    for row in rows:
        _row(table, row.relpath, row.state, row.bundle or "-", row.detail)
    console.print(table)
