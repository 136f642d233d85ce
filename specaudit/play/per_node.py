"""What a function makes of a syntax node, kept while the node lives.

A syntax tree of Python's ast takes about 25 times its source in memory, and the index keeps only the trees read
most recently (scan.index.SYNTAX_KEPT_BYTES). A cache that held its nodes, as ``functools.lru_cache`` does, would
keep alive every tree it was asked about.
"""

from __future__ import annotations

import ast
import functools
import weakref
from collections.abc import Callable
from typing import TypeVar

Node = TypeVar("Node", bound=ast.AST)
Value = TypeVar("Value")


def per_node(compute: Callable[[Node], Value]) -> Callable[[Node], Value]:
    known: weakref.WeakKeyDictionary[Node, Value] = weakref.WeakKeyDictionary()

    @functools.wraps(compute)
    def cached(node: Node) -> Value:
        try:
            return known[node]
        except KeyError:
            value = known[node] = compute(node)
            return value

    return cached
