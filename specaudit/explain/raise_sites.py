"""A pasted error line located where the engine makes it, from the message atlas.

The line's message is looked up as printed and as pydantic prints a validator's (``Value error, ... [type=``);
the best templates are its raise sites. Which engine and releases the paste is consistent with comes from the
sites, narrowed by the traceback's frames: a frame in an engine's package keeps that engine's sites, and a frame at
a site's file keeps that site and, where its line is the site's line in some releases, those releases. A message
that quotes another (``Worker failed with error '...'``) is located at the quoted one, the wrapper kept beside it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence

from ..results.outcome import Frame, Located, RaiseSite
from .atlas import Atlas, Hit, release_order, release_ranges
from .fixes import advised_fixes, caller_fixes, fixes_of, said_fixes
from .messages import template_text
from .tracebacks import BareLine

MIN_PART_LITERAL = 24  # a template found inside a longer line (not the whole of it) needs this much literal text
MIN_LITERAL_TO_TELL = 40  # literal text that tells a site however long the holes' values are
MIN_LITERAL_SHARE = 0.6  # else the share of the text that must be literal
_PYDANTIC = re.compile(r"(?:Value error|Assertion failed), (?P<message>.+?)(?:\s*\[type=.*)?$", re.DOTALL)
_QUOTED = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception): )?(?P<message>.+)$", re.DOTALL)


def locate(atlas: Atlas, message: str, frames: Sequence[Frame] = (), exception: str | None = None,
           version: str | None = None, quoted: bool = False, continued: Sequence[str] = (),
           engine: str | None = None) -> Located | None:
    """Where ``message`` (an exception's message, or a line pasted without one) is made, or None where no
    template of the atlas is it. ``version`` and ``engine``: the release the log names, where it names one (only
    that engine's templates are its sites); ``continued``: the lines a paste may have wrapped the message over."""
    hits = _best(atlas, message, frames, exception, continued, whole=quoted, engine=engine)
    if not hits:
        return None
    best = hits[0]
    if not quoted:
        inner = _quoted(atlas, best, frames, version, engine)
        if inner is not None:
            return inner
    releases = _consistent(hits, frames, version)
    sites = tuple(_site(atlas, hit, releases) for hit in hits[:5])
    engines = {hit.entry.engine for hit in hits}
    engine = engines.pop() if len(engines) == 1 else None
    said = "; ".join(f"{e} {release_ranges(releases[e], atlas.releases.get(e, []))}" for e in sorted(releases))
    fixes = _distinct(fix for hit in hits[:5] for fix in _fixes(atlas, hit)) or \
        _distinct(fix for hit in hits[:5] for fix in _said(atlas, hit))
    named = {_knob(fix) for fix in fixes}
    fixes += tuple(fix for fix in _distinct(f for hit in hits[:5] for f in _advised(atlas, hit))
                   if _knob(fix) not in named)
    fixes += _cut_needed(best)
    quotes = _quoted_text(best)
    if quotes:  # a wrapper quoting a failure the atlas does not know: its guard is the wrapper's, no fix of that
        fixes = ()
    return Located(message, sites, engine, said, best.holes, fixes, quotes=quotes)


# Lines with no exception type looked up in one log: a paste's few, not a log's millions; each no longer than an
# engine's message (a kilobyte of the atlas's commonest words costs 23 ms: 200 of them, under 5 s).
MAX_BARE_LOOKUPS = 200
MAX_BARE_CHARS = 1024
MIN_BARE_LITERAL = 20  # literal text a bare line must match whole to be read as the engine's raise


def bare_line(atlas: Atlas) -> BareLine:
    """A line pasted without its exception's type, as the type the engine raises it with: where the whole line is
    a raise's or an assert's message (and not a log's) with enough literal text to tell it."""
    left = [MAX_BARE_LOOKUPS]

    def raised(line: str) -> str | None:
        if not MIN_BARE_LITERAL <= len(line) <= MAX_BARE_CHARS or left[0] <= 0:
            return None
        left[0] -= 1
        hits = atlas.lookup(line)
        hit = next((h for h in hits if h.whole and not h.entry.logged and h.entry.literal >= MIN_BARE_LITERAL), None)
        if hit is None and hits and hits[0].partial:  # the line holds a raise's leading part, and no log's as much
            tied = [h for h in hits if h.rank == hits[0].rank]
            hit = hits[0] if not any(h.entry.logged for h in tied) and hits[0].literal >= MIN_BARE_LITERAL and \
                line.startswith(hits[0].entry.template.parts[0]) else None
        return hit.entry.template.exception.rpartition(".")[2] if hit else None

    return raised


def _best(atlas: Atlas, message: str, frames: Sequence[Frame], exception: str | None,
          continued: Sequence[str] = (), whole: bool = False, engine: str | None = None) -> list[Hit]:
    """The hits that tie for best, over the message as printed and as pydantic prints a validator's, each alone
    and with the lines it may go on over (rejoined where the paste cut a word, or between two); ``whole``: only
    templates that are the whole message (a wrapper's quote is one message, not a line around one); ``engine``: the
    engine the log names (else its frames' packages), whose templates alone can be its sites."""
    rejoined = [message + "".join(continued), message + " " + " ".join(continued)] if continued else []
    texts = [message, *rejoined, *_as_written(message)]
    texts += [found["message"] for text in texts for found in [_PYDANTIC.search(text)] if found]
    hits = [h for text in dict.fromkeys(texts) for h in atlas.lookup(text) if _credible(h, text, whole)]
    packages = {engine} if engine in atlas.releases else \
        {e for e in atlas.releases if any(f"/{e}/" in _path(f) for f in frames)}
    hits = [h for h in hits if not packages or h.entry.engine in packages]
    if exception and any(not h.entry.logged for h in hits):
        hits = [h for h in hits if not h.entry.logged]  # an exception's message: raised, not logged
    if exception and any(_same_type(h, exception) for h in hits):
        hits = [h for h in hits if _same_type(h, exception)]
    at_frame = [h for h in hits if any(_path(f).endswith("/" + h.entry.file) for f in frames)]
    hits = at_frame or hits
    if not hits:
        return []
    top = max(h.rank for h in hits)
    best = [h for h in hits if h.rank == top]
    # a site at a frame's line first, then a raise before a log, then the newest release's first
    best.sort(key=lambda h: release_order(h.entry.releases[-1]), reverse=True)
    return sorted(best, key=lambda h: (_at_line(h, frames) is None, h.entry.logged))


def _as_written(message: str) -> list[str]:
    """An ``assert`` statement as pasted (its frame's source line, perhaps cut at a message's opening parenthesis),
    as ast writes it: how the atlas holds an assert with no message."""
    if not message.startswith("assert "):
        return []
    statement = re.sub(r"[\s,(]+$", "", message)
    for candidate in (statement, statement.rpartition(",")[0]):
        try:
            tree = ast.parse(candidate.strip()) if candidate else None
        except (SyntaxError, ValueError, RecursionError):
            continue
        if tree is not None and len(tree.body) == 1 and isinstance(tree.body[0], ast.Assert):
            written = f"assert {ast.unparse(tree.body[0].test)}"
            return [written] if written != message else []
    return []


def _credible(hit: Hit, text: str, whole: bool) -> bool:
    """Whether the hit tells where the text was made: the whole text, or (unless ``whole``) enough literal text of a
    part of it; and either much literal text or most of the text literal. A template mostly of holes around a
    phrase Python itself prints ("{x} object has no attribute {y}") is not where Python's own AttributeError was."""
    literal = hit.literal or hit.entry.literal  # a cut paste's: what it holds of the template
    if not hit.whole and (whole or literal < MIN_PART_LITERAL):
        return False
    if _python_own(hit.entry.template.parts):
        return False
    return literal >= MIN_LITERAL_TO_TELL or literal >= MIN_LITERAL_SHARE * len(text.strip())


# Python's own messages, which an engine's template may copy around holes (a __getattr__ raising "'{cls}' object has
# no attribute '{name}'"): a template whose literal text is one of them and little else is not where the line came from.
_PYTHON_OWN = re.compile(r"object has no attribute|object is not (?:subscriptable|callable|iterable)|not supported "
                         r"between instances of|unsupported operand type\(s\) for|unexpected keyword argument|"
                         r"(?:too many|not enough) values to unpack|index out of range")


def _python_own(parts: Sequence[str]) -> bool:
    literal = "".join(parts[0::2])
    said = _PYTHON_OWN.search(literal)
    if said is None:
        return False
    return len(re.sub(r"[\W_]+", "", literal[:said.start()] + literal[said.end():])) < 8


def _quoted(atlas: Atlas, wrapper: Hit, frames: Sequence[Frame], version: str | None,
            engine: str | None = None) -> Located | None:
    """The message a wrapper's hole quotes, located, where it is one the atlas knows."""
    for _, value in wrapper.holes:
        text = value.strip()
        found = _QUOTED.match(text) if len(text) >= 12 else None
        inner = locate(atlas, found["message"], frames, None, version, quoted=True, engine=engine) if found else None
        if inner is not None:
            releases = _consistent([wrapper], frames, version)
            return Located(inner.text, inner.sites, inner.engine, inner.releases, inner.holes, inner.fixes,
                           _site(atlas, wrapper, releases))
    return None


def _quoted_text(hit: Hit) -> str:
    """The text of a hole the template quotes ('{result}'), where the atlas does not know it as a message of its
    own (Python's: "'Qwen2ForCausalLM' object has no attribute 'set_embed'"): the failure the wrapper reports."""
    parts = hit.entry.template.parts
    for i, (_, value) in enumerate(hit.holes):
        before, after = parts[2 * i], parts[2 * i + 2]
        if before[-1:] in ("'", '"') and after[:1] == before[-1] and len(value) >= 12:
            return value
    return ""


def _consistent(hits: list[Hit], frames: Sequence[Frame], version: str | None) -> dict[str, list[str]]:
    """engine -> the releases the hits appear in, narrowed to those whose line is a frame's where a frame is at
    one, and to the release the log names where it is one of them."""
    releases: dict[str, set[str]] = {}
    for hit in hits:
        releases.setdefault(hit.entry.engine, set()).update(hit.entry.releases)
    pinned: dict[str, set[str]] = {}
    for hit in hits:
        line = _at_line(hit, frames)
        if line is not None:
            pinned.setdefault(hit.entry.engine, set()).update(
                r for r, at in zip(hit.entry.releases, hit.entry.lines) if at == line)
    releases = pinned or releases
    if version and any(version in r for r in releases.values()):
        releases = {e: {version} for e, r in releases.items() if version in r}
    return {e: sorted(r, key=release_order) for e, r in releases.items()}


def _at_line(hit: Hit, frames: Sequence[Frame]) -> int | None:
    """The line of the frame at the hit's file whose line is the site's in some release, if one is."""
    for frame in reversed(frames):
        if _path(frame).endswith("/" + hit.entry.file) and frame.line in hit.entry.lines:
            return frame.line
    return None


def _site(atlas: Atlas, hit: Hit, releases: dict[str, list[str]]) -> RaiseSite:
    entry, template = hit.entry, hit.entry.template
    have = [r for r in releases.get(entry.engine, []) if r in entry.releases] or list(entry.releases)
    line = entry.lines[entry.releases.index(have[-1])]
    return RaiseSite(entry.engine, entry.file, template.function, line, template.kind, template.exception,
                     template.guard, release_ranges(entry.releases, atlas.releases.get(entry.engine, [])),
                     template_text(template.parts))


def _fixes(atlas: Atlas, hit: Hit) -> list[str]:
    """The fixes of the conditions on the way to the hit's raise, with the values the message printed (fixes.py);
    where they name no knob, its callers' (fixes.caller_fixes)."""
    fields = atlas.fields.get(hit.entry.engine, {})
    return fixes_of(hit.entry.template, hit.holes, fields) or \
        caller_fixes(hit.entry.template, hit.holes, fields, atlas.callers(hit.entry))


def _said(atlas: Atlas, hit: Hit) -> list[str]:
    """The knobs the message's own words tell to change, for a message whose conditions read none."""
    return said_fixes(hit.entry.template, atlas.fields.get(hit.entry.engine, {}))


def _advised(atlas: Atlas, hit: Hit) -> list[str]:
    """The knobs the message's words advise changing, beside the conditions' fixes."""
    return advised_fixes(hit.entry.template, atlas.fields.get(hit.entry.engine, {}))


def _knob(fix: str) -> str:
    """The knob a fix changes: what it says before its value."""
    return fix.partition(": ")[0]


def _cut_needed(hit: Hit) -> tuple[str, ...]:
    """Where the paste cut the message before a hole that the conditions on the way read: what a fix would have
    needed is not in the paste, said as a line of the fixes."""
    if not hit.cut:
        return ()
    template = hit.entry.template
    read = " ".join([*(c for c, _ in template.way), template.guard])
    needed = [h for h in hit.cut if re.search(rf"(?<![\w.]){re.escape(h)}(?![\w(])", read)]
    if not needed:
        return ()
    return (f"not from this paste: it cut the message before {', '.join(needed)}, which the conditions on the way "
            "read (paste the whole message for the fix that needs its value)",)


def _distinct(fixes: Iterable[str]) -> tuple[str, ...]:
    """The fixes once each: the same knob and value from several tied sites (releases whose messages print more or
    fewer values) once, the one that works the value out first."""
    ordered = sorted(dict.fromkeys(fixes), key=lambda fix: " = " not in fix.partition(" (")[0])
    kept: dict[str, str] = {}
    for fix in ordered:
        kept.setdefault(re.sub(r" = -?\d+$", "", fix.partition(" (")[0]), fix)
    return tuple(kept.values())


def _same_type(hit: Hit, exception: str) -> bool:
    """Whether the template makes an exception of the pasted type (``torch.OutOfMemoryError`` is OutOfMemoryError)."""
    return hit.entry.template.exception.rpartition(".")[2] == exception.rpartition(".")[2]


def _path(frame: Frame) -> str:
    return frame.file.replace("\\", "/")
