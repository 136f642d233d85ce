"""The release's modules as the player reads them (play.player.Scope): a module's constants, Literal aliases and
functions, its imports followed within the release, its classes along their MRO (a method, a property or a class
attribute found on a base), and the objects of its classes.

A name bound to a class is a ``ReleaseClass``; a module-level table that is not a literal (``_CONFIG_BY_METHOD =
{"ngram": _builtin("ngram.config", ...)}``) is played out of its own expression, as the module's import computes it.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import Any, Protocol

from .per_node import per_node
from .values import CLASS, UNKNOWN, Raised, ReleaseClass, Unknown

# The decorators that make a method an attribute read (`self.speculator_config`), played on the object it is read of.
PROPERTIES = frozenset({"property", "cached_property", "functools.cached_property"})


class Modules(Protocol):
    """A release's modules by dotted name: the syntax tree and the file in the tree, or None."""

    def module_tree(self, name: str) -> tuple[ast.Module, str] | None: ...


@dataclass(frozen=True)
class Member:
    """What a class (or a base along its MRO) defines under a name: a function (``node`` a FunctionDef) or a value
    (the expression assigned in the class body), with the scope of the class that defines it."""

    node: ast.FunctionDef | ast.expr
    scope: ModuleScope
    owner: str  # "module:Class" of the class that defines it
    annotated: bool = False  # declared with an annotation that is not ClassVar: a field of each object, not the class's

    @property
    def is_property(self) -> bool:
        return isinstance(self.node, ast.FunctionDef) and any(
            ast.unparse(d) in PROPERTIES for d in self.node.decorator_list)


