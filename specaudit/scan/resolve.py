"""Resolve names across modules, build each class's MRO (C3), and decide Protocol conformance
the way ``isinstance`` decides it for a ``@runtime_checkable`` Protocol.

A name resolves to a class of the tree, to something outside the tree (torch, typing, transformers...),
or to nothing, with the reason. Answers that depend on a name that resolves to nothing are "unknown",
never a silent no.
"""

from __future__ import annotations

import ast
import builtins
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .facts import ClassInfo, LiteralRef, Merge, ModuleInfo, SyntaxProblem, dotted_name, factory_call, flatten
from .index import TreeIndex

# Names typing's own _get_protocol_attrs leaves out of a protocol's members (CPython 3.10-3.13).
_NOT_PROTOCOL_MEMBERS = frozenset({
    "__abstractmethods__", "__annotations__", "__weakref__", "_is_protocol", "_is_runtime_protocol",
    "__dict__", "__args__", "__slots__", "__next_in_mro__", "__parameters__", "__origin__",
    "__orig_bases__", "__extra__", "__tree_hash__", "__doc__", "__subclasshook__", "__init__",
    "__new__", "__module__", "_MutableMapping__marker", "__class_getitem__", "__match_args__",
    "__protocol_attrs__", "__non_callable_proto_members__", "__type_params__", "__static_attributes__",
    "__firstlineno__", "__qualname__", "__annotate__", "__annotations_cache__",
})
_TYPING_MODULES = ("typing", "typing_extensions")
_OBJECT_ATTRIBUTES = frozenset(dir(object))  # every class has these, whatever its bases


@dataclass(frozen=True)
class External:
    """A name bound outside the engine tree (``torch.nn.Module``, ``typing.Protocol``...)."""

    qualname: str


@dataclass(frozen=True)
class Unresolved:
    name: str
    reason: str


Resolved = ClassInfo | ModuleInfo | External | Unresolved


@dataclass(frozen=True)
class Hierarchy:
    """A class's linearization. ``unknown`` holds why it is incomplete (a base that did not resolve)."""

    cls: ClassInfo
    # not called `mro`: dataclasses would take type.mro for a default
    linear: tuple[ClassInfo | External, ...]
    unknown: tuple[str, ...]


@dataclass(frozen=True)
class Protocol:
    cls: ClassInfo
    members: tuple[str, ...]
    runtime_checkable: bool


@dataclass(frozen=True)
class Conformance:
    """Whether a class satisfies a protocol: True, False, or None (unknown, see ``reason``)."""

    protocol: str
    conforms: bool | None
    missing: tuple[str, ...]
    provided_by: dict[str, str]  # member -> qualname of the class in the MRO that defines it
    reason: str


# What can hold a statement: an assignment is never inside an expression.
_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


def _statements(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and the statements under it, in the order ``ast.walk`` meets them (breadth first), without walking
    into the expressions, which hold none (most of a method's nodes)."""
    todo = deque([node])
    while todo:
        node = todo.popleft()
        todo.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, _HOLDS_STATEMENTS))
        yield node


