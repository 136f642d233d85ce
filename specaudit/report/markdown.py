"""Markdown that pastes into a GitHub issue: the verdict first, long evidence folded in <details>."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..core.types import Finding, SmokeVerdict
from ..results.scan import Comparison, Landscape, LaunchSummary, Provenance, ScanResult
from .lines import (
    MARK,
    NODE_COLUMNS,
    absent_rules,
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
    num,
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
    source_link,
    summary,
    without_controls,
)
from .renderer import Renderer, Report

if TYPE_CHECKING:
    from ..fleet.results import FleetResult
    from ..results.matrix import Matrix
    from ..results.outcome import Agreement, Explanation, RootCause, SignatureMatch, SmokeResult


# The HTML this renderer writes itself; any other tag in a report comes from an input (a config string, a log
# line, an engine's message) and is made inert.
_OWN_TAGS = re.compile(r"</?(?:details|summary)>|<br>")
_FENCE = re.compile(r"^\s*```")


def inert_html(markdown: str) -> str:
    """Markdown where only this renderer's own tags are HTML: every other `<` outside code (a span or a fence, where
    CommonMark shows it as written) becomes `&lt;`, so that an `<img onerror=...>` in an input is text."""
    out, fenced = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            parts = line.split("`")
            for i in range(0, len(parts), 2):  # the even parts are outside code spans
                pieces = _OWN_TAGS.split(parts[i])
                tags = _OWN_TAGS.findall(parts[i])
                parts[i] = "".join(p.replace("<", "&lt;") + (tags[j] if j < len(tags) else "")
                                   for j, p in enumerate(pieces))
            line = "`".join(parts)
        out.append(line)
    return "\n".join(out)


class Markdown(Renderer[str]):
    def render(self, report: Report) -> str:
        return inert_html(super().render(without_controls(report)))

    def scan(self, result: ScanResult) -> str:
        tree = result.tree
        out = [f"# specaudit scan: {tree.engine} {tree.version}", "", f"- tree: `{tree.root}` ({tree.origin})"]
        if result.launch:
            out += _launch(result, result.launch)
        out += _rules_absent(result) + _candidates(result) + _landscape(result.landscape, folded=bool(result.launch))
        if result.skipped:
            out += ["## Skipped files", ""] + [f"- `{p}`: {why}" for p, why in result.skipped.items()] + [""]
        out += [f"_{path_line(result)}_", "", f"_{platform_line(result)}_", "", f"_{indexed_line(result)}._", "",
                f"_{provenance_line(result.provenance)}_"]
        return _text(out)

    def comparison(self, comparison: Comparison) -> str:
        columns = comparison.columns
        out = [f"# specaudit scan: {' | '.join(columns)}", "",
               "| | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns),
               "| verdict | " + " | ".join(f"**{r.verdict}**" for r in comparison.results) + " |"]
        for phase, cells in comparison.rows():
            out.append(f"| {phase.replace('_', ' ')} | " + " | ".join(
                "<br>".join(_cell(line) for line in gate_lines(cell)) or "-" for cell in cells) + " |")
        out.append("")
        for result in comparison.results:
            # each release's own report, one heading level down
            out += [re.sub(r"^#", "##", line) for line in self.scan(result).splitlines()] + [""]
        return "\n".join(out)

    def explanation(self, explanation: Explanation) -> str:
        out = [f"# specaudit explain: `{explanation.log}`", "", f"{explanation.lines} lines.", "",
               *_root(explanation.root, None)]
        if explanation.scanned:
            out += [f"Held against the scan of {explanation.scanned}.", ""]
        cause = explanation.cause
        if cause is None:
            out.append(no_signature(explanation) + ".")
        else:
            out += [f"## Root cause: {cause.title} (`{cause.signature}`)", "",
                    f"- line {cause.line_number}: `{cause.line.strip()}`", *_cause(cause)]
        others = [m for m in explanation.matches if m is not cause]
        if others:
            out += ["", "## Other known lines", "", "| line | signature | text |", "|---|---|---|"]
            out += [f"| {m.line_number} | {m.title} | `{_cell(m.line.strip())}` |" for m in others]
        return _text(out + _provenance(explanation.provenance))

    def smoke(self, result: SmokeResult) -> str:
        out = [f"# specaudit smoke: {result.host} ({result.engine})", "",
               f"Started {result.started}, {result.seconds:.1f} s.", "", f"## {result.verdict}", "", result.reason, "",
               *_root(result.root, result.agreement), "```", result.command_line, "```", "", "| | |", "|---|---|"]
        out += [f"| {label} | {_cell(value)} |" for label, value in smoke_rows(result)]
        if result.nodes:
            out += ["", "## Nodes", "", "| " + " | ".join(NODE_COLUMNS) + " |", "|---" * len(NODE_COLUMNS) + "|"]
            out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in smoke_node_rows(result)]
            out += ["", *[f"- {line}" for line in smoke_fleet_lines(result)]]
        out += _crash(result)
        if result.answers:
            out += ["", "## Answers", "", "| prompt | ok | tokens | answer |", "|---|---|---|---|"]
            out += [f"| {_cell(a.prompt)} | {'yes' if a.ok else 'no: ' + _cell(a.problem)} | {num(a.completion_tokens)} "
                    f"| {_cell(a.text[:80])} |" for a in result.answers]
        out += ["", "## Timeline", "", "| s | phase | |", "|---|---|---|"]
        out += [f"| {e.seconds:.1f} | {e.phase} | {_cell(e.text)} |" for e in result.timeline]
        return _text(out + _provenance(result.provenance))

    def matrix(self, matrix: Matrix) -> str:
        out = [f"# specaudit matrix: {', '.join(matrix.targets)}", "", launches_line(matrix), "", *_answers(matrix), ""]
        out += ["| release | " + " | ".join(matrix.targets) + " |", "|---|" + "---|" * len(matrix.targets)]
        out += [f"| {release} | " + " | ".join(_cell(cell_line(matrix.cell(t, release))) for t in matrix.targets) + " |"
                for release in matrix.releases]
        blocked = [c for c in matrix.cells if c.blocking]
        if blocked:
            out += [""] + _details("The gates of each blocked cell", [
                f"- {c.target} on {c.release}: " + "; ".join(f"{g.title} (`{g.location}`)" for g in c.blocking)
                for c in blocked])
        for line in release_provenance(matrix.results):
            out += [f"_{line}_", ""]
        return "\n".join(out)

    def fleet(self, result: FleetResult) -> str:
        out = [f"# specaudit fleet: {', '.join(result.hosts)} ({result.engine})", "",
               f"Started {result.started}, {result.seconds:.1f} s.", "", f"## {result.verdict}", "", fleet_summary(result),
               "", "```", " ".join(result.command), "```", "", "| node | verdict | engine | bundles | GPUs | scan |",
               "|---|---|---|---|---|---|"]
        out += [f"| {_cell(n.host)} ({n.transport}) | **{n.verdict}** | {_cell(node_engine(n))} "
                f"| {_cell(', '.join(f'{b.bundle} ({b.state})' for b in n.bundles) or '-')} "
                f"| {'-' if n.gpus is None else n.gpus} | {_cell(node_scan(n))} |" for n in result.nodes]
        out += ["", "## Where the nodes differ", ""]
        if result.differences:
            out += ["| aspect | values (nodes) | |", "|---|---|---|"]
            out += [f"| {_cell(d.aspect)} | {_cell(difference_line(d))} | {'must agree' if d.material else 'shown'} |"
                    for d in result.differences]
        else:
            out.append("Nowhere: the nodes agree on everything compared.")
        if result.arithmetic is not None:
            out += ["", "## Launch arithmetic", "", layout_line(result.arithmetic), ""]
            out += [f"- {check_line(c)}" for c in result.arithmetic.checks]
            out += ["", "| node | role |", "|---|---|"]
            out += [f"| {_cell(h)} | {_cell(r)} |" for h, r in result.arithmetic.roles.items()]
        if result.parallel_gates:
            out += ["", "## Gates that read the parallel sizes", ""]
            out += [f"- {MARK[g.finding.status]} {g.finding.title} (`{g.finding.location}`) on {', '.join(g.hosts)}"
                    for g in result.parallel_gates]
        for n in result.nodes:
            out += ["", f"## {n.host}", "", "| | |", "|---|---|"]
            out += [f"| {label} | {_cell(value)} |" for label, value in node_rows(n)]
        return _text(out + _provenance(result.provenance))


def _text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def _details(summary: str, lines: list[str]) -> list[str]:
    """Markdown folded under a summary (GitHub renders <details>): long evidence stays one click away."""
    return [f"<details><summary>{summary}</summary>", "", *lines, "", "</details>", ""]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _answers(matrix: Matrix) -> list[str]:
    """Above the grid: from which release each target works unpatched, and what opens each blocked release."""
    out = []
    for answer in matrix.answers:
        out.append(f"- **{answer.target}**: " + (f"works unpatched from **{', '.join(answer.works_from)}**"
                                                 if answer.works_from else "no release of the range works unpatched"))
        out += [f"  - {release}: {remedy}" for release, remedy in answer.remedies.items()]
    return out


def _launch(result: ScanResult, launch: LaunchSummary) -> list[str]:
    """The launch judged, its verdict, the gates that block it and the others on the path."""
    out = [f"- target: **{launch.target}** ({launch.source}); architectures {', '.join(launch.architectures) or '-'}; "
           f"text model type `{launch.text_model_type}`" + (f"; drafter `{launch.draft}`" if launch.draft else ""),
           f"- {method_line(result)}",
           *[f"- note: {note}" for note in launch.notes],
           *[f"- {line}" for line in known_lines(result)],
           "", f"## Verdict: {result.verdict}", "", summary(result), ""]
    for number, finding in enumerate(shown_first(result), 1):
        out += _blocking(result, finding, number)
    others = other_gates(result)
    if others:
        out += ["## Other gates on the path", "", "| | gate | where | status | why |", "|---|---|---|---|---|"]
        out += [f"| {MARK[f.status]} | {f.title} | `{f.location}` | {f.status} | {_cell(f.why)} |" for f in others]
        out.append("")
    return out


def _blocking(result: ScanResult, f: Finding, number: int) -> list[str]:
    link = source_link(result, f)
    return [f"### {number}. {f.title} (`{f.rule_id}`){runs_label(f)}", "",
            "- where: " + (f"[`{f.location}`]({link})" if link else f"`{f.location}`")
            + f" ({f.phase.replace('_', ' ')})"
            + (f"; also at {', '.join(f'`{a}`' for a in f.also)}" if f.also else ""),
            f"- error: `{f.error}`" if f.error else "- error: -",
            f"- why: {f.why}", f"- hint: {f.hint}", "",
            *_details("the engine's code", ["```python", f.code, "```"])]


def _rules_absent(result: ScanResult) -> list[str]:
    absent = absent_rules(result)
    return ["Not in this release (no code of that shape): " + ", ".join(f"{r.title} (`{r.id}`)" for r in absent),
            ""] if absent else []


def _candidates(result: ScanResult) -> list[str]:
    if not result.candidates:
        return []
    return ["## Unclassified candidate gates", ""] + _details(
        f"{len(result.candidates)} raises on the method's path that no rule names",
        ["| where | raises | why |", "|---|---|---|",
         *[f"| `{c.location}` | {_cell(c.error or '-')} | {_cell(c.why)} |" for c in result.candidates]])


def _landscape(land: Landscape, folded: bool) -> list[str]:
    """The method's landscape: with a launch it is background, folded, so that the report pastes into an issue."""
    if no_contract(land):
        return [f"## {land.method} landscape", "", no_contract(land), ""]
    rows = registered(land)
    out = [f"## {land.method} landscape", "",
           f"{land.contract} in this release: {', '.join(f'`{m}`' for m in land.contract_members) or '-'}", "",
           f"- registered architectures that satisfy it: **{len(rows)}** of {len(land.architectures)}",
           f"- classes in the tree that do: **{len(land.conforming_classes)}**; "
           f"`grep '{land.grep_pattern}'` finds {len(land.grep_classes)} classes",
           f"- unknown: {len(land.unknown_classes)}", ""]
    table = ["| architecture | class | where |", "|---|---|---|",
             *[f"| {a.architecture} | `{a.module}.{a.class_name}` | `{a.file}:{a.line}` |" for a in rows]]
    out += _details("The registered architectures that satisfy it", table) if folded else table + [""]
    return out + _details("Every conforming class", [f"- `{q}`" for q in land.conforming_classes])


