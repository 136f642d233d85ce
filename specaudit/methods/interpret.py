"""How a release's own code resolves the speculative method, played out on a launch without running it.

The engines resolve the method in a few statements: ``if self.method is None: ... self.method = "draft_model"``,
``elif "eagle3" in self.draft_model_config.model.lower(): self.method = "eagle3"``, ``return "EAGLE"``. This walks
such a function's syntax tree statement by statement, with the variable that holds the method, the locals it
assigns, and what the launch fixes (``bindings``: an expression of the engine's, as written, to a value of the
launch). A condition it cannot evaluate is taken both ways; the outcomes of every way are kept.

Nothing of the engine is executed or imported: expressions are evaluated by the small evaluator here, over
constants, names, attributes, comparisons, ``and``/``or``/``not``, ``str.lower``/``upper``, ``getattr``,
``any``/``all`` over a known sequence, and ``get_args`` of the release's Literal aliases. Anything else is unknown.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..core.values import COMPARISONS


class _Unknown:
    def __repr__(self) -> str:
        return "<unknown>"


UNKNOWN: Any = _Unknown()  # a value the launch does not fix
MAX_WAYS = 64  # a function that forks on more unknown conditions than this is not one that resolves a method


@dataclass(frozen=True)
class Step:
    """An assignment that set the method, and the conditions that led to it."""

    line: int
    code: str
    conditions: tuple[str, ...]

    def __str__(self) -> str:
        why = f" (where {' and '.join(self.conditions)})" if self.conditions else ""
        return f"{self.line}: {self.code}{why}"


@dataclass(frozen=True)
class Outcome:
    """One way through the function: the method it leaves, or the raise that ends it."""

    method: Any
    steps: tuple[Step, ...] = ()
    raises: str | None = None  # "N: raise ...", when this way ends in a raise


@dataclass
class _Way:
    env: dict[str, Any]
    conditions: tuple[str, ...] = ()
    steps: tuple[Step, ...] = ()
    done: Outcome | None = None

    def fork(self, condition: str) -> _Way:
        return _Way(dict(self.env), self.conditions + (condition,), self.steps)


@dataclass
class Interpreter:
    """``variable``: the expression that holds the method in the function (``self.method``, a parameter's name);
    ``bindings``: expression -> value; ``literals``: a module-level name -> the strings its Literal (or a frozenset
    of strings, or a string constant) declares, and ``constant`` whether it is a plain string constant; ``tracked``:
    other expressions the function assigns and later reads (``self.model``)."""

    variable: str
    bindings: dict[str, Any]
    literals: Callable[[str], set[str] | None]
    tracked: tuple[str, ...] = ()
    returns: bool = False  # the function returns the method (else it sets ``variable``, and returns anything)
    constant: Callable[[str], bool] = lambda name: False  # whether a module-level name is a plain string constant

    def run(self, function: ast.FunctionDef | ast.AsyncFunctionDef, method: Any) -> list[Outcome]:
        """Every way through ``function`` for a launch whose method is ``method`` on entry."""
        start = _Way({self.variable: method})
        ways = self._block(function.body, [start])
        return [w.done or Outcome(w.env.get(self.variable, UNKNOWN), w.steps) for w in ways]

    # -- statements ----------------------------------------------------------------------------------------------

    def _block(self, body: list[ast.stmt], ways: list[_Way]) -> list[_Way]:
        for stmt in body:
            live = [w for w in ways if w.done is None]
            if not live:
                break
            ways = [w for w in ways if w.done is not None] + [out for w in live for out in self._statement(stmt, w)]
            if len(ways) > MAX_WAYS:
                raise ValueError(f"more than {MAX_WAYS} ways through the function")
        return ways

    def _statement(self, stmt: ast.stmt, way: _Way) -> list[_Way]:
        if isinstance(stmt, ast.If):
            value = self.evaluate(stmt.test, way.env)
            if value is UNKNOWN and not self._sets_method(stmt):
                # Either way leaves the method as it is (a raise in it is a gate the path judges): no fork, but the
                # locals it may assign are no longer known.
                for assigned in _assigned_names(stmt):
                    way.env[assigned] = UNKNOWN
                return [way]
            test = ast.unparse(stmt.test)
            ways = []
            if value is UNKNOWN or _truth(value):
                ways += self._block(stmt.body, [way.fork(test) if value is UNKNOWN else way])
            if value is UNKNOWN or not _truth(value):
                ways += self._block(stmt.orelse, [way.fork(f"not ({test})") if value is UNKNOWN else way])
            return ways
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if stmt.value is None:
                return [way]
            value = self.evaluate(stmt.value, way.env)
            for target in targets:
                name = _dotted(target)
                if name == self.variable:
                    way.steps += (Step(stmt.lineno, self._code(stmt), way.conditions),)
                if name is not None and (name == self.variable or name in self.tracked or isinstance(target, ast.Name)):
                    way.env[name] = value
            return [way]
        if isinstance(stmt, ast.Raise):
            way.done = Outcome(way.env.get(self.variable, UNKNOWN), way.steps, f"{stmt.lineno}: {self._code(stmt)}")
            return [way]
        if isinstance(stmt, ast.Return):
            method = way.env.get(self.variable, UNKNOWN)
            if self.returns:
                method = self.evaluate(stmt.value, way.env) if stmt.value is not None else None
                if _dotted(stmt.value) != self.variable:
                    way.steps += (Step(stmt.lineno, self._code(stmt), way.conditions),)
            way.done = Outcome(method, way.steps)
            return [way]
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            return self._block(stmt.body, [way])
        if isinstance(stmt, ast.Try):
            return self._block(stmt.body + stmt.orelse + stmt.finalbody, [way])
        # Loops, nested definitions, calls for their effects: they set no method in the shapes engines use.
        return [way]

    def _sets_method(self, stmt: ast.stmt) -> bool:
        """Whether a statement can change the method, or end the function with one."""
        for node in ast.walk(stmt):
            if self.returns and isinstance(node, ast.Return) and node.value is not None:
                return True
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(_dotted(t) in (self.variable, *self.tracked) for t in targets):
                    return True
        return False

    def _code(self, stmt: ast.stmt) -> str:
        text = ast.unparse(stmt).splitlines()[0]
        return text if len(text) <= 120 else text[:117] + "..."

    # -- expressions ---------------------------------------------------------------------------------------------

    def evaluate(self, node: ast.expr, env: dict[str, Any]) -> Any:
        name = _dotted(node)
        if name is not None and name in env:
            return env[name]
        if name is not None and name in self.bindings:
            return self.bindings[name]
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            names = self.literals(node.id)  # a module-level string constant: `_ARCH = "Qwen3OmniDSparkModel"`
            return next(iter(names)) if names is not None and len(names) == 1 and self.constant(node.id) else UNKNOWN
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [self.evaluate(e, env) for e in node.elts]
            return UNKNOWN if any(i is UNKNOWN for i in items) else tuple(items)
        if isinstance(node, ast.BoolOp):
            return self._boolean(node, env)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            value = self.evaluate(node.operand, env)
            return UNKNOWN if value is UNKNOWN else not _truth(value)
        if isinstance(node, ast.Compare):
            return self._compare(node, env)
        if isinstance(node, ast.Call):
            return self._call(node, env)
        if isinstance(node, ast.Attribute):
            owner = self.evaluate(node.value, env)
            if isinstance(owner, dict):
                return owner.get(node.attr, UNKNOWN)
        return UNKNOWN

    def _boolean(self, node: ast.BoolOp, env: dict[str, Any]) -> Any:
        # Python's own short-circuit: the first value that decides is the value; an unknown one before it, unknown.
        deciding = isinstance(node.op, ast.Or)
        value: Any = None
        for operand in node.values:
            value = self.evaluate(operand, env)
            if value is UNKNOWN:
                rest = [self.evaluate(o, env) for o in node.values[node.values.index(operand) + 1:]]
                if any(v is not UNKNOWN and _truth(v) == deciding for v in rest):
                    return deciding  # a later operand decides the whole, whatever the unknown one is
                return UNKNOWN
            if _truth(value) == deciding:
                return value
        return value

    def _compare(self, node: ast.Compare, env: dict[str, Any]) -> Any:
        left = self.evaluate(node.left, env)
        for op, comparator in zip(node.ops, node.comparators):
            right = self.evaluate(comparator, env)
            if left is UNKNOWN or right is UNKNOWN:
                return UNKNOWN
            try:
                holds = COMPARISONS[type(op)](left, right)
            except (TypeError, KeyError):
                return UNKNOWN
            if not holds:
                return False
            left = right
        return True

    def _call(self, node: ast.Call, env: dict[str, Any]) -> Any:
        func = _dotted(node.func)
        if func is not None and f"{func}()" in self.bindings:
            return self.bindings[f"{func}()"]
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("lower", "upper") and not node.args:
            value = self.evaluate(node.func.value, env)
            return getattr(value, node.func.attr)() if isinstance(value, str) else UNKNOWN
        if func == "get_args" and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
            names = self.literals(node.args[0].id)
            return UNKNOWN if names is None else tuple(sorted(names))
        if func == "getattr" and len(node.args) in (2, 3) and isinstance(node.args[1], ast.Constant):
            owner = self.evaluate(node.args[0], env)
            default = self.evaluate(node.args[2], env) if len(node.args) == 3 else UNKNOWN
            return owner.get(node.args[1].value, default) if isinstance(owner, dict) else UNKNOWN
        if func in ("any", "all") and len(node.args) == 1 and isinstance(node.args[0], ast.GeneratorExp):
            return self._quantified(func, node.args[0], env)
        return UNKNOWN

    def _quantified(self, func: str, gen: ast.GeneratorExp, env: dict[str, Any]) -> Any:
        if len(gen.generators) != 1 or gen.generators[0].ifs or not isinstance(gen.generators[0].target, ast.Name):
            return UNKNOWN
        loop = gen.generators[0]
        items = self.evaluate(loop.iter, env)
        if items is UNKNOWN or not isinstance(items, (tuple, list)):
            return UNKNOWN
        assert isinstance(loop.target, ast.Name)
        values = [self.evaluate(gen.elt, {**env, loop.target.id: item}) for item in items]
        if func == "any":
            return True if any(v is not UNKNOWN and _truth(v) for v in values) else UNKNOWN if UNKNOWN in values else False
        return False if any(v is not UNKNOWN and not _truth(v) for v in values) else UNKNOWN if UNKNOWN in values else True


def _truth(value: Any) -> bool:
    return bool(value)


def _dotted(node: ast.expr | None) -> str | None:
    """``self.draft_model_config.model`` as text; None for anything that is not a name or an attribute chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _assigned_names(stmt: ast.stmt) -> set[str]:
    return {name for node in ast.walk(stmt) if isinstance(node, (ast.Assign, ast.AnnAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if (name := _dotted(target)) is not None}


def methods_named(function: ast.FunctionDef | ast.AsyncFunctionDef, variable: str) -> set[str]:
    """The strings ``function`` compares the method with or assigns to it: the methods a release names where it
    declares no list of them."""
    named: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Compare) and variable in {_dotted(n) for n in [node.left, *node.comparators]}:
            named |= set(_strings([node.left, *node.comparators]))
        elif isinstance(node, ast.Assign) and any(_dotted(t) == variable for t in node.targets):
            named |= set(_strings([node.value]))
    return named


def _strings(nodes: list[ast.expr]) -> Iterator[str]:
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                yield sub.value
