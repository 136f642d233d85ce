"""The words that every report format prints, made once from the result objects: a format lays them out, and none
words them its own way."""

from __future__ import annotations

import dataclasses
import re
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.types import ExitCode, Finding, Status, Verdict
from ..results.scan import ArchitectureRow, Landscape, Provenance, RuleStatus, ScanResult

# What only explain's and smoke's results hold is named for the type checker: a scan's report imports none of it
# (their 15 dataclasses and the traceback reader's patterns, ~0.05 s of a warm scan's imports).
if TYPE_CHECKING:
    from ..fleet.results import Difference, FleetResult, NodeAudit
    from ..launch.parallel import Arithmetic, Check
    from ..results.matrix import Cell, Matrix
    from ..results.outcome import (
        Acceptance,
        Crash,
        Explanation,
        Located,
        Lossless,
        Preflight,
        RootCause,
        SmokeNode,
        SmokeResult,
    )

T = TypeVar("T")
# C0 controls but tab and newline, DEL and C1: an escape sequence from a config, a METADATA or a log line (OSC 8
# hyperlinks, CSI colours, a carriage return that overwrites the line) never reaches a terminal or a document.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def without_controls(value: T) -> T:
    """A result with the control characters of every string it holds removed (what changes is a copy: results stay
    as computed)."""
    return _clean(value)


def _clean(value: Any) -> Any:
    """``value`` with its strings cleaned: the very object where nothing in it changes (most of a result)."""
    kind = _KINDS.get(type(value), _UNSEEN)
    if kind is _UNSEEN:
        kind = _KINDS[type(value)] = _kind(type(value))
    if kind is str:
        return _CONTROL.sub("", value) if _CONTROL.search(value) else value
    if kind is list:
        items = [_clean(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
    if kind is dict:
        pairs = [(_clean(k), _clean(v)) for k, v in value.items()]
        return value if all(k is a and v is b for (k, v), (a, b) in zip(pairs, value.items())) else dict(pairs)
    if kind is not None:
        fields = {name: getattr(value, name) for name in kind}
        cleaned = {name: _clean(field) for name, field in fields.items()}
        changed = {name: field for name, field in cleaned.items() if field is not fields[name]}
        return dataclasses.replace(value, **changed) if changed else value
    return value


_KINDS: dict[type, Any] = {}
_UNSEEN = object()


def _kind(kind: type) -> Any:
    """How ``_clean`` walks a value of this type: ``str``, ``list`` (a list or tuple), ``dict``, a dataclass's init
    fields, or None (left as it is: numbers, enums, None)."""
    if issubclass(kind, Enum):
        return None
    for walked, as_ in ((str, str), (list, list), (tuple, list), (dict, dict)):
        if issubclass(kind, walked):
            return as_
    if dataclasses.is_dataclass(kind):
        return tuple(f.name for f in dataclasses.fields(kind) if f.init)
    return None


MARK = {Status.BLOCKS: "✗", Status.PASSES: "✓", Status.UNKNOWN: "?", Status.NOT_APPLICABLE: "–",
        Status.UNCLASSIFIED: "•", Status.UNDECIDED: "~", Status.DEGRADES: "↓", Status.WARNS: "!"}
_SEVERITY = (Status.BLOCKS, Status.DEGRADES, Status.UNKNOWN, Status.WARNS, Status.UNDECIDED, Status.PASSES,
             Status.NOT_APPLICABLE, Status.UNCLASSIFIED)
# What a finding shown in full says beside its title, where it does not block: the launch runs, and how the drafter fares.
_RUNS = {Status.DEGRADES: " (runs; the drafter will not help)", Status.WARNS: " (runs; a warning: the drafter helps less)"}


# -- a scan ------------------------------------------------------------------------------------------------------


def summary(result: ScanResult) -> str:
    if result.verdict == Verdict.BLOCKED:
        return f"{len(result.blocking)} gate(s) would stop this launch, in the order it meets them"
    if result.verdict == Verdict.DEGRADED:
        undecided = sum(f.status == Status.UNKNOWN for f in result.findings)
        return (f"the launch will run, and the drafter will not help: {len(result.degrading)} finding(s) say why, with "
                "the fix" + (f" ({undecided} gate(s) could not be decided besides)" if undecided else "")
                + _warned(result))
    if result.verdict == Verdict.UNKNOWN:
        if result.method is not None and not result.method.modeled:
            return "no verdict for this method: specaudit does not model it, or cannot tell which the engine runs"
        return "no gate blocks, but some could not be decided" + _warned(result)
    return f"no gate on the {method_name(result)} path stops this launch" + _warned(result)


def _warned(result: ScanResult) -> str:
    count = len(result.warnings)
    return f"; {count} warning(s): the drafter helps, less than it could, on some requests" if count else ""


def runs_label(finding: Finding) -> str:
    """What a finding shown in full says beside its title: for one that does not block, that the launch runs and how
    the drafter fares ("" for a gate that blocks)."""
    return _RUNS.get(finding.status, "")


def method_name(result: ScanResult) -> str:
    return result.launch.method if result.launch and result.launch.method else "EAGLE-3"


def method_line(result: ScanResult) -> str:
    """The launch's method: as named, as the release resolves it and why, and whether specaudit models it."""
    m = result.method
    if m is None:
        return f"method {method_name(result)}"
    named = f"named {m.requested}" if m.requested else "named by none"
    how = f"; the release: {'; '.join(m.how)}" if m.how else ""
    if m.method is None:
        return f"method: cannot be told before launch ({named}{how})"
    modeled = "" if m.modeled else "; not modeled by specaudit"
    draft = f"; the draft: {m.draft}" if m.draft else ""
    warns = f"; the engine warns: {'; '.join(m.warnings)}" if m.warnings else ""
    return f"method {m.method} ({named}{how}{draft}{modeled}{warns})"


def known_lines(result: ScanResult) -> list[str]:
    """The known runtime failures of the launch's cell, one line each: not gates, crashes a thread reports."""
    return [f"known failure {k.id}: {k.title}. {k.hint}" for k in result.known_failures]


def shown_first(result: ScanResult) -> list[Finding]:
    """What each report shows in full, with its code and fix: the gates that block, then what degrades the drafter,
    then the warnings (what it loses on some requests)."""
    return result.blocking + result.degrading + result.warnings


def other_gates(result: ScanResult) -> list[Finding]:
    """The gates on the path that neither block, degrade nor warn: shown after those, in a table."""
    return [f for f in result.findings if f.status not in (Status.BLOCKS, Status.DEGRADES, Status.WARNS)]


def absent_rules(result: ScanResult) -> list[RuleStatus]:
    """The rules with no code of their shape in this release."""
    return [r for r in result.rules if r.sites == 0 and r.phase != "candidate"]


def no_contract(landscape: Landscape) -> str:
    """Why a method's landscape has nothing to count, where its file declares no target contract (MTP: the draft is
    the target's own layers, rewritten from its config); "" where it has one."""
    if landscape.contract or landscape.contract_members:
        return ""
    return (f"{landscape.method} landscape: specaudit declares no target-class contract for {landscape.method} "
            "(rules/methods/): no class of the tree is held against one")


def registered(landscape: Landscape) -> list[ArchitectureRow]:
    """The registered architectures that satisfy the method's target contract."""
    return [a for a in landscape.architectures if a.conforms]


def gate_lines(findings: list[Finding]) -> list[str]:
    """One line per gate of a comparison cell: a rule with several sites shows its worst outcome and a tally."""
    by_rule: dict[str, list[Finding]] = {}
    for finding in findings:
        by_rule.setdefault(finding.rule_id, []).append(finding)
    return [_gate_line(group) for group in by_rule.values()]


def _gate_line(group: list[Finding]) -> str:
    worst = min(group, key=lambda f: _SEVERITY.index(f.status))
    counts = {s: sum(f.status == s for f in group) for s in _SEVERITY}
    tally = " (" + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ")" if len(group) > 1 else ""
    return f"{MARK[worst.status]} {worst.title}{tally}"


def path_line(result: ScanResult) -> str:
    """How the method's path was traced, in one line: the runner and why, what was followed and decided."""
    path = result.path
    found = [e for e in path.entries if e.function]
    missing = [e.role for e in path.entries if not e.function]
    decided = ", ".join(f"{n} {status}" for status, n in path.decided.items())
    text = (f"{method_name(result)} path: {path.runner_reason}; {path.functions} functions traced from {len(found)} entry points"
            f" ({path.obligations} raises, asserts and reads of the target{': ' + decided if decided else ''})")
    return text + (f"; not in this tree: {', '.join(missing)}" if missing else "")


def platform_line(result: ScanResult) -> str:
    """Which branch of the engine's platform dispatches the verdict read."""
    branches = result.tree.platform_branches
    shown = "; ".join(branches[:3]) + (f"; and {len(branches) - 3} more" if len(branches) > 3 else "")
    return (f"platform {result.tree.platform} (--platform):"
            + (f" {len(branches)} platform dispatches followed: {shown}" if branches else " no platform dispatch read"))


def indexed_line(result: ScanResult) -> str:
    return f"{result.files_indexed} modules indexed in {result.seconds:.2f} s"


def source_link(result: ScanResult, finding: Finding) -> str | None:
    """The finding's line in the engine's public repository, at the release's tag (a link; nothing is fetched)."""
    from ..core.engines import ENGINES

    engine = ENGINES.get(result.tree.engine)
    return engine.source_link(result.tree.version, finding.file, finding.line) if engine else None


# -- where a report comes from -----------------------------------------------------------------------------------


def provenance_line(p: Provenance | None) -> str:
    """Where the report comes from, in one line: specaudit, the command, the time, and what the tree had in it."""
    if p is None:
        return ""
    text = f"made by specaudit {p.specaudit} ({p.command}) at {p.time}"
    text += f"; the release from {p.source}" if p.source else "; no release read"
    text += f"; bundles applied: {', '.join(p.bundles)}" if p.bundles else ""
    text += f"; {len(p.modified)} file(s) read differ from the wheel's RECORD: {_first(p.modified, 5)}" \
        if p.modified else ""
    text += f"; read with edits in memory: {', '.join(p.in_memory)}" if p.in_memory else ""
    return text + ("; a specaudit patch of the tree was under way, so what was read may be half written: scan again "
                   "once `specaudit patch --status` shows it done" if p.patching else "")


def release_provenance(results: list[ScanResult]) -> list[str]:
    """Each release's provenance line (where it came from, what was changed in it), once per release."""
    lines: dict[str, str] = {}
    for result in results:
        lines.setdefault(f"{result.tree.engine} {result.tree.version}", provenance_line(result.provenance))
    return [f"{release}: {line}" for release, line in lines.items() if line]


def _first(items: tuple[str, ...] | list[str], shown: int) -> str:
    return ", ".join(items[:shown]) + (f" and {len(items) - shown} more" if len(items) > shown else "")


# -- a matrix ----------------------------------------------------------------------------------------------------


def cell_line(cell: Cell) -> str:
    """A matrix cell in one line: the verdict, the first gate that blocks, and the verdict patched."""
    text = cell.verdict
    if cell.blocking:
        more = f" +{len(cell.blocking) - 1}" if len(cell.blocking) > 1 else ""
        text += f": {cell.blocking[0].title}{more}"
    return text + (f"; patched: {cell.patched}" if cell.patched else "")


def launches_line(matrix: Matrix) -> str:
    """Which launches the cells are: the method they name."""
    return f"launches of method {matrix.method}" if matrix.method else "launches naming no method (the engine infers it)"


def answer_lines(matrix: Matrix) -> list[str]:
    """The answers above the grid, as lines every format prints."""
    lines = []
    for answer in matrix.answers:
        lines.append(f"{answer.target}: works unpatched from {', '.join(answer.works_from)}" if answer.works_from
                     else f"{answer.target}: no release of the range works unpatched")
        lines += [f"  {release}: {remedy}" for release, remedy in answer.remedies.items()]
    return lines


# -- a launch's log ----------------------------------------------------------------------------------------------


def crash_lines(crash: Crash) -> list[str]:
    """The root cause a log's tracebacks show, as lines every format prints: the exception, where it was raised,
    and the calls that led there, nearest first."""
    from ..explain.tracebacks import package_path  # here: a scan's report reads no traceback

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
    return [root.summary, how, *(located_lines(root.located) if root.located else []),
            *(crash_lines(root.crash) if root.crash else [])]


def located_lines(found: Located) -> list[str]:
    """Where the message atlas finds the root line: its raise sites, the guard with the values the message
    printed, the fixes the guard names, and the releases the paste is consistent with."""
    lines = [f"made at {s.location} in {s.function} ({s.kind} {s.exception}; {s.engine} {s.releases})"
             for s in found.sites[:3]]
    if found.sites and found.sites[0].message and found.sites[0].message != found.text:  # its holes, as written
        lines.insert(1, f"message there: {found.sites[0].message}")
    if found.quoted_by is not None:
        lines.append(f"quoted by the wrapper at {found.quoted_by.location} in {found.quoted_by.function}")
    if found.quotes:
        lines.append(f"a wrapper: the failure it reports is {found.quotes}")
    guard = found.sites[0].guard
    values = ", ".join(f"{hole} = {value}" for hole, value in found.holes)
    if guard:
        lines.append(f"guard: {guard}" + (f", where {values}" if values else ""))
    elif values:  # the values the message printed (a hole the paste cut, said so), with no guard to show them in
        lines.append(f"its holes: {values}")
    lines += [f"fix: {fix}" for fix in found.fixes]
    both = "" if found.engine else " (both engines make this message)"
    return [*lines, f"consistent with {found.releases}{both}"]


def no_signature(explanation: Explanation) -> str:
    if explanation.exit_code == ExitCode.READY:  # neither a failure line nor a traceback: say so, not "no match"
        return "No sign of a failed launch or request in this log" + (
            "; the known lines below are not failures" if explanation.matches else "")
    return "No text signature matches a line of this log" + ("; the root cause above is read from its traceback"
                                                             if explanation.root else "")


# -- a smoke launch ----------------------------------------------------------------------------------------------


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
    rows = _preflight_rows(result.preflight)
    if result.scan:
        rows.append(("static scan", f"{result.scan.verdict}" + "".join(f"; blocked by {f.title} ({f.location})"
                                                                      for f in result.scan.blocking)))
    if result.engine_exit is not None:
        rows.append(("engine exit status", str(result.engine_exit)))
    return rows + _acceptance_rows(result.acceptance) + _lossless_rows(result.lossless) + [("log", log)
                                                                                          for log in result.logs]


NODE_COLUMNS = ("node", "role", "engine", "scan", "launch")


def smoke_node_rows(result: SmokeResult) -> list[tuple[str, str, str, str, str]]:
    """A multi-node smoke's nodes as rows of NODE_COLUMNS: each node's part, its preflight and what its launch did (the
    node whose log holds the root cause said so); none for a launch on one node."""
    return [(n.host, n.role, n.preflight.engine if n.preflight else "-",
             n.scan if n.scan.startswith(n.verdict) else f"{n.verdict}; scan {n.scan}",
             _node_launch(n, n.host == result.root_node)) for n in result.nodes]


def _node_launch(node: SmokeNode, root: bool) -> str:
    if not node.process_groups:
        return "not launched"
    groups = ", ".join(str(g) for g in node.process_groups)
    if node.root is not None:
        what = ("ROOT CAUSE: " if root else "failed after the root cause: ") + node.root.summary
    elif node.failed:
        what = f"exited with status {node.exit_status}"
    else:
        what = "ran until teardown"
    return f"process group {groups}: {what}" + "".join(f"; log {log}" for log in node.logs)


def smoke_fleet_lines(result: SmokeResult) -> list[str]:
    """What the fleet audit of a multi-node smoke found beside the nodes: the launch arithmetic, its checks, and where
    the nodes differ in what must agree."""
    if not result.nodes:
        return []
    out = [layout_line(result.arithmetic), *[check_line(c) for c in result.arithmetic.checks]] \
        if result.arithmetic is not None else []
    return out + [f"the nodes differ: {d}" for d in result.differences]


def _preflight_rows(pre: Preflight | None) -> list[tuple[str, str]]:
    if pre is None:
        return []
    rows = [("node", f"{pre.hostname}: {pre.python}"), ("engine", f"{pre.engine} at {pre.engine_root}")]
    if pre.modified_files:
        rows.append(("engine files changed since install", _first(pre.modified_files, 8)))
    rows += [("model", line) for line in pre.models]
    rows.append(("GPUs", "; ".join(f"{g['index']} {g['name']}: {g['memory_free_mib']} of {g['memory_total_mib']} MiB "
                                   "free" for g in pre.gpus) if pre.nvidia_smi else "no nvidia-smi on the node"))
    if pre.gpu_processes:
        rows.append(("GPU processes before launch", "; ".join(f"pid {p['pid']} {p['process_name']} "
                                                              f"({p['used_memory_mib']} MiB)" for p in pre.gpu_processes)))
    return rows


def _acceptance_rows(fig: Acceptance | None) -> list[tuple[str, str]]:
    if fig is None:
        return []
    return [("drafts / drafted / accepted tokens", f"{num(fig.drafts)} / {num(fig.draft_tokens)} / "
                                                   f"{num(fig.accepted_tokens)}"),
            ("acceptance rate", num(fig.acceptance_rate, 3)),
            ("mean acceptance length", num(fig.mean_acceptance_length, 2)),
            ("acceptance per position", ", ".join(f"{p:.3f}" for p in fig.per_position) or "-"),
            *([("acceptance length by prompt kind", ", ".join(f"{kind} {length:.2f}"
                                                              for kind, length in fig.by_kind.items()))]
              if fig.by_kind else []),
            *([("held against", fig.expected)] if fig.expected else []),
            *([("figures from", fig.source)] if fig.source else []),
            *[("flag", flag) for flag in fig.flags]]


def _lossless_rows(lossless: Lossless | None) -> list[tuple[str, str]]:
    if lossless is None:
        return []
    return [("lossless", f"identical on {lossless.compared} prompts" if lossless.identical
             else "; ".join(lossless.differences))]


def num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


# -- a fleet -------------------------------------------------------------------------------------------------------


def fleet_summary(result: FleetResult) -> str:
    """The fleet's verdict in a sentence: the worst node, whether the nodes agree, whether the numbers add up."""
    nodes = f"{len(result.nodes)} node(s), {result.scans} scan(s), {result.seconds:.1f} s"
    material = [d for d in result.differences if d.material]
    agree = ("the nodes agree on what the launch needs alike" if not material else
             "the nodes differ: " + "; ".join(f"{d.aspect} ({', '.join(d.odd) or 'split'})" for d in material))
    worst = f"worst node {result.worst_node}"
    unmet = ("dependencies not as the release requires: " + "; ".join(f"{name} ({', '.join(hosts)})" for name, hosts
                                                                      in result.unmet.items())) if result.unmet else ""
    sums = f"launch arithmetic {result.arithmetic.status}" if result.arithmetic is not None else ""
    return "; ".join(part for part in (nodes, worst, agree, unmet, sums) if part)


def node_scan(node: NodeAudit) -> str:
    if node.scan is None:
        return node.scan_problem or "not scanned"
    first = node.scan.blocking[0] if node.scan.blocking else None
    shared = f" (the scan of {node.scanned_on}: same engine files, checkpoints and platform)" if node.scanned_on else ""
    return f"scan {node.scan.verdict}" + (f": {first.title} ({first.location})" if first else "") + shared


def node_engine(node: NodeAudit) -> str:
    """The node's engine, or why it is not known: the node not reached, or not probed."""
    return node.preflight.engine if node.preflight else node.error or node.probe_problem


def node_rows(node: NodeAudit) -> list[tuple[str, str]]:
    """A node's figures as (label, value) rows."""
    if not node.reached:
        return [("not reached", node.error)]
    if node.preflight is None:
        return [("not probed", node.probe_problem)]
    rows = _preflight_rows(node.preflight)
    rows.append(("engine files", f"sha256 {node.engine_digest[:16]}" if node.engine_digest else "-"))
    rows += [("patch bundle", f"{b.bundle}: {b.state}, {b.detail}") for b in node.bundles]
    rows += [(f"dependency {d.name}", (d.installed or "not installed") + (
        f"; {'; '.join(d.required)}: {'met' if d.met else 'NOT MET'}" if d.required else "; the release names no version"))
        for d in node.dependencies]
    if node.patch_problem:
        rows.append(("patch state", node.patch_problem))
    for c in node.checkpoints:
        rows.append((f"{c.role} {c.path}", "missing" if not c.present else
                     f"config.json sha256 {(c.config_sha256 or '-')[:16]}; safetensors headers "
                     + (f"sha256 {c.headers_sha256[:16]} ({c.files} file(s))" if c.headers_sha256 else "none")))
    rows += [("problem", problem) for problem in node.preflight.problems]
    rows.append(("static scan", node_scan(node)))
    return rows


def difference_line(difference: Difference) -> str:
    return "; ".join(f"{value} ({', '.join(hosts)})" for value, hosts in difference.values.items())


def check_line(check: Check) -> str:
    says = f"; the engine says: {check.engine_says}" if check.engine_says else ""
    return f"{MARK[check.status]} {check.name}: {check.detail}{says}"


def layout_line(arithmetic: Arithmetic) -> str:
    p = arithmetic.parallelism
    parts = [f"TP {p.tensor}", f"PP {p.pipeline}", f"DP {p.data}"] + ([f"PCP {p.context}"] if p.context > 1 else [])
    mode = "Ray" if p.ray else (f"{p.nnodes} nodes ({p.engine}'s multi-node mode)" if p.nnodes > 1 else "one node")
    draft = f", draft TP {p.draft_tensor}" if p.draft_tensor is not None else ""
    return f"{' x '.join(parts)} = {p.ranks} rank(s), {mode}{draft}"

