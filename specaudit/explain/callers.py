"""The callers of a raising function, one or two levels up, found in the same release's source: where a raise's own
conditions name no knob, the conditions its callers call it under often do (``if spec.method == "eagle3":
self._check(...)``), and the arguments they hand it say what its parameters are to the launch (``inspect_model_cls(
self.draft_model_config.architectures, ...)``).

A call is linked to a function through the caller's module: a bare name it defines or imports (``from .utils import
get_model_architecture``, followed through a package's re-exports and star imports), an attribute of such a name (a
class's method, an imported module's function: ``envs.f``), or a method of the caller's own class (``self.f``) where
that class defines it; a call so resolved is linked to the function it names and to no other of the same name. A call
that cannot be resolved so (a builtin's, a local variable's, an inherited method's, a method of an object a module
makes: ``ModelRegistry.resolve_model_cls``) is linked by its name (the last part of the function's qualified name; a
class's name for its ``__init__``), where the call fits the function's parameters and the name is not defined in too
many places to tell (then only a ``self.`` call in the function's own file is taken). The atlas is built one file at a
time, and this pass only joins what the files' passes found (templates.FileFacts).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .templates import Call, Signature

MAX_CALLERS = 6  # call sites kept for a function, per level
MAX_UP = 3  # call sites kept for each caller, one level further up
MAX_DEFS_OF_NAME = 3  # a name defined in more places than this is linked only by a ``self.`` call in its own file


@dataclass(frozen=True)
class Caller:
    """A call site of a function: the caller, the conditions it calls under, what reaches their names, and what each
    of the function's parameters is bound to there; with the caller's own callers (``up``), one level further."""

    file: str
    function: str
    line: int
    way: tuple[tuple[str, bool], ...]
    reaching: tuple[tuple[str, str], ...]
    bindings: tuple[tuple[str, str], ...]  # (the callee's parameter, the argument's source in the caller)
    receiver: str = "self"  # how the call names the callee (templates.Call.receiver): "self" is the caller's self
    up: tuple[Caller, ...] = ()

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


def link_callers(defs: dict[str, dict[str, Signature]], calls: dict[str, list[Call]],
                 wanted: Iterable[tuple[str, str]], imports: dict[str, dict[str, str]] | None = None,
                 ) -> dict[tuple[str, str], tuple[Caller, ...]]:
    """(file, function) -> its callers with theirs, for each function of ``wanted``: ``defs`` file -> qualified
    name -> parameters, ``calls`` file -> the calls it makes, ``imports`` file -> the names its imports bind (all
    from templates.file_facts)."""
    resolver = Resolver(defs, imports or {})
    by_name: dict[str, list[tuple[str, Call]]] = {}
    for file, made in calls.items():
        for call in made:
            by_name.setdefault(call.callee, []).append((file, call))
    defined: dict[str, int] = {}
    for names in defs.values():
        for qualified in names:
            short = _short(qualified)
            defined[short] = defined.get(short, 0) + 1

    def callers(file: str, function: str, limit: int, depth: int) -> tuple[Caller, ...]:
        signature = defs.get(file, {}).get(function)
        if signature is None:
            return ()
        short = _short(function)
        crowded = defined.get(short, 0) > MAX_DEFS_OF_NAME
        found: list[Caller] = []
        # a call under a condition, or handing on more than its own parameters' names, before a call that passes
        # its names through (whose callers, a level up, then say what they are)
        for at, call in sorted(by_name.get(short, ()), key=lambda c: (not c[1].way, _passes_through(c[1]))):
            if len(found) >= limit:
                break
            if (at, call.function) == (file, function):
                continue
            target = resolver.callee(at, call)
            if target is not None and not resolver.names(target, file, function):
                continue  # the call names another function of that name
            if target is None and crowded and (at != file or call.receiver != "self"):
                continue
            bindings = bind(function, signature, call)
            if bindings is None:
                continue
            up = callers(at, call.function, MAX_UP, depth - 1) if depth > 1 else ()
            found.append(Caller(at, call.function, call.line, call.way, call.reaching, bindings, call.receiver, up))
        return tuple(found)

    return {(file, function): linked for file, function in wanted
            for linked in [callers(file, function, MAX_CALLERS, 2)] if linked}


MAX_HOPS = 4  # re-exports followed from the module a name is imported from to the one that defines it


class Resolver:
    """The function a call names, read through its module's definitions and imports."""

    def __init__(self, defs: dict[str, dict[str, Signature]], imports: dict[str, dict[str, str]]) -> None:
        self.defs, self.imports = defs, imports
        # file -> the names it defines at its top (functions and classes)
        self.top = {file: {q.partition(".")[0] for q in names} for file, names in defs.items()}

    def callee(self, at: str, call: Call) -> tuple[str, str] | None:
        """(file, what it names there: "f", "C.f", "C" for its ``__init__``) for a call made in ``at``; ("", "") for
        a callee outside the release; None where the call cannot be resolved (a builtin's, a local's, an inherited
        method's, a method of an object a module makes: it is then linked by name)."""
        if call.receiver == "self":
            scope = call.function.rpartition(".")[0]
            named = f"{scope}.{call.callee}"
            return (at, named) if scope and named in self.defs.get(at, {}) else None
        if call.receiver == "" or call.owner and call.owner.partition(".")[0] != "self":
            return self.where(at, f"{call.owner}.{call.callee}" if call.receiver else call.callee, MAX_HOPS)
        return None

    def where(self, at: str, ref: str, hops: int) -> tuple[str, str] | None:
        """Where a dotted reference made in module ``at`` leads."""
        head, _, rest = ref.partition(".")
        if head in self.top.get(at, ()):
            return self._defined(at, ref)
        target = self.imports.get(at, {}).get(head)
        if not target or hops <= 0:
            return None
        dotted = _absolute(target, at)
        if dotted is None:
            return None
        dotted += f".{rest}" if rest else ""
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            module = self._module_file(".".join(parts[:cut]))
            if module is None:
                continue
            inside = ".".join(parts[cut:])
            return self._inside(module, inside, hops - 1) if inside else None  # None: the module itself, called
        return ("", "") if parts[0] not in self._packages() else None

    def _inside(self, module: str, ref: str, hops: int) -> tuple[str, str] | None:
        """Where a reference to a name of ``module`` leads: what it defines, imports (a package's re-export) or
        binds from a star import's module."""
        head = ref.partition(".")[0]
        bound = self.imports.get(module, {})
        if head in self.top.get(module, ()) or head not in bound and not any(k.startswith("*") for k in bound):
            return self._defined(module, ref)
        if head in bound:
            return self.where(module, ref, hops)
        for key, star in bound.items():  # a name no statement of the module binds: one of its star imports'
            source = _absolute(star, module) if key.startswith("*") else None
            found = self._module_file(source) if source else None
            if found is not None and hops > 0:
                led = self._inside(found, ref, hops - 1)
                if led is not None and led[0] and (led[1].partition(".")[0] in self.top.get(led[0], ())):
                    return led
        return None

    def _defined(self, file: str, ref: str) -> tuple[str, str] | None:
        """A reference to what ``file`` defines: a function, a class (its ``__init__``), a class's method; an
        inherited method (not in the class's own body) is None: linked by name."""
        names = self.defs.get(file, {})
        head = ref.partition(".")[0]
        if head not in self.top.get(file, ()):
            return None  # a name the module binds otherwise (an object it makes, of a class defined anywhere)
        if ref in names or f"{ref}.__init__" in names or "." not in ref:
            return (file, ref)  # a function, a class (its own __init__ or an inherited one), a class's own method
        return None

    def names(self, target: tuple[str, str], file: str, function: str) -> bool:
        """Whether the resolved callee is ``function`` of ``file``."""
        return target[0] == file and target[1] in (function, function.removesuffix(".__init__"))

    def _module_file(self, module: str) -> str | None:
        path = module.replace(".", "/")
        return next((f for f in (f"{path}.py", f"{path}/__init__.py") if f in self.defs), None)

    def _packages(self) -> set[str]:
        return {file.partition("/")[0] for file in self.defs}


