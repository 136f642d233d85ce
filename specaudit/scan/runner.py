"""The model runner a launch takes, decided as the release decides it, from its source (never imported).

vLLM picks Model Runner V1 (``vllm/v1/worker/gpu_model_runner.py``) or V2 (``vllm/v1/worker/gpu/``) per launch in
``VllmConfig.use_v2_model_runner`` (``vllm/config/vllm.py``): the variable, then the method, the model's kind, the
default-V2 architectures and MoE-ness, Triton on the platform, the features V2 does not support. This module reads
that property's body and runs it over the launch in three values, following the methods of its class that it calls,
with what each engine expression is for a launch declared in the path file's ``runner:`` section (``reads``). Where
the release has no such property, the variable's default decides (``defaults_file``), as before.

The result names the runner and why (the conditions that decided, with their lines, and what the engine logs when it
falls back), or both runners and what was not known. The tracer (trace.py) then follows only that runner's roles.
"""

from __future__ import annotations

import ast
import copy
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..play.libraries.environ import declared_default, truthy
from ..play.operators import compare
from ..play.player import LiteralScope, Player
from ..play.values import EngineObject, Raised, Unknown
from .facts import dotted_name

BOTH = "v1 and v2"  # what trace.BOTH_RUNNERS names: both runners' roles are traced

# A launch's value for an engine expression that names the target class (``__target__``), from the caller: (known,
# value) or (False, what was not understood).
TargetReader = Callable[[str], tuple[bool, Any]]


@dataclass(frozen=True)
class RunnerChoice:
    """How the engine picks its model runner (the path file's ``runner:`` section, rules/README.md)."""

    variable: str  # the environment variable that forces a runner
    defaults_file: str  # the module that declares its default
    when_set: str  # the runner used when the variable is truthy (releases without ``decision``)
    otherwise: str
    decision: str = ""  # module:Class.attribute of the release's own choice (a property or method returning a bool)
    when_true: str = ""  # the runner it names by True
    when_false: str = ""
    reads: tuple[tuple[str, str], ...] = ()  # engine expression -> expression over the launch
    assumed: tuple[tuple[str, str], ...] = ()  # engine expression -> the value taken, said in the reason
    platforms: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()  # platform -> names it fixes
    ignored_calls: tuple[str, ...] = ("logger",)  # receivers whose calls are statements without effect
    decided: tuple[str, str] | None = None  # the runner and why, for one launch (set by ``for_launch``)
    # runner -> the method of the decision's class that checks the launch against that runner once it is taken
    # (vLLM's VllmConfig._validate_v1_model_runner): a raise on every way through it refuses the launch
    validate: tuple[tuple[str, str], ...] = ()


def runner_choice(data: dict[str, Any] | None) -> RunnerChoice | None:
    """The ``runner:`` section of a path file."""
    if not data:
        return None
    known = {"variable", "defaults_file", "when_set", "otherwise", "decision", "when_true", "when_false"}
    plain: dict[str, Any] = {k: str(v) for k, v in data.items() if k in known}
    return RunnerChoice(
        **plain,
        reads=tuple((str(k), str(v)) for k, v in (data.get("reads") or {}).items()),
        assumed=tuple((str(k), str(v)) for k, v in (data.get("assumed") or {}).items()),
        platforms=tuple((str(p), tuple((str(k), v) for k, v in (names or {}).items()))
                        for p, names in (data.get("platforms") or {}).items()),
        ignored_calls=tuple(str(c) for c in data.get("ignored_calls") or ("logger",)),
        validate=tuple((str(k), str(v)) for k, v in (data.get("validate") or {}).items()),
    )


@dataclass(frozen=True)
class RunnerDecision:
    runner: str  # v1, v2, or BOTH
    reason: str
    undecided: tuple[str, ...] = ()  # what could not be known, where both are traced
    logged: tuple[str, ...] = ()  # what the engine logs on the way (its fallback warnings)
    trail: tuple[str, ...] = ()  # every condition met on the way, with its value and line


