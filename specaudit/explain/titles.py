"""An issue's title pasted with no error line, read against the message atlas.

A title shortens or rewords the engine's message ("EAGLE3 crashes with PP>1 on a DeepSeek target"),
so it is not matched as a template is: its words are. Each word of the title is weighed by how rare it is among the
atlas's templates (a word every template holds tells nothing), and a template scores the share of the title's weight
that its text holds: its message's literal words, and with less weight its guard, function and file (a word no
template holds, a model's name, weighs nothing). An upper-case
abbreviation is also read as the words of an engine flag it abbreviates (``PP``: ``pipeline_parallel_size``), taken
from the flag classes the atlas read (``Atlas.fields``).

What a title can settle: the engine (the one whose templates hold its words, or the one it names) and the messages
it is nearest, with their guards and fixes. What it cannot: the exception, the raise site and the release, which only
the error line and its traceback show; the reading says so.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from ..results.outcome import Located, RaiseSite
from .atlas import Atlas, Entry, release_ranges
from .fixes import fixes_of
from .messages import template_text

TITLE = "issue title"  # the exception of a crash read from an issue title: no error line was pasted
MAX_TITLE_CHARS = 300  # a title longer than this is prose, not a title
MIN_WORDS = 2  # title words a template must hold to be near it
MIN_SHARE = 0.3  # the share of the title's weight the nearest template must hold
CONTEXT_WEIGHT = 0.5  # a word held by the guard, function or file only, not the message
NEAR_RATIO = 0.85  # templates within this share of the nearest's score are shown beside it
FIX_SHARE = 0.75  # a fix is offered from a message that holds this share of the title's weight: else it is a guess
MAX_NEAR = 3

# An issue title's tag, "[Bug]: ", "[Speculative decoding] " (not a rank tag or SGLang's "[TP0]")
_TAG = re.compile(r"^\s*\[(?P<tag>[A-Za-z][\w .+/-]{0,38})\]:?\s+")
_RANK_TAG = re.compile(r"^(?:rank\d+|(?:[A-Z]+\d+ ?)+)$")
# What a title says when it reports a failure
_FAILURE = re.compile(r"\b(?:crash\w*|errors?|fail\w*|exception|raises?|raised|missing|assert\w*|not supported|"
                      r"unsupported|cannot|can't|can ?not|unable|broken|invalid|(?:does|do)(?: not|n't) work|hangs?|"
                      r"stuck|mismatch\w*|out of memory|OOM|illegal)\b", re.IGNORECASE)
# a word: an upper-case run before a capitalized word (LLM in LLMEngine), a capitalized or lower-case word, an
# upper-case run; digits kept with the word they end (eagle3, Qwen2)
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+\d*|[A-Z]+\d*")
_ABBREVIATION = re.compile(r"^[A-Z]{2,4}$")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")  # a name as written, before it is split into words
_EXCEPTION_NAME = re.compile(r"^(?:[A-Z]\w*)?(?:Error|Exception|Warning)$")
_SUFFIXES = ("ing", "ed", "es", "s", "e")  # not -er: a drafter is not a draft, a worker not work
# Words a title reports a failure with, or joins others with: they locate nothing
_STOP = frozenset({"a", "an", "the", "and", "or", "but", "with", "without", "on", "in", "into", "of", "for", "to",
    "from", "by", "at", "as", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that",
    "these", "those", "there", "when", "while", "because", "after", "before", "during", "if", "then", "than", "so",
    "i", "we", "you", "my", "our", "your", "me", "us", "get", "gets", "got", "getting", "using", "use", "used",
    "uses", "run", "runs", "running", "how", "why", "what", "which", "can", "could", "would", "should", "will",
    "may", "might", "also", "only", "bug", "bugs", "issue", "issues", "error", "errors", "crash", "crashes",
    "crashed", "crashing", "fail", "fails", "failed", "failing", "failure", "raise", "raises", "raised", "exception",
    "exceptions", "traceback", "problem", "sometimes", "always", "randomly", "unexpected", "unexpectedly", "occurs",
    "occurred", "happens", "happen", "self", "none", "true", "false", "some", "any", "all", "one", "two", "via",
    "vs", "new", "old", "latest", "version", "model", "models"})


def title_of(line: str, near: Callable[[str], bool] | None = None) -> str | None:
    """The failure an issue title reports, without its tag: the paste's first line, where it is no longer than a title
    and either carries a title's tag (``[Bug]: ...``) and says that something failed, or, with no tag, is a sentence
    that names an error (``untagged_title``) whose words ``near`` finds near an engine's message (``title_near``: the
    atlas; without one, a line with no tag is not read). None where the line is no such title."""
    text = line.strip()
    if not text or len(text) > MAX_TITLE_CHARS:
        return None
    tag = _TAG.match(text)
    if tag is None:
        return text if near is not None and untagged_title(text) and near(text) else None
    if _RANK_TAG.match(tag["tag"]):
        return None
    title = text[tag.end():].strip()
    return title if len(title) >= 12 and _FAILURE.search(title) else None


# A line with no tag is read as a title where it is a sentence (words, a letter first, not ending in ":" as Python's
# "The above exception was the direct cause of the following exception:" and a paste's "I got this error:" do) that
# names an error: an exception's type, or error, exception, crash, fail, assert; and is not a log's or Python's line
# (a timestamp, a pid or rank tag, a logger's level, a frame, a path or file:line, a statement or a call of code).
MIN_TITLE_WORDS = 4
_NAMES_ERROR = re.compile(r"\b(?:[A-Z]\w*(?:Error|Exception)|[Ee]rrors?|[Ee]xceptions?|[Cc]rash\w*|[Ff]ail\w*|"
                          r"[Aa]ssert\w*|OOM)\b")
_NOT_PROSE = re.compile(r"^(?:[\d(\[<>#|`*-]|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b|Traceback\b|File \"|"
                        r"During handling\b|The above exception\b|(?:assert|raise|return|def|class|import|lambda)\s)|[=;{}]|\w\(|"
                        r"\w+\.py\b|(?:^|\s)/\w|\.\w+:\d|:$|\w+(?:Error|Exception):")


def title_near(atlas: Atlas) -> Callable[[str], bool]:
    """Whether an untagged line's words are near a message of the atlas's releases, as a title's are read
    (``title_located``): prose that names an error but no engine message ("we assert that the failure is rare") is
    not read as a title."""
    return lambda text: title_located(atlas, text) is not None


def untagged_title(text: str) -> str | None:
    """A first line with no tag, read as an issue's title: a sentence naming an error (``run eagle speculative
    decodeing error!``, sglang#3362), not a question or a change that names none (``How to run EAGLE3 for Llama 3.3
    70B instruct``, sglang#6768), nor a log's, Python's or a paste's own line."""
    if not text[:1].isalpha() or _NOT_PROSE.search(text) or len(text.split()) < MIN_TITLE_WORDS:
        return None
    return text if _NAMES_ERROR.search(text) else None


