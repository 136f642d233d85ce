"""Stage 6: render a ScanResult: the terminal (rich), markdown, HTML and JSON. Renders only; computes nothing."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .cache import slug
from .errors import SpecauditError
from .outcome import Agreement, Explanation, RootCause, SignatureMatch, SmokeResult
from .result import Comparison, ScanResult
from .tracebacks import Crash, package_path
from .types import Finding, SmokeVerdict, Status, Verdict

if TYPE_CHECKING:
    from .matrix import Cell, Matrix

FORMATS = ("json", "md", "html")
SCAN_FORMATS = (*FORMATS, "sarif")  # SARIF holds code locations: a scan's, not a launch's
_STYLE = {Verdict.READY: "bold green", Verdict.BLOCKED: "bold red", Verdict.UNKNOWN: "bold yellow",
          Verdict.LANDSCAPE: "bold cyan", SmokeVerdict.PASSED: "bold green", SmokeVerdict.FLAGGED: "bold yellow",
          SmokeVerdict.FAILED: "bold red", SmokeVerdict.UNREACHABLE: "bold red", SmokeVerdict.INTERRUPTED: "bold yellow"}
_MARK = {Status.BLOCKS: "✗", Status.PASSES: "✓", Status.UNKNOWN: "?", Status.NOT_APPLICABLE: "–",
         Status.UNCLASSIFIED: "•", Status.UNDECIDED: "~"}
LANDSCAPE_ROWS = 60  # the terminal lists this many EAGLE-3 architectures; files list them all


Report = "ScanResult | Comparison | Explanation | SmokeResult | Matrix"


def report_name(report: Report) -> str:
    from .matrix import Matrix

    if isinstance(report, Matrix):
        targets = "-".join(slug(t) for t in report.targets)
        return f"matrix-{targets}-{slug(report.releases[0])}-to-{slug(report.releases[-1])}"
    if isinstance(report, SmokeResult):
        stamp = re.sub(r"[^0-9T]", "", report.started)[:15]
        return f"smoke-{slug(report.host)}-{report.engine}-{slug(Path(report.target or '').name or 'launch')}-{stamp}"
    if isinstance(report, Explanation):
        return "explain-" + slug(Path(report.log).name)
    results = report.results if isinstance(report, Comparison) else [report]
    launch = results[0].launch
    target = launch.target if launch else "landscape"
    name = slug(Path(target).name or target)
    trees = "-".join(f"{r.tree.engine}-{r.tree.version}" for r in results)
    return f"scan-{trees}-{name}"


def check_out_dir(out_dir: Path) -> None:
    """The reports' directory exists (created if need be) and is writable: checked before the work, so a scan is
    not done for nothing."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecauditError(f"--out {out_dir}: cannot create it ({exc.strerror})") from None
    if not out_dir.is_dir() or not os.access(out_dir, os.W_OK | os.X_OK):
        raise SpecauditError(f"--out {out_dir}: not a writable directory")


def write_report(report: Report, fmt: str, out_dir: Path) -> Path:
    check_out_dir(out_dir)
    path = out_dir / f"{report_name(report)}.{fmt}"
    from .sarif import to_sarif

    render = {"json": to_json, "md": to_markdown, "html": to_html, "sarif": to_sarif}[fmt]
    # A report is shared and committed: paths under the home directory are written as a user writes them.
    text = render(report).replace(str(Path.home()).rstrip("/") + "/", "~/")
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SpecauditError(f"{path}: cannot write the report ({exc.strerror})") from None
    return path


def to_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, sort_keys=False) + "\n"


def print_report(report: ScanResult | Comparison, console: Console) -> None:
    if isinstance(report, ScanResult):
        print_terminal(report, console)
        return
    table = Table(title="side by side", title_justify="left", show_lines=True)
    table.add_column("")
    for column in report.columns:
        table.add_column(column, overflow="fold")
    table.add_row("verdict", *[Text(r.verdict, style=_STYLE[r.verdict]) for r in report.results])
    for phase, cells in report.rows():
        table.add_row(phase.replace("_", " "), *["\n".join(_gate_lines(cell)) or "-" for cell in cells])
    console.print(table)
    for result in report.results:
        console.rule(f"{result.tree.engine} {result.tree.version}")
        print_terminal(result, console)


