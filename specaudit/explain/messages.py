"""A message expression of engine code as the text it prints: literal parts and named holes.

``f"got {n=} for {self.method!r}"``, ``"got %d for %s" % (n, m)``, ``"got {} for {m}".format(n, m=m)`` and
``"got " + str(n)`` all become parts: literal, hole, literal, ... (odd indices are holes, named by the source of
the expression printed there), as the player reads them (play.player.Player.text) knowing only what the source
writes out. A hole stands for any text; a message that is one hole is no message.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from ..play.player import LiteralScope, Player
from ..play.text import template_text as template_text  # the parts as the message reads in its source
from ..play.values import Raised

Parts = tuple[str, ...]  # literal, hole, literal, ..., literal: always an odd count

MIN_LITERAL = 6  # a message with fewer literal characters than this tells nothing of where it came from


def message_parts(node: ast.expr, resolve: Callable[[str], ast.expr | None] = lambda name: None,
                  logged: list[ast.expr] | None = None) -> Parts | None:
    """The parts ``node`` prints, or None where it is not a message (no literal text in it, or it fails to build).
    ``resolve`` gives the expression a local name was last assigned (``msg = f"..."; raise ValueError(msg)``);
    ``logged``, the arguments a logger formats the message with."""
    if logged and isinstance(node, ast.Constant) and isinstance(node.value, str):
        node = ast.BinOp(node, ast.Mod(), ast.Tuple(logged, ast.Load()))  # a logger prints `message % arguments`
    try:
        parts = _normal(Player("", {}, LiteralScope()).text(node, {}, resolve))
    except Raised:
        return None
    literal = "".join(parts[0::2])
    return parts if len(literal.strip()) >= MIN_LITERAL and re.search(r"[A-Za-z]{3}", literal) else None


def _normal(parts: list[str]) -> Parts:
    """Adjacent holes as one (two holes side by side split their text nowhere in particular)."""
    out = [parts[0]]
    for i in range(1, len(parts), 2):
        hole, literal = parts[i], parts[i + 1]
        if out[-1] == "" and len(out) > 1:
            out[-2] += ", " + hole
            out[-1] = literal
        else:
            out += [hole, literal]
    return tuple(out)


def pattern_of(parts: Parts) -> str:
    """The regex of the parts: each literal escaped, each hole a named group ``h0``, ``h1``, ... (the hole's name
    is its expression's source, which is no group name)."""
    out = [re.escape(parts[0])]
    for i in range(1, len(parts), 2):
        out += [f"(?P<h{i // 2}>.*?)", re.escape(parts[i + 1])]
    return "".join(out)
