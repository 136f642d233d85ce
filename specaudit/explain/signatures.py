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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import yaml

from ..core.data import data_dir
from ..core.errors import SpecauditError
from ..results.outcome import Crash, Explanation, SignatureMatch
from .tracebacks import TracebackReader

# Terminal control sequences: colours, and the cursor and erase commands progress bars write (`\x1b[2K`).
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\x1b[=>]")
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
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            engine = data["engine"]
            if engines is not None and engine not in engines:
                continue
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
        frame=re.compile(entry["frame"]) if "frame" in entry else None)


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
            fields = {k: v for k, v in found.groupdict().items() if v is not None}
            return SignatureMatch(signature.id, signature.title, signature.engine, crash.line_number, crash.text,
                                  fields, signature.gate, signature.gate_ids, signature.hint, True, ())
    return None


SERVER_UP = "server up"  # the milestone of a launch that came up (rules/signatures/*.yaml)


def load_wrappers(engines: Iterable[str] | None = None, directory: Path | None = None) -> list[re.Pattern]:
    """Exceptions that only say something failed below them (``Engine core initialization failed``)."""
    return _entries("wrappers", lambda engine, entry: re.compile(entry), engines, directory, required=False)


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
    line = line[:MAX_LINE_CHARS * 2].rstrip("\n").rstrip("\r")
    return _ANSI.sub("", line.rpartition("\r")[2])[:MAX_LINE_CHARS]


MAX_LINE_CHARS = 16384


@functools.cache
def needle_of(pattern: re.Pattern) -> str:
    """The longest run of literal characters every match of ``pattern`` contains ("" where there is none: a
    pattern that is an alternation at its top)."""
    try:
        from re import _parser as parser  # type: ignore[attr-defined]  # Python 3.11 and later
    except ImportError:  # Python 3.10
        import sre_parse as parser  # type: ignore[no-redef]
    runs, run = [], ""
    for op, value in parser.parse(pattern.pattern, pattern.flags):
        if str(op) == "LITERAL" and not pattern.flags & re.IGNORECASE:
            run += chr(value)
            continue
        if str(op) == "BRANCH":
            return ""
        runs.append(run)
        run = ""
    return max([*runs, run], key=len)


def match_line(line: str, signatures: list[Signature]) -> tuple[Signature, re.Match] | None:
    """The first signature that a (clean) log line matches. A pattern runs only on a line that holds its longest
    literal (a substring test, linear), so that no line makes a pattern backtrack for long."""
    for signature in signatures:
        needle = needle_of(signature.pattern)
        if needle and needle not in line:
            continue
        found = signature.pattern.search(line)
        if found:
            return signature, found
    return None


def classify(lines: Iterable[str], signatures: list[Signature], log: str = "-",
             wrappers: list[re.Pattern] | None = None, up: list[re.Pattern] | None = None,
             release: list[Milestone] | None = None, crashes: list[Signature] | None = None) -> Explanation:
    """The first line that matches each signature, with the lines around it; the root cause, the first match of
    a root signature; and the root cause the tracebacks show (see tracebacks.py), with or without a signature.
    A traceback before a line that shows the server up (``up``) is one the launch came through; one after it
    counts. A root traceback no line names is held against the crash signatures (``crashes``); the ``release``
    markers say which release and platform wrote the log. Reads the lines once, keeping only a few: a log of any
    size fits in memory."""
    tracebacks = TracebackReader()
    named: dict[str, str] = {}
    before: deque[str] = deque(maxlen=CONTEXT_LINES)
    first: dict[str, tuple[int, str, Signature, re.Match, list[str]]] = {}  # signature id -> its first match
    waiting: list[tuple[list[str], int]] = []  # contexts still collecting the lines after their match: (lines, size)
    count = 0
    for count, raw in enumerate(lines, 1):
        line = clean_line(raw)
        tracebacks.feed(count, line)
        for marker in release or ():
            found = marker.pattern.search(line)
            if found:
                named.setdefault("engine", marker.engine)
                for key, value in found.groupdict().items():
                    if value:
                        named.setdefault(key, value)
        if any(pattern.search(line) for pattern in up or ()):
            tracebacks.came_through()
        for context, _ in waiting:
            context.append(line)
        waiting = [(context, size) for context, size in waiting if len(context) < size]
        hit = match_line(line, signatures)
        if hit and hit[0].id not in first:
            context = [*before, line]
            first[hit[0].id] = (count, line, hit[0], hit[1], context)
            waiting.append((context, len(context) + CONTEXT_LINES))
        before.append(line)
    distinct = []
    for number, line, signature, found, context in sorted(first.values(), key=lambda m: m[0]):
        fields = {k: v for k, v in found.groupdict().items() if v is not None}
        distinct.append(SignatureMatch(signature.id, signature.title, signature.engine, number, line, fields,
                                       signature.gate, signature.gate_ids, signature.hint, signature.root,
                                       tuple(context)))
    cause = next((m for m in distinct if m.root), None)
    crash = tracebacks.root(wrappers or [])
    if cause is None and crash is not None:
        cause = match_crash(crash, crashes or [])
        distinct += [cause] if cause else []
    return Explanation(log, count, cause, distinct, crash, named)


def explain_file(path: str, engines: Iterable[str] | None = None) -> Explanation:
    """Classify a log file, or standard input for ``-`` (a pipe: ``/dev/stdin`` is read the same way)."""
    signatures, wrappers, release = load_signatures(engines), load_wrappers(engines), load_release_markers(engines)
    crashes = load_crash_signatures(engines)
    up = [m.pattern for m in load_milestones(engines) if m.name == SERVER_UP]
    if path == "-":
        return classify(_decoded(sys.stdin.buffer), signatures, "standard input", wrappers, up, release, crashes)
    log = Path(path)
    if log.is_dir() or not log.exists():
        raise SpecauditError(f"{path}: no such log file")
    try:
        with log.open("rb") as fh:
            return classify(_decoded(fh), signatures, str(log), wrappers, up, release, crashes)
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
