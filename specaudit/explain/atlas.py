"""The message atlas: every template of the releases it was built from (atlas_build.py), identical ones merged,
each with the releases it appears in and its line in each; and a line of a paste looked up in it.

A lookup finds the candidates by one word of each template (its longest literal word, one no hole can touch),
checks that its literals appear in order, and only then runs its pattern: a line costs a few dictionary lookups
and the patterns of the templates that share a word with it, whatever the atlas's size.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from packaging.version import InvalidVersion, Version

from .callers import Caller, caller_of
from .messages import Parts, pattern_of
from .templates import Template

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
MAX_LOOKUP_CHARS = 4096  # an engine's message is read from its start; no pattern's work grows past this


@dataclass(frozen=True)
class Entry:
    """One template as the releases have it: the same message made the same way in the same function."""

    engine: str
    file: str  # the package path: vllm/config/speculative.py
    template: Template  # its line is the newest release's
    releases: tuple[str, ...]  # oldest first
    lines: tuple[int, ...]  # its line in each of them

    @cached_property
    def pattern(self) -> re.Pattern:
        return re.compile(pattern_of(self.template.parts), re.DOTALL)

    @property
    def logged(self) -> bool:
        return self.template.kind.startswith("logger.")

    @property
    def literal(self) -> int:
        return sum(len(p) for p in self.template.parts[0::2])


# The text of a hole the paste cut off (Hit.cut): the message was pasted up to a point before it.
CUT = "(cut from the paste)"


@dataclass(frozen=True)
class Hit:
    entry: Entry
    holes: tuple[tuple[str, str], ...]  # (the hole's expression, the text it stands for; CUT where the paste cut it)
    whole: bool  # the template is the whole text, not a part of it
    cut: tuple[str, ...] = ()  # the holes the paste left out: it holds the template's leading part only
    literal: int = 0  # a cut hit's: the template's literal text the paste holds

    @property
    def rank(self) -> tuple[bool, bool, int]:
        return not self.cut and not self.partial, self.whole, self.literal or self.entry.literal

    @property
    def partial(self) -> bool:
        """The paste holds the template's leading part only (a hit found by ``leading``)."""
        return self.literal > 0


# A template as the atlas files hold it (JSON): kind, exception, function, line, parts, guard, remedies, way,
# reaching; and an
# entry of the merged atlas: engine, file, that row (the newest release's), its releases, its line in each.
Row = list[Any]


def row_of(t: Template) -> Row:
    return [t.kind, t.exception, t.function, t.line, list(t.parts), t.guard, [list(r) for r in t.remedies],
            [list(w) for w in t.way], [list(r) for r in t.reaching]]


def template_of(row: Row) -> Template:
    kind, exception, function, line, parts, guard, remedies, way, reaching = row
    return Template(kind, exception, function, line, tuple(parts), guard, tuple((n, v) for n, v in remedies),
                    tuple((c, bool(b)) for c, b in way), tuple((n, v) for n, v in reaching))


class Atlas:
    """The merged atlas as its file holds it, each entry made an ``Entry`` only when a lookup reaches it: loading
    it costs the JSON's parse and nothing per template."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.rows: list[Row] = data["entries"]
        self.index: dict[str, list[int]] = data["index"]  # anchor word -> the entries it anchors
        self.releases: dict[str, list[str]] = data["releases"]  # engine -> its releases built, oldest first
        # engine -> flag class -> its fields, over every release
        self.fields = {e: {c: frozenset(n) for c, n in cs.items()} for e, cs in data["fields"].items()}
        self._entries: dict[int, Entry] = {}
        self._callers: dict[str, str] = data.get("callers") or {}  # function -> its callers' rows, as JSON

    def callers(self, entry: Entry) -> tuple[Caller, ...]:
        """The callers of the function that makes ``entry``'s message, in the releases the atlas was built from
        (callers.py), parsed when asked for."""
        rows = json.loads(self._callers.get(f"{entry.engine}\t{entry.file}\t{entry.template.function}", "[]"))
        return tuple(caller_of(row) for row in rows)

    @property
    def functions_called(self) -> int:
        """How many raising functions the callers' table holds callers of."""
        return len(self._callers)

    def __len__(self) -> int:
        return len(self.rows)

    def entry(self, i: int) -> Entry:
        if i not in self._entries:
            engine, file, row, releases, lines = self.rows[i]
            self._entries[i] = Entry(engine, file, template_of(row), tuple(releases), tuple(lines))
        return self._entries[i]

    def lookup(self, text: str) -> list[Hit]:
        """The templates ``text`` is an instance of, best first: whole before part, more literal text before less;
        where it is an instance of none, the templates whose leading part it holds, cut (``leading``)."""
        text = text[:MAX_LOOKUP_CHARS].strip()
        candidates = {i for word in set(_WORD.findall(text)) for i in self.index.get(word, ())}
        hits = [hit for i in candidates if _in_order(self.rows[i][2][4][0::2], text)
                for hit in [_match(self.entry(i), text)] if hit]
        if not hits:
            hits = [hit for i in candidates if self.rows[i][2][4][0] in text
                    for hit in [leading(self.entry(i), text)] if hit]
        return sorted(hits, key=lambda h: h.rank, reverse=True)


