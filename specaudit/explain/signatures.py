"""Crash signatures: the engines' own error texts (``rules/signatures/<engine>.yaml``), each mapped to the gate
that raises it and the hint that opens it, and the classification of a launch log against them.

The root cause of a failed launch is the first line that matches a signature marked as a root (the default):
an engine prints consequences around its causes ("EngineCore failed to start." before the engine core's
traceback, "Engine core initialization failed. See root cause above" after it).
"""

from __future__ import annotations

import codecs
import functools
import io
import re
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

import yaml

from ..core.data import YAML_LOADER, data_dir
from ..core.errors import SpecauditError
from ..launch.known import KNOWN_FAILURES, KnownFailure, load_known_failures
from ..results.outcome import Crash, Explanation, SignatureMatch
from .titles import TITLE, title_of
from .tracebacks import CUT_OFF, BareLine, TracebackReader

# Terminal control sequences, whole: the strings of OSC (a hyperlink, a window title), DCS, SOS, PM and APC to their
# terminator, CSI (colours, and the cursor and erase commands progress bars write: `\x1b[2K`) in its 7- and 8-bit
# forms, the other escapes; then any control character left but the tab. A log line never reaches a terminal or a
# report with a sequence of its own (each alternative is linear: no quantifier inside another).
_ANSI = re.compile(r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
                   r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?|\x1b[ -/]*[0-~]?|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
CONTEXT_LINES = 3


@dataclass(frozen=True)
class Signature:
    id: str
    engine: str
    title: str
    pattern: re.Pattern
    hint: str
    gate: str | None = None  # the rule whose gate raises it, when one does
    gates: tuple[str, ...] = ()  # or the rules whose gates may raise it (which one, the values tell)
    root: bool = True  # False: a consequence an engine prints after the cause
    examples: tuple[str, ...] = field(default=(), compare=False)
    counterexamples: tuple[str, ...] = field(default=(), compare=False)
    # A crash signature (`frames:` in the file): ``frame`` is searched in "file:function" of the root traceback's
    # frames and ``pattern`` in its exception text; both must match.
    frame: re.Pattern | None = None
    # Where the signature's text is a generic one (a torch shape error): searched in "file:function" of the frames of
    # the traceback whose exception line it matched; where that traceback has frames and none is here, the line is
    # that text raised elsewhere, and the signature names no root cause.
    within: re.Pattern | None = None
    warning: bool = False  # a line that says the engine went on (a logger's WARNING): never a failure
    method: str | None = None  # the speculative method whose launches print it (reported as the match's "method")
    needles: tuple[str, ...] = field(default=(), compare=False)  # literals one of which its every match holds

    def __post_init__(self) -> None:
        if not self.needles:
            object.__setattr__(self, "needles", needles_of(self.pattern))

    @property
    def gate_ids(self) -> tuple[str, ...]:
        return (self.gate,) if self.gate else self.gates


@dataclass(frozen=True)
class Milestone:
    """A line that marks progress of a launch (weights loaded, server up): the phases of a smoke timeline."""

    name: str
    engine: str
    pattern: re.Pattern


def _entries(key: str, make, engines: Iterable[str] | None, directory: Path | None, required: bool) -> list:
    """``make(engine, entry)`` for each entry under ``key`` in the signature files of the engines asked for."""
    directory = directory or data_dir("rules") / "signatures"
    made = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            data = yaml.load(path.read_text(encoding="utf-8"), Loader=YAML_LOADER)
            engine = data["engine"]
            if engines is not None and engine not in engines and engine != "*" or data.get("kind") == KNOWN_FAILURES:
                continue  # another engine's ("*": every engine's), or a table of known failures (known.py reads those)
            made += [make(engine, entry) for entry in (data[key] if required else data.get(key) or ())]
        except (yaml.YAMLError, KeyError, TypeError, re.error) as exc:
            raise SpecauditError(f"{path}: not a valid signature file ({type(exc).__name__}: {exc})") from None
    return made


def _signature(engine: str, entry: dict) -> Signature:
    return Signature(
        id=entry["id"], engine=engine, title=entry["title"], pattern=re.compile(entry["pattern"]),
        hint=" ".join(entry["hint"].split()), gate=entry.get("gate"), gates=tuple(entry.get("gates", ())),
        root=entry.get("root", True), examples=tuple(entry.get("examples", ())),
        counterexamples=tuple(entry.get("counterexamples", ())),
        frame=re.compile(entry["frame"]) if "frame" in entry else None, warning=bool(entry.get("warning", False)),
        within=re.compile(entry["within"]) if "within" in entry else None,
        method=entry.get("method"))


def load_signatures(engines: Iterable[str] | None = None, directory: Path | None = None) -> list[Signature]:
    return _entries("signatures", _signature, engines, directory, required=True)


def load_crash_signatures(engines: Iterable[str] | None = None, directory: Path | None = None) -> list[Signature]:
    """Crashes known by the engine code their traceback passes through (a tensor shape error raised in torch,
    under the drafter's code), whatever their exception says."""
    return _entries("frames", _signature, engines, directory, required=False)


def match_crash(crash: Crash, signatures: list[Signature]) -> SignatureMatch | None:
    """The first crash signature whose frame the root traceback passes through, with its exception text."""
    places = [f"{frame.file}:{frame.function}" for frame in crash.frames]
    for signature in signatures:
        if signature.frame is None:
            continue  # not a crash signature: no frame for the traceback to pass through
        found = signature.pattern.search(crash.text)
        if found and any(signature.frame.search(place) for place in places):
            fields = _fields(signature, found)
            return SignatureMatch(signature.id, signature.title, signature.engine, crash.line_number, crash.text,
                                  fields, signature.gate, signature.gate_ids, signature.hint, True, ())
    return None


SERVER_UP = "server up"  # the milestone of a launch that came up (rules/signatures/*.yaml)


def load_wrappers(engines: Iterable[str] | None = None, directory: Path | None = None) -> list[re.Pattern]:
    """Exceptions that only say something failed below them (``Engine core initialization failed``)."""
    return _entries("wrappers", lambda engine, entry: re.compile(entry), engines, directory, required=False)


def load_dying(engines: Iterable[str] | None = None, directory: Path | None = None) -> list[re.Pattern]:
    """Lines that say a process is dying of the traceback that follows them (SGLang's ``Scheduler hit an exception:``):
    that traceback ends the launch, whatever its exception."""
    return _entries("dying", lambda engine, entry: re.compile(entry), engines, directory, required=False)


def load_release_markers(engines: Iterable[str] | None = None, directory: Path | None = None) -> list[Milestone]:
    """Lines that name the release or the platform that wrote a log (a ``version`` or ``platform`` group)."""
    return _entries("release", lambda engine, entry: Milestone("release", engine, re.compile(entry)),
                    engines, directory, required=False)


def load_milestones(engines: Iterable[str] | None = None, directory: Path | None = None) -> list[Milestone]:
    return _entries("milestones", lambda engine, entry: Milestone(entry["name"], engine, re.compile(entry["pattern"])),
                    engines, directory, required=False)


def clean_line(line: str) -> str:
    """A log line as a terminal shows it: without control sequences, and only what the last carriage return
    left (a progress bar redraws its line with `\r`; a CRLF line ends with one); and no longer than
    ``MAX_LINE_CHARS``: an engine's message is read from its start, and no pattern's work grows with a line's."""
    line = line[:MAX_LINE_CHARS * 2].rstrip("\n").rstrip("\r").rpartition("\r")[2]
    return (line if line.isprintable() else _ANSI.sub("", line))[:MAX_LINE_CHARS]  # most lines hold no control


MAX_LINE_CHARS = 16384


@functools.cache
def needle_of(pattern: re.Pattern) -> str:
    """The longest run of literal characters every match of ``pattern`` contains ("" where there is none)."""
    needles = needles_of(pattern)
    return needles[0] if len(needles) == 1 else ""


@functools.cache
def needles_of(pattern: re.Pattern) -> tuple[str, ...]:
    """Literals one of which every match of ``pattern`` contains (an alternation gives one per branch); () where
    none is known. A line that holds none of them cannot match, so the pattern need not run on it."""
    if pattern.flags & re.IGNORECASE:
        return ()
    try:
        from re import _parser as parser  # type: ignore[attr-defined]  # Python 3.11 and later
    except ImportError:  # Python 3.10
        import sre_parse as parser  # type: ignore[no-redef]
    return _needles(list(parser.parse(pattern.pattern, pattern.flags))) or ()


def _needles(items: list) -> tuple[str, ...] | None:
    candidates: list[tuple[str, ...]] = []
    run = ""
    for op, value in items:
        name = str(op)
        if name == "LITERAL":
            run += chr(value)
            continue
        if name == "SUBPATTERN" and value[-1] and all(str(o) == "LITERAL" for o, _ in value[-1]) \
                and not value[1] & re.IGNORECASE:
            run += "".join(chr(v) for _, v in value[-1])  # a group of literals: part of the run
            continue
        if run:
            candidates.append((run,))
        run = ""
        found: tuple[str, ...] | None = None
        if name == "SUBPATTERN" and not value[1] & re.IGNORECASE:
            found = _needles(list(value[-1]))
        elif name == "BRANCH":
            branches = [_needles(list(branch)) for branch in value[1]]
            found = tuple(n for b in branches for n in b) if branches and all(branches) else None  # type: ignore
        elif name in ("MAX_REPEAT", "MIN_REPEAT") and value[0] >= 1:
            found = _needles(list(value[2]))
        if found:
            candidates.append(found)
    if run:
        candidates.append((run,))
    # the longest literal, an alternation's counting against it: each alternative is another test on every line
    return max(candidates, key=lambda c: min(len(n) for n in c) - 2 * (len(c) - 1), default=None)


class Prefiltered:
    """A pattern searched only in a line that holds one of its needles: a substring test, linear, so that no line
    makes a pattern backtrack for long, and most lines cost an ``in`` test or two."""

    __slots__ = ("pattern", "needles")

    def __init__(self, pattern: re.Pattern) -> None:
        self.pattern, self.needles = pattern, needles_of(pattern)

    def search(self, line: str) -> re.Match | None:
        return self.pattern.search(line) if _holds(line, self.needles) else None


def _holds(line: str, needles: tuple[str, ...]) -> bool:
    """Whether ``line`` holds one of ``needles`` (or there are none to tell by)."""
    if len(needles) == 1:
        return needles[0] in line
    return not needles or any(n in line for n in needles)


def match_line(line: str, signatures: list[Signature]) -> tuple[Signature, re.Match] | None:
    """The first signature that a (clean) log line matches. A pattern runs only on a line that holds one of its
    literals (``needles_of``)."""
    for signature in signatures:
        needles = signature.needles
        if needles and (needles[0] not in line if len(needles) == 1 else not any(n in line for n in needles)):
            continue
        found = signature.pattern.search(line)
        if found:
            return signature, found
    return None


def _fields(signature: Signature, found: re.Match) -> dict[str, str]:
    fields = {k: v for k, v in found.groupdict().items() if v is not None}
    return {**fields, "method": signature.method} if signature.method else fields


# A logger's level at the start of a line: what a WARNING, INFO or DEBUG line says is not a failure of the launch.
_LEVEL = re.compile(r"^(?:\([^()]*pid=\d+\) ?)?(?:\[[^\]]*\] ?)?(?P<level>DEBUG|INFO|WARNING|WARN)\s+\d\d-\d\d ")


def classify(lines: Iterable[str], signatures: list[Signature], log: str = "-",
             wrappers: list[re.Pattern] | None = None, up: list[re.Pattern] | None = None,
             release: list[Milestone] | None = None, crashes: list[Signature] | None = None,
             known: list[KnownFailure] | None = None, bare: BareLine | None = None,
             near: Callable[[str], bool] | None = None) -> Explanation:
    """The first line that matches each signature, with the lines around it; the root cause, the first match of
    a root signature; and the root cause the tracebacks show (see tracebacks.py), with or without a signature.
    A traceback before a line that shows the server up (``up``) is one the launch came through; one after it
    counts. A root traceback no line names is held against the crash signatures (``crashes``); the ``release``
    markers say which release and platform wrote the log. A known failure line that a logger printed as a
    warning is listed, not a root cause; a log whose only failure lines are consequences ("Engine core
    initialization failed") has the first of them as its cause: the launch failed, of a cause that is not in the
    log. The ``known`` failures whose text the root cause shows are listed with it (the root cause when no
    signature names it). A line with no exception type that ``bare`` knows as one the engine raises is a crash; a
    paste with no failure line whose first line is an issue's title saying something failed is a crash of that title
    (titles.title_of: exception ``TITLE``; a line with no tag only where ``near``, the atlas, holds its words).
    Reads the lines once, keeping only a few: a log of any size fits in memory."""
    tracebacks = TracebackReader(bare)
    named: dict[str, str] = {}
    markers = [(marker, Prefiltered(marker.pattern)) for marker in release or ()]
    ups = [Prefiltered(pattern) for pattern in up or ()]
    before: deque[str] = deque(maxlen=CONTEXT_LINES)
    matched: dict[str, tuple[int, str, Signature, re.Match, list[str], bool]] = {}  # id -> its first match
    waiting: list[tuple[list[str], int]] = []  # contexts still collecting the lines after their match: (lines, size)
    count = 0
    first: tuple[int, str] | None = None  # the paste's first line that is not blank: an issue's title, perhaps
    for count, raw in enumerate(lines, 1):
        line = clean_line(raw)
        tracebacks.feed(count, line)
        if first is None and line.strip():
            first = (count, line)
        for marker, search in markers:
            found = search.search(line)
            if found:
                named.setdefault("engine", marker.engine)
                for key, value in found.groupdict().items():
                    if value:
                        named.setdefault(key, value)
        if any(search.search(line) for search in ups):
            tracebacks.came_through()
        if waiting:
            for context, _ in waiting:
                context.append(line)
            waiting = [(context, size) for context, size in waiting if len(context) < size]
        head = line[:80]
        level = _LEVEL.match(line) if "INFO " in head or "DEBUG " in head or "WARN" in head else None
        # an INFO or DEBUG line of a logger is the engine going on: no signature's line (not even listed)
        hit = None if level and level["level"] in ("INFO", "DEBUG") else match_line(line, signatures)
        if hit and hit[0].id not in matched:
            context = [*before, line]
            quiet = level is not None and not hit[0].warning
            matched[hit[0].id] = (count, line, hit[0], hit[1], context, quiet)
            waiting.append((context, len(context) + CONTEXT_LINES))
        before.append(line)
    distinct = []
    for number, line, signature, found, context, quiet in sorted(matched.values(), key=lambda m: m[0]):
        fields = _fields(signature, found)
        title = signature.title + (" (in a warning: the engine went on)" if quiet else "")
        distinct.append(SignatureMatch(signature.id, title, signature.engine, number, line, fields,
                                       signature.gate, signature.gate_ids, signature.hint,
                                       signature.root and not quiet and not signature.warning, tuple(context)))
    tracebacks.close()
    crash = tracebacks.root(wrappers or [])
    engine, by_id = _log_engine(named, crash), {s.id: s for s in signatures}
    distinct = [m if not m.root or _fits(by_id.get(m.signature), m, crash, engine) else replace(m, root=False)
                for m in distinct]
    cause = next((m for m in distinct if m.root), None)
    framed = match_crash(crash, crashes or []) if crash is not None else None
    if framed is not None and crash is not None and (cause is None or _names(cause, crash)):
        cause = framed  # known by the code its traceback passes through: more than by the text of its line
        distinct.append(framed)
    if cause is None and (crash is None or crash.exception == CUT_OFF):
        failing = {s.id for s in signatures if not s.warning}
        cause = next((m for m in distinct if m.signature in failing and "(in a warning" not in m.title), None)
    matched_known = known_matches(known or [], cause, crash, named)
    if cause is None and matched_known:
        cause = replace(matched_known[0], root=True)
        matched_known[0] = cause
    if crash is None and cause is None and first is not None:
        reported = title_of(first[1], near)
        if reported is not None:  # an issue's title, and no error line: the failure it reports (titles.py)
            crash = Crash(first[0], "", TITLE, reported, ())
    return Explanation(log, count, cause, distinct + matched_known, crash, named)


_OTHER_ENGINE = {"vllm": "sglang", "sglang": "vllm"}


def _log_engine(named: dict[str, str], crash: Crash | None) -> str | None:
    """The engine the log is one of: the one its release lines name, else the one whose package the root
    traceback's frames are in (None where they are in both, or in neither)."""
    if named.get("engine") in _OTHER_ENGINE:
        return named["engine"]
    packages = {e for f in crash.frames for e in _OTHER_ENGINE if f"/{e}/" in f.file.replace("\\", "/")} \
        if crash is not None else set()
    return packages.pop() if len(packages) == 1 else None


def _fits(signature: Signature | None, match: SignatureMatch, crash: Crash | None, engine: str | None) -> bool:
    """Whether a root signature's match is the root cause it names: an engine's signature on a log of that engine
    (the release it names or its frames, else its line naming the other engine and not this one: a vLLM text in an
    SGLang paste is SGLang's own failure), and one with a ``within`` on a traceback that passes there."""
    if signature is None or signature.engine not in _OTHER_ENGINE:
        return True
    other = _OTHER_ENGINE[signature.engine]
    if engine is not None and engine != signature.engine:
        return False
    line = match.line.lower()
    if engine is None and re.search(rf"\b{other}\b", line) and not re.search(rf"\b{signature.engine}\b", line):
        return False
    if signature.within is not None and crash is not None and crash.frames and _names(match, crash):
        return any(signature.within.search(f"{f.file}:{f.function}") for f in crash.frames)
    return True


def _names(match: SignatureMatch, crash: Crash) -> bool:
    """Whether a signature's line is the crash's own exception line."""
    return crash.text in match.line or bool(crash.message) and crash.message in match.line


def known_matches(known: list[KnownFailure], cause: SignatureMatch | None, crash: Crash | None,
                  named: dict[str, str]) -> list[SignatureMatch]:
    """The known failures whose error text the root cause shows (its line, or its traceback's exception), of the
    engine and release the log names where it names them: listed beside the root cause, with the thread and fix."""
    texts = [(m.line_number, m.line, m.context) for m in (cause,) if m] + \
        [(c.line_number, c.text, ()) for c in (crash,) if c]
    found = []
    for failure in known:
        if named.get("engine") not in (None, failure.engine):
            continue
        hit = next(((n, text, ctx, m) for n, text, ctx in texts for m in [failure.pattern.search(text)] if m), None)
        if hit and "version" in named and not failure.applies(named["version"], failure.features):
            continue  # the log's release is not one the thread reports it in
        if hit:
            number, text, context, match = hit
            seen = f"{failure.engine} {', '.join(failure.seen_in)}"
            found.append(SignatureMatch(failure.id, f"Known failure: {failure.title} (seen in {seen}; {failure.thread})",
                                        failure.engine, number, text, _fields_of(match, failure), None, (),
                                        failure.hint, False, tuple(context)))
    return found


def _fields_of(match: re.Match, failure: KnownFailure) -> dict[str, str]:
    fields = {k: v for k, v in match.groupdict().items() if v is not None}
    return {**fields, "thread": failure.thread, "releases": failure.specifier}


def explain_file(path: str, engines: Iterable[str] | None = None, bare: BareLine | None = None,
                 near: Callable[[str], bool] | None = None) -> Explanation:
    """Classify a log file, or standard input for ``-`` (a pipe: ``/dev/stdin`` is read the same way); ``bare``
    and ``near`` as for ``classify``."""
    signatures, known = load_signatures(engines), load_known_failures(engines)
    wrappers, release = load_wrappers(engines), load_release_markers(engines)
    crashes = load_crash_signatures(engines)
    up = [m.pattern for m in load_milestones(engines) if m.name == SERVER_UP]
    if path == "-":
        return classify(_decoded(sys.stdin.buffer), signatures, "standard input", wrappers, up, release, crashes,
                        known, bare, near)
    log = Path(path)
    if log.is_dir() or not log.exists():
        raise SpecauditError(f"{path}: no such log file")
    try:
        with log.open("rb") as fh:
            return classify(_decoded(fh), signatures, str(log), wrappers, up, release, crashes, known, bare, near)
    except OSError as exc:
        raise SpecauditError(f"{path}: cannot read it ({exc.strerror})") from None


def _decoded(stream: IO[bytes]) -> Iterator[str]:
    """A byte stream's lines, ending at "\n" only, so their numbers are the file's (`\r` redraws a line); UTF-8, or
    UTF-16 where the stream starts with its byte-order mark (PowerShell's `>` writes UTF-16 LE)."""
    head = stream.peek(2)[:2] if hasattr(stream, "peek") else b""
    if head in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        yield from io.TextIOWrapper(stream, encoding="utf-16", errors="replace", newline="\n")  # type: ignore[arg-type]
        return
    for number, raw in enumerate(stream):
        yield (raw[3:] if number == 0 and raw.startswith(codecs.BOM_UTF8) else raw).decode("utf-8", errors="replace")