# -- terminal ----------------------------------------------------------------------------------------


def print_terminal(result: ScanResult, console: Console) -> None:
    tree, launch = result.tree, result.launch
    console.print(f"[bold]specaudit scan[/]  {tree.engine} {tree.version}  [dim]{tree.root}[/]  ({tree.origin})")
    if launch:
        console.print(f"target [bold]{launch.target}[/] ({launch.source}): "
                      f"architectures {', '.join(launch.architectures) or '-'}, "
                      f"text model type {launch.text_model_type or '-'}; method {launch.method}"
                      + (f", drafter {launch.draft}" if launch.draft else ""))
        for note in launch.notes:
            console.print(Text(f"note: {note}", style="yellow"))
        console.print(Text(f"\n{result.verdict}", style=_STYLE[result.verdict]) +
                      Text(f"  {_summary(result)}"))
        for number, finding in enumerate(result.blocking, 1):
            console.print(_finding_panel(finding, number))
        others = [f for f in result.findings if f.status != Status.BLOCKS]
        if others:
            table = Table(title="other gates on the path", show_lines=False, title_justify="left")
            for column in ("", "gate", "where", "why"):
                table.add_column(column, overflow="fold")
            for f in others:
                table.add_row(_MARK[f.status], f.title, f.location, f"{f.status}: {f.why}")
            console.print(table)
    _print_rules_absent(result, console)
    _print_candidates(result, console)
    _print_landscape(result, console, full=launch is None)
    if result.skipped:
        console.print(f"[yellow]skipped {len(result.skipped)} file(s) it could not read:[/] " +
                      "; ".join(f"{p} ({why})" for p, why in result.skipped.items()))
    console.print(Text(path_line(result), style="dim"))
    console.print(Text(platform_line(result), style="dim"))
    console.print(Text(provenance_line(result), style="dim"))
    console.print(f"[dim]{result.files_indexed} modules indexed in {result.seconds:.2f} s[/]")


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
    return Panel(body, title=f"[bold red]{number}. {f.title}[/]  [dim]{f.rule_id}[/]", title_align="left")


def _print_rules_absent(result: ScanResult, console: Console) -> None:
    absent = [r for r in result.rules if r.sites == 0 and r.phase != "candidate"]
    if absent:
        console.print("[dim]not in this release (no code of that shape): " +
                      ", ".join(f"{r.title} ({r.id})" for r in absent) + "[/]")


def _print_candidates(result: ScanResult, console: Console) -> None:
    if not result.candidates:
        return
    table = Table(title="unclassified candidate gates (no rule names them yet)", title_justify="left")
    for column in ("where", "raises", "why"):
        table.add_column(column, overflow="fold")
    for c in result.candidates:
        table.add_row(c.location, c.error or "-", c.why)
    console.print(table)


def _print_landscape(result: ScanResult, console: Console, full: bool) -> None:
    land = result.landscape
    registered = [a for a in land.architectures if a.eagle3]
    console.print(f"\n[bold]EAGLE-3 landscape[/]: {land.contract} in this release: "
                  f"{', '.join(land.contract_members) or 'none found'}")
    console.print(f"  {len(registered)} of {len(land.architectures)} registered architectures satisfy it; "
                  f"{len(land.eagle3_classes)} classes in the tree do, where `grep '{land.grep_pattern}'` finds "
                  f"{len(land.grep_classes)} classes"
                  + (f"; {len(land.eagle3_unknown)} unknown" if land.eagle3_unknown else ""))
    if not full:
        return
    table = Table(title=f"registered architectures that satisfy {land.contract}", title_justify="left")
    for column in ("architecture", "class", "where"):
        table.add_column(column, overflow="fold")
    for row in registered[:LANDSCAPE_ROWS]:
        table.add_row(row.architecture, row.class_name, f"{row.file}:{row.line}")
    console.print(table)
    if len(registered) > LANDSCAPE_ROWS:
        console.print(f"  ... and {len(registered) - LANDSCAPE_ROWS} more (--format md|html|json lists all)")
    for qualname in land.eagle3_unknown:
        reason = next((a.eagle3_reason for a in land.architectures if f"{a.module}.{a.class_name}" == qualname), "")
        console.print(f"  [yellow]?[/] {qualname} {reason}")


