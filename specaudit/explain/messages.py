"""A message expression of engine code as the text it prints: literal parts and named holes.

``f"got {n=} for {self.method!r}"``, ``"got %d for %s" % (n, m)``, ``"got {} for {m}".format(n, m=m)`` and
``"got " + str(n)`` all become parts: literal, hole, literal, ... (odd indices are holes, named by the source of
the expression printed there). A hole stands for any text; a message that is one hole is no message.
"""

from __future__ import annotations

import ast
import re
import string
from collections.abc import Callable

Parts = tuple[str, ...]  # literal, hole, literal, ..., literal: always an odd count

# printf-style conversions as `%` and the loggers apply them: %(name)s, %-5.2f, %%
_PRINTF = re.compile(r"%(?:\((?P<key>[^)]*)\))?[#0 +-]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?(?P<conversion>[diouxXeEfFgGcrsa%])")
MIN_LITERAL = 6  # a message with fewer literal characters than this tells nothing of where it came from


def message_parts(node: ast.expr, resolve: Callable[[str], ast.expr | None] = lambda name: None,
                  logged: list[ast.expr] | None = None) -> Parts | None:
    """The parts ``node`` prints, or None where it is not a message (no literal text in it). ``resolve`` gives
    the expression a local name was last assigned (``msg = f"..."; raise ValueError(msg)``); ``logged``, the
    arguments a logger formats the message with."""
    raw = printf_parts(node.value, logged) if logged and isinstance(node, ast.Constant) and isinstance(node.value, str) \
        else _parts(node, resolve, depth=0)
    parts = _normal(raw)
    literal = "".join(parts[0::2])
    return parts if len(literal.strip()) >= MIN_LITERAL and re.search(r"[A-Za-z]{3}", literal) else None


def printf_parts(template: str, args: list[ast.expr]) -> list[str]:
    """A ``%`` format (or a logger's message and its arguments) as parts."""
    names = _sources(args)
    parts, at, index = [""], 0, 0
    for found in _PRINTF.finditer(template):
        parts[-1] += template[at:found.start()]
        at = found.end()
        if found["conversion"] == "%":
            parts[-1] += "%"
            continue
        key = found["key"]
        hole = key if key is not None else names[index] if index < len(names) else f"arg{index}"
        index += key is None
        parts += [hole, ""]
    parts[-1] += template[at:]
    return parts


def _parts(node: ast.expr, resolve: Callable[[str], ast.expr | None], depth: int) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        parts = [""]
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts[-1] += str(value.value)
            elif isinstance(value, ast.FormattedValue):
                parts += [ast.unparse(value.value), ""]
        return parts
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and _is_str(node.left):
        args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        return printf_parts(node.left.value, list(args))  # type: ignore[attr-defined]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _concat(_parts(node.left, resolve, depth), _parts(node.right, resolve, depth))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
            and _is_str(node.func.value):
        return _format_parts(node.func.value.value, node)  # type: ignore[attr-defined]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("str", "repr") \
            and len(node.args) == 1:
        return ["", ast.unparse(node.args[0]), ""]
    if isinstance(node, ast.Name) and depth < 2:
        assigned = resolve(node.id)
        if assigned is not None:
            return _parts(assigned, resolve, depth + 1)
    return ["", ast.unparse(node), ""]


def _concat(left: list[str], right: list[str]) -> list[str]:
    return left[:-1] + [left[-1] + right[0]] + right[1:]


def _format_parts(template: str, call: ast.Call) -> list[str]:
    positional = _sources(call.args)
    keywords = {k.arg: ast.unparse(k.value) for k in call.keywords if k.arg}
    parts, auto = [""], 0
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return [template]
    for literal, name, _, _ in fields:
        parts[-1] += literal
        if name is None:
            continue
        head = re.split(r"[.\[]", name, maxsplit=1)[0]
        if head == "":
            hole, auto = positional[auto] if auto < len(positional) else f"arg{auto}", auto + 1
        elif head.isdigit():
            hole = positional[int(head)] if int(head) < len(positional) else f"arg{head}"
        else:
            hole = keywords.get(head, head)
        parts += [hole, ""]
    return parts


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


def _is_str(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _sources(args: list[ast.expr]) -> list[str]:
    return [ast.unparse(a) for a in args if not isinstance(a, ast.Starred)]


def pattern_of(parts: Parts) -> str:
    """The regex of the parts: each literal escaped, each hole a named group ``h0``, ``h1``, ... (the hole's name
    is its expression's source, which is no group name)."""
    out = [re.escape(parts[0])]
    for i in range(1, len(parts), 2):
        out += [f"(?P<h{i // 2}>.*?)", re.escape(parts[i + 1])]
    return "".join(out)


def template_text(parts: Parts) -> str:
    """The parts as the message reads in its source: each hole as ``{its source}``."""
    return "".join(part if i % 2 == 0 else f"{{{part}}}" for i, part in enumerate(parts))
