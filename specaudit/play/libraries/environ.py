"""Environment variables as engine code reads them: ``os.getenv("VAR", default)`` and ``os.environ.get("VAR",
default)``, wherever a module declares them (vLLM's ``envs.py`` lambdas), and the truth the engine gives a value."""

from __future__ import annotations

import ast
from typing import Any

from ..per_node import per_node


def declared_default(tree: ast.Module | None, variable: str) -> tuple[bool, Any]:
    """(declared, default): whether the module reads ``variable`` from the environment, and the constant default it
    gives (None where it gives none)."""
    return _declared(tree).get(variable, (False, None)) if tree is not None else (False, None)


@per_node
def _declared(tree: ast.Module) -> dict[str, tuple[bool, Any]]:
    """Every variable the module reads from the environment, with its default: one walk of an ``envs`` module."""
    found: dict[str, tuple[bool, Any]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and _reads_environment(node.func):
            default = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
            found.setdefault(node.args[0].value, (True, default))
    return found


def truthy(value: Any) -> bool:
    """A variable's value as the engines' boolean flags take it (``bool(int(...))`` or a "true" string)."""
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _reads_environment(func: ast.expr) -> bool:
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts)).endswith(("getenv", "environ.get"))
