"""Stage 6: render a ScanResult: the terminal (rich), markdown, HTML and JSON. Renders only; computes nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rich.console import Console, Group
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from .gates import Finding, Status
from .result import ScanResult, Verdict

FORMATS = ("json", "md", "html")
_STYLE = {Verdict.READY: "bold green", Verdict.BLOCKED: "bold red", Verdict.UNKNOWN: "bold yellow",
          Verdict.LANDSCAPE: "bold cyan"}
_MARK = {Status.BLOCKS: "✗", Status.PASSES: "✓", Status.UNKNOWN: "?", Status.NOT_APPLICABLE: "–",
         Status.UNCLASSIFIED: "•"}
LANDSCAPE_ROWS = 60  # the terminal lists this many EAGLE-3 architectures; files list them all


def report_name(result: ScanResult) -> str:
    target = result.launch.target if result.launch else "landscape"
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(target).name or target).strip("-")
    return f"scan-{result.tree.engine}-{result.tree.version}-{slug}"


def write_report(result: ScanResult, fmt: str, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{report_name(result)}.{fmt}"
    render = {"json": to_json, "md": to_markdown, "html": to_html}[fmt]
    path.write_text(render(result), encoding="utf-8")
    return path


def to_json(result: ScanResult) -> str:
    return json.dumps(result.to_dict(), indent=2, sort_keys=False) + "\n"


# -- terminal ----------------------------------------------------------------------------------------


def print_terminal(result: ScanResult, console: Console) -> None:
    tree, launch = result.tree, result.launch
    console.print(f"[bold]specaudit scan[/]  {tree.engine} {tree.version}  [dim]{tree.root}[/]  ({tree.origin})")
    if launch:
        console.print(f"target [bold]{launch.target}[/] ({launch.source}): architectures {', '.join(launch.architectures) or '-'}, "
                      f"text model type {launch.text_model_type or '-'}; method {launch.method}"
                      + (f", drafter {launch.draft}" if launch.draft else ""))
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
                table.add_row(_MARK[f.status], f.title, f.location, f"[{f.status}] {f.why}")
            console.print(table)
    _print_rules_absent(result, console)
    _print_candidates(result, console)
    _print_landscape(result, console, full=launch is None)
    if result.skipped:
        console.print(f"[yellow]skipped {len(result.skipped)} unparsable file(s):[/] " +
                      "; ".join(f"{p} ({why})" for p, why in result.skipped.items()))
    console.print(f"[dim]{result.files_indexed} modules indexed in {result.seconds:.2f} s[/]")


def _finding_panel(f: Finding, number: int) -> Panel:
    body = Group(
        Text.assemble(("where  ", "bold"), f"{f.location}  ", ("(" + f.phase.replace("_", " ") + ")", "dim")),
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
    console.print(f"\n[bold]EAGLE-3 landscape[/]: SupportsEagle3 members in this release: "
                  f"{', '.join(land.eagle3_members) or 'no such protocol'}")
    console.print(f"  {len(registered)} of {len(land.architectures)} registered architectures satisfy SupportsEagle3; "
                  f"{len(land.eagle3_classes)} classes in the tree conform, where `grep SupportsEagle3` finds "
                  f"{len(land.grep_classes)} class statements"
                  + (f"; {len(land.eagle3_unknown)} unknown" if land.eagle3_unknown else ""))
    if not full:
        return
    table = Table(title="registered architectures that satisfy SupportsEagle3", title_justify="left")
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


def _summary(result: ScanResult) -> str:
    blocking = result.blocking
    if result.verdict == Verdict.BLOCKED:
        return f"{len(blocking)} gate(s) would stop this launch, in the order it meets them"
    if result.verdict == Verdict.UNKNOWN:
        return "no gate blocks, but some could not be decided"
    return "no gate on the EAGLE-3 path stops this launch"


# -- markdown ----------------------------------------------------------------------------------------


def to_markdown(result: ScanResult) -> str:
    tree, launch, land = result.tree, result.launch, result.landscape
    out = [f"# specaudit scan: {tree.engine} {tree.version}", "",
           f"- tree: `{tree.root}` ({tree.origin})"]
    if launch:
        out += [f"- target: **{launch.target}** ({launch.source}); architectures {', '.join(launch.architectures) or '-'}; "
                f"text model type `{launch.text_model_type}`; method `{launch.method}`"
                + (f"; drafter `{launch.draft}`" if launch.draft else ""),
                "", f"## Verdict: {result.verdict}", "", _summary(result), ""]
        for number, f in enumerate(result.blocking, 1):
            out += [f"### {number}. {f.title} (`{f.rule_id}`)", "",
                    f"- where: `{f.location}` ({f.phase.replace('_', ' ')})",
                    f"- error: `{f.error}`" if f.error else "- error: -",
                    f"- why: {f.why}", f"- hint: {f.hint}", "", "```python", f.code, "```", ""]
        others = [f for f in result.findings if f.status != Status.BLOCKS]
        if others:
            out += ["## Other gates on the path", "", "| | gate | where | status | why |", "|---|---|---|---|---|"]
            out += [f"| {_MARK[f.status]} | {f.title} | `{f.location}` | {f.status} | {_cell(f.why)} |" for f in others]
            out.append("")
    absent = [r for r in result.rules if r.sites == 0 and r.phase != "candidate"]
    if absent:
        out += ["Not in this release (no code of that shape): " + ", ".join(f"{r.title} (`{r.id}`)" for r in absent), ""]
    if result.candidates:
        out += ["## Unclassified candidate gates", "", "| where | raises | why |", "|---|---|---|"]
        out += [f"| `{c.location}` | {_cell(c.error or '-')} | {_cell(c.why)} |" for c in result.candidates]
        out.append("")
    registered = [a for a in land.architectures if a.eagle3]
    out += ["## EAGLE-3 landscape", "",
            f"SupportsEagle3 members in this release: {', '.join(f'`{m}`' for m in land.eagle3_members) or '-'}", "",
            f"- registered architectures satisfying SupportsEagle3: **{len(registered)}** of {len(land.architectures)}",
            f"- classes in the tree that conform: **{len(land.eagle3_classes)}**; "
            f"`grep SupportsEagle3` finds {len(land.grep_classes)} class statements",
            f"- unknown: {len(land.eagle3_unknown)}", "",
            "| architecture | class | where |", "|---|---|---|"]
    out += [f"| {a.architecture} | `{a.module}.{a.class_name}` | `{a.file}:{a.line}` |" for a in registered]
    out += ["", "<details><summary>Every conforming class</summary>", ""]
    out += [f"- `{q}`" for q in land.eagle3_classes]
    out += ["", "</details>", ""]
    if result.skipped:
        out += ["## Skipped files", ""] + [f"- `{p}`: {why}" for p, why in result.skipped.items()] + [""]
    out.append(f"_{result.files_indexed} modules indexed in {result.seconds:.2f} s._")
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# -- html --------------------------------------------------------------------------------------------


def to_html(result: ScanResult) -> str:
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("specaudit", "templates"), autoescape=select_autoescape(["html"]))
    template = env.get_template("scan.html")
    return template.render(r=result, marks=_MARK, summary=_summary(result), Status=Status)