def _absolute(target: str, at: str) -> str | None:
    """An import's target made absolute against the module it is written in (``.registry.X`` in
    ``vllm/model_executor/models/__init__.py``: ``vllm.model_executor.models.registry.X``)."""
    level = len(target) - len(target.lstrip("."))
    if not level:
        return target
    package = at.split("/")[:-1]
    if level - 1 > len(package):
        return None
    base = package[:len(package) - (level - 1)]
    return ".".join([*base, target[level:]]) if target[level:] else ".".join(base)


def bind(function: str, signature: Signature, call: Call) -> tuple[tuple[str, str], ...] | None:
    """The function's parameters bound to the call's arguments; None where the call does not fit them (or cannot
    be a call of it: a method called by a bare name)."""
    params = list(signature.params)
    method = bool(params) and params[0] in ("self", "cls") and "." in function
    init = function.endswith(".__init__")
    if method:
        if not (call.receiver or init):
            return None
        params = params[1:]
    elif call.receiver == "self":
        return None
    if len(call.args) > len(params) and not signature.star:
        return None
    named = set(params) | set(signature.keyword_only)
    if any(k not in named for k, _ in call.keywords) and not signature.double_star:
        return None
    bound = list(zip(params, call.args)) + [(k, v) for k, v in call.keywords if k in named]
    return tuple(bound)


def _passes_through(call: Call) -> bool:
    return all(a.isidentifier() for a in [*call.args, *(v for _, v in call.keywords)])


def _short(function: str) -> str:
    """The name a function is called by: its own, or its class's for an ``__init__``."""
    parts = function.split(".")
    return parts[-2] if parts[-1] == "__init__" and len(parts) > 1 else parts[-1]


def caller_row(caller: Caller) -> list[Any]:
    return [caller.file, caller.function, caller.line, [list(w) for w in caller.way],
            [list(r) for r in caller.reaching], [list(b) for b in caller.bindings], caller.receiver,
            [caller_row(u) for u in caller.up]]


def caller_of(row: list[Any]) -> Caller:
    file, function, line, way, reaching, bindings, receiver, up = row
    return Caller(file, function, line, tuple((c, bool(b)) for c, b in way), tuple((n, v) for n, v in reaching),
                  tuple((p, a) for p, a in bindings), receiver, tuple(caller_of(u) for u in up))


def call_row(call: Call) -> list[Any]:
    return [call.callee, call.function, call.line, call.receiver, list(call.args), [list(k) for k in call.keywords],
            [list(w) for w in call.way], [list(r) for r in call.reaching], call.owner]


def call_of(row: list[Any]) -> Call:
    callee, function, line, receiver, args, keywords, way, reaching, owner = row
    return Call(callee, function, line, receiver, tuple(args), tuple((k, v) for k, v in keywords),
                tuple((c, bool(b)) for c, b in way), tuple((n, v) for n, v in reaching), owner)


def signature_row(signature: Signature) -> list[Any]:
    return [list(signature.params), list(signature.keyword_only), signature.star, signature.double_star]


def signature_of(row: list[Any]) -> Signature:
    params, keyword_only, star, double_star = row
    return Signature(tuple(params), tuple(keyword_only), bool(star), bool(double_star))