_SEVERITY = (Status.BLOCKS, Status.UNKNOWN, Status.UNDECIDED, Status.PASSES, Status.NOT_APPLICABLE, Status.UNCLASSIFIED)


def _gate_lines(findings: list[Finding]) -> list[str]:
    """One line per gate of a comparison cell: a rule with several sites shows its worst outcome and a tally."""
    by_rule: dict[str, list[Finding]] = {}
    for finding in findings:
        by_rule.setdefault(finding.rule_id, []).append(finding)
    lines = []
    for group in by_rule.values():
        worst = min(group, key=lambda f: _SEVERITY.index(f.status))
        tally = ""
        if len(group) > 1:
            counts = {s: sum(f.status == s for f in group) for s in _SEVERITY}
            tally = " (" + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ")"
        lines.append(f"{_MARK[worst.status]} {worst.title}{tally}")
    return lines


def _summary(result: ScanResult) -> str:
    blocking = result.blocking
    if result.verdict == Verdict.BLOCKED:
        return f"{len(blocking)} gate(s) would stop this launch, in the order it meets them"
    if result.verdict == Verdict.UNKNOWN:
        return "no gate blocks, but some could not be decided"
    return "no gate on the EAGLE-3 path stops this launch"


# -- markdown ----------------------------------------------------------------------------------------


def to_markdown(report: Report) -> str:
    from .matrix import Matrix

    if isinstance(report, Matrix):
        return _matrix_markdown(report)
    if isinstance(report, SmokeResult):
        return _smoke_markdown(report)
    if isinstance(report, Explanation):
        return _explanation_markdown(report)
    if isinstance(report, ScanResult):
        return _markdown(report)
    out = [f"# specaudit scan: {' | '.join(report.columns)}", "",
           "| | " + " | ".join(report.columns) + " |", "|---|" + "---|" * len(report.columns),
           "| verdict | " + " | ".join(f"**{r.verdict}**" for r in report.results) + " |"]
    for phase, cells in report.rows():
        out.append(f"| {phase.replace('_', ' ')} | " + " | ".join(
            "<br>".join(_cell(line) for line in _gate_lines(cell)) or "-" for cell in cells) + " |")
    out.append("")
    for result in report.results:
        # each release's own report, one heading level down
        out += [re.sub(r"^#", "##", line) for line in _markdown(result).splitlines()] + [""]
    return "\n".join(out)


def path_line(result: ScanResult) -> str:
    """How the EAGLE-3 path was traced, in one line: the runner and why, what was followed and decided."""
    path = result.path
    found = [e for e in path.entries if e.function]
    missing = [e.role for e in path.entries if not e.function]
    decided = ", ".join(f"{n} {status}" for status, n in path.decided.items())
    text = (f"EAGLE-3 path: {path.runner_reason}; {path.functions} functions traced from {len(found)} entry points"
            f" ({path.obligations} raises, asserts and reads of the target{': ' + decided if decided else ''})")
    return text + (f"; not in this tree: {', '.join(missing)}" if missing else "")


def source_link(result: ScanResult, finding: Finding) -> str | None:
    """The finding's line in the engine's public repository, at the release's tag (a link; nothing is fetched)."""
    from .engines import ENGINES

    engine = ENGINES.get(result.tree.engine)
    return engine.source_link(result.tree.version, finding.file, finding.line) if engine else None


def provenance_line(result: ScanResult) -> str:
    """Where the report comes from, in one line: specaudit, the command, the time, and what the tree had in it."""
    p = result.provenance
    if p is None:
        return ""
    text = f"made by specaudit {p.specaudit} ({p.command}) at {p.time}; the release from {p.source}"
    if p.bundles:
        text += f"; bundles applied: {', '.join(p.bundles)}"
    if p.modified:
        shown = ", ".join(p.modified[:5]) + (f" and {len(p.modified) - 5} more" if len(p.modified) > 5 else "")
        text += f"; {len(p.modified)} file(s) read differ from the wheel's RECORD: {shown}"
    if p.in_memory:
        text += f"; read with edits in memory: {', '.join(p.in_memory)}"
    return text