@dataclass(frozen=True)
class LaunchFacts:
    """What the runner choice reads of a launch."""

    method: str | None
    options: dict[str, Any] = field(default_factory=dict)  # the launch command's options, by dashed name
    speculative: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)  # the target's config.json
    text_config: dict[str, Any] = field(default_factory=dict)
    draft_config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # the launch's environment, where known
    platform: str = "cuda"
    target: TargetReader | None = None


class Source:
    """The release's modules, as the index gives them: (syntax tree, relative path) by module name."""

    def __init__(self, module_tree: Callable[[str], tuple[ast.Module, str] | None]):
        self.module_tree = module_tree


# -- values (play.values', and the engine objects the launch has) -------------------------------------------------


@dataclass(frozen=True)
class Ref(EngineObject):
    """An engine object the launch has (a config), known by its dotted path."""

    path: str


class _Raised(Exception):
    def __init__(self, message: str, line: int, rendered: str = ""):
        super().__init__(message)
        self.message, self.line = message, line
        self.rendered = rendered or message  # the error as the engine prints it, where its values are known


class _Returned(Exception):
    def __init__(self, value: Any, line: int):
        super().__init__("return")
        self.value, self.line = value, line


_PRESENT = "__present__"


@functools.lru_cache(maxsize=512)
def _expression(source: str) -> ast.expr:
    return ast.parse(source, mode="eval").body