@dataclass(frozen=True)
class Near:
    """A template whose text holds the title's words."""

    index: int  # the entry's in the atlas
    entry: Entry
    score: float  # the share of the title's weight it holds
    words: tuple[str, ...]  # the title's words it holds


@dataclass(frozen=True)
class TitleReading:
    title: str
    near: tuple[Near, ...]  # nearest first
    engine: str | None  # the engine the title is read as (None: not settled)
    engine_by: str  # how: "named in the title", "by its words", ""


def read_title(atlas: Atlas, title: str) -> TitleReading:
    """The templates nearest ``title``'s words, and the engine it is read as."""
    words = title_words(title)
    texts = _texts(atlas)
    named = {e for e in atlas.releases if re.search(rf"\b{e}\b", title, re.IGNORECASE)}
    alone = next(iter(named)) if len(named) == 1 else None
    weights: dict[str, float] = {}
    held: dict[int, dict[str, float]] = {}  # entry -> word -> the weight it holds of it
    total = len(atlas) or 1
    for word in words:
        in_message, in_context = texts.holding(word, _abbreviations(atlas))
        in_context -= in_message
        if not in_message and not in_context:
            continue  # a word no message holds (a model's name, "startup") locates nothing, and weighs nothing
        weight = math.log((total + 1) / (len(in_message) + len(in_context) + 1))
        weights[word] = weight
        for i in in_message:
            held.setdefault(i, {})[word] = weight
        for i in in_context:
            held.setdefault(i, {})[word] = weight * CONTEXT_WEIGHT
    whole = sum(weights.values()) or 1.0
    scored = []
    for i, have in held.items():
        if len(have) < MIN_WORDS or named and atlas.rows[i][0] not in named:
            continue
        entry = atlas.entry(i)
        score = sum(have.values()) / whole * _kind_weight(entry)
        scored.append((score, -entry.literal, i, entry, tuple(w for w in weights if w in have)))
    scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
    near = [Near(i, entry, score, held_words) for score, _, i, entry, held_words in scored[:50]]
    if not near or near[0].score < MIN_SHARE:
        return TitleReading(title, (), alone, "named in the title" if alone else "")
    close = [n for n in near if n.score >= NEAR_RATIO * near[0].score]
    engines = {n.entry.engine for n in close}
    engine = alone or (engines.pop() if len(engines) == 1 else None)
    by = "named in the title" if alone else "by its words" if engine else ""
    shown = tuple(n for n in close if engine is None or n.entry.engine == engine)
    return TitleReading(title, shown[:MAX_NEAR], engine, by)


