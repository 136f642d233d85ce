"""Python tracebacks in a launch log, read as the lines go by: the exception, its message and its frames.

Engines print them bare or with a prefix on every line, one per process: ``(Worker pid=7271) ERROR 11-30
07:22:20 [multiproc_executor.py:953] Traceback (most recent call last):``. Each process's lines are followed
apart, so tracebacks printed by two processes at once do not mix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..results.outcome import Crash, Frame

# A process tag, then a logger's level, date, time and [file:line], any of them absent.
_PREFIX = re.compile(r"^(?:(?P<process>\([^()]*pid=\d+\)) ?)?"
                     r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d\s+[\d:.]+\s+\[[^\]]*\] ?)?")
_START = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<message>.*))?$")
MAX_CRASHES = 64  # a log that prints more tracebacks than this repeats itself: the first ones are the story


@dataclass
class _Open:
    line_number: int
    frames: list[Frame] = field(default_factory=list)


class TracebackReader:
    def __init__(self) -> None:
        self.crashes: list[Crash] = []
        self._open: dict[str, _Open] = {}  # process -> its traceback being read

    def feed(self, number: int, line: str) -> None:
        """One log line, without colours; ``number`` counts from 1."""
        prefix = _PREFIX.match(line)
        assert prefix is not None  # every part of _PREFIX is optional: it matches at the start of any line
        process, content = prefix.group("process") or "", line[prefix.end():]
        if content.strip() == _START:
            self._open[process] = _Open(number)
            return
        current = self._open.get(process)
        if current is None:
            return
        frame = _FRAME.match(content)
        if frame:
            current.frames.append(Frame(frame["file"], int(frame["line"]), frame["function"]))
        elif content[:1].isspace() or not content:
            return  # the source line of a frame, its ^^^ markers
        else:
            del self._open[process]
            found = _EXCEPTION.match(content.strip())
            if found and len(self.crashes) < MAX_CRASHES:
                self.crashes.append(Crash(current.line_number, process, found["type"], found["message"] or "",
                                          tuple(current.frames)))

    def came_through(self) -> None:
        """The launch came up after the tracebacks read so far (its server answers): they did not stop it."""
        self.crashes.clear()

    def root(self, wrappers: list[re.Pattern]) -> Crash | None:
        """The root cause: the first traceback in the log (the earliest failing process, and in a chain the
        exception that caused the others) that is not a wrapper saying that something below it failed."""
        return next((c for c in self.crashes if not any(w.search(c.text) for w in wrappers)), None)


_SITE_PACKAGES = re.compile(r"^.*?/(?:site|dist)-packages/")


def package_path(path: str) -> str:
    """A frame's file as its package path (``vllm/v1/...``): the part that names it on every machine."""
    shortened = _SITE_PACKAGES.sub("", path.replace("\\", "/"))
    return shortened if shortened != path else str(Path(path))