def _root(root: RootCause | None, agreement: Agreement | None) -> list[str]:
    """A failed launch's root cause, and the scan's prediction against it."""
    out = []
    if root is not None:
        first, *rest = root_lines(root)
        out += ["## Root cause of the failed launch", "", f"`{first}`", ""] + [f"- {line.strip()}" for line in rest] + [""]
    if agreement is not None:
        out += ["## Prediction against outcome", "", f"- predicted: {agreement.predicted}",
                f"- outcome: {agreement.outcome}", f"- **{agreement.line}**", ""]
    if agreement is not None and agreement.bug_report:
        out += _details("A finding about specaudit: paste it into a bug report", [agreement.bug_report])
    return out


def _cause(cause: SignatureMatch) -> list[str]:
    """The gate, hint and log context of a matched crash line, as explain and smoke reports show them."""
    return [f"- gate: `{cause.gate}`" if cause.gate else "- gate: none on the EAGLE-3 path",
            f"- hint: {cause.hint}", "", "```", *cause.context, "```"]


def _crash(result: SmokeResult) -> list[str]:
    """The smoke launch's first fatal line with its context, else the log's last lines when it failed."""
    cause = result.cause
    if cause:
        return ["", f"## Crash: {cause.title} (`{cause.signature}`), log line {cause.line_number}", "", *_cause(cause)]
    if result.last_lines and result.verdict == SmokeVerdict.FAILED:
        return ["", "## Last lines of the log", "", "```", *result.last_lines, "```"]
    return []


def _provenance(p: Provenance | None) -> list[str]:
    return ["", f"_{provenance_line(p)}_"] if p else []