def title_words(title: str) -> list[str]:
    """The title's words that may locate a message: not a stop word, not an exception's name (Python's own, most
    often, which no engine template makes), each once; an abbreviation kept in upper case."""
    words = []
    for name in _NAME.findall(title):
        if _EXCEPTION_NAME.match(name):
            continue
        for token in _WORD.findall(name):
            if _ABBREVIATION.match(token):
                words.append(token)
                continue
            lower = token.lower()
            if len(lower) >= 3 and lower not in _STOP:
                words.append(lower)
    return list(dict.fromkeys(words))


def stem(word: str) -> str:
    """A word without the suffix English adds to it (decoding, decoder, decode: ``decod``)."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[:-len(suffix)]
    return word


def words_of(text: str) -> list[str]:
    """Text's words as the title's are looked up among them: split at underscores, dots and camel case
    (``EagleLlamaModel``: eagle, llama, model), lower case, a number kept with the word it ends (``eagle3``)."""
    return [w.lower() for w in _WORD.findall(text)]


def _kind_weight(entry: Entry) -> float:
    """A failure's title is nearer a raise or an error than a line logged at a lower level."""
    kind = entry.template.kind
    if not kind.startswith("logger."):
        return 1.0
    return 0.9 if any(level in kind for level in ("error", "exception", "critical", "fatal", "warning")) else 0.6


class _Texts:
    """The atlas's templates as two texts, an entry a line, in lower case: their messages' literal text, and their
    guards, functions and files. A word's entries are found by a substring search of its stem (C's speed over the
    whole atlas), then each entry found is split into its words (``words_of``) to tell the word from a part of
    another: no entry is split into words that holds no title word."""

    def __init__(self, atlas: Atlas) -> None:
        self.atlas = atlas
        self.messages = _Lines([" ".join(row[4][0::2]) for _, _, row, _, _ in atlas.rows])
        self.contexts = _Lines([f"{row[5]} {row[2]} {file.rpartition('/')[2][:-3]}" for _, file, row, _, _ in atlas.rows])
        self._stems: dict[str, str] = {}

    def holding(self, word: str, abbreviations: dict[str, set[str]]) -> tuple[set[int], set[int]]:
        """The entries whose message holds ``word``, and those whose guard, function or file does. An abbreviation
        is held as itself, or as every word of a flag's it abbreviates."""
        if not _ABBREVIATION.match(word):
            key = stem(word)
            return self._held(self.messages, key), self._held(self.contexts, key)
        lower = word.lower()
        message, context = self._held(self.messages, lower), self._held(self.contexts, lower)
        for spelled in abbreviations.get(lower, ()):
            keys = [stem(w) for w in spelled.split()]
            message |= set.intersection(*(self._held(self.messages, k) for k in keys))
            context |= set.intersection(*(self._held(self.contexts, k) | self._held(self.messages, k) for k in keys))
        return message, context

    def _held(self, lines: _Lines, key: str) -> set[int]:
        found = lines.found.get(key)
        if found is None:
            found = lines.found[key] = {i for i in lines.containing(key) if key in self._words(lines, i)}
        return found

    def _words(self, lines: _Lines, i: int) -> set[str]:
        words = lines.words.get(i)
        if words is None:
            words = lines.words[i] = set()
            for word in _WORD.findall(lines.lines[i]):
                key = self._stems.get(word)
                if key is None:
                    key = self._stems[word] = stem(word.lower())
                words.add(key)
        return words


