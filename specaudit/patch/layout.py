"""Layout of what the patch codemods insert: items in a sequence's own separators, methods at a class's end, imports
where a person (or isort) puts them. Shared by codemods.py and transplant.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar, cast

import libcst as cst
from libcst.codemod.visitors import AddImportsVisitor


def appended(body: cst.BaseSuite, methods: Sequence[cst.FunctionDef]) -> cst.BaseSuite:
    """A class body with methods added at its end, a blank line before each."""
    return body.with_changes(body=[*body.body, *(f.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
                                                 for f in methods)])




class AddImports(AddImportsVisitor):
    """libcst's AddImportsVisitor, which puts the names it adds to an existing ``from ... import`` first; here
    they go where a person (or isort) puts them: in order, in the statement's own layout."""

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom) -> cst.ImportFrom:
        merged = super().leave_ImportFrom(original_node, updated_node)
        if isinstance(merged.names, cst.ImportStar) or isinstance(updated_node.names, cst.ImportStar):
            return merged
        names = list(updated_node.names)
        for alias in (a for a in merged.names if not any(a is old for old in updated_node.names)):
            key = _isort_key(alias.evaluated_name)
            at = next((i for i, old in enumerate(names) if _isort_key(old.evaluated_name) > key), len(names))
            names = inserted(names, [alias], at)
        return merged.with_changes(names=names)


def _isort_key(name: str) -> tuple[int, str]:
    """The order isort (and ruff, as vLLM runs it) gives imported names: CONSTANTS, Classes, then the others,
    each case-insensitively."""
    return (0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2), name.lower()





_Item = TypeVar("_Item", cst.BaseElement, cst.ImportAlias, cst.Arg, cst.Param)


def inserted(items: Sequence[_Item], new: Sequence[_Item], at: int) -> list[_Item]:
    """``items`` with ``new`` inserted before index ``at``, in the sequence's own layout: the old items keep their
    commas (and the comments after them), the new ones take the separator between two items, and the last item
    takes the sequence's tail (its trailing comma, with the line break, or none)."""
    separator = _separator(items)
    tail: cst.Comma | cst.MaybeSentinel = items[-1].comma if items else cst.MaybeSentinel.DEFAULT
    separated = [item.with_changes(comma=separator) if i == len(items) - 1 else item for i, item in enumerate(items)]
    merged = separated[:at] + [item.with_changes(comma=separator) for item in new] + separated[at:]
    merged[-1] = merged[-1].with_changes(comma=tail)
    return merged


def with_arguments(call: cst.Call, new: Sequence[cst.Arg], at: int | None = None) -> cst.Call:
    """A call with arguments added before its ``at``-th (by default after its others and before any
    ``*args``/``**kwargs``), on one line each (what was written over several lines in the code they come from is
    joined), in the call's own separators."""
    args = list(call.args)
    at = next((i for i, a in enumerate(args) if a.star), len(args)) if at is None else at
    added = [one_line(a).with_changes(whitespace_after_arg=cst.SimpleWhitespace("")) for a in new]
    if at == len(args) and args:  # the last argument's space before the parenthesis goes to the new last one
        added[-1] = added[-1].with_changes(whitespace_after_arg=args[-1].whitespace_after_arg)
        args[-1] = args[-1].with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
    return call.with_changes(args=inserted(args, added, at))


_Node = TypeVar("_Node", bound=cst.CSTNode)


def one_line(node: _Node) -> _Node:
    """Code written over several lines inside brackets, on one: each line break a space."""
    return cast(_Node, node.visit(_OneLine()))


class _OneLine(cst.CSTTransformer):
    def leave_ParenthesizedWhitespace(self, original_node: cst.ParenthesizedWhitespace,
                                      updated_node: cst.ParenthesizedWhitespace) -> cst.SimpleWhitespace:
        return cst.SimpleWhitespace(" ")


def _separator(items: Sequence[_Item]) -> cst.Comma:
    """The comma between two items as the sequence writes it (one item a line: its line break, not a comment the
    line may have), or ", "."""
    comma = items[0].comma if len(items) > 1 else None
    if not isinstance(comma, cst.Comma):
        return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
        return comma.with_changes(whitespace_after=comma.whitespace_after.with_changes(
            first_line=cst.TrailingWhitespace(), empty_lines=[]))
    return comma
