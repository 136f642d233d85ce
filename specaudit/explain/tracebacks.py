"""Python tracebacks in a launch log, read as the lines go by: the exception, its message and its frames.

Engines print them bare or with a prefix on every line, one per process: ``(Worker pid=7271) ERROR 11-30
07:22:20 [multiproc_executor.py:953] Traceback (most recent call last):``, or SGLang's ``[2025-02-12 07:00:41 TP0]
Scheduler hit an exception: Traceback (most recent call last):``. Each process's lines are followed apart, so
tracebacks printed by two processes at once do not mix.

What users paste is often less than a traceback, and each of these is read as one:

- frames without the ``Traceback`` header above them (the tail of a traceback), up to the exception line;
- a lone exception line (``KeyError: 'embed_tokens.weight'``, ``torch.AcceleratorError: CUDA error: ...``): a crash
  with no frames, unless a logger printed it as a WARNING, INFO or DEBUG line (the engine went on);
- pydantic's form, ``ValidationError: 1 validation error for SpeculativeConfig`` and the ``Value error, ...`` line
  under it (read into the crash's message), or that second line alone;
- a log whose lines a web page joined into one: split again where a process tag or a frame starts;
- a line pasted as Markdown code (`` `KeyError: 'x'` ``), an exception's repr as a logger prints it
  (``IndexError('...')``), and a traceback cut off before its exception line (a crash of its own, the root cause
  only where no other is);
- torch's ``[rank0]:`` tag, a timestamp, logging's ``ERROR:name:`` and a bare ``ERROR [file.py:L]`` before a line;
- text before the exception type (``while loading I got ValueError: ...``), argparse's ``prog: error: argument
  --x: invalid loads value: ...``, and a line with no exception type that the message atlas knows as a raise's
  whole message (``bare``);
- a message a paste wrapped over several lines (kept as the crash's ``continued``, rejoined for the atlas), also
  where the whole paste is indented, and a frame wrapped inside its file's name;
- an error inside prose or an issue's title: after Markdown's list, heading and quote marks and a title's tag
  (``[Bug]: ...``), and an exception in an inline code span or quotes in the middle of a sentence (``However, I got
  `AssertionError: ...` ``), its message ending where the span does; a message quoted with no exception type
  (``"Prompt logprob is not supported ..."``) is looked up as a raise's whole message, like a bare line;
- an ``AssertionError`` with no message, named by the ``assert`` statement above it (the frame's source line, or
  the line pasted above it);
- frames with no header and no exception line (a tail cut off at both ends), and any cut-off traceback named by its
  innermost frame's source line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..results.outcome import Crash, Frame

# A process tag, torch's rank tag, a timestamp, SGLang's bracketed time and rank tags, then a logger's level with
# vLLM's date, time and [file:line], logging's default ":name:", or a bare [file:line]; any of them absent.
_PREFIX = re.compile(r"^(?:(?P<process>\([^()]*pid=\d+\)) ?)?(?:\[rank\d+\]: ?)?"
                     r"(?P<stamp>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?Z? (?:- )?)?"
                     r"(?P<tag>\[(?:\d{4}-\d\d-\d\d[ T][\d:.]+(?: [^\]]*)?|(?:[A-Z]+\d+ ?)+)\] ?)?"
                     r"(?:(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)(?:\s+\d\d-\d\d\s+[\d:.]+\s+"
                     r"(?:\[[^\]]*\]|[\w./-]+:\d+\])|:[\w.]*:|\s+\[[\w./-]+:\d+\]) ?)?")
_START = "Traceback (most recent call last):"
_STACK = "Stack (most recent call last):"  # logging's stack_info: frames of a call that did not fail
# A frame, indented or not; a long one wrapped before its ", in function" (which then goes unread).
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<function>.+?))?,?\s*$')
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<message>.*))?$")
# What an exception's name looks like where no header says that a traceback ends there: a lone line, or the line
# after frames that had no header.
_NAME = (r"(?:[A-Za-z_]\w*\.)*(?:(?:[A-Z]\w*)?(?:Error|Exception)|[A-Z]\w*(?:Exit|Interrupt|Fault|Failure)"
         r"|StopIteration|GeneratorExit)")
_LONE = re.compile(rf"^(?P<type>{_NAME})(?::\s?(?P<message>.*))?$")
# an exception line with text before it ("while loading: ValueError: ..."): only a name that says Error or Exception
_INNER = re.compile(r"(?:^|[\s:'\"(\[`])(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): (?P<message>\S.*)$")
# What prose and Markdown put before an error: quote marks, a list item's or a heading's mark, an issue title's tag
# ("[Bug]: ", "[Speculative decoding]: "); each of them, any number, at the start of a line.
_LEADER = re.compile(r"^(?:\s*(?:>+|[-*+](?= )|\d{1,3}[.)](?= )|#{1,6}(?= )|\[[^\]\n]{1,40}\]:?(?= |$)))+\s*")
# An assert statement quoted in prose that says it failed ("MTP, assert error, assert (m.num_reqs * 2 <= n)")
_SAID_ASSERT = re.compile(r"\bassert(?:ion)?[ _-]?(?:error|failed|failure)\b[,:]?\s+(?P<statement>assert\b\W.*)$",
                          re.IGNORECASE)
_LEADING = frozenset(">-*+#[0123456789`\"'")  # the first characters a line with a leader (or a span) starts with
# A span a sentence quotes: inline code or double quotes, closed or running to the end of the line.
_SPAN = re.compile(r"`([^`]{12,})(?:`|$)|\"([^\"]{12,})(?:\"|$)")
MAX_SPANS = 3  # spans of one line looked up as a raise's whole message
# argparse's refusal of an argument ("vllm serve: error: argument --x: invalid loads value: '...'"): it raised
# ArgumentError, caught it, printed this and exited 2
_ARGPARSE = re.compile(r"^(?:usage: .*?)?[\w .-]*: error: (?P<message>(?:argument|unrecognized arguments|the following "
                       r"arguments are required).*)$")
ARGUMENT_ERROR = "argparse.ArgumentError"
# a frame a paste wrapped inside its file's name: its path goes on on the next line
_WRAPPED_FRAME = re.compile(r'^\s*File "[^"]*$')
MAX_CONTINUED = 4  # lines of a message that a paste wrapped, read after its exception line
# an exception's repr, as a logger prints `repr(e)`: IndexError('Error in model execution: tuple index out of range')
_REPR = re.compile(rf"^(?P<type>{_NAME})\((?P<quote>['\"])(?P<message>.*)(?P=quote)\)$")
CUT_OFF = "Traceback"  # the exception of a traceback that ends before its exception line (cut off when pasted)
# pydantic's form: "1 validation error for SpeculativeConfig", then the field's line and "  Value error, ... [type=".
_VALIDATION = re.compile(r"^\d+ validation errors? for \w+$")
_PYDANTIC_LINE = re.compile(r"^\s+(?P<message>\S.*?)\s*\[type=[^\]]*\]?.*$")
_PYDANTIC_LONE = re.compile(r"^\s*(?P<message>(?:Value error|Assertion failed), .+?)\s*(?:\[type=.*)?$")
_QUIET = {"DEBUG", "INFO", "WARNING", "WARN"}  # logger levels whose exception text is not a failure
# Where a line joined by a web page is split again: before a process tag, or before a frame or header.
_JOINED_TAG = re.compile(r"(?<=\S) +(?=\([^()]*pid=\d+\) )")
_JOINED_FRAME = re.compile(r"(?<=\S) +(?=File \"|Traceback \(most recent call last\):)")
_JOINED_EXCEPTION = re.compile(rf"(?<=\S) +(?={_NAME}: )")
_JOINED_SOURCE = re.compile(r'^(File "[^"]+", line \d+, in [\w<>.]+) +(\S.*)$')
MAX_CRASHES = 64  # a log that prints more tracebacks than this repeats itself: the first ones are the story


@dataclass
class _Open:
    line_number: int
    frames: list[Frame] = field(default_factory=list)
    headed: bool = True  # False: frames with no "Traceback" header above them
    source: str = ""  # the source line under the last frame (the statement that raised, in the innermost)
    stack: bool = False  # a logger's "Stack (most recent call last):": frames that are no failure


BareLine = Callable[[str], "str | None"]  # a line with no exception type -> the type the engine raises it as, if it does


class TracebackReader:
    def __init__(self, bare: BareLine | None = None) -> None:
        self.bare = bare  # an error pasted without its exception's type, known by the engine's message
        self.crashes: list[Crash] = []
        self._open: dict[str, _Open] = {}  # process -> its traceback being read
        self._validation: dict[str, tuple[int, int]] = {}  # process -> (crash index, lines left) for pydantic's form
        self._wrapped: dict[str, str] = {}  # process -> the first part of a frame wrapped inside its file's name
        self._continuing: dict[str, int] = {}  # process -> the crash whose exception line may go on below
        self._indent: dict[str, str] = {}  # process -> the indentation of that exception line (a pasted block's)
        self._assert: dict[str, str] = {}  # process -> an `assert` statement pasted on the line just above

    def feed(self, number: int, line: str) -> None:
        """One log line, without colours; ``number`` counts from 1. A line that holds several joined lines is read
        as each of them."""
        if len(line) > 100 and (line.count("pid=") > 1 or line.count('File "') > 1):
            for part in split_joined(line):
                self._feed(number, part)
        else:
            self._feed(number, line)

    def _feed(self, number: int, line: str) -> None:
        prefix = _PREFIX.match(line)
        assert prefix is not None  # every part of _PREFIX is optional: it matches at the start of any line
        process, content = prefix.group("process") or "", line[prefix.end():]
        if self._wrapped and process in self._wrapped:
            content = self._wrapped.pop(process) + content.lstrip()
        elif 'File "' in content and _WRAPPED_FRAME.match(content):
            self._wrapped[process] = content
            return
        if self._validation and process in self._validation and self._pydantic(process, content):
            return
        if self._continuing and process in self._continuing and self._continued(process, prefix, content):
            return
        tail = content.rstrip()
        if tail.endswith(_START) or tail.endswith(_STACK):
            self._open[process] = _Open(number, stack=tail.endswith(_STACK))
            return
        current = self._open.get(process)
        frame = _FRAME.match(content) if 'File "' in content else None
        if current is None:
            if frame:  # the tail of a traceback whose header is not here
                self._open[process] = current = _Open(number, headed=False)
            else:
                self._lone(number, process, prefix.group("level"), content, _logged(prefix))
                return
        if frame:
            current.frames.append(Frame(frame["file"], int(frame["line"]), frame["function"] or "?"))
            current.source = ""
        elif content[:1].isspace() or not content:
            source = content.strip()
            if source and current.frames and not current.source and source.strip("^~ "):
                current.source = source  # the source line of a frame (not its ^^^ markers)
            return
        else:
            del self._open[process]
            found = (_EXCEPTION if current.headed else _LONE).match(content.strip())
            if found and not current.stack:
                message = found["message"] or _asserted(found["type"], current.source)
                self._add(Crash(current.line_number, process, found["type"], message, tuple(current.frames)),
                          continuing=True)
            else:
                self._cut_off(current, process, content.strip())
                self._lone(number, process, prefix.group("level"), content, _logged(prefix))

    def _continued(self, process: str, prefix: re.Match, content: str) -> bool:
        """A line that goes on with the message of the exception line above it, as a paste wraps a long one: not
        blank, not indented, not a logger's, a frame's or another exception's line. True when it was read so."""
        index = self._continuing.pop(process)
        indent = self._indent.pop(process, "")
        crash = self.crashes[index] if index < len(self.crashes) else None
        block = bool(indent) and content.startswith(indent) and not content[len(indent):][:1].isspace()
        if crash is None or not content or content[:1].isspace() and not block or prefix.group("level") \
                or 'File "' in content \
                or _START in content or _LONE.match(content.strip()) or _INNER.search(content) \
                or len(crash.continued) >= MAX_CONTINUED \
                or content.startswith(("During handling", "The above exception")):
            return False
        self.crashes[index] = replace(crash, continued=(*crash.continued, content.strip()))
        self._continuing[process] = index
        if indent:
            self._indent[process] = indent
        return True

    def _cut_off(self, current: _Open, process: str, after: str = "") -> None:
        """A traceback with no exception line (its header or not; a logger's stack is none): still a sign that
        something failed. The source line under its innermost frame says what it was doing; ``after``: the line
        that ended it, where that is a fragment a paste cut (``torch.O``)."""
        said = current.source.startswith(("assert ", "raise "))  # the statement that failed is there
        if current.stack or not current.frames or not current.headed and len(current.frames) < 2 and not said:
            return
        message = "cut off before its exception line"
        if current.source:
            message += f", at {current.source}"
        if after and len(after) <= 40 and " " not in after:
            message += f" (then '{after}')"
        self._add(Crash(current.line_number, process, CUT_OFF, message, tuple(current.frames)))

    def close(self) -> None:
        """The log ended: the tracebacks still open were cut off."""
        for process, current in list(self._open.items()):
            self._cut_off(current, process)
        self._open.clear()

    def _lone(self, number: int, process: str, level: str | None, content: str, logged: bool = False) -> None:
        """An exception line outside any traceback: a crash with no frames, unless a logger called it a warning.
        ``logged``: the line has a logger's prefix (a level, a timestamp, SGLang's bracketed time or rank tag)."""
        if level in _QUIET:
            return
        stripped = content.strip()
        if not stripped:
            return
        if stripped[0] in _LEADING:  # Markdown's marks, a title's tag: what they mark is the line
            stripped = _LEADER.sub("", stripped, count=1)
        if stripped.startswith("`") and stripped.endswith("`"):
            stripped = stripped.strip("`").strip()  # a line pasted as Markdown code: `KeyError: 'x'`
        if not stripped[:1].isalnum() and stripped[:1] not in "`\"'":
            return
        found = _LONE.match(stripped) or _REPR.match(stripped)
        if found:
            message = found["message"] or _asserted(found["type"], self._assert.get(process, ""))
            self._add(Crash(number, process, found["type"], message, ()), continuing=True)
            self._indent[process] = content[:len(content) - len(content.lstrip())]
            return
        if stripped.startswith("assert "):
            self._assert[process] = stripped  # the statement an AssertionError on the next line was raised by
            return
        if self._assert:
            self._assert.pop(process, None)
        argparse = _ARGPARSE.match(stripped) if ": error: " in stripped else None
        if argparse:
            self._add(Crash(number, process, ARGUMENT_ERROR, argparse["message"], ()))
            return
        inner = _INNER.search(stripped) if "Error: " in stripped or "Exception: " in stripped else None
        if inner:
            message = inner["message"]
            opened = stripped[inner.start("type") - 1] if inner.start("type") else ""
            # A reason an engine's log line gives in parentheses is a failure it handled and logs, not the line's
            # own: "[time] OpenAI Responses API ... disabled: ... init failed (ModuleNotFoundError: ...)" (SGLang
            # 0.5.17). The same words pasted without a logger's prefix are the failure the paste is about.
            if opened == "(" and logged:
                return
            if opened == "(" and message.endswith(")") and message.count(")") > message.count("("):
                message = message[:-1].rstrip()  # the parenthesis the line closes, not the message's
            if opened in "`\"" and opened:  # in a code span or quotes: the message ends where they close
                message = message.partition(opened)[0].rstrip()
            self._add(Crash(number, process, inner["type"], message, ()), continuing=True)
            return
        said = _SAID_ASSERT.search(stripped) if "ssert" in stripped else None
        if said:
            self._add(Crash(number, process, "AssertionError", said["statement"].rstrip(), ()))
            return
        pydantic = _PYDANTIC_LONE.match(content) if ", " in content else None
        if pydantic:
            self._add(Crash(number, process, "ValidationError", pydantic["message"], ()))
            return
        if self.bare is None or level is not None:
            return
        raised = self.bare(stripped)
        if raised:
            self._add(Crash(number, process, raised, stripped, ()))
            return
        spans = _SPAN.finditer(stripped) if "`" in stripped or '"' in stripped else iter(())
        for _, span in zip(range(MAX_SPANS), spans):
            quoted = (span[1] or span[2]).strip()
            raised = self.bare(quoted)
            if raised:
                self._add(Crash(number, process, raised, quoted, ()))
                return

    def _add(self, crash: Crash, continuing: bool = False) -> None:
        """``continuing``: its exception line may go on over the next lines (a paste wrapped it)."""
        if len(self.crashes) >= MAX_CRASHES:
            return
        self.crashes.append(crash)
        if continuing:
            self._continuing[crash.process] = len(self.crashes) - 1
        if _VALIDATION.match(crash.message):
            self._validation[crash.process] = (len(self.crashes) - 1, 3)

    def _pydantic(self, process: str, content: str) -> bool:
        """The lines under pydantic's "N validation error for X": the first that says what failed ("  Value error,
        ... [type=value_error, ...]") goes into the crash's message. True when the line was read so."""
        index, left = self._validation.pop(process)
        found = _PYDANTIC_LINE.match(content)
        if found:
            crash = self.crashes[index]
            self.crashes[index] = replace(crash, message=f"{crash.message}: {found['message']}")
            return True
        if left > 1 and content[:1].isalnum() and " " not in content.strip():
            self._validation[process] = (index, left - 1)  # the field's name, on its own line: read on
            return True
        return False

    def came_through(self) -> None:
        """The launch came up after the tracebacks read so far (its server answers): they did not stop it."""
        self.crashes.clear()
        self._validation.clear()
        self._continuing.clear()

    def root(self, wrappers: list[re.Pattern]) -> Crash | None:
        """The root cause: the first traceback in the log (the earliest failing process, and in a chain the
        exception that caused the others) that is not a wrapper saying that something below it failed; else the
        first wrapper (a launch that failed, whose cause is not in the log)."""
        whole = [c for c in self.crashes if c.exception != CUT_OFF]
        return next((c for c in whole if not any(w.search(c.text) for w in wrappers)),
                    whole[0] if whole else self.crashes[0] if self.crashes else None)


