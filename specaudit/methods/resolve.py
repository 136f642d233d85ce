"""The method a launch runs, resolved as the release's own code resolves it (methods/interpret.py plays that code
out), and the release's own list of methods."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..launch.request import Launch
from .catalog import EngineMethods
from .interpret import UNKNOWN, Interpreter, Outcome, methods_named


class ReleaseCode(Protocol):
    """What resolution reads of a release: a module's syntax tree and its path in the tree, or None."""

    def module_tree(self, name: str) -> tuple[ast.Module, str] | None: ...


@dataclass(frozen=True)
class Resolution:
    requested: str | None  # the method as the launch names it, lower case; None: it names none
    method: str | None  # the method the engine will run, lower case; None: it cannot be told before launch
    how: tuple[str, ...]  # the engine's own steps that made it so, "file:line: code (where ...)"
    release_methods: tuple[str, ...]  # what the release has, lower case
    listed_at: str  # where that list comes from: "file:line Name", or the functions whose comparisons name them
    listed: bool  # True: the release declares the list; False: it is what its resolving code compares with
    problem: str = ""  # why the method cannot be told, when it cannot
    checked: str = "requested"  # which the engine looks up in its list: the method as named, or as resolved
    # Where every way through the resolving code ends in a raise for this launch: (file, line, the raise's code).
    stops: tuple[str, int, str] | None = None

    @property
    def in_release(self) -> bool | None:
        """Whether the release has the launch's method (None: no method named, or no list to tell)."""
        looked_up = self.requested if self.checked == "requested" else self.method
        if self.requested is None or looked_up is None or not self.release_methods:
            return None
        return looked_up in self.release_methods


def launch_facts(launch: Launch) -> dict[str, Any]:
    """The launch's own values that the engines' resolving code reads (catalog.LAUNCH_FACTS)."""
    spec = launch.speculative
    model = spec.get("model") or launch.draft  # --draft names the speculative config's model
    target = launch.target
    drafter = launch.drafter.config if launch.drafter is not None else None
    own = model is None  # no drafter named: the draft is the target's own checkpoint (MTP), or none at all
    return {
        "method": launch.method,
        "model": model,
        "num_speculative_tokens": spec.get("num_speculative_tokens"),
        "target_path": target.name if target else UNKNOWN,
        "draft_path": model if model is not None else (target.name if target else UNKNOWN),
        "draft_architectures": list(drafter.get("architectures") or []) if drafter is not None
        else (target.architectures if own and target else UNKNOWN),
        "draft_model_type": drafter.get("model_type", UNKNOWN) if drafter is not None else UNKNOWN,
        "draft_config": drafter if drafter is not None else (None if own else UNKNOWN),
        "target_model_type": target.model_type if target else UNKNOWN,
        "target_text_model_type": target.text_model_type if target else UNKNOWN,
        "target_architectures": target.architectures if target else UNKNOWN,
        # vLLM's custom proposer: `pkg.module.Class`, dotted identifiers and no path separator
        "model_is_class_path": isinstance(model, str) and "/" not in model and len(model.split(".")) >= 2
        and all(p.isidentifier() for p in model.split(".")),
    }