def platform_line(result: ScanResult) -> str:
    """Which branch of the engine's platform dispatches the verdict read."""
    branches = result.tree.platform_branches
    shown = "; ".join(branches[:3]) + (f"; and {len(branches) - 3} more" if len(branches) > 3 else "")
    return (f"platform {result.tree.platform} (--platform):"
            + (f" {len(branches)} platform dispatches followed: {shown}" if branches else " no platform dispatch read"))


def _markdown(result: ScanResult) -> str:
    tree, launch, land = result.tree, result.launch, result.landscape
    out = [f"# specaudit scan: {tree.engine} {tree.version}", "",
           f"- tree: `{tree.root}` ({tree.origin})"]
    if launch:
        out += [f"- target: **{launch.target}** ({launch.source}); architectures {', '.join(launch.architectures) or '-'}; "
                f"text model type `{launch.text_model_type}`; method `{launch.method}`"
                + (f"; drafter `{launch.draft}`" if launch.draft else ""),
                *[f"- note: {note}" for note in launch.notes],
                "", f"## Verdict: {result.verdict}", "", _summary(result), ""]
        for number, f in enumerate(result.blocking, 1):
            link = source_link(result, f)
            out += [f"### {number}. {f.title} (`{f.rule_id}`)", "",
                    "- where: " + (f"[`{f.location}`]({link})" if link else f"`{f.location}`")
                    + f" ({f.phase.replace('_', ' ')})"
                    + (f"; also at {', '.join(f'`{a}`' for a in f.also)}" if f.also else ""),
                    f"- error: `{f.error}`" if f.error else "- error: -",
                    f"- why: {f.why}", f"- hint: {f.hint}", "",
                    *_details("the engine's code", ["```python", f.code, "```"])]
        others = [f for f in result.findings if f.status != Status.BLOCKS]
        if others:
            out += ["## Other gates on the path", "", "| | gate | where | status | why |", "|---|---|---|---|---|"]
            out += [f"| {_MARK[f.status]} | {f.title} | `{f.location}` | {f.status} | {_cell(f.why)} |" for f in others]
            out.append("")
    absent = [r for r in result.rules if r.sites == 0 and r.phase != "candidate"]
    if absent:
        out += ["Not in this release (no code of that shape): " + ", ".join(f"{r.title} (`{r.id}`)" for r in absent), ""]
    if result.candidates:
        out += ["## Unclassified candidate gates", ""]
        out += _details(f"{len(result.candidates)} raises on the EAGLE-3 path that no rule names",
                        ["| where | raises | why |", "|---|---|---|",
                         *[f"| `{c.location}` | {_cell(c.error or '-')} | {_cell(c.why)} |" for c in result.candidates]])
    registered = [a for a in land.architectures if a.eagle3]
    out += ["## EAGLE-3 landscape", "",
            f"{land.contract} in this release: {', '.join(f'`{m}`' for m in land.contract_members) or '-'}", "",
            f"- registered architectures that satisfy it: **{len(registered)}** of {len(land.architectures)}",
            f"- classes in the tree that do: **{len(land.eagle3_classes)}**; "
            f"`grep '{land.grep_pattern}'` finds {len(land.grep_classes)} classes",
            f"- unknown: {len(land.eagle3_unknown)}", ""]
    table = ["| architecture | class | where |", "|---|---|---|",
             *[f"| {a.architecture} | `{a.module}.{a.class_name}` | `{a.file}:{a.line}` |" for a in registered]]
    # With a launch the landscape is background: folded, so that the report pastes into an issue.
    out += _details("The registered architectures that satisfy it", table) if launch else table + [""]
    out += _details("Every conforming class", [f"- `{q}`" for q in land.eagle3_classes])
    if result.skipped:
        out += ["## Skipped files", ""] + [f"- `{p}`: {why}" for p, why in result.skipped.items()] + [""]
    out.append(f"_{path_line(result)}_")
    out.append("")
    out.append(f"_{platform_line(result)}_")
    out.append("")
    out.append(f"_{result.files_indexed} modules indexed in {result.seconds:.2f} s._")
    out += ["", f"_{provenance_line(result)}_"]
    return "\n".join(out) + "\n"