class ModuleScope:
    """A module of the release (play.player.Scope): its Literal aliases, its constants, its classes and the functions
    it defines or imports, following its imports within the release. ``owner``: the class whose method is played
    out (`self.use_dspark()` is one of its own); ``models``: the objects the release builds from a checkpoint, by
    the class that builds them and the checkpoint's path (``ModelConfig(model=path)`` reads the config at that path,
    which the launch knows)."""

    def __init__(self, code: Modules, tree: ast.Module, where: str, seen: frozenset[str] = frozenset(),
                 owner: ast.ClassDef | None = None, models: dict[str, dict[str, dict[str, Any]]] | None = None):
        self.code = code
        self.tree = tree
        self.where = where  # its file in the tree
        self.seen = seen | {where}  # the files on the way here, by their paths
        self.owner = owner
        self.models = models or {}

    @property
    def this_class(self) -> str | None:
        """"module:Class" of the class whose method is played out, if one is."""
        return f"{module_of(self.where)}:{self.owner.name}" if self.owner is not None else None

    def literals(self, name: str) -> set[str] | None:
        found = strings_declared(self.tree, name)
        if found is not None:
            return found
        imported = self._imported(name)
        return imported[0].literals(imported[1]) if imported else None

    def value(self, name: str) -> Any:
        module_name, _, local = name.rpartition(":")
        if module_name:
            other = self.module(module_name)
            return other.value(local) if other is not None else Unknown(f"{module_name} is not in this tree")
        for stmt in self.tree.body:
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                return ReleaseClass(f"{module_of(self.where)}:{name}")
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and name in assigned(stmt) and stmt.value is not None:
                if name in rebound(self.tree):  # `_current_vllm_config = None`, set by set_current_vllm_config()
                    return Unknown(f"{name} (a global the module's functions set)")
                return self._computed(name, stmt.value)
        imported = self._imported(name)
        return imported[0].value(imported[1]) if imported else UNKNOWN

    def _computed(self, name: str, expression: ast.expr) -> Any:
        found = literal(expression)
        if not isinstance(found, Unknown) or not isinstance(expression, _TABLES):
            return found
        key = (self.where, name)
        if key in _COMPUTING:  # a value that reads itself: not one the module computes
            return UNKNOWN
        from .player import Player  # the player reads modules through this scope: imported where it is used

        _COMPUTING.add(key)
        try:
            return Player("", {}, self).evaluate(expression, {})
        finally:
            _COMPUTING.discard(key)

    def function(self, name: str) -> tuple[ast.FunctionDef, ModuleScope] | None:
        module_name, _, name = name.rpartition(":")
        if module_name:
            other = self.module(module_name)
            return other.function(name) if other is not None else None
        head, _, member = name.partition(".")
        if head == "self":
            if self.owner is None or "." in member:
                return None
            return self._method(self.owner, member)
        for stmt in reversed(self.tree.body):  # the last definition is the one the name is bound to (@overload)
            if isinstance(stmt, ast.FunctionDef) and stmt.name == head and not member:
                return stmt, self
            if isinstance(stmt, ast.ClassDef) and stmt.name == head and member and "." not in member:
                return self._method(stmt, member)
        imported = self._imported(head)
        return imported[0].function(".".join(filter(None, (imported[1], member)))) if imported else None

    def _method(self, cls: ast.ClassDef, name: str) -> tuple[ast.FunctionDef, ModuleScope] | None:
        found = self.member(f"{module_of(self.where)}:{cls.name}", name, cls=cls)
        if found is None or not isinstance(found.node, ast.FunctionDef):
            return None
        return found.node, found.scope

    def member(self, class_name: str, name: str, after: str | None = None, cls: ast.ClassDef | None = None
               ) -> Member | None:
        """What the class ("module:Class") or the first base along its MRO that has it defines under ``name``;
        ``after``: only the bases after that class of the MRO (``super().name``)."""
        lineage = self._lineage(class_name, cls)
        if after is not None:
            keys = [f"{module_of(scope.where)}:{found.name}" for scope, found in lineage]
            lineage = lineage[keys.index(after) + 1:] if after in keys else []
        for scope, found in lineage:
            for stmt in reversed(found.body):
                if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                    return Member(stmt, scope, f"{module_of(scope.where)}:{found.name}")
                if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and name in assigned(stmt) and stmt.value is not None:
                    field = isinstance(stmt, ast.AnnAssign) and "ClassVar" not in ast.unparse(stmt.annotation)
                    return Member(stmt.value, scope, f"{module_of(scope.where)}:{found.name}", field)
        return None

    def mro(self, class_name: str) -> list[str]:
        """The class and its bases that the release defines, in Python's order (depth first, left to right, each
        once: the engines' hierarchies are single chains and mixins, where that is the C3 order)."""
        return [f"{module_of(scope.where)}:{cls.name}" for scope, cls in self._lineage(class_name)]

    def outside_bases(self, class_name: str) -> list[str]:
        """The bases along the class's MRO that the release imports from a library (``transformers.PretrainedConfig``),
        by the library's dotted name."""
        return [origin for scope, cls in self._lineage(class_name) for base in cls.bases
                if (origin := scope.origin(ast.unparse(base))) is not None]

    def origin(self, name: str) -> str | None:
        """The library's dotted name of what ``name`` (``AutoConfig.for_model``, ``transformers.PretrainedConfig``)
        stands for, where this module imports it from a module that is not the release's; else None."""
        head, _, rest = name.partition(".")
        for stmt in self.tree.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                for alias in stmt.names:
                    if (alias.asname or alias.name) == head and self.code.module_tree(stmt.module) is None \
                            and self.code.module_tree(f"{stmt.module}.{alias.name}") is None:
                        return ".".join(filter(None, (stmt.module, alias.name, rest)))
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if (alias.asname or alias.name) == head and self.code.module_tree(alias.name) is None:
                        return ".".join(filter(None, (alias.name, rest)))
        return None

    def _lineage(self, class_name: str, cls: ast.ClassDef | None = None) -> list[tuple[ModuleScope, ast.ClassDef]]:
        found = self._class(class_name) if cls is None else (self._at(cls), cls)
        lineage: list[tuple[ModuleScope, ast.ClassDef]] = []
        seen: set[str] = set()
        stack = [found] if found is not None else []
        while stack:
            scope, node = stack.pop(0)
            key = f"{module_of(scope.where)}:{node.name}"
            if key in seen:
                continue
            seen.add(key)
            lineage.append((scope, node))
            bases = [scope.value(ast.unparse(b)) if isinstance(b, ast.Name) else UNKNOWN for b in node.bases]
            stack = [c for c in (self._class(b.name) for b in bases if isinstance(b, ReleaseClass))
                     if c is not None] + stack
        return lineage

    def _at(self, cls: ast.ClassDef) -> ModuleScope:
        return ModuleScope(self.code, self.tree, self.where, self.seen, cls, self.models)

    def _class(self, class_name: str) -> tuple[ModuleScope, ast.ClassDef] | None:
        module_name, _, name = class_name.rpartition(":")
        scope = self.module(module_name) if module_name != module_of(self.where) else self
        if scope is None:
            return None
        node = next((n for n in scope.tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
        return (scope._at(node), node) if node is not None else None

    def instance(self, name: str, named: dict[str, Any]) -> Any:
        module_name, _, name = name.rpartition(":")
        if module_name:
            other = self.module(module_name)
            return other.instance(name, named) if other is not None else UNKNOWN
        cls = next((n for n in self.tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
        if cls is None:
            imported = self._imported(name) if "." not in name else None
            return imported[0].instance(imported[1], named) if imported else UNKNOWN
        qualified = f"{module_of(self.where)}:{cls.name}"
        model = named.get("model")
        loaded = self.models.get(qualified, {}).get(model, {}) if isinstance(model, str) else {}
        return {**declared_fields(cls), **copy.deepcopy(loaded), **named, CLASS: qualified}

    def _imported(self, name: str) -> tuple[ModuleScope, str] | None:
        for stmt in self.tree.body:
            if isinstance(stmt, ast.ImportFrom) and (module := self._absolute(stmt)):
                for alias in stmt.names:
                    if (alias.asname or alias.name) == name:
                        other = self._import(module)
                        return (other, alias.name) if other is not None else None
        return None

    def _absolute(self, stmt: ast.ImportFrom) -> str | None:
        """The module an import names, a relative one (a package's ``from .base import X`` re-export) in full."""
        if not stmt.level:
            return stmt.module
        package = module_of(self.where)
        if not self.where.endswith("__init__.py"):
            package = package.rpartition(".")[0]
        for _ in range(stmt.level - 1):
            package = package.rpartition(".")[0]
        return ".".join(filter(None, (package, stmt.module))) or None

    def _import(self, name: str) -> ModuleScope | None:
        """A module this one imports: not one on the way here (an import cycle)."""
        found = self.code.module_tree(name)
        if found is None or found[1] in self.seen:
            return None
        return ModuleScope(self.code, found[0], found[1], self.seen, models=self.models)

    def module(self, name: str) -> ModuleScope | None:
        """A module of the release named in full (``"module:name"``, ``importlib.import_module``)."""
        found = self.code.module_tree(name)
        return ModuleScope(self.code, found[0], found[1], models=self.models) if found is not None else None


# The module-level values played out: the tables a module builds of its own names and helpers (a dict of qualified
# names made by a helper), not what a call makes at import (a logger, a registry object).
_TABLES = (ast.Dict, ast.List, ast.Tuple, ast.Set, ast.JoinedStr, ast.BinOp)
_COMPUTING: set[tuple[str, str]] = set()  # the module-level values being played out (one reading itself is not)


@per_node
def rebound(tree: ast.Module) -> frozenset[str]:
    """The module-level names its functions rebind (``global name``): what the module holds when a function reads
    one depends on what ran before, not on its assignment."""
    return frozenset(name for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names)


def module_of(relpath: str) -> str:
    """``vllm/config/parallel.py`` -> ``vllm.config.parallel`` (a package's ``__init__.py``: the package)."""
    return relpath.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def assigned(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.ClassDef):
        return {stmt.name}
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
    return {t.id for t in targets if isinstance(t, ast.Name)}


def literal(node: ast.expr) -> Any:
    """A constant written in the code: a literal, or arithmetic on literals (``1 << 24``), played by the operators'
    bounded tables; else UNKNOWN."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if not all(isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop)) for n in ast.walk(node)):
        return UNKNOWN
    from .player import LiteralScope, Player  # the player reads modules through this one: imported where used

    try:
        return Player("", {}, LiteralScope()).evaluate(node, {})
    except Raised:
        return UNKNOWN


def declared_default(value: ast.expr) -> tuple[Any, dict[str, Any]]:
    """A field's declared default (``= 5``, ``= Field(default=None, ge=1)``), UNKNOWN where it is not a constant,
    and the numeric constraints of its ``Field``/``field`` (``gt``, ``ge``, ``lt``, ``le``)."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("Field", "field"):
        keywords = {k.arg: k.value for k in value.keywords if k.arg}
        constraints = {k: v.value for k, v in keywords.items() if k in ("gt", "ge", "lt", "le")
                       and isinstance(v, ast.Constant) and isinstance(v.value, (int, float))}
        default = keywords.get("default", value.args[0] if value.args else None)
        return (literal(default) if default is not None else UNKNOWN), constraints
    return literal(value), {}


def declared_fields(cls: ast.ClassDef) -> dict[str, Any]:
    """The constant defaults a class declares for its fields (``enable_hc_sp: bool = False``, ``Field(default=1)``),
    but for the fields its own methods assign (``__post_init__`` derives them: not the declared value)."""
    written = _written_by_methods(cls)
    fields = {}
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None \
                and stmt.target.id not in written and "ClassVar" not in ast.unparse(stmt.annotation):
            default, _ = declared_default(stmt.value)
            if not isinstance(default, Unknown):
                fields[stmt.target.id] = default
    return fields


@per_node
def _written_by_methods(cls: ast.ClassDef) -> frozenset[str]:
    """The fields of ``self`` a class's own methods assign."""
    return frozenset(t.attr for f in cls.body if isinstance(f, ast.FunctionDef) for n in ast.walk(f)
                     if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                     for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                     if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self")


def strings_declared(tree: ast.Module, name: str, seen: frozenset[str] = frozenset()) -> set[str] | None:
    """The strings a module-level name declares: ``Literal[...]`` (through the aliases it nests), the members of
    ``class name(Enum)``, or a set, tuple or ``frozenset({...})`` of strings."""
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == name:
            return {t.id for s in stmt.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)}
        targets, value = (stmt.targets, stmt.value) if isinstance(stmt, ast.Assign) else \
            ([stmt.target], stmt.value) if isinstance(stmt, ast.AnnAssign) else ([], None)
        if value is None or not any(isinstance(t, ast.Name) and t.id == name for t in targets):
            continue
        found: set[str] = set()
        for node in ast.walk(value):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
            elif isinstance(node, ast.Name) and node.id not in seen | {name, "Literal", "frozenset", "set", "tuple"}:
                found |= strings_declared(tree, node.id, seen | {name}) or set()
        return found
    return None


def defined_class(code: Modules, class_name: str) -> ModuleScope | None:
    """A class of the release named in full (``"module:Class"``) as the player reads it: the scope of the module that
    defines it, the class its owner (``scope.owner``; ``scope.member`` and ``scope.this_class`` read it); None where
    the module is not in the tree or does not define the class itself."""
    module_name = class_name.rpartition(":")[0]
    found = code.module_tree(module_name)
    located = ModuleScope(code, found[0], found[1])._class(class_name) if found is not None else None
    return located[0] if located is not None else None
