"""What Python's operators, builtins and the methods of plain values do, for every player of engine code: one table
each, so that a feature one player needs (``set.intersection``, ``sum``) is there for all of them.

An operation on known values gives its value; where Python itself would raise on the launch's values (a modulo by
zero, ``None > 1``), ``Raised`` says so, since the engine raises there too; anything else it cannot compute (a type
it does not model, a result past the size bound) is ``Unknown``.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from .values import Raised, Unknown

MAX_VALUE_CHARS = 1_000_000  # a string or sequence a player builds past this is unknown: `.replace` chains double

BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.BitOr: operator.or_, ast.BitAnd: operator.and_,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}  # not **: `2 ** 2 ** 99` in a hostile tree would not finish; a shift only by what fits a machine word
MAX_SHIFT = 64

UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.Not: operator.not_, ast.USub: operator.neg,
                                                        ast.UAdd: operator.pos}

COMPARISONS: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_, ast.IsNot: operator.is_not,
}
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)

# Builtins that only compute on the values they are given.
PURE: dict[str, Callable[..., Any]] = {
    "len": len, "int": int, "float": float, "bool": bool, "str": str, "abs": abs, "min": min, "max": max,
    "sum": sum, "any": any, "all": all, "sorted": sorted, "tuple": tuple, "list": list, "set": set,
    "frozenset": frozenset,
}
TYPES: dict[str, Any] = {"dict": dict, "list": list, "tuple": tuple, "str": str, "int": int, "float": float,
                         "bool": bool, "set": (set, frozenset), "frozenset": frozenset}

# The methods of plain values a player may call: name -> the types that have it (none of them reaches outside).
METHODS: dict[str, type | tuple[type, ...]] = {
    "get": dict, "keys": dict, "values": dict, "items": dict, "copy": (dict, list),
    "startswith": str, "endswith": str, "lower": str, "upper": str, "strip": str, "split": str, "casefold": str,
    "replace": str, "join": str, "rsplit": str, "partition": str, "rpartition": str, "removeprefix": str,
    "removesuffix": str, "lstrip": str, "rstrip": str,
    "intersection": (set, frozenset), "union": (set, frozenset), "issubset": (set, frozenset),
    "index": (list, tuple), "count": (list, tuple),
}


def binary(op: ast.operator, left: Any, right: Any) -> Any:
    """``left <op> right`` on known values."""
    if isinstance(left, Unknown):
        return left
    if isinstance(right, Unknown):
        return right
    compute = BINARY.get(type(op))
    if compute is None:
        return Unknown(f"the operator {type(op).__name__}")
    if isinstance(op, ast.Mult) and _oversized(left, right):
        return Unknown("a product past the size bound")
    if isinstance(op, ast.LShift) and not (isinstance(right, int) and right <= MAX_SHIFT):
        return Unknown("a shift past the size bound")
    try:
        return compute(left, right)
    except ZeroDivisionError as exc:
        raise Raised(f"ZeroDivisionError: {exc}") from None
    except TypeError as exc:
        if left is None or right is None:  # `None % 2`: Python refuses it, as the engine will
            raise Raised(f"TypeError: {exc}") from None
        return Unknown(f"{type(left).__name__} {type(op).__name__} {type(right).__name__}")


def compare(op: ast.cmpop, left: Any, right: Any) -> Any:
    """``left <op> right`` on known values: its truth."""
    if isinstance(left, Unknown):
        return left
    if isinstance(right, Unknown):
        return right
    try:
        return COMPARISONS[type(op)](left, right)
    except TypeError as exc:
        if (left is None or right is None) and isinstance(op, _ORDERING):
            raise Raised(f"TypeError: {exc}") from None  # `None > 1`: Python refuses it, as the engine will
        return Unknown(f"{type(left).__name__} {type(op).__name__} {type(right).__name__}")
    except KeyError:
        return Unknown(type(op).__name__)


def plain_method(owner: Any, name: str, args: list[Any]) -> Any:
    """``owner.name(*args)`` for a method of a plain value that METHODS lists; Unknown for any other."""
    kinds = METHODS.get(name)
    if kinds is None or not isinstance(owner, kinds) or type(owner).__module__ != "builtins":
        return Unknown(f"{type(owner).__name__}.{name}()")
    if any(isinstance(a, Unknown) for a in args):
        return next(a for a in args if isinstance(a, Unknown))
    if name == "replace" and isinstance(owner, str):
        return bounded_replace(owner, *args)
    try:
        return getattr(owner, name)(*args)
    except (TypeError, ValueError, LookupError):
        return Unknown(f"{type(owner).__name__}.{name}() on these values")


def bounded_replace(base: str, old: Any = None, new: Any = None, *rest: Any) -> Any:
    """``base.replace(old, new, ...)``, computed only where its result stays under MAX_VALUE_CHARS."""
    if not isinstance(old, str) or not isinstance(new, str):
        return Unknown("str.replace() of what is not a string")
    grows = (base.count(old) if old else len(base) + 1) * max(0, len(new) - len(old))
    if len(base) + grows > MAX_VALUE_CHARS:
        return Unknown("str.replace() past the size bound")
    return base.replace(old, new, *rest)


def pure(name: str, args: list[Any]) -> Any:
    """A builtin of PURE called on known values."""
    unknown = next((a for a in args if isinstance(a, Unknown)), None)
    if unknown is not None:
        return unknown
    try:
        return PURE[name](*args)
    except (TypeError, ValueError):
        return Unknown(f"{name}() of these values")


def _oversized(left: Any, right: Any) -> bool:
    sized, count = (left, right) if isinstance(right, int) else (right, left)
    return isinstance(sized, (str, bytes, list, tuple)) and isinstance(count, int) \
        and len(sized) * count > MAX_VALUE_CHARS