class Resolver:
    def __init__(self, index: TreeIndex):
        self.index = index
        self.package = index.tree.engine.package
        self._hierarchies: dict[str, Hierarchy] = {}
        self._conditional: dict[str, dict[str, str]] = {}  # a class's qualname -> its MRO's conditional layers
        # Classes a factory built: the names its parameters are bound to, and, when the factory may return
        # its argument unchanged instead, that argument.
        self._made: dict[str, tuple[dict[str, Resolved], ClassInfo | None]] = {}
        self._instance_attributes: dict[str, dict[str, list[ast.expr]]] = {}
        # A class's statement by (module, name): found once, where each method lookup along an MRO looked for it again
        # (flattening its module's platform branches each time: interfaces.py's protocols, dozens of times a scan).
        self._class_nodes: dict[tuple[str, str], ast.ClassDef | None] = {}

    # -- names ---------------------------------------------------------------------------------------

    def resolve(self, module: ModuleInfo, dotted: str) -> Resolved:
        head, _, rest = dotted.partition(".")
        target = self._lookup(module, head, set())
        for attr in rest.split(".") if rest else ():
            target = self._attribute(target, attr)
        return target

    def resolve_module(self, name: str) -> ModuleInfo | External | Unresolved:
        if not self._inside(name):
            return External(name)
        info = self.index.module(name)
        if info is not None:
            return info
        if self.index.has_module(name):
            return Unresolved(name, f"{self.index.files[name]} could not be parsed")
        return Unresolved(name, f"no module {name} in this tree")

    def _inside(self, module: str) -> bool:
        return module == self.package or module.startswith(self.package + ".")

    def _lookup(self, module: ModuleInfo, name: str, seen: set[tuple[str, str]]) -> Resolved:
        key = (module.name, name)
        if key in seen:
            return Unresolved(name, f"import cycle through {module.name}")
        seen.add(key)
        if name in module.classes:
            return module.classes[name]
        if name in module.aliases:
            head, _, rest = module.aliases[name].partition(".")
            target = self._lookup(module, head, seen) if head != name else Unresolved(name, "self-alias")
            for attr in rest.split(".") if rest else ():
                target = self._attribute(target, attr)
            return target
        if name in module.imports or name in module.declared_imports:
            imp = module.imports.get(name) or module.declared_imports[name]
            if imp.name is None:
                return self.resolve_module(imp.module)
            source = self.resolve_module(imp.module)
            if isinstance(source, ModuleInfo):
                found = self._lookup(source, imp.name, seen)
                if isinstance(found, Unresolved) and self.index.has_module(f"{imp.module}.{imp.name}"):
                    return self.resolve_module(f"{imp.module}.{imp.name}")  # from pkg import submodule
                return found
            if isinstance(source, External):
                return External(f"{imp.module}.{imp.name}")
            if self.index.has_module(f"{imp.module}.{imp.name}"):
                return self.resolve_module(f"{imp.module}.{imp.name}")
            return source
        if name in module.factory_calls:
            function, args = module.factory_calls[name]
            return self.made_class(module, function, args, {})
        if name in module.functions or name in module.literals:
            return External(f"{module.name}.{name}")  # not a class: nothing to linearize
        if name in module.computed:
            return Unresolved(name, f"{name} is computed at import time ({module.path}:{module.computed[name]})")
        for star in module.star_imports:
            source = self.resolve_module(star)
            if isinstance(source, ModuleInfo):
                if source.all_names is not None and name not in source.all_names:
                    continue
                found = self._lookup(source, name, seen)
                if not isinstance(found, Unresolved):
                    return found
            elif isinstance(source, External):
                return Unresolved(name, f"may come from 'from {star} import *', outside the tree")
        if hasattr(builtins, name):
            return External(f"builtins.{name}")
        return Unresolved(name, f"{name} is not defined or imported in {module.name}")

    def _attribute(self, target: Resolved, attr: str) -> Resolved:
        if isinstance(target, ModuleInfo):
            found = self._lookup(target, attr, set())
            if isinstance(found, Unresolved) and self.index.has_module(f"{target.name}.{attr}"):
                return self.resolve_module(f"{target.name}.{attr}")
            return found
        if isinstance(target, External):
            return External(f"{target.qualname}.{attr}")
        if isinstance(target, ClassInfo):
            return External(f"{target.qualname}.{attr}")  # a nested name: not followed
        return target

    def made_class(self, module: ModuleInfo, function: str, args: tuple[str, ...],
                   bindings: dict[str, Resolved]) -> Resolved:
        """The class ``function(*args)`` returns, where ``function`` is a factory of the tree: the class it
        defines, with its parameters bound to the arguments (vLLM's ``as_seq_cls_model(LlamaForCausalLM)``)."""
        found = self.resolve(module, function)
        where, _, name = found.qualname.rpartition(".") if isinstance(found, External) else ("", "", "")
        home = self.index.module(where) if self._inside(where) else None
        factory = home.factories.get(name) if home is not None else None
        if home is None or factory is None or len(args) > len(factory.params):
            reason = found.reason if isinstance(found, Unresolved) else f"{function} does not return a class it builds"
            return Unresolved(f"{function}(...)", f"{function}({', '.join(args)}) is a call: {reason}")
        values = [self._bound(module, a, bindings) for a in args]
        # Named by what the arguments resolved to: one factory called on two classes makes two classes.
        named = ", ".join(v.qualname if isinstance(v, (ClassInfo, External)) else v.name for v in values)
        made = ClassInfo(**{**factory.made.__dict__, "name": f"{factory.made.name}[{named}]"})
        if made.qualname not in self._made:
            argument = values[0] if factory.returns_argument and isinstance(values[0], ClassInfo) else None
            local = ModuleInfo(name=home.name, path=home.path, is_package=home.is_package, imports=factory.imports)
            scope = {name: self._lookup(local, name, set()) for name in factory.imports}
            self._made[made.qualname] = ({**scope, **dict(zip(factory.params, values))}, argument)
        return made

    def _bound(self, module: ModuleInfo, dotted: str, bindings: dict[str, Resolved]) -> Resolved:
        head, _, rest = dotted.partition(".")
        if head not in bindings:
            return self.resolve(module, dotted)
        target = bindings[head]
        for attr in rest.split(".") if rest else ():
            target = self._attribute(target, attr)
        return target

    def find_class(self, module: str, name: str) -> ClassInfo | Unresolved:
        info = self.resolve_module(module)
        if not isinstance(info, ModuleInfo):
            return info if isinstance(info, Unresolved) else Unresolved(name, f"{module} is outside the tree")
        found = self.resolve(info, name)
        if isinstance(found, ClassInfo):
            return found
        if isinstance(found, Unresolved):
            return found
        return Unresolved(name, f"{module}.{name} is not a class of the tree")

    # -- hierarchy -----------------------------------------------------------------------------------

    def hierarchy(self, cls: ClassInfo) -> Hierarchy:
        cached = self._hierarchies.get(cls.qualname)
        if cached is None:
            self._hierarchies[cls.qualname] = Hierarchy(cls, (cls,), ("inheritance cycle",))  # cycle guard
            cached = self._linearize(cls)
            self._hierarchies[cls.qualname] = cached
        return cached

    def _linearize(self, cls: ClassInfo) -> Hierarchy:
        module = self.index.module(cls.module)
        bindings = self._made.get(cls.qualname, ({}, None))[0]
        unknown: list[str] = []
        base_mros: list[list[ClassInfo | External]] = []
        direct: list[ClassInfo | External] = []
        for dotted, written in zip(cls.bases, cls.base_sources):
            call = factory_call(ast.parse(written, mode="eval").body) if dotted is None else None
            target: Resolved
            if module is None:
                target = Unresolved(written, "module not indexed")
            elif call is not None:
                target = self.made_class(module, call[0], call[1], bindings)
            elif dotted is None:
                unknown.append(f"base {written} of {cls.qualname} is not a plain name")
                continue
            else:
                target = self._bound(module, dotted, bindings)
            if target is cls and module is not None and dotted is not None:
                # `class X(X)` subclasses the X bound before this statement: an import or alias.
                target = self._shadowed(module, dotted)
            if isinstance(target, ClassInfo):
                base = self.hierarchy(target)
                unknown.extend(base.unknown)
                direct.append(target)
                base_mros.append(list(base.linear))
            elif isinstance(target, External):
                direct.append(target)
                base_mros.append([target])
            elif isinstance(target, ModuleInfo):
                unknown.append(f"base {written} of {cls.qualname} is a module")
            else:
                unknown.append(f"base {written} of {cls.qualname}: {target.reason}")
        merged = _c3_merge(base_mros + [list(direct)])
        if merged is None:
            unknown.append(f"no consistent MRO for {cls.qualname}")
            merged = _dedupe([c for mro in base_mros for c in mro])
        return Hierarchy(cls, (cls, *merged), tuple(dict.fromkeys(unknown)))

    def _shadowed(self, module: ModuleInfo, dotted: str) -> Resolved:
        head, _, rest = dotted.partition(".")
        if head not in module.imports and head not in module.aliases:
            return Unresolved(dotted, f"class {dotted} names itself as a base")
        without = ModuleInfo(**{**module.__dict__, "classes": {k: v for k, v in module.classes.items() if k != head}})
        return self.resolve(without, dotted)

    def instance_attributes(self, cls: ClassInfo) -> frozenset[str]:
        """The attributes its methods assign on ``self``."""
        return frozenset(self._assigned(cls))

    def part_class(self, cls: ClassInfo, name: str) -> ClassInfo | None:
        """The class of the part ``self.name`` that ``cls`` (or the first base that assigns it) builds, when
        every assignment builds the same one, directly (``self.model = LlamaModel(...)``) or through a method of
        the class that returns one (``self.model = self._init_model(...)``); None when it is not known."""
        for base in self.hierarchy(cls).linear:
            values = self._assigned(base).get(name) if isinstance(base, ClassInfo) else None
            if values and isinstance(base, ClassInfo):
                return self._built(cls, base, values)
        return None

    def _built(self, cls: ClassInfo, owner: ClassInfo, values: list[ast.expr], depth: int = 0) -> ClassInfo | None:
        """The one class that every value constructs (``Name(...)``, ``self.model_cls(...)``, ``self.make(...)``)."""
        module = self.index.module(owner.module)
        built: set = set()
        for value in values:
            dotted = dotted_name(value.func) if isinstance(value, ast.Call) else None
            if dotted and dotted.startswith("self.") and dotted.count(".") == 1 and depth == 0:
                built.add(self._called_member(cls, dotted[5:]))
            else:
                built.add(self.resolve(module, dotted) if module and dotted else None)
        found = built.pop() if len(built) == 1 else None
        return found if isinstance(found, ClassInfo) else None

    def method_node(self, cls: ClassInfo, name: str) -> tuple[ClassInfo, ast.FunctionDef] | None:
        """The definition of method ``name`` that an instance of ``cls`` calls (the first in its MRO), and its class."""
        for base in self.hierarchy(cls).linear:
            if not isinstance(base, ClassInfo):
                continue  # an external base: its methods are not read
            node = self._class_node(base)
            found = next((s for s in (node.body if node else []) if isinstance(s, ast.FunctionDef) and s.name == name),
                         None)
            if found is not None:
                return base, found
            if name in base.bound:
                return None  # bound another way (an assignment, a decorator's result)
        return None

    def _called_member(self, cls: ClassInfo, member: str) -> ClassInfo | None:
        """What calling ``self.member(...)`` builds: the class a class attribute names (``model_cls =
        DeepseekV2Model``), or the one class a method returns an instance of; the first definition in the MRO."""
        for base in self.hierarchy(cls).linear:
            if not isinstance(base, ClassInfo):
                continue  # an external base: its members are not read
            node = self._class_node(base)
            for stmt in node.body if node else []:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == member:
                    returns = [s.value for s in ast.walk(stmt) if isinstance(s, ast.Return)]
                    values = [r for r in returns if r is not None]  # a bare `return` builds nothing
                    return self._built(cls, base, values, 1) if values and len(values) == len(returns) else None
                if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == member for t in stmt.targets):
                    dotted, module = dotted_name(stmt.value), self.index.module(base.module)
                    found = self.resolve(module, dotted) if dotted and module else None
                    return found if isinstance(found, ClassInfo) else None
        return None

    def part_calls(self, cls: ClassInfo) -> dict[str, tuple[ModuleInfo, ast.Call]]:
        """The parts that ``cls`` (through its MRO) assigns from one call, each with the module of that call."""
        found: dict[str, tuple[ModuleInfo, ast.Call]] = {}
        for base in reversed(self.hierarchy(cls).linear):
            if not isinstance(base, ClassInfo):
                continue
            module = self.index.module(base.module)
            if module is None:
                continue
            for name, values in self._assigned(base).items():
                if len(values) == 1 and isinstance(values[0], ast.Call):
                    found[name] = (module, values[0])
                else:
                    found.pop(name, None)
        return found

    def _assigned(self, cls: ClassInfo) -> dict[str, list[ast.expr]]:
        """Attribute of ``self`` -> the values its methods assign to it: read from the class's code when first
        asked, as only the target's classes ever are (indexing them for every class would double the cost of a
        cold scan). An augmented or annotation-only assignment counts, with no value known."""
        found = self._instance_attributes.get(cls.qualname)
        if found is None:
            node = self._class_node(cls)
            found = {}
            for function in (node.body if node else []):
                if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for stmt in _statements(function):
                    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
                        for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
                            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                                    and target.value.id == "self":
                                known = value if value is not None else ast.Constant(None)
                                found.setdefault(target.attr, []).append(known)
            self._instance_attributes[cls.qualname] = found
        return found

    def _class_node(self, cls: ClassInfo) -> ast.ClassDef | None:
        key = (cls.module, cls.name)
        if key not in self._class_nodes:
            module = self.index.module(cls.module)
            # Kept by its file's content (index.TreeIndex.kept): a warm scan does not parse the file for it.
            self._class_nodes[key] = self.index.kept(module.path, f"class-statement:{cls.name}",
                                                     lambda: self._find_class_node(cls)) if module else None
        return self._class_nodes[key]

    def _find_class_node(self, cls: ClassInfo) -> ast.ClassDef | None:
        module = self.index.module(cls.module)
        try:
            body = self.index.syntax(module.path).body if module else []
        except (SyntaxProblem, OSError):
            return None
        # A class a factory made is `function.<locals>.Name[arguments]`: its statement is in that function.
        function, _, local = cls.name.partition(".<locals>.")
        if local:
            body = next((s.body for s in flatten(body, self.index.platform)
                         if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == function), [])
        name = local.partition("[")[0] if local else cls.name
        return next((s for s in flatten(body, self.index.platform) if isinstance(s, ast.ClassDef) and s.name == name),
                    None)

    # -- protocols -----------------------------------------------------------------------------------

    def protocols(self, module_name: str) -> dict[str, Protocol]:
        """Every Protocol class defined in a module, with its members as typing computes them."""
        module = self.index.module(module_name)
        if module is None:
            return {}
        found = (self.protocol(cls) for cls in module.classes.values())
        return {p.cls.name: p for p in found if p is not None}

    def protocol(self, cls: ClassInfo) -> Protocol | None:
        """``cls`` as a Protocol (its members as typing computes them), or None when it is not one."""
        if not self._is_protocol(cls):
            return None
        members: set[str] = set()
        for base in self.hierarchy(cls).linear:
            if isinstance(base, ClassInfo) and (base is cls or self._is_protocol(base)):
                members |= base.bound | base.annotated
        runtime = any(d.rsplit(".", 1)[-1] == "runtime_checkable" for d in cls.decorators)
        return Protocol(cls, tuple(sorted(m for m in members if _is_member(m))), runtime)

    def _is_protocol(self, cls: ClassInfo) -> bool:
        module = self.index.module(cls.module)
        for dotted in cls.bases:
            if dotted is None or module is None:
                continue
            target = self.resolve(module, dotted)
            if isinstance(target, External) and target.qualname in {f"{m}.Protocol" for m in _TYPING_MODULES}:
                return True
        return False

    def conformance(self, cls: ClassInfo, protocol: Protocol) -> Conformance:
        """``isinstance(cls, protocol)``: every member is an attribute somewhere in the MRO."""
        if not protocol.runtime_checkable:
            return Conformance(protocol.cls.name, None, protocol.members, {},
                               f"{protocol.cls.name} is not @runtime_checkable: isinstance raises TypeError on it")
        return self.has_members(cls, protocol.members, protocol.cls.name, protocol.cls)

    def has_members(self, cls: ClassInfo, members: tuple[str, ...], label: str,
                    protocol: ClassInfo | None = None) -> Conformance:
        """Whether ``hasattr(cls, m)`` holds for every member, reading the class's MRO."""
        hierarchy = self.hierarchy(cls)
        conditional = self._conditional.get(cls.qualname)
        if conditional is None:  # a landscape asks it of each class for every protocol
            conditional = self._conditional[cls.qualname] = self._conditional_layers(hierarchy)
        provided: dict[str, str] = {}
        maybe: dict[str, str] = {}
        for member in members:
            if member in _OBJECT_ATTRIBUTES:
                provided[member] = "builtins.object"
                continue
            for base in hierarchy.linear:
                # typing's isinstance uses hasattr: an annotation without a value binds nothing,
                # except on the protocol itself, which typing fills in.
                if isinstance(base, ClassInfo) and (member in base.bound or
                                                    (base is protocol and member in base.annotated)):
                    if base.qualname not in conditional:
                        provided[member] = base.qualname
                        break
                    maybe.setdefault(member, conditional[base.qualname])
        missing = tuple(m for m in members if m not in provided)
        if missing and all(m in maybe for m in missing):
            return Conformance(label, None, missing, provided,
                               f"{', '.join(missing)} only in the class {maybe[missing[0]]}, which returns its "
                               f"argument unchanged in some branch")
        if not missing:
            return Conformance(label, True, (), provided, f"all of {', '.join(members)} found in its MRO")
        if hierarchy.unknown:
            return Conformance(label, None, missing, provided,
                               f"{', '.join(missing)} not found, but the MRO is incomplete: {hierarchy.unknown[0]}")
        externals = [b.qualname for b in hierarchy.linear
                     if isinstance(b, External) and b.qualname.split(".")[0] not in ("builtins", *_TYPING_MODULES)]
        note = f" (external bases {', '.join(externals)} taken to add none)" if externals else ""
        return Conformance(label, False, missing, provided, f"missing {', '.join(missing)}{note}")

    def _conditional_layers(self, hierarchy: Hierarchy) -> dict[str, str]:
        """The classes of an MRO that are there only when a factory wraps its argument (qualname -> factory):
        the ones it adds above the argument's own MRO."""
        layers: dict[str, str] = {}
        for made in hierarchy.linear:
            argument = self._made.get(made.qualname, ({}, None))[1] if isinstance(made, ClassInfo) else None
            if not isinstance(made, ClassInfo) or argument is None:
                continue
            kept = set(self.hierarchy(argument).linear)
            for base in self.hierarchy(made).linear:
                if isinstance(base, ClassInfo) and base not in kept:
                    layers[base.qualname] = made.name.split(".<locals>")[0]
        return layers

    # -- literals ------------------------------------------------------------------------------------

    def literal(self, module: ModuleInfo, name: str, _depth: int = 0) -> Any:
        """A module-level literal with its spreads and aliases followed across modules; None if unknown."""
        if _depth > 20:
            return None
        if name in module.literals:
            return self._expand(module, module.literals[name], _depth)
        imp = module.imports.get(name)
        if imp is not None and imp.name:
            source = self.resolve_module(imp.module)
            if isinstance(source, ModuleInfo):
                return self.literal(source, imp.name, _depth + 1)
        return None

    def _expand(self, module: ModuleInfo, value: Any, depth: int) -> Any:
        if isinstance(value, LiteralRef):
            return self.literal(module, value.name, depth + 1)
        if not isinstance(value, Merge):
            return value
        parts = [self._expand(module, part, depth + 1) for part in value.parts]
        if value.kind == "dict":
            merged: dict = {}
            for part in parts:
                if isinstance(part, dict):
                    merged.update(part)
            return merged
        return [item for part in parts if isinstance(part, (list, tuple)) for item in part]


def _is_member(name: str) -> bool:
    return name not in _NOT_PROTOCOL_MEMBERS and not name.startswith("_abc_")


def _c3_merge(sequences: list[list]) -> list | None:
    sequences = [list(s) for s in sequences if s]
    result: list = []
    while sequences:
        for seq in sequences:
            head = seq[0]
            if not any(head in other[1:] for other in sequences):
                break
        else:
            return None
        result.append(head)
        sequences = [[c for c in s if c != head] for s in sequences]
        sequences = [s for s in sequences if s]
    return result


def _dedupe(items: list) -> list:
    seen: list = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen
