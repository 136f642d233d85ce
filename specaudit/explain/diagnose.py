"""A failed launch's root cause, held against what the scan predicted.

The root cause is classified by where it was raised before what it says: the innermost frame of the engine's own
code in the root traceback (tracebacks.py), when it falls inside the statement of a gate the scan found, is that
gate, whatever the message. A crash with no gate there is classified by its text signature (the environment,
CPU-only limits, out of memory: signatures.py), else by its traceback alone. Then the prediction (the scan's
first blocking gate, or READY) is compared with the outcome: a disagreement is a finding about specaudit itself,
with the frames to paste into a bug report.
"""

from __future__ import annotations

import re

from ..core.engines import ENGINES
from ..core.types import Finding, Status, Verdict
from ..results.outcome import Agreement, Crash, Explanation, Frame, Located, RootCause, SignatureMatch
from ..results.scan import GateSite, ScanResult
from .atlas import CUT, Atlas
from .titles import TITLE, title_located, title_summary
from .tracebacks import CUT_OFF, package_path


def engine_frame(crash: Crash) -> Frame | None:
    """The innermost frame of an engine's own code: where the engine raised it, or called what raised it."""
    packages = [f"/{profile.package}/" for profile in ENGINES.values()]
    return next((f for f in reversed(crash.frames) if any(p in f.file.replace("\\", "/") for p in packages)), None)


def gate_at(frame: Frame, gates: list[GateSite]) -> GateSite | None:
    """The gate whose statement holds the frame's line: a rule's (it names the gate, as the scan reports it)
    before an obligation of the path inside it, then the narrowest."""
    path = frame.file.replace("\\", "/")
    holding = [g for g in gates
               if (path == g.file or path.endswith("/" + g.file)) and g.line <= frame.line <= g.end_line]
    return min(holding, key=lambda g: (g.rule_id.startswith("path-"), g.end_line - g.line), default=None)


def root_cause(explanation: Explanation, scan: ScanResult | None, exit_status: int | None = None) -> RootCause | None:
    """The root cause of a failed launch, classified by gate location, then signature, then traceback."""
    crash, signature, found = explanation.crash, explanation.cause, explanation.located
    if crash is not None and crash.exception == TITLE:  # no error line: what the title's words settle, and not
        return RootCause(title_summary(crash.message, found), "issue title", crash, None, None, None, found)
    frame = engine_frame(crash) if crash else None
    gate = gate_at(frame, scan.gates) if frame and scan else None
    if gate is not None and crash is not None:
        return RootCause(f"{gate.title}: {crash.text} (raised at {gate.location})", "gate location", crash, signature,
                         gate, frame, found)
    if signature is not None and engine_fits(signature.engine, explanation) and (
            crash is None or _names_crash(signature, crash) or signature.line_number < crash.line_number):
        return RootCause(f"{signature.title}: {signature.line.strip()}", "signature", crash, signature, None, frame,
                         found)
    if crash is not None and found is not None:
        return RootCause(_located_summary(crash, found), "raise site", crash, None, None, frame, found)
    if crash is not None:
        where = f" (raised in {frame.function} at {package_path(frame.file)}:{frame.line})" if frame else ""
        return RootCause(f"{crash.text}{where}", "traceback", crash, None, None, frame)
    if exit_status:
        return RootCause(f"the engine exited with status {exit_status}, without a traceback", "exit status",
                         None, None, None, None)
    return None


def paste_engines(explanation: Explanation) -> frozenset[str]:
    """The engines the paste is consistent with, from what tells them: the release a line of it names, else the
    packages of its root traceback's frames, else the engines whose templates the atlas located its root line at (a
    message both engines word alike: both); none where nothing tells."""
    named = explanation.release.get("engine")
    if named in ENGINES:
        return frozenset({named})
    crash = explanation.crash
    if crash is not None:
        framed = {engine for engine, profile in ENGINES.items() for f in crash.frames
                  if f"/{profile.package}/" in f.file.replace("\\", "/")}
        if framed:
            return frozenset(framed)
        if crash.exception == TITLE:
            return frozenset()  # a title's sites are the messages nearest its words, not where it was raised
    found = explanation.located
    return frozenset({site.engine for site in found.sites}) if found is not None else frozenset()


def engine_fits(engine: str, explanation: Explanation) -> bool:
    """Whether an engine's own text (a signature's, a template's) classifies the paste: where the paste is known to
    be of that engine alone, or nothing tells its engine but that text. A signature of one engine on a message both
    engines word alike, or on a paste of the other, names no root cause (the sites say where it was raised)."""
    if engine not in ENGINES:
        return True  # every engine's (a device's, a driver's)
    told = paste_engines(explanation)
    return not told or told == {engine}


def _located_summary(crash: Crash, found: Located) -> str:
    site = found.sites[0]
    where = f"raised at {site.location} in {site.function}" + (f" and {len(found.sites) - 1} more place(s)"
                                                               if len(found.sites) > 1 else "")
    if found.quoted_by is not None:
        return f"{found.text} ({where}; quoted by {crash.exception} at {found.quoted_by.location}; {found.releases})"
    if found.quotes:
        return f"{found.quotes} (quoted by {crash.exception} {where}; {found.releases})"
    cut = [hole for hole, value in found.holes if value == CUT]
    if cut:
        where += f"; the paste holds the message's leading part only, cut before {', '.join(cut)}"
    return f"{crash.text} ({where}; {found.releases})"


def root_log(logs: list[tuple[Explanation, float | None, int | None]], wrappers: list[re.Pattern]) -> int:
    """Which of several logs of one launch holds its root cause: a multi-node launch's, one log a node, each given
    with when its first failure arrived and its engine's exit status. A crash is a traceback or a root signature line;
    a log whose only crash is a wrapper ("Engine core initialization failed": something below it failed, here on
    another node) ranks after every log with a crash of its own, and a log that shows only an exit status after
    both; among equals, the earliest failure, then the first log (the head's)."""
    def rank(i: int) -> tuple[int, float, int]:
        explanation, at, status = logs[i]
        crash = explanation.crash
        wrapped = crash is not None and any(w.search(crash.text) for w in wrappers)
        cause = explanation.cause
        if crash is not None and not wrapped or cause is not None and cause.root and (
                crash is None or cause.line_number < crash.line_number):
            kind = 0
        elif crash is not None or cause is not None:
            kind = 1
        else:
            kind = 2 if status else 3
        return kind, at if at is not None else float("inf"), i

    return min(range(len(logs)), key=rank)


def _names_crash(signature: SignatureMatch, crash: Crash) -> bool:
    """Whether a signature's line is the crash's own exception (then it classifies the crash); else the earlier of
    the two is the root cause: a later process's known line does not outrank the earliest failing process."""
    return crash.text in signature.line or bool(crash.message) and crash.message in signature.line


def agreement(scan: ScanResult | None, root: RootCause | None, came_up: bool,
              drafter_helped: bool | None = None) -> Agreement:
    """The scan's first blocking gate (or READY, or DEGRADED) against the launch: it came up, or it failed of ``root``;
    ``drafter_helped``: whether, come up, its drafts were accepted as a working drafter's are (None: not measured),
    held against READY (the drafter helps) and DEGRADED (it cannot)."""
    outcome = "the launch came up" if came_up else f"the launch failed: {root.summary}" if root else \
        "the launch failed, with no root cause in its log"
    if scan is None:
        return Agreement("no scan", outcome, None, "there was no preflight scan to compare with")
    first = scan.blocking[0] if scan.blocking else None
    predicted = f"{scan.verdict}" + (f", first at {first.title} ({first.location})" if first else "")
    if scan.verdict == Verdict.UNKNOWN:
        return Agreement(predicted, outcome, None, "the scan said UNKNOWN: " + "; ".join(
            f"{f.title} ({f.location})" for f in scan.findings if f.status == Status.UNKNOWN)[:400])
    if came_up:
        if first is None and drafter_helped is not None:
            helps = scan.verdict != Verdict.DEGRADED
            outcome += ", and its drafter " + ("helped" if drafter_helped else "did not help (acceptance flagged)")
            if helps == drafter_helped:
                return Agreement(predicted, outcome, True, f"the scan said {scan.verdict} and the launch came up with "
                                 f"a drafter that {'helped' if helps else 'did not help'}")
            return _disagree(predicted, outcome, scan, root, f"the scan said {scan.verdict}, but the drafter "
                             + ("did not help: a silent failure the scan did not predict" if helps else
                                "helped: the finding that called it useless does not hold for this launch"))
        if first is None:
            return Agreement(predicted, outcome, True, f"the scan said {scan.verdict} and the launch came up")
        return _disagree(predicted, outcome, scan, root, f"the scan said BLOCKED at {first.location}, but the launch "
                         "came up: that gate does not stop this launch (the scan misjudged it)")
    if root is None or root.by == "exit status":
        return Agreement(predicted, outcome, None, "the log shows no root cause to compare with the prediction")
    if root.gate is None and root.signature is not None and not root.signature.gates:
        return Agreement(predicted, outcome, None, f"the launch failed of its host or environment "
                         f"({root.signature.title}), not at a gate of the EAGLE-3 path")
    if first is not None and _same_gate(first, root):
        return Agreement(predicted, outcome, True, f"the launch stopped at the gate the scan named first "
                         f"({first.location})")
    met = f"{root.gate.location}" if root.gate else f"gate {' or '.join(root.signature.gates)}" if root.signature else \
        f"{package_path(root.frame.file)}:{root.frame.line}" if root.frame else "an unknown place"
    if first is None:
        why = f"the scan said {scan.verdict}, but the launch failed at {met}"
    elif root.gate is None and root.signature is None:
        why = f"the launch failed at {met}, where the scan knows no gate, before {first.location}: the scan missed it"
    else:
        why = (f"the scan named {first.location} first, but the launch stopped at {met}: the scan missed or "
               "misordered it")
    return _disagree(predicted, outcome, scan, root, why)