class _Lines:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.text = "\n".join(lines).lower()
        self.starts, at = [], 0
        for line in lines:
            self.starts.append(at)
            at += len(line) + 1
        self.found: dict[str, set[int]] = {}  # a stem -> the entries that hold a word of it
        self.words: dict[int, set[str]] = {}  # an entry -> the stems of its words, once split

    def containing(self, needle: str) -> set[int]:
        """The lines whose text holds ``needle`` (lower case), found by ``str.find`` over the whole text."""
        found, at = set(), self.text.find(needle)
        while at >= 0:
            line = bisect_right(self.starts, at) - 1
            found.add(line)
            at = self.text.find(needle, self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text))
        return found


_CACHE: WeakKeyDictionary[Atlas, _Texts] = WeakKeyDictionary()
_ABBREVIATED: WeakKeyDictionary[Atlas, dict[str, set[str]]] = WeakKeyDictionary()


def _texts(atlas: Atlas) -> _Texts:
    if atlas not in _CACHE:
        _CACHE[atlas] = _Texts(atlas)
    return _CACHE[atlas]


def _abbreviations(atlas: Atlas) -> dict[str, set[str]]:
    """Abbreviation -> the words it stands for, from the engines' flags: a flag's words by their initials, and those
    before a last ``size`` (``pipeline_parallel_size``: ``pp`` for pipeline parallel; ``tp``, ``dp``, ``ep``)."""
    if atlas not in _ABBREVIATED:
        found: dict[str, set[str]] = {}
        for classes in atlas.fields.values():
            for names in classes.values():
                for name in names:
                    parts = [p for p in name.lower().split("_") if p]
                    for run in (parts, parts[:-1] if parts[-1:] == ["size"] else []):
                        if 2 <= len(run) <= 4 and all(p.isalpha() for p in run):
                            found.setdefault("".join(p[0] for p in run), set()).add(" ".join(run))
        _ABBREVIATED[atlas] = found
    return _ABBREVIATED[atlas]


def title_located(atlas: Atlas, title: str) -> Located | None:
    """The title's reading as the atlas's finding: the messages nearest its words as its sites (each with its guard
    and releases), the engine where its words settle it, and the fixes of the nearest messages' conditions; no
    holes (a title prints no values); fixes only from a message that holds most of its words. None where no message
    holds enough of its words."""
    reading = read_title(atlas, title)
    if not reading.near:
        return None
    sites = tuple(_site(atlas, n.entry) for n in reading.near)
    engines = sorted({n.entry.engine for n in reading.near})
    said = "; ".join(f"{e} " + release_ranges({r for n in reading.near if n.entry.engine == e
                                                for r in n.entry.releases}, atlas.releases.get(e, []))
                     for e in engines)
    fixes: list[str] = []
    for n in reading.near:
        if n.score >= FIX_SHARE:
            fixes += fixes_of(n.entry.template, (), atlas.fields.get(n.entry.engine, {}))
    return Located(title, sites, reading.engine, f"{said} (by the title's words alone)", (),
                   tuple(dict.fromkeys(fixes)))


def title_summary(title: str, found: Located | None) -> str:
    """What a title settles and what it does not, in words: the root cause of a paste that is only a title."""
    said = f"an issue title, with no error line: '{title}'"
    unsettled = ("a title does not show the exception, where it was raised or the release: paste the error line and "
                 "its traceback to settle them")
    if found is None or not found.sites:
        return f"{said}; no engine message holds enough of its words; {unsettled}"
    site = found.sites[0]
    engine = f"{found.engine}'s" if found.engine else "a"
    more = f" and {len(found.sites) - 1} more" if len(found.sites) > 1 else ""
    guard = f" under {site.guard}" if site.guard else ""
    unsure = "" if found.engine else " (the engine is not settled: both engines' messages hold its words)"
    message = f" '{site.message}'" if site.message else ""
    return (f"{said}. Its words are nearest {engine} {site.kind} {site.exception}{message} at {site.location} in "
            f"{site.function}{guard}{more}{unsure}; {found.releases}; {unsettled}")


def _site(atlas: Atlas, entry: Entry) -> RaiseSite:
    template = entry.template
    return RaiseSite(entry.engine, entry.file, template.function, entry.lines[-1], template.kind, template.exception,
                     template.guard, release_ranges(entry.releases, atlas.releases.get(entry.engine, [])),
                     template_text(template.parts))