def _details(summary: str, lines: list[str]) -> list[str]:
    """Markdown folded under a summary (GitHub renders <details>): long evidence stays one click away."""
    return [f"<details><summary>{summary}</summary>", "", *lines, "", "</details>", ""]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# -- html --------------------------------------------------------------------------------------------


def to_html(report: Report) -> str:
    from jinja2 import Environment, PackageLoader, select_autoescape

    from .matrix import Matrix

    env = Environment(loader=PackageLoader("specaudit", "templates"), autoescape=select_autoescape(["html"]))
    if isinstance(report, Matrix):
        return env.get_template("matrix.html").render(m=report, cell_line=cell_line,
                                                      provenance=matrix_provenance(report))
    if isinstance(report, SmokeResult):
        return env.get_template("smoke.html").render(r=report, rows=smoke_rows(report), spans=timeline_spans(report),
                                                     root_lines=root_lines,
                                                     root=report.root, agreement=report.agreement)
    if isinstance(report, Explanation):
        return env.get_template("explain.html").render(e=report, root_lines=root_lines, root=report.root,
                                                       agreement=None, no_signature=_no_signature(report))
    comparison = report if isinstance(report, Comparison) else None
    results = report.results if comparison else [report]
    return env.get_template("scan.html").render(results=results, comparison=comparison, marks=_MARK,
                                                summary=_summary, gate_lines=_gate_lines, Status=Status,
                                                path_line=path_line, platform_line=platform_line,
                                                provenance_line=provenance_line, source_link=source_link)


# -- matrix ----------------------------------------------------------------------------------------------


def cell_line(cell: Cell) -> str:
    """A matrix cell in one line: the verdict, the first gate that blocks, and the verdict patched."""
    text = cell.verdict
    if cell.blocking:
        more = f" +{len(cell.blocking) - 1}" if len(cell.blocking) > 1 else ""
        text += f": {cell.blocking[0].title}{more}"
    if cell.patched:
        text += f"; patched: {cell.patched}"
    return text


def answer_lines(matrix: Matrix) -> list[str]:
    """The answers above the grid, as lines every format prints."""
    lines = []
    for answer in matrix.answers:
        lines.append(f"{answer.target}: works unpatched from {', '.join(answer.works_from)}" if answer.works_from
                     else f"{answer.target}: no release of the range works unpatched")
        lines += [f"  {release}: {remedy}" for release, remedy in answer.remedies.items()]
    return lines


def print_matrix(matrix: Matrix, console: Console) -> None:
    console.print(f"[bold]specaudit matrix[/]  {len(matrix.targets)} target(s) x {len(matrix.releases)} release(s)")
    for line in answer_lines(matrix):
        console.print(Text(line, style="" if line.startswith(" ") else "bold"))
    table = Table(show_lines=True)
    table.add_column("release")
    for target in matrix.targets:
        table.add_column(target, overflow="fold")
    for release in matrix.releases:
        cells = [matrix.cell(t, release) for t in matrix.targets]
        table.add_row(release, *[Text(cell_line(c), style=_STYLE[c.verdict].replace("bold ", "")) for c in cells])
    console.print(table)


def _matrix_markdown(matrix: Matrix) -> str:
    out = [f"# specaudit matrix: {', '.join(matrix.targets)}", ""]
    for answer in matrix.answers:
        out.append(f"- **{answer.target}**: " + (f"works unpatched from **{', '.join(answer.works_from)}**"
                                                 if answer.works_from
                                                 else "no release of the range works unpatched"))
        out += [f"  - {release}: {remedy}" for release, remedy in answer.remedies.items()]
    out += ["", "| release | " + " | ".join(matrix.targets) + " |", "|---|" + "---|" * len(matrix.targets)]
    for release in matrix.releases:
        out.append(f"| {release} | " + " | ".join(_cell(cell_line(matrix.cell(t, release)))
                                                  for t in matrix.targets) + " |")
    blocked = [c for c in matrix.cells if c.blocking]
    if blocked:
        out += [""] + _details("The gates of each blocked cell", [
            f"- {c.target} on {c.release}: " + "; ".join(f"{g.title} (`{g.location}`)" for g in c.blocking)
            for c in blocked])
    for line in matrix_provenance(matrix):
        out += [f"_{line}_", ""]
    return "\n".join(out)


