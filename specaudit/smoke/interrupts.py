"""Ctrl-C around the steps of a smoke that must not be cut in half: a launch (its process group started and not
yet recorded would outlive the teardown) and the teardown itself (a node left half cleaned)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def interrupts_ignored() -> Iterator[None]:
    """The block runs to its end; a Ctrl-C (or a SIGTERM) during it is dropped: teardown is what it would ask for."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """The block runs to its end; a Ctrl-C (or a SIGTERM) during it is raised as KeyboardInterrupt right after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    saved = {sig: signal.signal(sig, lambda number, _frame: caught.append(number)) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    if caught:
        raise KeyboardInterrupt