def resolve(launch: Launch, code: ReleaseCode, spec: EngineMethods) -> Resolution:
    """The method the release runs for ``launch``: each of the engine's resolving functions that the release defines
    played out in turn on the launch's values, then its lookup's aliases; with the release's own list of methods."""
    requested = launch.method.lower() if launch.method else None
    spell = str.upper if spec.case == "upper" else str.lower
    facts = launch_facts(launch)
    bindings = {expression: facts[fact] for expression, fact in spec.bindings.items()}
    current: Any = spell(requested) if requested else None
    how: list[str] = []
    named: set[str] = set()
    functions: list[str] = []
    for resolver in spec.resolvers:
        found = _function(code, resolver.functions)
        if found is None:
            continue
        function, module, relpath = found
        functions.append(f"{relpath}:{function.lineno} {function.name}")
        named |= methods_named(function, resolver.variable)
        interpreter = Interpreter(resolver.variable, bindings, functools.partial(_declared, module), resolver.tracked,
                                  resolver.returns, functools.partial(_is_constant, module))
        try:
            outcomes = interpreter.run(function, current)
        except (ValueError, RecursionError) as exc:
            return _resolution(requested, None, how, code, spec, named, functions,
                               f"{relpath}:{function.lineno}: {exc}")
        chosen, problem = _choose(outcomes)
        if problem:
            return _resolution(requested, None, how, code, spec, named, functions, f"{relpath}: {problem}")
        how += [f"{relpath}:{step}" for outcome in chosen[:1] for step in outcome.steps]
        current = chosen[0].method
        if chosen[0].raises:  # the engine refuses the launch while resolving its method: nothing after it runs
            line, _, raised = chosen[0].raises.partition(": ")
            method = current.lower() if isinstance(current, str) else None
            return replace(_resolution(requested, method, how, code, spec, named, functions, ""),
                           stops=(relpath, int(line), raised))
    for alias in spec.aliases:
        names = _declared_at(code, alias.names)
        if names and isinstance(current, str) and current in names:
            how.append(f"{alias.names}: {current} is an alias of {alias.method}")
            current = alias.method
    method = current.lower() if isinstance(current, str) else None
    problem = "" if method else "the resolving code leaves no method"
    return _resolution(requested, method, how, code, spec, named, functions, problem)


def _choose(outcomes: list[Outcome]) -> tuple[list[Outcome], str]:
    """The ways the launch can go: those that do not raise (a raise is a gate, judged on the path), when they agree
    on the method; else the raising ones, whose method is the one the raise met."""
    running = [o for o in outcomes if o.raises is None]
    if not running:
        return outcomes[:1], ""
    if any(o.method is UNKNOWN for o in running):
        return [], "the method is set from a value not known before launch"
    if len({o.method for o in running}) > 1:
        ways = "; ".join(f"{o.method!r} where {' and '.join(o.steps[-1].conditions) or 'otherwise'}"
                         for o in running if o.steps)
        return [], f"the method depends on what is not known before launch: {ways}"
    return running, ""


def _resolution(requested: str | None, method: str | None, how: list[str], code: ReleaseCode, spec: EngineMethods,
                named: set[str], functions: list[str], problem: str) -> Resolution:
    for listed in spec.listed_in:
        names = _declared_at(code, listed)
        if names:
            module_name, _, name = listed.partition(":")
            tree, relpath = code.module_tree(module_name) or (None, module_name)
            line = next((s.lineno for s in tree.body if name in _assigned(s)), 0) if tree else 0
            return Resolution(requested, method, tuple(how), _lower(names), f"{relpath}:{line} {name}", True, problem,
                              spec.checked)
    aliases = {n for a in spec.aliases for n in (_declared_at(code, a.names) or ())}
    return Resolution(requested, method, tuple(how), _lower(named | aliases), ", ".join(functions), False, problem,
                      spec.checked)


def _assigned(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.ClassDef):
        return {stmt.name}
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _lower(names: set[str]) -> tuple[str, ...]:
    return tuple(sorted({n.lower() for n in names}))


def _function(code: ReleaseCode, candidates: tuple[str, ...]) -> tuple[ast.FunctionDef, ast.Module, str] | None:
    for candidate in candidates:
        module_name, _, qualname = candidate.partition(":")
        found = code.module_tree(module_name)
        if found is None:
            continue
        tree, relpath = found
        node: ast.AST | None = tree
        for part in qualname.split("."):
            body = getattr(node, "body", [])
            node = next((n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part), None)
        if isinstance(node, ast.FunctionDef):
            return node, tree, relpath
    return None


def _declared_at(code: ReleaseCode, spec: str) -> set[str] | None:
    module_name, _, name = spec.partition(":")
    found = code.module_tree(module_name)
    return _declared(found[0], name) if found else None


def _is_constant(tree: ast.Module, name: str) -> bool:
    return any(isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)
               and name in _assigned(s) for s in tree.body)


def _declared(tree: ast.Module, name: str, seen: frozenset[str] = frozenset()) -> set[str] | None:
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
                found |= _declared(tree, node.id, seen | {name}) or set()
        return found
    return None