def matrix_provenance(matrix: Matrix) -> list[str]:
    """Each release's provenance line (where it came from, what was changed in it), once per release."""
    lines: dict[str, str] = {}
    for result in matrix.results:
        lines.setdefault(f"{result.tree.engine} {result.tree.version}", provenance_line(result))
    return [f"{release}: {line}" for release, line in lines.items() if line]


# -- patch status ------------------------------------------------------------------------------------------


def print_patch_status(tree, state, rows, console: Console) -> None:
    console.print(f"[bold]specaudit patch --status[/]  {tree.label}  [dim]{tree.root}[/]")
    if state["bundles"]:
        for bundle, info in sorted(state["bundles"].items()):
            console.print(f"applied: [bold]{bundle}[/] ({', '.join(info['changes'])})")
    else:
        console.print("no bundle applied")
    if not rows:
        console.print("every file is as the wheel installed it (RECORD hashes match)")
        return
    table = Table(title="files that differ from the wheel", title_justify="left")
    for column in ("file", "state", "bundle", ""):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row.relpath, row.state, row.bundle or "-", row.detail)
    console.print(table)


# -- explain -----------------------------------------------------------------------------------------------


def _cause_gate_and_hint(cause: SignatureMatch) -> list[Text]:
    return [Text.assemble(("gate   ", "bold"), cause.gate or "- (not a gate of the EAGLE-3 path)"),
            Text.assemble(("hint   ", "bold"), (cause.hint, "green"))]


def _cause_markdown(cause: SignatureMatch) -> list[str]:
    """The gate, hint and log context of a matched crash line, as explain and smoke reports show them."""
    return [f"- gate: `{cause.gate}`" if cause.gate else "- gate: none on the EAGLE-3 path",
            f"- hint: {cause.hint}", "", "```", *cause.context, "```"]


def crash_lines(crash: Crash) -> list[str]:
    """The root cause a log's tracebacks show, as lines every format prints: the exception, where it was raised,
    and the calls that led there, nearest first."""
    where = f"line {crash.line_number}" + (f", {crash.process}" if crash.process else "")
    lines = [f"{crash.text}  ({where})"]
    if crash.frames:
        last = crash.frames[-1]
        lines.append(f"raised in {last.function} at {package_path(last.file)}:{last.line}")
        lines += [f"  called from {f.function} at {package_path(f.file)}:{f.line}" for f in reversed(crash.frames[-6:-1])]
    return lines


def root_lines(root: RootCause) -> list[str]:
    """A failed launch's root cause as lines every format prints: what and where, how it was classified, and the
    calls that led there, nearest first."""
    how = f"classified by {root.by}"
    if root.gate:
        how += f": gate {root.gate.rule_id} ({root.gate.location})"
    elif root.signature:
        how += f": {root.signature.signature}" + (f", gate {root.signature.gate}" if root.signature.gate else "")
    return [root.summary, how, *(crash_lines(root.crash) if root.crash else [])]


def _print_root(root: RootCause | None, agreement: Agreement | None, console: Console) -> None:
    if root is not None:
        first, *rest = root_lines(root)
        console.print(Panel(Group(Text(first, style="red"), Text("\n".join(rest), style="dim")),
                            title="[bold red]root cause of the failed launch[/]", title_align="left"))
    if agreement is not None:
        style = {True: "green", False: "bold red", None: "dim"}[agreement.agrees]
        console.print(Text(agreement.line, style=style))
        if agreement.bug_report:
            console.print(Panel(Text(agreement.bug_report), title="a finding about specaudit: paste it into a bug "
                                                                   "report", title_align="left"))


def _root_markdown(root: RootCause | None, agreement: Agreement | None) -> list[str]:
    out = []
    if root is not None:
        first, *rest = root_lines(root)
        out += ["## Root cause of the failed launch", "", f"`{first}`", ""] + [f"- {line.strip()}" for line in rest] + [""]
    if agreement is not None:
        out += ["## Prediction against outcome", "", f"- predicted: {agreement.predicted}",
                f"- outcome: {agreement.outcome}", f"- **{agreement.line}**", ""]
        if agreement.bug_report:
            out += ["<details><summary>A finding about specaudit: paste it into a bug report</summary>", "",
                    agreement.bug_report, "", "</details>", ""]
    return out


