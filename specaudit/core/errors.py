"""Errors that reach the user as one line and a distinct exit code."""

from __future__ import annotations

import json
from typing import Any

from .types import ExitCode


class SpecauditError(Exception):
    """A problem with what the user gave us: printed as one line, exit code 2."""

    exit_code = ExitCode.BAD_INPUT


class FieldTypeError(SpecauditError):
    """A field of JSON from input (a model's config.json, a speculative config, the patch state or its journal) whose
    value is not of the type its reader requires: bad input, found where the input is read (core/data.py
    check_fields), so that nothing past that point meets it."""

    def __init__(self, source: str, name: str, expected: str, value: Any):
        super().__init__(f"{source}: \"{name}\" must be {expected}, not {json.dumps(value)[:60]}")
        self.source, self.name, self.expected, self.value = source, name, expected, value