def index_of(rows: list[Row]) -> dict[str, list[int]]:
    """Each entry under its anchor word (``anchor``); an entry with none cannot be told by its text, and is left out."""
    index: dict[str, list[int]] = {}
    for i, (_, _, row, _, _) in enumerate(rows):
        word = anchor(row[4])
        if word:
            index.setdefault(word, []).append(i)
    return index


def anchor(parts: Parts | list[str]) -> str:
    """The template's longest literal word that every instance holds whole: not touching a hole."""
    best = ""
    last = len(parts) - 1
    for i in range(0, len(parts), 2):
        literal = parts[i]
        for found in _WORD.finditer(literal):
            touches_hole = found.start() == 0 and i > 0 or found.end() == len(literal) and i < last
            if not touches_hole and len(found[0]) > len(best):
                best = found[0]
    return best


def _in_order(literals: list[str], text: str) -> bool:
    """Whether the literals appear in ``text`` in their order: what a match needs, tested without a pattern."""
    at = 0
    for literal in literals:
        if literal:
            at = text.find(literal, at)
            if at < 0:
                return False
            at += len(literal)
    return True


def _match(entry: Entry, text: str) -> Hit | None:
    found = entry.pattern.fullmatch(text)
    whole = found is not None
    found = found or entry.pattern.search(text)
    if found is None:
        return None
    holes = entry.template.parts[1::2]
    return Hit(entry, tuple((hole, found[f"h{i}"]) for i, hole in enumerate(holes)), whole)


MIN_LEADING_LITERAL = 24  # the template's literal text a paste of its leading part must hold
MIN_FIRST_LITERAL = 8  # and its first literal: where the message starts in the line
# A hole's text where the paste cut the literal after it: a value as Python prints one.
_VALUE = re.compile(r"""\[[^\]\n]*\]|\([^)\n]*\)|\{[^}\n]*\}|'[^'\n]*'|"[^"\n]*"|[^\s,;]+""")
_WORDS = re.compile(r"\w+")


def leading(entry: Entry, text: str) -> Hit | None:
    """The template matched on its leading part only: the line holds its first literal, then its holes and literals
    in order up to a point; after that point the line's rest is either the start of the template's next literal
    (the paste cut the message there) or words the template's rest holds, in their order (the paste left some out
    between). The holes up to the point are read (the last one as a value as Python prints it); those after it are
    ``Hit.cut``. None where the line holds less than MIN_LEADING_LITERAL of the template's literal text, or goes on
    with words the template does not have."""
    parts = entry.template.parts
    first = parts[0]
    if len(parts) < 3 or len(first.strip()) < MIN_FIRST_LITERAL:
        return None
    at = text.find(first)
    if at < 0:
        return None
    at += len(first)
    literal = len(first)
    holes: list[tuple[str, str]] = []
    for i in range(1, len(parts), 2):
        after = parts[i + 1]
        end = text.find(after, at) if after else -1
        if end >= 0 and "\n" not in text[at:end]:
            holes.append((parts[i], text[at:end]))
            at, literal = end + len(after), literal + len(after)
            continue
        value = _VALUE.match(text, at)
        if value is None:
            break
        holes.append((parts[i], value[0].rstrip(".")))
        at += len(value[0].rstrip("."))
        rest = text[at:].rstrip()
        if not rest:
            break
        if after.startswith(rest):  # cut in the literal after the hole
            literal += len(rest)
            break
        told = _told(rest, " ".join(parts[i + 1::2]))
        if told is None:
            return None
        literal += told
        break
    else:
        return None  # the whole template: a match the pattern refused
    if literal < MIN_LEADING_LITERAL:
        return None  # too little of it to tell
    cut = parts[2 * len(holes) + 1::2]
    return Hit(entry, (*holes, *((hole, CUT) for hole in cut)), False, tuple(cut), literal)


def _told(rest: str, template_rest: str) -> int | None:
    """The literal characters of ``rest`` that the template's rest holds, its words in their order; None where a
    word of it is not there."""
    words = _WORDS.findall(rest)
    have = _WORDS.findall(template_rest)
    at = 0
    for word in words:
        try:
            at = have.index(word, at) + 1
        except ValueError:
            return None
    return sum(len(w) + 1 for w in words)


def release_order(version: str) -> tuple[int, Version | str]:
    try:
        return 0, Version(version)
    except InvalidVersion:
        return 1, version


def release_ranges(releases: Iterable[str], known: list[str]) -> str:
    """The releases as runs of consecutive ones among those the atlas knows: "0.17.0-0.33.0, 0.34.0"."""
    have, runs = set(releases), []
    run: list[str] = []
    for release in known:
        if release in have:
            run.append(release)
        elif run:
            runs.append(run)
            run = []
    if run:
        runs.append(run)
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