def _no_signature(explanation: Explanation) -> str:
    return "No text signature matches a line of this log" + ("; the root cause above is read from its traceback"
                                                             if explanation.root else "")


def print_explanation(explanation: Explanation, console: Console) -> None:
    console.print(f"[bold]specaudit explain[/]  {explanation.log}  ({explanation.lines} lines)")
    _print_root(explanation.root, None, console)
    if explanation.scanned:
        console.print(Text(f"held against the scan of {explanation.scanned}", style="dim"))
    cause = explanation.cause
    if cause is None:
        console.print(_no_signature(explanation))
    else:
        body = Group(
            Text.assemble(("line   ", "bold"), str(cause.line_number), ("  " + cause.signature, "dim")),
            Text("\n".join(cause.context), style="dim"),
            Text.assemble(("error  ", "bold"), (cause.line.strip(), "red")),
            *_cause_gate_and_hint(cause),
        )
        console.print(Panel(body, title=f"[bold red]root cause: {cause.title}[/]", title_align="left"))
    others = [m for m in explanation.matches if m is not cause]
    if others:
        table = Table(title="other known lines", title_justify="left")
        for column in ("line", "signature", "text"):
            table.add_column(column, overflow="fold")
        for match in others:
            table.add_row(str(match.line_number), match.title + ("" if match.root else " (a consequence)"),
                          match.line.strip())
        console.print(table)


def _explanation_markdown(explanation: Explanation) -> str:
    out = [f"# specaudit explain: `{explanation.log}`", "", f"{explanation.lines} lines.", ""]
    out += _root_markdown(explanation.root, None)
    if explanation.scanned:
        out += [f"Held against the scan of {explanation.scanned}.", ""]
    cause = explanation.cause
    if cause is None:
        out.append(_no_signature(explanation) + ".")
    else:
        out += [f"## Root cause: {cause.title} (`{cause.signature}`)", "",
                f"- line {cause.line_number}: `{cause.line.strip()}`", *_cause_markdown(cause)]
    others = [m for m in explanation.matches if m is not cause]
    if others:
        out += ["", "## Other known lines", "", "| line | signature | text |", "|---|---|---|"]
        out += [f"| {m.line_number} | {m.title} | `{_cell(m.line.strip())}` |" for m in others]
    return "\n".join(out) + "\n"


# -- smoke -------------------------------------------------------------------------------------------------


def timeline_spans(result: SmokeResult) -> list[tuple[str, float, float]]:
    """The timeline as phases in the order they began: each from its first event to the next phase's first."""
    starts: list[tuple[str, float]] = []
    for event in result.timeline:
        if not starts or starts[-1][0] != event.phase:
            starts.append((event.phase, event.seconds))
    ends = [start for _, start in starts[1:]] + [max(result.seconds, starts[-1][1]) if starts else 0.0]
    return [(phase, start, end) for (phase, start), end in zip(starts, ends)]