def _same_gate(finding: Finding, root: RootCause) -> bool:
    if root.gate is not None and (finding.location == root.gate.location or root.gate.location in finding.also
                                  or (finding.file == root.gate.file
                                      and root.gate.line <= finding.line <= root.gate.end_line)):
        return True
    return root.signature is not None and finding.rule_id in root.signature.gates or _same_message(finding, root)


def _same_message(finding: Finding, root: RootCause) -> bool:
    """The engine's own message, as the scan renders it for the launch, in the crash's: a check the engine's config
    code runs and pydantic re-raises elsewhere (vLLM's create_speculative_config) is the gate the scan named."""
    engine = (finding.error or "").partition(": ")[2].partition("<")[0].strip()
    return root.crash is not None and len(engine) >= 24 and engine in root.crash.text


def _disagree(predicted: str, outcome: str, scan: ScanResult, root: RootCause | None, why: str) -> Agreement:
    lines = [f"specaudit's scan disagrees with a real launch ({scan.tree.engine} {scan.tree.version}, platform "
             f"{scan.tree.platform}).", "", f"- predicted: {predicted}", f"- outcome: {outcome}", f"- {why}"]
    if scan.launch is not None:
        lines.append(f"- target: {scan.launch.target} ({', '.join(scan.launch.architectures)}), method "
                     f"{scan.launch.method}")
    if root is not None and root.crash is not None:
        lines += ["", "```", "Traceback (most recent call last):"]
        lines += [f'  File "{package_path(f.file)}", line {f.line}, in {f.function}' for f in root.crash.frames]
        lines += [root.crash.text, "```"]
    return Agreement(predicted, outcome, False, why, "\n".join(lines))


def explain(log: str, engines: list[str] | None = None, tree: str | None = None,
            platform: str | None = None) -> Explanation:
    """Classify a launch log, and hold its root cause against the scan of the release that wrote it: ``tree``
    (a directory, a wheel, ``vllm==X``) when given, else the release and platform the log names."""
    from dataclasses import replace

    from ..tree.provenance import launch_provenance
    from .raise_sites import bare_line
    from .signatures import explain_file
    from .titles import title_near

    atlas = message_atlas(tree)
    explanation = explain_file(log, engines, bare_line(atlas) if atlas else None, title_near(atlas) if atlas else None)
    if explanation.crash is None and explanation.cause is None:
        return replace(explanation, provenance=launch_provenance(None))
    explanation = replace(explanation, located=located(explanation, atlas) if atlas else None)
    scan, scanned = release_scan(explanation, tree, platform)
    return replace(explanation, root=root_cause(explanation, scan), scanned=scanned, provenance=launch_provenance(scan))


def message_atlas(tree: str | None) -> Atlas | None:
    """The atlas of every release in the tree cache and of ``tree`` (vllm==X, a directory, a wheel), built on first
    use; None where there is none to build it from."""
    import sys
    from contextlib import suppress

    from ..core.errors import SpecauditError
    from ..tree.locate import locate
    from .atlas_build import cached_release_trees, load_atlas

    trees = cached_release_trees()
    if tree is not None:
        with suppress(SpecauditError):  # said by the scan of the release, which fails the same way
            trees.append(locate(tree))
    roots = {t.root.resolve(): t for t in trees}
    if not roots:
        return None
    return load_atlas(roots.values(), lambda text: print(f"specaudit: {text}", file=sys.stderr))


def located(explanation: Explanation, atlas: Atlas) -> Located | None:
    """The root line found in the atlas: the root traceback's message with its frames, else the root signature's
    line."""
    from .raise_sites import locate

    version, engine = explanation.release.get("version"), explanation.release.get("engine")
    crash = explanation.crash
    if crash is not None and crash.exception == TITLE:
        return title_located(atlas, crash.message)
    if crash is not None and crash.exception != CUT_OFF:
        return locate(atlas, crash.message or crash.exception, crash.frames, crash.exception, version,
                      continued=crash.continued, engine=engine)
    cause = explanation.cause
    return locate(atlas, cause.line.strip(), (), None, version, engine=engine) if cause else None


def release_scan(explanation: Explanation, tree: str | None, platform: str | None) -> tuple[ScanResult | None, str]:
    """The landscape scan whose gate sites the log's frames are held against, and what it was, in words; None and
    why not, when no release can be scanned (the log's root cause is then classified by text and traceback)."""
    from ..core.errors import SpecauditError
    from ..scan.audit import scan
    from ..tree.locate import locate

    named = explanation.release
    spec = tree or (f"{named['engine']}=={named['version']}" if "version" in named else None)
    if spec is None:
        return None, "no scan: the log names no release (give --tree)"
    platform = platform or named.get("platform", "cuda")
    try:
        engine_tree = locate(spec, named.get("engine"))
        return scan(engine_tree, None, platform=platform), \
            f"{engine_tree.engine.name} {engine_tree.version} (platform {platform}, {engine_tree.origin})"
    except SpecauditError as exc:
        return None, f"no scan of {spec}: {exc}"
