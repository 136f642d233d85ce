"""Errors that reach the user as one line and a distinct exit code."""

from __future__ import annotations


class ExitCode:
    READY = 0
    BLOCKED = 1
    BAD_INPUT = 2
    UNKNOWN = 3
    DRIFT = 4  # a file is not as the patch bundle expects
    OUT_OF_RANGE = 5  # no bundle covers the release
    LOCKED = 6  # another patch run holds the tree
    SSH = 7  # the remote cannot be reached, refuses the key, or its host key changed
    FLAGGED = 8  # smoke: the launch runs, and the drafter silently does not help (or is not lossless)
    INTERRUPTED = 130  # Ctrl-C


class SpecauditError(Exception):
    """A problem with what the user gave us: printed as one line, exit code 2."""

    exit_code = ExitCode.BAD_INPUT
