"""The text a template prints of its arguments, as Python prints it: a printf-style one (``%``, the loggers) or a
``str.format`` one, split into literal text and fields, then filled in. Text is parts: literal, hole, literal, ...
(an odd count), a hole being what is not known, named by its code. player.Player.text reads the expressions."""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .operators import MAX_VALUE_CHARS
from .values import UNKNOWN, known

# printf-style conversions as `%` and the loggers apply them: %(name)s, %-5.2f, %%
_PRINTF = re.compile(r"%(?:\((?P<key>[^)]*)\))?[#0 +-]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?(?P<conversion>[diouxXeEfFgGcrsa%])")
_CONVERSIONS: dict[str, Callable[[Any], Any]] = {"": lambda value: value, "s": str, "r": repr, "a": ascii}


@dataclass(frozen=True)
class Field:
    """A field of a template: the argument it prints (its position, or its name), and how: a printf conversion as
    written (``%-5.2f``, ``%(key)s``), else a conversion and a spec (``{!r:>8}``, in an f-string too); ``whole``: it
    prints the argument, not a part of it (``{0.name}``)."""

    argument: int | str
    printf: str = ""
    conversion: str = ""
    spec: str = ""
    whole: bool = True

    def show(self, value: Any) -> str | None:
        """What the field prints of ``value``; None where that is a part of it, where Python would not print it
        (``%d`` of a str), or where it would run past MAX_VALUE_CHARS (a width of a billion)."""
        if not self.whole or self.conversion not in _CONVERSIONS or \
                any(int(n) > MAX_VALUE_CHARS for n in re.findall(r"\d+", self.printf or self.spec)):
            return None
        try:
            if self.printf:
                return self.printf % ({self.argument: value} if isinstance(self.argument, str) else (value,))
            return format(_CONVERSIONS[self.conversion](value), self.spec)
        except (TypeError, ValueError, OverflowError):
            return None


Pieces = list[str | Field]  # a template: its literal text and its fields, in order


def printf(template: str) -> Pieces:
    """A printf-style template (``%`` on a str, a logger's message) as pieces."""
    pieces: Pieces = []
    at, index = 0, 0
    for found in _PRINTF.finditer(template):
        pieces.append(template[at:found.start()])
        at = found.end()
        if found["conversion"] == "%":
            pieces.append("%")
        elif found["key"] is not None:
            pieces.append(Field(found["key"], printf=found[0]))
        else:
            pieces.append(Field(index, printf=found[0]))
            index += 1
    return [*pieces, template[at:]]


def formatted(template: str) -> Pieces:
    """A ``str.format`` template as pieces: a field's argument is the next position (``{}``), the one it numbers
    (``{0}``), or the keyword it names (``{name}``). A template Python refuses (``{`` unclosed) reads as written."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return [template]
    pieces: Pieces = []
    auto = 0
    for literal, name, spec, conversion in fields:
        pieces.append(literal)
        if name is None:
            continue
        head = re.split(r"[.\[]", name, maxsplit=1)[0]
        argument: int | str = auto if head == "" else int(head) if head.isdigit() else head
        auto += head == ""
        pieces.append(Field(argument, conversion=conversion or "", spec=spec or "", whole=head == name))
    return pieces


def filled(pieces: Pieces, positional: Sequence[tuple[str, Any]], keywords: dict[str, tuple[str, Any]]) -> list[str]:
    """The parts a template prints with these arguments, each (its code, its value): a field whose value is known
    and prints is literal text, any other a hole named by its argument's code (``arg2``, or its name, where none)."""
    parts = [""]
    for piece in pieces:
        if isinstance(piece, str):
            parts[-1] += piece
            continue
        argument = piece.argument
        code, value = keywords.get(argument, (argument, UNKNOWN)) if isinstance(argument, str) else \
            positional[argument] if argument < len(positional) else (f"arg{argument}", UNKNOWN)
        shown = piece.show(value) if known(value) else None
        parts = joined(parts, [shown] if shown is not None else ["", code, ""])
    return parts


def joined(left: list[str], right: list[str]) -> list[str]:
    """The parts of one text followed by another's."""
    return [*left[:-1], left[-1] + right[0], *right[1:]]


def template_text(parts: Sequence[str]) -> str:
    """The parts as the message reads in its source: each hole as ``{its source}``."""
    return "".join(part if i % 2 == 0 else f"{{{part}}}" for i, part in enumerate(parts))
