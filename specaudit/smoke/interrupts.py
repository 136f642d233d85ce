"""Ctrl-C around the steps of a smoke that must not be cut in half: a launch (its process group started and not
yet recorded would outlive the teardown) and the teardown itself (a node left half cleaned)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def _handled(handler: Callable[[int, Any], None] | signal.Handlers) -> Iterator[None]:
    """Ctrl-C and SIGTERM go to ``handler`` for the block (signals reach the main thread only: elsewhere, as they
    were)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, handler) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, previous in saved.items():
            signal.signal(sig, previous)


@contextmanager
def interrupts_ignored() -> Iterator[None]:
    """The block runs to its end; a Ctrl-C (or a SIGTERM) during it is dropped: teardown is what it would ask for."""
    with _handled(signal.SIG_IGN):
        yield


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """The block runs to its end; a Ctrl-C (or a SIGTERM) during it is raised as KeyboardInterrupt right after."""
    caught: list[int] = []
    with _handled(lambda number, _frame: caught.append(number)):
        yield
    if caught:
        raise KeyboardInterrupt
