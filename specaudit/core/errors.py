"""Errors that reach the user as one line and a distinct exit code."""

from __future__ import annotations

from .types import ExitCode


class SpecauditError(Exception):
    """A problem with what the user gave us: printed as one line, exit code 2."""

    exit_code = ExitCode.BAD_INPUT
