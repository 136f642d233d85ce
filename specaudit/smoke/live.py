"""The live view of a smoke launch: phase, elapsed time and the log's last lines, redrawn as they come.

On a terminal it is a rich Live panel; elsewhere (CI, a pipe) each timeline event is printed as one line,
so that a log of the run reads as its timeline.
"""

from __future__ import annotations

import time
from collections import deque

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from ..explain.signatures import clean_line
from ..results.outcome import Event

TAIL_LINES = 12


class LiveView:
    def __init__(self, console: Console, host: str):
        self.console, self.host = console, clean_line(host)
        self.started = time.monotonic()
        self.phase = "connect"
        self.events: deque[Event] = deque(maxlen=6)
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._live = Live(self._render(), console=console, auto_refresh=True, refresh_per_second=4,
                          transient=True, get_renderable=self._render) if console.is_terminal else None

    def __enter__(self) -> LiveView:
        if self._live:
            self._live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._live:
            self._live.stop()

    def event(self, event: Event) -> None:
        event = Event(event.seconds, event.phase, clean_line(event.text))  # what the node said: no sequence of its own
        self.phase = event.phase
        self.events.append(event)
        if self._live is None:
            self.console.print(Text.assemble((f"{event.seconds:8.1f}s ", "dim"), (f"{event.phase:<10} ", "bold"),
                                             event.text))

    def line(self, text: str) -> None:
        self.tail.append(clean_line(text))

    def _render(self) -> Panel:
        elapsed = time.monotonic() - self.started
        events = Text("\n").join(Text.assemble((f"{e.seconds:7.1f}s ", "dim"), (f"{e.phase:<10} ", "bold"), e.text)
                                 for e in self.events)
        tail = Text("\n").join(Text(line[:200], style="dim") for line in self.tail)
        return Panel(Group(events, Text(""), tail),
                     title=f"specaudit smoke {escape(self.host)}: [bold]{self.phase}[/] {elapsed:.0f} s", title_align="left")