def _logged(prefix: re.Match) -> bool:
    """Whether a line's prefix is a logger's: a level, a timestamp, or SGLang's bracketed time or rank tag."""
    return bool(prefix.group("level") or prefix.group("stamp") or prefix.group("tag"))


def _asserted(exception: str, statement: str) -> str:
    """The message of an exception that printed none: for an AssertionError, the ``assert`` statement that raised
    it (as its frame's source line or the line pasted above it shows it)."""
    if exception.rpartition(".")[2] == "AssertionError" and statement.startswith("assert "):
        return statement
    return ""


def split_joined(line: str) -> list[str]:
    """The lines a web page joined into ``line``: split before each process tag when it holds several, else before
    each frame and header, and the exception from the source line before it."""
    if line.count("pid=") > 1:
        parts = _JOINED_TAG.split(line)
        if len(parts) > 1:
            return parts
    parts = _JOINED_FRAME.split(line)
    if len(parts) == 1:
        return parts
    parts = parts[:-1] + _JOINED_EXCEPTION.split(parts[-1])
    split = []
    for part in parts:  # a frame and its source line: the source, indented, on a line of its own
        frame = _JOINED_SOURCE.match(part)
        split += [frame[1], "    " + frame[2]] if frame else [part]
    return split


_SITE_PACKAGES = re.compile(r"^.*?/(?:site|dist)-packages/")


def package_path(path: str) -> str:
    """A frame's file as its package path (``vllm/v1/...``): the part that names it on every machine."""
    shortened = _SITE_PACKAGES.sub("", path.replace("\\", "/"))
    return shortened if shortened != path else str(Path(path))