class _Interpreter:
    """Runs the decision's body over a launch. Conditions that cannot be known fork the run; each run ends in a
    return (its value and the conditions that led there) or a raise."""

    def __init__(self, choice: RunnerChoice, source: Source, facts: LaunchFacts):
        self.choice, self.source, self.facts = choice, source, facts
        self.reads = dict(choice.reads)
        self.assumed = dict(choice.assumed)
        self.platform = dict(dict(choice.platforms).get(facts.platform, ()))
        self.used_assumptions: set[str] = set()
        self.looked: dict[str, Any] = {}  # what the launch gave each read, in the order read
        self.unknown: list[str] = []
        self.nested: dict[str, list[list[str]]] = {}  # a method of the class called -> the trail of each way
        self.module_name, _, qual = choice.decision.partition(":")
        self.class_name, _, self.attribute = qual.partition(".")
        found = source.module_tree(self.module_name)
        self.tree: ast.Module | None = found[0] if found else None
        self.file = found[1] if found else ""
        self.methods: dict[str, ast.FunctionDef] = {}
        self.constants: dict[str, ast.expr] = {}
        self.envs_tree: ast.Module | None = None
        self.envs_aliases: set[str] = set()
        if self.tree is not None:
            for stmt in self.tree.body:
                if isinstance(stmt, ast.ClassDef) and stmt.name == self.class_name:
                    self.methods = {f.name: f for f in stmt.body if isinstance(f, ast.FunctionDef)}
                elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    self.constants[stmt.targets[0].id] = stmt.value
                elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
                    self.constants[stmt.target.id] = stmt.value
                elif isinstance(stmt, ast.Import):  # `import vllm.envs as envs`: envs.<NAME> reads the variables
                    self.envs_aliases |= {a.asname or a.name for a in stmt.names if a.name == choice.defaults_file}
                elif isinstance(stmt, ast.ImportFrom) and stmt.module and \
                        choice.defaults_file.rpartition(".") == (stmt.module, ".", stmt.names[0].name):
                    self.envs_aliases.add(stmt.names[0].asname or stmt.names[0].name)
            envs = source.module_tree(choice.defaults_file)
            self.envs_tree = envs[0] if envs else None

    @property
    def found(self) -> bool:
        return self.attribute in self.methods

    # ---- running

    def runs(self) -> list[tuple[str, Any, list[str], list[str], int]]:
        """Every way through the decision: (kind 'return'|'raise', value, trail, logged, line)."""
        out = []
        for trail, logged, outcome in self._call(self.attribute, [], []):
            if isinstance(outcome, _Raised):
                out.append(("raise", outcome.message, trail, logged, outcome.line))
            else:
                out.append(("return", outcome.value, trail, logged, outcome.line))
        return out

    def _call(self, name: str, trail: list[str], logged: list[str]) -> list[tuple[list[str], list[str], Any]]:
        """The outcomes of running method ``name`` of the class: (trail, logged, _Returned | _Raised)."""
        function = self.methods[name]
        results = []
        for _env, trail2, logged2, outcome in self._block(function.body, {"self": Ref("self")}, list(trail),
                                                         list(logged)):
            results.append((trail2, logged2, outcome or _Returned(None, function.end_lineno or function.lineno)))
        return results

    def _block(self, body: list[ast.stmt], env: dict, trail: list[str], logged: list[str]) -> Iterator[tuple]:
        """Runs statements; yields (env, trail, logged, outcome or None when the block falls through)."""
        if not body:
            yield env, trail, logged, None
            return
        stmt, rest = body[0], body[1:]
        for env2, trail2, logged2, outcome in self._statement(stmt, env, trail, logged):
            if outcome is not None:
                yield env2, trail2, logged2, outcome
            else:
                yield from self._block(rest, env2, trail2, logged2)

    def _statement(self, stmt: ast.stmt, env: dict, trail: list[str], logged: list[str]) -> Iterator[tuple]:
        line = f"{self.file}:{stmt.lineno}"
        if isinstance(stmt, ast.Return):
            said = trail + [f"returns `{ast.unparse(stmt.value) if stmt.value else 'None'}` ({line})"]
            for env2, value in self._values(stmt.value, env) if stmt.value else [(env, None)]:
                yield env2, said, logged, _Returned(value, stmt.lineno)
        elif isinstance(stmt, ast.Raise):
            message = ast.unparse(stmt.exc) if stmt.exc else "raise"
            yield env, trail + [f"raises at {line}: {message}"], logged, _Raised(message, stmt.lineno,
                                                                                   self._error(stmt.exc, env))
        elif isinstance(stmt, ast.If):
            for env2, test in self._values(stmt.test, env):
                if isinstance(test, Unknown):
                    for holds in (True, False):
                        yield from self._block(stmt.body if holds else stmt.orelse, self._fork(env2),
                                               trail + [f"if `{ast.unparse(stmt.test)}` ({line}) taken {holds}: "
                                                        f"{test.why} is not known"], list(logged))
                else:
                    holds = bool(test)
                    yield from self._block(stmt.body if holds else stmt.orelse, env2,
                                           trail + [f"`{ast.unparse(stmt.test)}` is {holds} ({line})"], logged)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
            if stmt.value is None:
                yield env, trail, logged, None
                return
            for env2, value in self._values(stmt.value, env):
                if isinstance(target, ast.Name):
                    env2 = dict(env2)
                    env2[target.id] = value
                yield env2, trail, logged, None
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            yield from self._effect(stmt.value, env, trail, logged)
        else:  # imports, pass, docstrings, loops the decision does not have: no effect on the choice
            if isinstance(stmt, (ast.For, ast.While, ast.With, ast.Try)):
                self.unknown.append(f"a {type(stmt).__name__.lower()} statement at {line}")
            yield env, trail, logged, None

    def _effect(self, call: ast.Call, env: dict, trail: list[str], logged: list[str]) -> Iterator[tuple]:
        func = call.func
        receiver = dotted_name(func.value) if isinstance(func, ast.Attribute) else None
        if receiver and receiver.split(".")[0] in self.choice.ignored_calls:
            yield env, trail, logged + [self._message(call, env)], None
            return
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr in ("append", "extend") \
                and isinstance(env.get(func.value.id), list):
            for env2, value in self._values(call.args[0], env):
                env2 = self._fork(env2)
                items = env2[func.value.id]
                if isinstance(value, Unknown) or (func.attr == "extend" and not isinstance(value, (list, tuple))):
                    items.append(value if isinstance(value, Unknown) else Unknown(ast.unparse(call)))
                elif func.attr == "append":
                    items.append(value)
                else:
                    items.extend(value)
                yield env2, trail, logged, None
            return
        for env2, _ in self._values(call, env):
            yield env2, trail, logged, None

    def _error(self, exc: ast.expr | None, env: dict) -> str:
        """What a raise prints: ``Name: message``, the message's f-string filled where its values are known."""
        if not isinstance(exc, ast.Call) or not exc.args:
            return ast.unparse(exc) if exc is not None else "raise"
        name = dotted_name(exc.func) or ast.unparse(exc.func)
        text = self._one(exc.args[0], env)
        return f"{name}: {text}" if isinstance(text, str) else f"{name}: {ast.unparse(exc.args[0])}"

    def _message(self, call: ast.Call, env: dict) -> str:
        """What a logger call prints: its format with %s filled where the values are known."""
        if not call.args:
            return ""
        values = [self._one(a, env) for a in call.args]
        text = values[0] if isinstance(values[0], str) else ast.unparse(call.args[0])
        args = tuple(v if not isinstance(v, Unknown) else f"<{v.why}>" for v in values[1:])
        try:
            return text % args if args else text
        except (TypeError, ValueError):
            return text

    @staticmethod
    def _fork(env: dict) -> dict:
        return {k: (copy.copy(v) if isinstance(v, list) else v) for k, v in env.items()}

    # ---- expressions

    def _values(self, node: ast.expr, env: dict) -> list[tuple[dict, Any]]:
        """An expression's value; a call of the class's own method may have several (one per way through it)."""
        calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and self._own_method(n)]
        if not calls:
            return [(env, self._one(node, env))]
        call = calls[0]
        name = call.func.attr  # type: ignore[attr-defined]
        out = []
        ways = self._call(name, [], [])
        self.nested[name] = [trail for trail, _, _ in ways]
        for _, _, outcome in ways:
            value = outcome.value if isinstance(outcome, _Returned) else Unknown(f"self.{name}() raises")
            out.append((env, self._one(node, env, {id(call): value})))
        distinct: list[tuple[dict, Any]] = []
        for item in out:
            if item[1] not in [d[1] for d in distinct]:
                distinct.append(item)
        return distinct

    def _own_method(self, node: ast.Call) -> bool:
        func = node.func
        return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
            and func.attr in self.methods and func.attr != self.attribute

    def _one(self, node: ast.expr, env: dict, given: dict[int, Any] | None = None) -> Any:
        given = given or {}
        if id(node) in given:
            return given[id(node)]
        one = lambda n: self._one(n, env, given)  # noqa: E731
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return env[node.id] if node.id in env else self._name(node.id)
        if isinstance(node, ast.Attribute):
            base = one(node.value)
            if isinstance(base, Ref):
                return self._lookup(f"{base.path}.{node.attr}" if base.path != "self" else f"self.{node.attr}")
            if isinstance(base, Unknown):
                return base
            return self._lookup(ast.unparse(node))
        if isinstance(node, ast.BoolOp):
            seen_unknown: Unknown | None = None
            for value_node in node.values:
                value = one(value_node)
                if isinstance(value, Unknown):
                    seen_unknown = seen_unknown or value
                    continue
                if isinstance(node.op, ast.And) and not value:
                    return value
                if isinstance(node.op, ast.Or) and value:
                    return value
            return seen_unknown if seen_unknown else value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            value = one(node.operand)
            return value if isinstance(value, Unknown) else not value
        if isinstance(node, ast.Compare):
            left = one(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = one(right_node)
                result = self._compare(op, left, right)
                if isinstance(result, Unknown) or not result:
                    return result
                left = right
            return True
        if isinstance(node, ast.IfExp):
            test = one(node.test)
            return test if isinstance(test, Unknown) else one(node.body if test else node.orelse)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = [one(e) for e in node.elts]
            return next((i for i in items if isinstance(i, Unknown)), None) or \
                {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for part in node.values:
                value = one(part.value) if isinstance(part, ast.FormattedValue) else part.value  # type: ignore
                parts.append(str(value) if not isinstance(value, Unknown) else "{" + value.why + "}")
            return "".join(parts)
        if isinstance(node, ast.Call):
            return self._invoke(node, env, given)
        if isinstance(node, ast.Subscript):
            base, index = one(node.value), one(node.slice)
            if isinstance(base, Unknown) or isinstance(index, Unknown):
                return base if isinstance(base, Unknown) else index
            try:
                return base[index]
            except (LookupError, TypeError):
                return Unknown(ast.unparse(node))
        return Unknown(ast.unparse(node))

    def _invoke(self, node: ast.Call, env: dict, given: dict[int, Any]) -> Any:
        text = ast.unparse(node)
        func = node.func
        name = func.id if isinstance(func, ast.Name) else None
        if name == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            base = self._one(node.args[0], env, given)
            if isinstance(base, Ref):
                path = f"{base.path}.{node.args[1].value!s}"
                if path in self.reads or path in self.assumed or self._object(path):
                    return self._lookup(path)
                return self._one(node.args[2], env, given) if len(node.args) > 2 else Unknown(path)
            return base if isinstance(base, Unknown) else Unknown(text)
        if name in ("any", "all", "sum") and node.args and isinstance(node.args[0], ast.GeneratorExp):
            return self._generator(name, node.args[0], env, given)
        if name in ("frozenset", "set", "list", "tuple", "bool", "len") and len(node.args) == 1:
            value = self._one(node.args[0], env, given)
            if isinstance(value, Unknown):
                return value
            convert: dict[str, Callable[[Any], Any]] = {"frozenset": frozenset, "set": set, "list": list,
                                                        "tuple": tuple, "bool": bool, "len": len}
            return convert[name](value)
        if isinstance(func, ast.Attribute):
            base = self._one(func.value, env, given)
            if isinstance(base, Ref):
                return self._lookup(f"{base.path}.{func.attr}()" if base.path != "self" else f"self.{func.attr}()")
            if isinstance(base, str) and func.attr == "join" and node.args:
                items = self._one(node.args[0], env, given)
                if isinstance(items, (list, tuple)) and not any(isinstance(i, Unknown) for i in items):
                    return base.join(str(i) for i in items)
            if isinstance(base, (set, frozenset)) and func.attr in ("intersection", "union", "issubset") \
                    and len(node.args) == 1:  # `{...}.intersection(draft_config.architectures or [])`
                other = self._one(node.args[0], env, given)
                if isinstance(other, (list, tuple, set, frozenset)) and not any(isinstance(i, Unknown) for i in other):
                    return getattr(base, func.attr)(other)
            if isinstance(base, Unknown):
                return base
        return self._lookup(text)

    def _generator(self, name: str, gen: ast.GeneratorExp, env: dict, given: dict[int, Any]) -> Any:
        if len(gen.generators) != 1 or not isinstance(gen.generators[0].target, ast.Name) or gen.generators[0].ifs:
            return Unknown(ast.unparse(gen))
        comp = gen.generators[0]
        items = self._one(comp.iter, env, given)
        if isinstance(items, Unknown):
            return items
        values = []
        for item in items:
            inner = dict(env)
            inner[comp.target.id] = item  # type: ignore[attr-defined]
            values.append(self._one(gen.elt, inner, given))
        unknown = next((v for v in values if isinstance(v, Unknown)), None)
        if name == "sum":
            return unknown or sum(values)
        result = any(v for v in values if not isinstance(v, Unknown)) if name == "any" else \
            all(v for v in values if not isinstance(v, Unknown))
        if unknown and ((name == "any" and not result) or (name == "all" and result)):
            return unknown
        return result

    @staticmethod
    def _compare(op: ast.cmpop, left: Any, right: Any) -> Any:
        if isinstance(op, (ast.Is, ast.IsNot)):
            if isinstance(left, Unknown):
                return left
            same = (left is right) if not isinstance(left, Ref) else right is None and False
            return same if isinstance(op, ast.Is) else not same
        if isinstance(left, Ref) or isinstance(right, Ref):
            return Unknown(f"a comparison with {left.path if isinstance(left, Ref) else right.path}")
        try:
            return compare(op, left, right)
        except Raised:
            return Unknown("a comparison")

    # ---- what the launch gives

    def _object(self, path: str) -> bool:
        prefix = path + "."
        return any(k.startswith(prefix) for k in (*self.reads, *self.assumed, *self.platform))

    def _name(self, name: str) -> Any:
        if name in self.envs_aliases:
            return Ref("envs")
        if name in self.platform:
            return self.platform[name]
        if name in self.reads or name in self.assumed:
            return self._lookup(name)
        if name in self.constants:
            node = self.constants[name]
            if isinstance(node, ast.Call) and dotted_name(node.func) in ("frozenset", "set") and len(node.args) == 1:
                node = node.args[0]
            try:
                value = ast.literal_eval(node)
            except ValueError:
                return Unknown(name)
            return frozenset(value) if isinstance(value, (set, list, tuple)) else value
        if self._object(name):
            return Ref(name)
        return Unknown(name)

    def _lookup(self, path: str) -> Any:
        if path.startswith("envs.") and path not in self.reads:
            variable = path[len("envs."):]
            if variable in self.facts.env:
                return truthy(self.facts.env[variable])
            declared, default = declared_default(self.envs_tree, variable)
            if not declared:
                return Unknown(f"{variable} (not declared in {self.choice.defaults_file})")
            return None if default is None else truthy(default)
        if path in self.platform:
            return self.platform[path]
        if path in self.reads:
            self.looked[path] = value = self._evaluate(path, self.reads[path])
            return value
        if path in self.assumed:
            self.used_assumptions.add(path)
            return self._evaluate(path, self.assumed[path])
        if self._object(path):
            return Ref(path)
        self.unknown.append(path)
        return Unknown(path)

    def _evaluate(self, path: str, expression: str) -> Any:
        f = self.facts
        if "__target__" in expression:
            if f.target is None:
                return Unknown(f"{path} (the target class)")
            known, value = f.target(expression)
            return value if known else Unknown(f"{path} ({value})")
        scope = {"__method__": f.method, "__options__": f.options, "__speculative__": f.speculative,
                 "__config__": f.config, "__text_config__": f.text_config, "__draft_config__": f.draft_config,
                 "__platform__": f.platform, "__present__": _PRESENT}
        try:
            value = Player("", {}, LiteralScope(scope)).evaluate(_expression(expression), {})
        except Raised as raised:  # a launch value of another type than the path file expects: not known
            return Unknown(f"{path} ({raised.error})")
        except SyntaxError as exc:
            return Unknown(f"{path} (the path file's expression does not parse: {exc.msg})")
        if isinstance(value, Unknown):
            return Unknown(f"{path} ({value.why or expression})")
        return Ref(path) if value == _PRESENT else value


def decide(choice: RunnerChoice, source: Source, facts: LaunchFacts) -> RunnerDecision:
    """The runner the launch takes: by the release's own choice where it has one, else by the variable's default."""
    interpreter = _Interpreter(choice, source, facts)
    if not choice.decision or not interpreter.found:
        return _by_variable(choice, interpreter.envs_tree, facts)
    runs = interpreter.runs()
    where = f"{choice.decision.split(':')[1]} ({interpreter.file}:{interpreter.methods[interpreter.attribute].lineno})"
    outcomes = {(kind, repr(value)) for kind, value, *_ in runs}
    assumed = sorted(interpreter.used_assumptions)
    note = (f"; assumed: {', '.join(f'{a} = {dict(choice.assumed)[a]}' for a in assumed)}" if assumed else "")
    if len(outcomes) == 1 and runs[0][0] == "return" and isinstance(runs[0][1], bool):
        kind, value, trail, logged, line = runs[0]
        runner = choice.when_true if value else choice.when_false
        said = [m for m in logged if m]
        decisive = _decisive(trail)
        called = [f"{name}(): " + "; ".join(_decisive(ways[0])) for name, ways in interpreter.nested.items()
                  if len({repr(w) for w in ways}) == 1 and f"self.{name}()" in " ".join(decisive)]
        if len(decisive) == 1:
            decisive = ["no condition before it holds", *decisive]
        shown = " ".join(decisive + called)
        values = [f"{p.removeprefix('self.')} = {v!r}"
                  for p, v in interpreter.looked.items()
                  if not isinstance(v, Ref) and p.rsplit(".", 1)[-1].removesuffix("()") in shown]
        text = (f"{where}: " + "; ".join(decisive + called) + (f" (with {', '.join(values)})" if values else "")
                + (f"; the engine logs \"{said[-1]}\"" if said else "") + note + f": {runner}")
        return RunnerDecision(runner, text, (), tuple(said), tuple(trail))
    unknown = sorted({w for _, _, trail, _, _ in runs for w in trail if "is not known" in w})
    values = sorted({f"{kind} {value!r}" for kind, value, *_ in runs})
    text = (f"{where} is not decided for this launch ({', '.join(values)}: "
            + "; ".join(unknown or [f"reads {', '.join(sorted(set(interpreter.unknown)))}"]) + ")" + note
            + ": both runners' paths are traced")
    return RunnerDecision(BOTH, text, tuple(unknown or sorted(set(interpreter.unknown))))


@dataclass(frozen=True)
class RunnerRefusal:
    """Where the runner a launch takes refuses it: the release's own check of the launch against that runner."""

    file: str
    line: int
    code: str  # the raise statement
    error: str  # what it prints, its values filled where known
    check: str  # Class.method that raises, with its line
    certain: bool  # every way through the check raises (else: some way does, on what is not known)
    reason: str  # the conditions that led there


def refusal(choice: RunnerChoice, source: Source, facts: LaunchFacts, runner: str) -> RunnerRefusal | None:
    """The release's check of the launch against the runner it takes (``validate``), run over the launch as the
    decision is: a raise where every way through it raises (``certain``), or where some way does; None otherwise."""
    name = dict(choice.validate).get(runner)
    interpreter = _Interpreter(choice, source, facts)
    if not name or name not in interpreter.methods:
        return None
    ways = interpreter._call(name, [], [])
    raised = [(trail, outcome) for trail, _, outcome in ways if isinstance(outcome, _Raised)]
    if not raised:
        return None
    # The way that took no condition it could not know as holding says what the launch itself meets.
    trail, outcome = min(raised, key=lambda r: sum("taken True" in step for step in r[0]))
    method = interpreter.methods[name]
    statement = next((n for n in ast.walk(method) if isinstance(n, ast.Raise) and n.lineno == outcome.line), None)
    direct = {n.func.attr for n in ast.walk(method) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"}
    called = [f"{called}(): " + "; ".join(_decisive(w[0])) for called, w in interpreter.nested.items()
              if w and called in direct]
    reason = "; ".join(_decisive(trail)[:-1] + called)  # the raise itself is the finding's code
    return RunnerRefusal(interpreter.file, outcome.line, ast.unparse(statement) if statement else outcome.message,
                         outcome.rendered, f"{choice.decision.split(':')[1].split('.')[0]}.{name} "
                         f"({interpreter.file}:{method.lineno})", len(raised) == len(ways), reason)


def _decisive(trail: list[str]) -> list[str]:
    """What decided a way through: the conditions that held (the branch it took) and its return."""
    return [t for t in trail if t.startswith("returns") or " is True (" in t or "raises" in t]


def _by_variable(choice: RunnerChoice, envs: ast.Module | None, facts: LaunchFacts) -> RunnerDecision:
    if choice.variable in facts.env:
        runner = choice.when_set if truthy(facts.env[choice.variable]) else choice.otherwise
        return RunnerDecision(runner, f"{choice.variable}={facts.env[choice.variable]} in the launch: {runner}")
    declared, default = declared_default(envs, choice.variable)
    if not declared:
        return RunnerDecision(choice.otherwise, f"{choice.variable} is not declared in this release "
                                                f"({choice.defaults_file}): {choice.otherwise}")
    if default is None:
        return RunnerDecision(BOTH, f"{choice.variable} is unset by default ({choice.defaults_file}) and this release "
                                    "has no choice of its own to read: both runners' paths are traced")
    runner = choice.when_set if truthy(default) else choice.otherwise
    return RunnerDecision(runner, f"{choice.variable} defaults to {default!r} ({choice.defaults_file}): {runner}")


def for_launch(spec: Any, decision: RunnerDecision) -> Any:
    """The path spec (trace.PathSpec) with the runner decided for one launch: its tracer follows that runner only."""
    if spec.runner is None:
        return spec
    return replace(spec, runner=replace(spec.runner, decided=(decision.runner, decision.reason)))