def smoke_rows(result: SmokeResult) -> list[tuple[str, str]]:
    """The figures of a smoke run as (label, value) rows, shared by every format."""
    rows = []
    pre = result.preflight
    if pre:
        rows += [("node", f"{pre.hostname}: {pre.python}"), ("engine", f"{pre.engine} at {pre.engine_root}")]
        if pre.modified_files:
            rows.append(("engine files changed since install", ", ".join(pre.modified_files[:8])
                         + (f" and {len(pre.modified_files) - 8} more" if len(pre.modified_files) > 8 else "")))
        rows += [("model", line) for line in pre.models]
        rows.append(("GPUs", "; ".join(f"{g['index']} {g['name']}: {g['memory_free_mib']} of {g['memory_total_mib']} MiB "
                                       "free" for g in pre.gpus) if pre.nvidia_smi else "no nvidia-smi on the node"))
        if pre.gpu_processes:
            rows.append(("GPU processes before launch", "; ".join(f"pid {p['pid']} {p['process_name']} "
                                                                  f"({p['used_memory_mib']} MiB)" for p in pre.gpu_processes)))
    if result.scan:
        rows.append(("static scan", f"{result.scan.verdict}" + "".join(f"; blocked by {f.title} ({f.location})"
                                                                      for f in result.scan.blocking)))
    if result.engine_exit is not None:
        rows.append(("engine exit status", str(result.engine_exit)))
    fig = result.acceptance
    if fig:
        rows += [("drafts / drafted / accepted tokens", f"{_num(fig.drafts)} / {_num(fig.draft_tokens)} / "
                                                        f"{_num(fig.accepted_tokens)}"),
                 ("acceptance rate", _num(fig.acceptance_rate, 3)),
                 ("mean acceptance length", _num(fig.mean_acceptance_length, 2)),
                 ("acceptance per position", ", ".join(f"{p:.3f}" for p in fig.per_position) or "-")]
        rows += [("flag", flag) for flag in fig.flags]
    if result.lossless:
        rows.append(("lossless", f"identical on {result.lossless.compared} prompts" if result.lossless.identical
                     else "; ".join(result.lossless.differences)))
    rows += [("log", log) for log in result.logs]
    return rows


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_smoke(result: SmokeResult, console: Console) -> None:
    console.print(Text.assemble(("specaudit smoke", "bold"), f"  {result.host}  {result.engine}  {result.started}  "
                                                             f"({result.seconds:.1f} s)"))
    console.print(Text(result.verdict, style=_STYLE[result.verdict]) + Text(f"  {result.reason}"))
    _print_root(result.root, result.agreement, console)
    cause = result.cause
    if cause:
        body = Group(Text("\n".join(cause.context), style="dim"), *_cause_gate_and_hint(cause))
        console.print(Panel(body, title=f"[bold red]{cause.title}[/] (log line {cause.line_number})", title_align="left"))
    elif result.last_lines and result.verdict == SmokeVerdict.FAILED:
        console.print(Panel(Text("\n".join(result.last_lines[-12:]), style="dim"), title="last lines of the log",
                            title_align="left"))
    table = Table(show_header=False, box=None)
    for label, value in smoke_rows(result):
        table.add_row(Text(label, style="bold"), Text(value, style="yellow" if label == "flag" else ""))
    console.print(table)
    wrong = [a for a in result.answers if not a.ok]
    for answer in wrong:
        console.print(Text.assemble(("wrong answer", "red"), f" to {answer.prompt!r}: {answer.problem}"))
    timeline = Table(title="timeline", title_justify="left", box=None)
    for column in ("s", "phase", ""):
        timeline.add_column(column, overflow="fold")
    for event in result.timeline:
        timeline.add_row(f"{event.seconds:.1f}", event.phase, Text(event.text))
    console.print(timeline)


def _smoke_markdown(result: SmokeResult) -> str:
    out = [f"# specaudit smoke: {result.host} ({result.engine})", "", f"Started {result.started}, {result.seconds:.1f} s.", "",
           f"## {result.verdict}", "", result.reason, "", *_root_markdown(result.root, result.agreement),
           "```", result.command_line, "```", "", "| | |", "|---|---|"]
    out += [f"| {label} | {_cell(value)} |" for label, value in smoke_rows(result)]
    cause = result.cause
    if cause:
        out += ["", f"## Crash: {cause.title} (`{cause.signature}`), log line {cause.line_number}", "",
                *_cause_markdown(cause)]
    elif result.last_lines and result.verdict == SmokeVerdict.FAILED:
        out += ["", "## Last lines of the log", "", "```", *result.last_lines, "```"]
    if result.answers:
        out += ["", "## Answers", "", "| prompt | ok | tokens | answer |", "|---|---|---|---|"]
        out += [f"| {_cell(a.prompt)} | {'yes' if a.ok else 'no: ' + _cell(a.problem)} | {_num(a.completion_tokens)} "
                f"| {_cell(a.text[:80])} |" for a in result.answers]
    out += ["", "## Timeline", "", "| s | phase | |", "|---|---|---|"]
    out += [f"| {e.seconds:.1f} | {e.phase} | {_cell(e.text)} |" for e in result.timeline]
    return "\n".join(out) + "\n"
