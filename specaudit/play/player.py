"""The player of engine code: a function of the release played out statement by statement on a launch's values,
without running it.

The engines decide a launch in a few statements: ``if self.method is None: ... self.method = "draft_model"``,
``elif "eagle3" in self.draft_model_config.model.lower(): self.method = "eagle3"``, ``return "EAGLE"``; they build
the draft's config by rewriting a config object (``hf_config.model_type = "deepseek_mtp"``, ``hf_config.update({
"n_predict": ...})``). The player walks such a function's syntax tree with the variable it follows (the method, the
returned value, or the object being rewritten), the locals it assigns, and what the launch fixes (``bindings``: an
expression of the engine's, as written, to a value of the launch; a config is a dict, its attributes its keys:
transformers' config objects are play.values.ConfigObject, played by play/libraries/transformers.py).

Its policy for a condition it cannot decide: where the statement sets the followed variable (or may end the
function), it **forks**, one way for each branch; elsewhere it **stops** there, and what the statement may assign
is no longer known. A caller that must say every way through (the model-runner choice: its function returns the
decision) asks it to fork on every condition (``forks_every``), and on every call followed whose ways end
differently, one way for each end; there it also plays the lists a function builds (``append``, ``extend``). Depth
limits live here (MAX_WAYS, MAX_EVERY_WAYS, MAX_CALLS). The outcomes of every way are kept, with the raise that
ends one (a ``raise``, a failed ``assert``, or an operation that fails on the launch's values: ``n % 0``), the
warnings the engine logs on it and the conditions it met (``Branch``: the branch it took, and where the condition
is not known, why); ``Coverage`` records what was played and what was not.

Values are play.values' (one ``Unknown``), operations play.operators' tables. Nothing of the engine is executed or
imported; the release's own functions are followed a few calls deep, through the ``Scope`` of their module. The
engine objects a caller stands for by ``EngineObject``s of its own (a launch's configs, an ``envs`` module) are read
through its ``Objects``, where the code reads them. A gate's condition (scan.decide) is evaluated by a player that
``explains``: what it cannot know says what, as the code reads it, and its ``Explaining`` objects are the target's.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from .libraries import transformers
from .operators import METHODS, UNARY, binary, compare, plain_method, pure
from .text import Field, filled, formatted, joined, printf, template_text
from .values import CLASS, UNKNOWN, ConfigObject, EngineObject, Raised, ReleaseClass, ReleaseModule, Unknown, truth

MAX_WAYS = 64  # a function that forks on more unknown conditions than this is not one that decides a launch
# Forking on every unknown condition (``forks_every``), a list built by appends doubles its ways at each: vLLM 0.33's
# _get_dbo_unsupported_features forks on six fields no launch option fixes, 64 ways already.
MAX_EVERY_WAYS = 512
MAX_CALLS = 6  # how deep the release's own functions are followed
MAX_ASSIGNED = 2  # how many assignments back a message's text is read (``msg = prefix + ...; raise ValueError(msg)``)
# object's own attribute access, past a class's __setattr__ and __getattr__: the call and its arity.
_OBJECT_SLOTS = {"object.__setattr__": 3, "object.__getattribute__": 2}
MAX_ITERATIONS = 64  # a loop over a known sequence longer than this is not played out
MAX_ITEMS = 4096  # nor a comprehension over more items than this (its element may follow calls for each)
# The builtin types ``isinstance`` is played with, on plain values (a class of the release is a ``type``).
_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (float, int), "bool": (bool,),
                                       "dict": (dict,), "list": (list,), "tuple": (tuple,),
                                       "set": (set, frozenset), "frozenset": (frozenset,)}
WARNINGS = frozenset({"warning", "warning_once", "warn"})  # logger.warning(...), warnings.warn(...)
# The builtins played (play.operators.PURE), but not those a release is as likely to shadow with a function of its own.
_PURE = ("len", "int", "bool", "str", "min", "max", "abs", "sorted", "tuple", "list", "frozenset", "set")
# The methods a list is built with: played on it in place, and a list a statement not played grows is forgotten,
# where every way is played out (``forks_every``). Elsewhere a list stays as it was, so that the other callers'
# outcomes do not change (sglang 0.5.23's collect_model_override_declarations returns its `declarations` as [],
# grown under a condition they stop at).
_GROWS = ("append", "extend")
# The builtins a call names that the player plays itself, whatever the scope says of the name.
_BUILTIN_CALLS = frozenset({"isinstance", "issubclass", "getattr", "hasattr", "setattr", "any", "all", "sum", "type",
                            "callable", "get_args", *_PURE})


class Scope(Protocol):
    """What the code of one module of the release gives the player."""

    def literals(self, name: str) -> set[str] | None:
        """The strings a module-level Literal alias, Enum or set of strings declares."""

    def value(self, name: str) -> Any:
        """A module-level constant (or one the module imports from the release; "module:name" for another
        module's), or UNKNOWN."""

    @property
    def where(self) -> str:
        """The file the module's code comes from (what Coverage records)."""

    def function(self, name: str) -> tuple[ast.FunctionDef, Scope] | None:
        """A function of the release by the name this module calls it (``f``, ``Class.static``, ``self.method`` of
        the class played out; "module:name" for another module's), and the scope of its module."""

    def instance(self, name: str, named: dict[str, Any]) -> Any:
        """An object of the release's class of that name built with these keyword arguments (``ParallelConfig(
        tensor_parallel_size=4)``): a dict of its declared fields, as given, else their constant defaults (none for a
        field its own methods assign), and ``CLASS``: "module:Class", whose methods are followed on it. UNKNOWN where
        the name is not a class of the release."""

    @property
    def this_class(self) -> str | None:
        """"module:Class" of the class whose method is played out (what ``self`` is an object of), if one is."""

    def member(self, class_name: str, name: str, after: str | None = None) -> Any:
        """What a class of the release ("module:Class") or a base along its MRO defines under ``name``: a
        play.modules.Member, or None; ``after``: only the bases after that class (``super().name``)."""

    def mro(self, class_name: str) -> list[str]:
        """The class and the bases of it that the release defines, "module:Class" each, in Python's order."""

    def outside_bases(self, class_name: str) -> list[str]:
        """The bases along the class's MRO that come from a library, by its dotted name."""

    def origin(self, name: str) -> str | None:
        """The library's dotted name of what a name of this module stands for, where it imports it from outside the
        release (``AutoConfig.for_model`` -> ``transformers.AutoConfig.for_model``); else None."""


class Objects(Protocol):
    """The engine objects a caller stands for by ``EngineObject``s of its own (a launch's configs, an ``envs``
    module), read where the played code reads them."""

    def has(self, owner: EngineObject, name: str) -> bool | Unknown:
        """Whether the caller knows of ``owner.name``: where it does not, ``getattr(owner, name, default)`` is the
        default, ``hasattr`` False; Unknown where it cannot say."""

    def attribute(self, owner: EngineObject, name: str) -> Any:
        """``owner.name``: a value, another engine object, or an Unknown that says why."""

    def call(self, owner: EngineObject, args: list[Any], named: dict[str, Any]) -> Any:
        """``owner(*args, **named)``: a call of an engine object (a method read off another: ``spec.is_xpress``)."""


class Explaining(Objects, Protocol):
    """The Objects of a player that explains (``Player.explains``: a gate's condition, judged by scan.decide): each
    reading takes the code it reads (``site``), for the Unknown that says what was not understood, and the engine
    objects also answer ``isinstance``, ``is`` and ``[]``."""

    def read(self, owner: Any, name: str, site: str) -> Any:
        """``owner.name`` as ``attribute``, where ``site`` reads it (raises Raised where the object lacks it)."""

    def holds(self, owner: Any, name: str, site: str) -> bool | Unknown:
        """``hasattr(owner, name)``: False where reading it raises; Unknown where that is not known."""

    def method(self, owner: EngineObject, name: str, site: str) -> Any:
        """``owner.name`` read to be called (a method of the speculative config, played with the call)."""

    def invoke(self, owner: EngineObject, args: list[Any], named: dict[str, Any], site: str) -> Any:
        """``owner(*args, **named)``, as ``call``."""

    def instance_of(self, value: Any, kind: Any, site: str) -> bool | Unknown:
        """``isinstance(value, kind)`` of an engine object, or against one (a class of the release)."""

    def same(self, op: ast.cmpop, left: Any, right: Any) -> Any:
        """``left <op> right`` where one side is an engine object: its truth, or UNKNOWN."""

    def item(self, owner: EngineObject, key: Any, site: str) -> Any:
        """``owner[key]``."""


@dataclass
class Coverage:
    """Where the played-out code went, over every way (``where``: the scope's file): the functions played out, the
    statements run, and the statements whose insides were not played out (a condition not known that sets no
    method, a loop). A raise in a function played out, outside those, that no way ran, is not reached by this
    launch: the launch's values decide it."""

    played: set[tuple[str, int, int]] = field(default_factory=set)
    ran: set[tuple[str, int]] = field(default_factory=set)
    opaque: set[tuple[str, int, int]] = field(default_factory=set)
    # Opaque statements whose condition calls what the launch binds and the scan could not read (whether
    # arctic_inference is installed, for a release fetched on its own): span -> that call.
    unread: dict[tuple[str, int, int], str] = field(default_factory=dict)

    def unread_at(self, where: str, line: int) -> str | None:
        """The bound call the scan could not read that decides whether the statement at ``line`` is reached."""
        return next((call for (w, first, last), call in self.unread.items() if w == where and first <= line <= last),
                    None)

    def not_reached(self, where: str, line: int) -> bool:
        """Whether no way of this launch reaches the statement at ``line``: False where that is not known."""
        def inside(spans: set[tuple[str, int, int]]) -> bool:
            return any(w == where and first <= line <= last for w, first, last in spans)
        return inside(self.played) and not inside(self.opaque) and (where, line) not in self.ran

    def span(self, where: str, node: ast.stmt | ast.excepthandler, into: set[tuple[str, int, int]]) -> None:
        into.add((where, node.lineno, node.end_lineno or node.lineno))


class WithoutClasses:
    """The part of a Scope for code that reads no class of the release (a condition, a decision of one module)."""

    this_class: str | None = None

    def member(self, class_name: str, name: str, after: str | None = None) -> Any:
        return None

    def mro(self, class_name: str) -> list[str]:
        return []

    def outside_bases(self, class_name: str) -> list[str]:
        return []

    def origin(self, name: str) -> str | None:
        return None


@dataclass(frozen=True)
class LiteralScope(WithoutClasses):
    """A scope of module-level names only (the Literal aliases and constants given): for code read on its own."""

    names: dict[str, Any] = field(default_factory=dict)
    where: str = ""  # the file its code comes from

    def literals(self, name: str) -> set[str] | None:
        found = self.names.get(name)
        return set(found) if isinstance(found, (set, frozenset, tuple, list)) else None

    def value(self, name: str) -> Any:
        found = self.names.get(name, UNKNOWN)
        return UNKNOWN if isinstance(found, (set, frozenset)) else found

    def function(self, name: str) -> tuple[ast.FunctionDef, Scope] | None:
        return None

    def instance(self, name: str, named: dict[str, Any]) -> Any:
        return UNKNOWN


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
class Branch:
    """An ``if`` a way met: its file (the scope's), line and test as written, the branch taken, and where the test
    is not known (the way forked on it), an Unknown that says why: the first thing not known that it read."""

    where: str
    line: int
    test: str
    taken: bool
    unknown: Unknown | None = None


@dataclass(frozen=True)
class Outcome:
    """One way through the function: the method it leaves (or the value it returns), or the raise that ends it."""

    method: Any
    steps: tuple[Step, ...] = ()
    raises: str | None = None  # "N: code" of the statement that raises, when this way ends in a raise
    error: str | None = None  # what it raises: the raise's own text, or the error the arithmetic meets
    env: dict[str, Any] = field(default_factory=dict, compare=False)  # what the way leaves assigned
    warnings: tuple[str, ...] = ()  # "N: message" of each warning the engine logs on the way (Player.logs)
    # (file, line, code) of the raise itself, where it is in a function this one calls (the function's own: raises)
    site: tuple[str, int, str] | None = None
    branches: tuple[Branch, ...] = field(default=(), compare=False)  # the ifs it met, in order (a callee's not)


@dataclass(frozen=True)
class _Imported:
    """A name a function imports from another module of the release, for what it is not a constant: a function."""

    name: str  # "module:name"


@dataclass
class _Way:
    env: dict[str, Any]
    conditions: tuple[str, ...] = ()
    steps: tuple[Step, ...] = ()
    warnings: tuple[str, ...] = ()
    branches: tuple[Branch, ...] = ()
    done: Outcome | None = None
    leaving: str | None = None  # "break" or "continue": the way leaves the loop's body here

    def fork(self, condition: str | None = None) -> _Way:
        """A copy that goes on its own from here; ``condition``: the one not known it takes as holding, if any."""
        # Deep: the objects a way rewrites (a config) are its own from here on.
        conditions = self.conditions + (condition,) if condition is not None else self.conditions
        return _Way(copy.deepcopy(self.env), conditions, self.steps, self.warnings, self.branches,
                    leaving=self.leaving)

    def end(self, method: Any, raises: str | None = None, error: str | None = None,
            site: tuple[str, int, str] | None = None) -> None:
        self.done = Outcome(method, self.steps, raises, error, self.env, self.warnings, site, self.branches)


class _Split(Exception):
    """A call followed whose ways end differently, met where every way is played out (``forks_every``): the
    statement is played again once for each end (``ends``: the outcomes of each), from the way as it was."""

    def __init__(self, call: ast.Call, ends: list[list[Outcome]]):
        super().__init__("split")
        self.call, self.ends = call, ends


@dataclass
class Player:
    """``variable``: the expression that holds the method in the function (``self.method``, a parameter's name);
    ``bindings``: expression -> value; ``scope``: the module's names; ``tracked``: other expressions the function
    assigns and later reads (``self.model``); ``forks_every``: fork on every condition not known and on every call
    whose ways end differently (else only where the statement sets the method or may end the function), and play
    the lists a function builds (_GROWS);
    ``objects``: what the caller's own engine objects hold; ``logs``: the logging calls whose lines each way keeps
    (``Outcome.warnings``), by method name."""

    variable: str
    bindings: dict[str, Any]
    scope: Scope = field(default_factory=LiteralScope)
    tracked: tuple[str, ...] = ()
    returns: bool = False  # the function returns the method (else it sets ``variable``, and returns anything)
    depth: int = 0  # calls followed to get here
    coverage: Coverage | None = None  # where the ways went, recorded for the caller
    forks_every: bool = False
    objects: Objects | None = None
    logs: frozenset[str] = WARNINGS
    # Where a way ends before the function does, and what it gives there: a statement of the function, and the
    # expression whose value the way ends with on reaching it (the width a layer is built with, where it is built).
    stop: tuple[ast.stmt, ast.expr] | None = None
    # A gate's condition (scan.decide): an unknown says what was not understood, as the code reads it (the dotted
    # global it names, the field it reads, else the expression itself), and a value after one not known that would
    # raise is not known either; the engine objects are ``Explaining``'s.
    explains: bool = False
    # The ends fixed of calls followed, while a statement is played again for each (_Split): id(call) -> outcomes.
    _given: dict[int, list[Outcome]] = field(default_factory=dict, init=False, repr=False)
    # While a condition (or a value returned) is evaluated: the first Unknown met that says why (None: not then).
    _first_unknown: list[Unknown] | None = field(default=None, init=False, repr=False)
    # While what a message prints is evaluated (printed): a boolean operation's truth is not its value.
    _printing: bool = field(default=False, init=False, repr=False)

    def run(self, function: ast.FunctionDef | ast.AsyncFunctionDef, method: Any,
            env: dict[str, Any] | None = None) -> list[Outcome]:
        """Every way through ``function`` for a launch whose method is ``method`` on entry; ``env``: what an earlier
        function left assigned (the tracked expressions)."""
        start = _Way({**copy.deepcopy(self.bindings), **copy.deepcopy(env or {}), self.variable: method})
        ways = self.play(function, [start])
        for way in ways:
            if way.done is None:
                way.end(way.env.get(self.variable, UNKNOWN))
        return [w.done for w in ways if w.done is not None]

    def play(self, function: ast.FunctionDef | ast.AsyncFunctionDef, ways: list[_Way]) -> list[_Way]:
        """The ways through a function's body, recorded in the coverage: played whole, or opaque where it was not."""
        if self.coverage is None:
            return self._block(function.body, ways)
        try:
            ways = self._block(function.body, ways)
        except (ValueError, RecursionError):
            self.coverage.span(self.scope.where, function, self.coverage.opaque)
            raise
        self.coverage.span(self.scope.where, function, self.coverage.played)
        return ways

    def _opaque(self, node: ast.stmt | ast.excepthandler, test: ast.expr | None = None,
                env: dict[str, Any] | None = None) -> None:
        """A statement not played out; where its ``test`` calls what the launch binds and the scan could not read (a
        bound call's key, ``name()``, holds UNKNOWN: nothing else assigns such keys), that call is recorded."""
        if self.coverage is None:
            return
        self.coverage.span(self.scope.where, node, self.coverage.opaque)
        if test is None or env is None:
            return
        for call in (n for n in ast.walk(test) if isinstance(n, ast.Call)):
            key = f"{dotted(call.func)}()"
            if isinstance(env.get(key, None), Unknown):
                self.coverage.unread[(self.scope.where, node.lineno, node.end_lineno or node.lineno)] = key
                return

    # -- statements ----------------------------------------------------------------------------------------------

    def _block(self, body: list[ast.stmt], ways: list[_Way]) -> list[_Way]:
        for stmt in body:
            live = [w for w in ways if w.done is None and w.leaving is None]
            if not live:
                break
            # Where every way is played out, the ways keep the order they split in (a condition's True branch
            # first: the first way takes what is not known as holding); elsewhere those that ended come first.
            if self.forks_every:
                ways = [out for w in ways for out in ([w] if w.done is not None or w.leaving is not None
                                                      else self._guarded(stmt, w))]
            else:
                ways = [w for w in ways if w.done is not None or w.leaving is not None] + \
                    [out for w in live for out in self._guarded(stmt, w)]
            limit = MAX_EVERY_WAYS if self.forks_every else MAX_WAYS
            if len(ways) > limit:
                raise ValueError(f"more than {limit} ways through the function")
        return ways

    def _guarded(self, stmt: ast.stmt, way: _Way) -> list[_Way]:
        if self.coverage is not None:
            self.coverage.ran.add((self.scope.where, stmt.lineno))
        before = way.fork() if self.forks_every else None  # to play the statement again from, where a call splits
        try:
            return self._statement(stmt, way)
        except Raised as raised:  # the engine's own code fails here on the launch's values
            way.end(way.env.get(self.variable, UNKNOWN), f"{stmt.lineno}: {self._code(stmt)}", raised.error,
                    raised.site)
            return [way]
        except _Split as split:
            assert before is not None  # only a player that forks on every call splits
            ways = []
            for end in split.ends:
                self._given[id(split.call)] = end
                try:
                    ways += self._guarded(stmt, before.fork())
                finally:
                    del self._given[id(split.call)]
            return ways

    def _statement(self, stmt: ast.stmt, way: _Way) -> list[_Way]:
        if self.stop is not None and stmt is self.stop[0]:
            way.end(self.evaluate(self.stop[1], way.env))
            return [way]
        if isinstance(stmt, ast.If):
            value = self._explained(stmt.test, way.env)
            if isinstance(value, Unknown) and not self.forks_every and not self._sets_method(stmt):
                # Either way leaves the method as it is (a raise in it is a gate the path judges): no fork, but what
                # it may assign is no longer known.
                self._forget(stmt, way.env)
                self._opaque(stmt, stmt.test, way.env)
                return [way]
            test = ast.unparse(stmt.test)
            unknown = value if isinstance(value, Unknown) else None
            ways = []
            for taken, body in ((True, stmt.body), (False, stmt.orelse)):
                if unknown is None and _truth(value) != taken:
                    continue
                went = way if unknown is None else way.fork(test if taken else f"not ({test})")
                went.branches += (Branch(self.scope.where, stmt.lineno, test, taken, unknown),)
                ways += self._block(body, [went])
            return ways
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if stmt.value is None:
                return [way]
            value = self.evaluate(stmt.value, way.env)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                if isinstance(stmt, ast.AugAssign):
                    value = binary(stmt.op, self.evaluate(target, way.env), value)
                self._assign(target, value, stmt, way)
            return [way]
        if isinstance(stmt, ast.Expr):
            if isinstance(stmt.value, ast.Call) and _called_name(stmt.value) in self.logs:
                way.warnings += (f"{stmt.lineno}: {self._message(stmt.value, way.env)}",)
            else:
                self.evaluate(stmt.value, way.env)  # for what it changes: `hf_config.update({...})`
            return [way]
        if isinstance(stmt, ast.Raise):
            code = self._code(stmt)
            way.end(way.env.get(self.variable, UNKNOWN), f"{stmt.lineno}: {code}", self._raised(stmt, way.env))
            return [way]
        if isinstance(stmt, ast.Assert):
            holds = self.evaluate(stmt.test, way.env)
            if isinstance(holds, Unknown):
                self._opaque(stmt, stmt.test, way.env)
            if not isinstance(holds, Unknown) and not _truth(holds):
                # Python prints an assert's message where it has one, else nothing: its test says what failed
                said = self._quiet(stmt.msg, way.env) if stmt.msg is not None else None
                way.end(way.env.get(self.variable, UNKNOWN), f"{stmt.lineno}: {self._code(stmt)}",
                        f"AssertionError: {said if isinstance(said, str) else ast.unparse(stmt.test)}")
            return [way]
        if isinstance(stmt, ast.Return):
            method = way.env.get(self.variable, UNKNOWN)
            if self.returns:
                # Where every way is played out, an unknown returned says why, as a condition does.
                value = self._explained if self.forks_every else self.evaluate
                method = value(stmt.value, way.env) if stmt.value is not None else None
                if dotted(stmt.value) != self.variable:
                    way.steps += (Step(stmt.lineno, self._code(stmt), way.conditions),)
            way.end(method)
            return [way]
        if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            for alias in stmt.names:  # `from vllm...mimo_v2_mtp import _MIMO_V2_PRO_NUM_MTP_LAYERS`, in the function
                name = f"{stmt.module}:{alias.name}"
                value = self.scope.value(name)
                way.env[alias.asname or alias.name] = _Imported(name) if isinstance(value, Unknown) else value
            return [way]
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            return self._block(stmt.body, [way])
        if isinstance(stmt, (ast.Break, ast.Continue)):
            way.leaving = "break" if isinstance(stmt, ast.Break) else "continue"
            return [way]
        if isinstance(stmt, ast.For):
            looped = self._loop(stmt, way)
            if looped is not None:
                return looped
        if isinstance(stmt, ast.Try):
            ways = self._block(stmt.body + stmt.orelse, [way])
            for handler in stmt.handlers:  # not played out
                self._opaque(handler)
            if stmt.handlers:  # a raise in the body may be caught: the way goes on, what the try assigned unknown
                for caught in [w for w in ways if w.done is not None and w.done.raises is not None]:
                    caught.done = None
                    self._forget(stmt, caught.env)
            return self._block(stmt.finalbody, ways)
        # Loops over what is not known, nested definitions: what they assign is not known.
        self._forget(stmt, way.env)
        self._opaque(stmt)
        if self.returns and isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)) \
                and any(isinstance(node, ast.Return) for node in ast.walk(stmt)):
            # A loop not played that may return from the function: one way ends there, with what it returns not
            # known, so that the value after the loop is never taken for the function's whole answer.
            returned = way.fork(f"the loop at line {stmt.lineno} returns")
            returned.end(Unknown(f"what the loop at line {stmt.lineno} returns"))
            return [returned, way]
        return [way]

    def _loop(self, stmt: ast.For, way: _Way) -> list[_Way] | None:
        """A ``for`` over a sequence the launch fixes, played item by item (``break``, ``continue`` and ``else`` as
        Python runs them); None where the sequence is not known or is longer than MAX_ITERATIONS."""
        items = _items(self._quiet(stmt.iter, way.env))
        if items is None:
            return None
        ways, left = [way], []
        for item in items:
            for going in ways:
                if not self._bind(stmt.target, item, going.env):
                    return None
            ways = self._block(stmt.body, ways)
            left += [w for w in ways if w.done is not None or w.leaving == "break"]
            ways = [w for w in ways if w.done is None and w.leaving != "break"]
            for going in ways:
                going.leaving = None
            if not ways:
                break
        if stmt.orelse:
            ways = self._block(stmt.orelse, ways)
        for broke in left:
            broke.leaving = None
        return left + ways

    @staticmethod
    def _bind(target: ast.expr, value: Any, env: dict[str, Any]) -> bool:
        """A loop's or an unpacking's names bound to a known value (``a, b = "x.y".rsplit(".", 1)``); False where
        the target is not names or the value does not unpack."""
        if isinstance(target, ast.Name):
            env[target.id] = value
            return True
        if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in target.elts) \
                and isinstance(value, (list, tuple)) and len(value) == len(target.elts):
            for element, item in zip(target.elts, value):
                assert isinstance(element, ast.Name)
                env[element.id] = item
            return True
        return False

    def _assign(self, target: ast.expr, value: Any, stmt: ast.stmt, way: _Way) -> None:
        name = dotted(target)
        if name == self.variable:
            way.steps += (Step(stmt.lineno, self._code(stmt), way.conditions),)
        if name is not None and (name == self.variable or name in self.tracked or name in way.env
                                 or isinstance(target, ast.Name)):
            way.env[name] = value
        elif isinstance(target, ast.Attribute):
            owner = self.evaluate(target.value, way.env)
            if isinstance(owner, dict):  # a config object rewritten in place: `hf_config.model_type = "..."`
                owner[target.attr] = value
        elif isinstance(target, ast.Subscript):
            owner, key = self.evaluate(target.value, way.env), self.evaluate(target.slice, way.env)
            if (isinstance(owner, dict) and not isinstance(key, Unknown)) or \
                    (isinstance(owner, list) and isinstance(key, int) and -len(owner) <= key < len(owner)):
                owner[key] = value
        elif isinstance(target, (ast.Tuple, ast.List)) and not self._bind(target, value, way.env):
            self._forget(stmt, way.env)

    def _sets_method(self, stmt: ast.stmt) -> bool:
        """Whether a statement can change the method, or end the function (with one, or early)."""
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Return, ast.Break, ast.Continue)) or (self.stop is not None
                                                                          and node is self.stop[0]):
                return True  # it may end the function (or the loop's round) here: what follows may not run
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(dotted(t) in (self.variable, *self.tracked) for t in targets):
                    return True
            if self.returns and _mutates(node, self.variable):
                return True  # the object being rewritten (the function's result) is
        return False

    def _forget(self, stmt: ast.stmt, env: dict[str, Any]) -> None:
        """What a statement not played out may have assigned is no longer known: names, and the keys of the
        objects it rewrites."""
        for node in ast.walk(stmt):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr, ast.For)) else []
            targets = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
            for target in targets:
                name = dotted(target)
                if name is not None and (name in env or isinstance(target, ast.Name) or name in self.tracked):
                    env[name] = UNKNOWN
                if isinstance(target, ast.Attribute):
                    owner = self._quiet(target.value, env)
                    if isinstance(owner, dict):
                        owner[target.attr] = UNKNOWN
            if self.forks_every and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in _GROWS:
                receiver = dotted(node.func.value)
                if receiver is not None and receiver in env:
                    env[receiver] = UNKNOWN
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update":
                owner = self._quiet(node.func.value, env)
                keys = self._quiet(node.args[0], env) if node.args else {}
                if isinstance(owner, dict):
                    for key in (keys if isinstance(keys, dict) else owner):
                        owner[key] = UNKNOWN
                    if isinstance(owner, ConfigObject) and not isinstance(keys, dict):
                        owner.open = True
            if isinstance(node, ast.Call) and dotted(node.func) == "setattr" and len(node.args) == 3:
                owner, key = self._quiet(node.args[0], env), self._quiet(node.args[1], env)
                self._setattr(owner, key, UNKNOWN)

    def _quiet(self, node: ast.expr, env: dict[str, Any]) -> Any:
        try:
            return self.evaluate(node, env)
        except Raised:
            return UNKNOWN

    def _code(self, stmt: ast.stmt) -> str:
        text = ast.unparse(stmt).splitlines()[0]
        return text if len(text) <= 120 else text[:117] + "..."

    def _raised(self, stmt: ast.Raise, env: dict[str, Any], holes: bool = False) -> str:
        """What a raise raises, as Python prints it where its message is known: ``ValueError: k must be ...``;
        ``holes``: what its message does not know shown as its code (``received {hidden_states.shape[-1]}``)."""
        exc = stmt.exc
        if isinstance(exc, ast.Call) and dotted(exc.func) and len(exc.args) == 1:
            message = self._with_holes(exc.args[0], env) if holes else self._quiet(exc.args[0], env)
            if isinstance(message, str):
                return f"{dotted(exc.func)}: {message}"
        return self._code(stmt).removeprefix("raise ").strip()

    def _with_holes(self, node: ast.expr, env: dict[str, Any]) -> str | None:
        """The text ``node`` builds, what is not known in it shown as its code in braces; None where it is no more
        than one such hole, or where building it fails on the values (the raise raises something else then)."""
        try:
            parts = self.text(node, env)
        except Raised:
            return None
        return None if len(parts) == 3 and parts[0] == parts[2] == "" else template_text(parts)

    def _message(self, call: ast.Call, env: dict[str, Any]) -> str:
        """A logged warning's text, its %-arguments filled in where they are known."""
        if not call.args:
            return ast.unparse(call)
        template = self._quiet(call.args[0], env)
        if not isinstance(template, str):
            return ast.unparse(call.args[0])
        values = [self._quiet(a, env) for a in call.args[1:]]
        try:
            return template % tuple("?" if isinstance(v, Unknown) else v for v in values) if values else template
        except (TypeError, ValueError):
            return template

    # -- expressions ---------------------------------------------------------------------------------------------

    def _explained(self, node: ast.expr, env: dict[str, Any]) -> Any:
        """An ``if``'s test, or a value returned: where it is not known and does not say why (``not x``, ``a and b``
        give UNKNOWN), the first Unknown it met that does."""
        self._first_unknown = []
        try:
            value = self.evaluate(node, env)
        finally:
            met, self._first_unknown = self._first_unknown, None
        return met[0] if isinstance(value, Unknown) and not value.why and met else value

    def evaluate(self, node: ast.expr, env: dict[str, Any]) -> Any:
        return self._noted(node, self._value(node, env))

    def _noted(self, node: ast.expr, value: Any) -> Any:
        """``node``'s value as evaluate gives it: explaining, an unknown named by the code read; the first unknown
        with a reason kept."""
        if self.explains and isinstance(value, Unknown) and not value.why:
            value = Unknown(ast.unparse(node))
        if self._first_unknown == [] and isinstance(value, Unknown) and value.why:
            self._first_unknown.append(value)
        return value

    def _value(self, node: ast.expr, env: dict[str, Any]) -> Any:
        name = dotted(node)
        if name is not None and name in env:
            return env[name]
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id == "self" and any(k.startswith("self.") for k in env):
                return self._this(env)
            return self.scope.value(node.id)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = self._in_order(node.elts, env) if self.explains else [self.evaluate(e, env) for e in node.elts]
            if isinstance(items, Unknown):
                return items
            if any(isinstance(i, Unknown) for i in items):
                return UNKNOWN
            try:
                return frozenset(items) if isinstance(node, ast.Set) else list(items) if isinstance(node, ast.List) \
                    else tuple(items)
            except TypeError:  # an item Python cannot hash
                return UNKNOWN
        if isinstance(node, ast.Dict) and self.explains:
            pairs = self._in_order([x for pair in zip(node.keys, node.values) for x in pair if x is not None], env) \
                if all(k is not None for k in node.keys) else UNKNOWN
            try:
                return pairs if isinstance(pairs, Unknown) else dict(zip(pairs[::2], pairs[1::2]))
            except TypeError:
                return UNKNOWN
        if isinstance(node, ast.Dict):
            return self._dict(node, env)
        if isinstance(node, ast.JoinedStr):  # its text, where every value in it is known
            parts = self.text(node, env)
            return parts[0] if len(parts) == 1 else UNKNOWN
        if isinstance(node, ast.BoolOp):
            return self._boolean(node, env)
        if isinstance(node, ast.UnaryOp):
            value = self.evaluate(node.operand, env)
            if isinstance(value, Unknown):
                return value if self.explains else UNKNOWN
            if isinstance(node.op, ast.Not):
                return not _truth(value)
            try:
                return UNARY[type(node.op)](value) if type(node.op) in UNARY else UNKNOWN
            except TypeError:  # `-"a"`: not this player's to call the engine's failure
                return UNKNOWN
        if isinstance(node, ast.BinOp):
            return binary(node.op, self.evaluate(node.left, env), self.evaluate(node.right, env))
        if isinstance(node, ast.Compare):
            return self._compare(node, env)
        if isinstance(node, ast.IfExp):
            test = self.evaluate(node.test, env)
            if isinstance(test, Unknown):
                return test if self.explains else UNKNOWN
            return self.evaluate(node.body if _truth(test) else node.orelse, env)
        if isinstance(node, ast.NamedExpr):
            env[node.target.id] = value = self.evaluate(node.value, env)
            return value
        if isinstance(node, ast.Call):
            return self._call(node, env)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self._comprehension(node, env)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, env)
        if isinstance(node, ast.Attribute):
            return self._member(node, self.evaluate(node.value, env), env)
        return UNKNOWN

    def _member(self, node: ast.Attribute, owner: Any, env: dict[str, Any]) -> Any:
        """``node`` (``owner.attr``) with its owner's value already played: each receiver of a chain is evaluated
        once (``s.replace(..).replace(..)``, played twice a step, took 2**steps)."""
        if isinstance(owner, Unknown) and self.explains:
            return self._dotted_global(node, env) or owner
        return self._attribute(owner, node.attr, node, env)

    def _callee(self, node: ast.Attribute, receiver: Any, env: dict[str, Any]) -> Any:
        """What evaluate gives for a method call's ``node.func``, its receiver already played."""
        name = dotted(node)
        return self._noted(node, env[name] if name is not None and name in env else self._member(node, receiver, env))

    def _dotted_global(self, node: ast.Attribute, env: dict[str, Any]) -> Any:
        """Explaining: ``module.Class``, ``current_platform.is_rocm``, where its first name is no local: what the
        scope makes of the whole dotted name; None where the chain starts elsewhere."""
        head: ast.expr = node
        while isinstance(head, ast.Attribute):
            head = head.value
        if isinstance(head, ast.Name) and head.id not in env:
            return self.scope.value(ast.unparse(node))
        return None

    def _in_order(self, nodes: list[ast.expr], env: dict[str, Any]) -> list[Any] | Unknown:
        """Explaining: the values of ``nodes`` in order, or the first not known (one after it that would raise is
        not known to be reached either)."""
        values: list[Any] = []
        unknown: Unknown | None = None
        for node in nodes:
            try:
                value = self.evaluate(node, env)
            except Raised:
                if unknown is None:
                    raise
                continue
            values.append(value)
            unknown = unknown or (value if isinstance(value, Unknown) else None)
        return values if unknown is None else unknown

    def _explaining(self) -> Explaining:
        assert self.explains and self.objects is not None
        return cast(Explaining, self.objects)

    def _attribute(self, owner: Any, name: str, site: ast.AST, env: dict[str, Any]) -> Any:
        """``owner.name``: a config's key, an object's field, or what its class defines (a property played on it, a
        class attribute), a class's attribute, a module's name, an engine object's (``Objects``)."""
        if isinstance(owner, ReleaseClass):
            if name in ("__name__", "__qualname__"):
                return owner.qualname
            return owner.module if name == "__module__" else self._class_attribute(owner.name, name, site, env)
        if isinstance(owner, ReleaseModule):
            return self.scope.value(f"{owner.name}:{name}")
        if isinstance(owner, dict):
            if name in owner or not isinstance(owner.get(CLASS), str):  # a config: its attributes are its keys
                if name in owner:
                    return owner[name]
                found = transformers.attribute(owner, name) if isinstance(owner, ConfigObject) else transformers.ABSENT
                return Unknown(ast.unparse(site) if isinstance(site, ast.Attribute) else name) \
                    if found is transformers.ABSENT else found
            return self._class_attribute(owner[CLASS], name, site, env, this=owner)
        if isinstance(owner, EngineObject) and self.objects is not None:
            if self.explains:
                return self._explaining().read(owner, name, ast.unparse(site))
            return self.objects.attribute(owner, name)
        return UNKNOWN

    def _class_attribute(self, class_name: str, name: str, site: ast.AST, env: dict[str, Any],
                         this: dict[str, Any] | None = None) -> Any:
        """What a class of the release defines under ``name``, read off the class or (``this``) an object of it: a
        property's value, played on the object; a class attribute's value. A field each object holds is not the
        class's to say."""
        member = self.scope.member(class_name, name)
        if member is None:
            forward = self.scope.member(class_name, "__getattr__") if this is not None else None
            if forward is not None and isinstance(forward.node, ast.FunctionDef) and self.depth < MAX_CALLS:
                # A view onto another object (SGLang's ResolvedView): what its __getattr__ answers for the name.
                return self._invoke(forward.node, forward.scope, site, env, [name], {}, {"self": this})
            return Unknown(f"{class_name.rpartition(':')[2]}.{name} (not defined in the release's class)")
        if isinstance(member.node, ast.FunctionDef):
            if not member.is_property or this is None or self.depth >= MAX_CALLS:
                return UNKNOWN
            return self._invoke(member.node, member.scope, site, env, [], {}, {"self": this})
        if this is not None and member.annotated:
            return UNKNOWN
        return Player("", {}, member.scope, depth=self.depth + 1).evaluate(member.node, {})

    def _this(self, env: dict[str, Any]) -> dict[str, Any]:
        """``self`` as one object where the frame holds its fields one by one (the followed ``self.method``, the
        launch's bindings): passed to a helper (``get_method_config_class(self)``), or read by name (``getattr(self,
        option)``). What a helper writes to it the frame reads back (_written_back)."""
        this: dict[str, Any] = {}
        nested: dict[str, dict[str, Any]] = {}
        for key, value in env.items():
            parts = key.split(".")
            if parts[0] != "self" or key.endswith("()") or len(parts) > 3:
                continue
            if len(parts) == 2:
                this[parts[1]] = value
            else:
                nested.setdefault(parts[1], {})[parts[2]] = value
        for name, fields in nested.items():
            if name not in this:
                this[name] = fields
            elif isinstance(this[name], dict):
                for key, value in fields.items():
                    this[name].setdefault(key, value)
        if self.scope.this_class is not None:
            this[CLASS] = self.scope.this_class
        return this

    @staticmethod
    def _written_back(this: dict[str, Any], before: dict[str, Any], env: dict[str, Any]) -> None:
        """What a helper wrote to ``self`` passed as one object (_this), into the frame's fields; a field replaced
        takes the fields bound under it with it (``self.draft_model_config.model``), but for the calls bound."""
        for key, value in this.items():
            if key == CLASS or (key in before and before[key] is value):
                continue
            name = f"self.{key}"
            env[name] = value
            for stale in [k for k in env if k.startswith(name + ".") and not k.endswith("()")]:
                del env[stale]

    def text(self, node: ast.expr, env: dict[str, Any],
             assigned: Callable[[str], ast.expr | None] = lambda name: None, depth: int = 0) -> list[str]:
        """The text ``node`` builds, as parts: literal, hole, literal, ... (play.text), read as Python builds it: an
        f-string, ``%`` and ``str.format`` on a str, ``+``, ``str()`` and ``repr()``; a local name, through what
        ``assigned`` says it was last assigned (``msg = f"..."; raise ValueError(msg)``), MAX_ASSIGNED deep; anything
        else, its value where that is a str. A value known is printed as Python prints it (``{n=}``, ``!r``,
        ``%5.2f``); one not known is a hole, named by its code. Raised where building the text fails on the values."""
        if isinstance(node, ast.JoinedStr):
            parts = [""]
            for part in node.values:
                if not isinstance(part, ast.FormattedValue):
                    parts = joined(parts, [str(cast(ast.Constant, part).value)])
                    continue
                value = self.printed(part.value, env)
                spec = self.text(part.format_spec, env) if part.format_spec is not None else [""]
                field = Field(0, conversion=chr(part.conversion) if part.conversion != -1 else "", spec=spec[0])
                parts = joined(parts, filled([field], [(ast.unparse(part.value), value if len(spec) == 1 else UNKNOWN)],
                                             {}))
            return parts
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return joined(self.text(node.left, env, assigned, depth), self.text(node.right, env, assigned, depth))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            template = self.evaluate(node.left, env)
            if isinstance(template, str):
                return self._printf(template, node.right, env)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            template = self.evaluate(node.func.value, env)
            if isinstance(template, str):
                keywords = {k.arg: (ast.unparse(k.value), self.printed(k.value, env)) for k in node.keywords if k.arg}
                return filled(formatted(template), self._arguments(node.args, env), keywords)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("str", "repr") \
                and len(node.args) == 1:
            return filled([Field(0, conversion=node.func.id[0])], self._arguments(node.args, env), {})
        if isinstance(node, ast.Name) and depth < MAX_ASSIGNED:
            expression = assigned(node.id)
            if expression is not None:
                return self.text(expression, env, assigned, depth + 1)
        value = self.printed(node, env)
        return [value] if isinstance(value, str) else ["", ast.unparse(node), ""]

    def printed(self, node: ast.expr, env: dict[str, Any]) -> Any:
        """The value ``node`` prints: where a boolean operation meets an operand not known before the one that decides
        it, not known (``name or 'default'``, of a name not known, is true, which _boolean gives elsewhere: not what
        is printed)."""
        printing, self._printing = self._printing, True
        try:
            return self.evaluate(node, env)
        finally:
            self._printing = printing

    def _printf(self, template: str, right: ast.expr, env: dict[str, Any]) -> list[str]:
        """``template % right``: its arguments a tuple written out, else the value of ``right`` (a tuple known is
        its items, a dict known fills the fields it names, each a hole named by its key where not known, as Python
        spreads them)."""
        if isinstance(right, ast.Tuple):
            return filled(printf(template), self._arguments(right.elts, env), {})
        code, value = ast.unparse(right), self.printed(right, env)
        positional = [(f"{code}[{i}]", item) for i, item in enumerate(value)] if isinstance(value, tuple) \
            else [(code, value)]
        keywords = {k: (k, v) for k, v in value.items() if isinstance(k, str)} if isinstance(value, dict) else {}
        return filled(printf(template), positional, keywords)

    def _arguments(self, nodes: list[ast.expr], env: dict[str, Any]) -> list[tuple[str, Any]]:
        """The positional arguments of a call, each as (its code, its value); one spread (``*args``) is none."""
        return [(ast.unparse(a), self.printed(a, env)) for a in nodes if not isinstance(a, ast.Starred)]

    def _dict(self, node: ast.Dict, env: dict[str, Any]) -> Any:
        result: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values):
            if key is None:  # `**other`
                spread = self.evaluate(value, env)
                if not isinstance(spread, dict):
                    return UNKNOWN
                result.update(spread)
                continue
            k = self.evaluate(key, env)
            if isinstance(k, Unknown):
                return UNKNOWN
            result[k] = self.evaluate(value, env)
        return result

    def _subscript(self, node: ast.Subscript, env: dict[str, Any]) -> Any:
        if self.explains:
            return self._explained_item(node, env)
        owner, key = self.evaluate(node.value, env), self.evaluate(node.slice, env)
        if isinstance(owner, Unknown) or isinstance(key, Unknown):
            return UNKNOWN
        if isinstance(owner, dict):  # a key it lacks may be a default of the engine's object: not known
            return owner.get(key, UNKNOWN)
        if isinstance(owner, (list, tuple)) and isinstance(key, int):
            if not -len(owner) <= key < len(owner):
                raise Raised(f"IndexError: {type(owner).__name__} index out of range")
            return owner[key]
        return UNKNOWN

    def _explained_item(self, node: ast.Subscript, env: dict[str, Any]) -> Any:
        """Explaining: ``owner[key]``, an engine object's through ``Explaining.item``; where Python would fail on the
        values (a key or an index it lacks), not known."""
        both = self._in_order([node.value, node.slice], env)
        if isinstance(both, Unknown):
            return both
        owner, key = both
        if isinstance(owner, EngineObject):
            return self._explaining().item(owner, key, ast.unparse(node))
        try:
            return owner[key]
        except Exception:  # noqa: BLE001 - a condition's own failure is not the launch's to call here
            return UNKNOWN

    def _boolean(self, node: ast.BoolOp, env: dict[str, Any]) -> Any:
        # Python's own short-circuit: the first value that decides is the value; an unknown one before it, unknown.
        deciding = isinstance(node.op, ast.Or)
        value: Any = None
        for operand in node.values:
            value = self.evaluate(operand, env)
            if isinstance(value, Unknown):
                rest = [] if self._printing else [self._quiet(o, env) for o in node.values[node.values.index(operand) + 1:]]
                if any(not isinstance(v, Unknown) and _truth(v) == deciding for v in rest):
                    return deciding  # a later operand decides the whole's truth, whatever the unknown one is
                return value if self.explains else UNKNOWN
            if _truth(value) == deciding:
                return value
        return value

    def _compare(self, node: ast.Compare, env: dict[str, Any]) -> Any:
        left = self.evaluate(node.left, env)
        for op, comparator in zip(node.ops, node.comparators):
            if self.explains and isinstance(left, Unknown):  # the first not known decides, whatever the rest raise
                return left
            right = self.evaluate(comparator, env)
            holds = self._explained_compare(op, left, right) if self.explains else compare(op, left, right)
            if isinstance(holds, Unknown):
                return holds
            if not holds:
                return False
            left = right
        return True

    def _explained_call(self, func: str | None, node: ast.Call, receiver: Any, env: dict[str, Any]) -> Any:
        """Explaining: a call of what is not known is not known, for what its callee is not (the dotted global a
        condition calls, ``current_platform.is_rocm()``); None where the call is played on. ``receiver``: the value
        of a method call's receiver, played once by the caller."""
        if isinstance(node.func, ast.Name) and node.func.id not in _BUILTIN_CALLS:
            callee = self.evaluate(node.func, env)
            return callee if isinstance(callee, Unknown) else None
        if isinstance(node.func, ast.Attribute) and isinstance(receiver, Unknown):
            callee = self._callee(node.func, receiver, env)
            return callee if isinstance(callee, Unknown) else UNKNOWN
        return None

    def _explained_compare(self, op: ast.cmpop, left: Any, right: Any) -> Any:
        """Explaining: a comparison of known values; of an engine object, what ``Explaining.same`` says; where Python
        would fail on the values (``None > 1``), not known."""
        if isinstance(left, Unknown) or isinstance(right, Unknown):
            return left if isinstance(left, Unknown) else right
        if isinstance(left, EngineObject) or isinstance(right, EngineObject):
            return self._explaining().same(op, left, right)
        try:
            holds = compare(op, left, right)
        except Raised:
            return UNKNOWN
        return UNKNOWN if isinstance(holds, Unknown) else holds

    def _call(self, node: ast.Call, env: dict[str, Any]) -> Any:
        func = dotted(node.func)
        if func is not None and f"{func}()" in env:
            return env[f"{func}()"]
        # `self.use_dspark()` where the frame holds self's fields one by one: followed as a method of the class
        # played, on those fields (_follow)
        own = func is not None and func.count(".") == 1 and func.startswith("self.") and "self" not in env
        bare_super = isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Call) \
            and dotted(node.func.value.func) == "super" and not node.func.value.args
        receiver = self.evaluate(node.func.value, env) \
            if isinstance(node.func, ast.Attribute) and (self.explains or not (own or bare_super)) else UNKNOWN
        if self.explains:
            explained = self._explained_call(func, node, receiver, env)
            if explained is not None:
                return explained
        args = node.args
        if self.objects is not None and isinstance(node.func, ast.Name):
            callee = self.evaluate(node.func, env)
            if isinstance(callee, EngineObject):  # `entry_points(group=...)`, imported where the caller stands for it
                return self._engine_call(callee, node, env)
        if isinstance(node.func, ast.Attribute):
            method = node.func.attr
            if bare_super:
                return self._super(method, node, env)
            owner = UNKNOWN if own else receiver
            if isinstance(owner, ReleaseClass):  # `config_cls.configure(spec)`: a class's own method
                return self._follow(f"{owner.name}.{method}", node, env, receiver=owner)
            if isinstance(owner, ConfigObject) and (CLASS not in owner or self.scope.member(owner[CLASS], method)
                                                    is None):  # `model.to_dict()`: transformers' own
                played, value = transformers.method(owner, method, [self.evaluate(a, env) for a in args])
                if played:
                    return value
            if isinstance(owner, dict) and isinstance(owner.get(CLASS), str):  # an object of a class of the release
                return self._follow(f"{owner[CLASS]}.{method}", node, env, this=owner)
            if isinstance(owner, EngineObject) and self.objects is not None \
                    and (func is None or self.scope.function(func) is None):  # not a method of the class played
                bound_method = self._explaining().method(owner, method, ast.unparse(node.func)) if self.explains \
                    else self.objects.attribute(owner, method)
                if isinstance(bound_method, EngineObject):
                    return self._engine_call(bound_method, node, env)
                return bound_method if isinstance(bound_method, Unknown) else UNKNOWN
            if self.forks_every and isinstance(owner, list) and method in _GROWS and len(args) == 1 \
                    and not node.keywords:
                return self._grow(owner, method, self.evaluate(args[0], env), dotted(node.func.value), env)
            if isinstance(owner, dict) and method == "get" and 1 <= len(args) <= 2:
                key = self.evaluate(args[0], env)
                default = self.evaluate(args[1], env) if len(args) == 2 else None
                return UNKNOWN if isinstance(key, Unknown) else owner.get(key, default)
            if isinstance(owner, dict) and CLASS not in owner and method in ("items", "keys", "values") and not args:
                return list(getattr(owner, method)())  # a view, as a list: a loop over a table's items is played
            if isinstance(owner, dict) and method == "update" and len(args) == 1 and not node.keywords:
                other = self.evaluate(args[0], env)
                if isinstance(other, dict):
                    owner.update(other)
                    return None
                for key in list(owner):  # updated from what is not known: none of its keys is
                    owner[key] = UNKNOWN
                return None
            if not isinstance(owner, (dict, Unknown)) and method in METHODS and not node.keywords:
                return plain_method(owner, method, [self.evaluate(a, env) for a in args])
        if func in _OBJECT_SLOTS and len(args) == _OBJECT_SLOTS[func] and not node.keywords:
            return self._object_slot(func, [self.evaluate(a, env) for a in args])
        if func == "setattr" and len(args) == 3 and not node.keywords:
            return self._setattr(*(self.evaluate(a, env) for a in args))
        if func in ("copy.deepcopy", "copy.copy", "deepcopy") and len(args) == 1:
            return copy.deepcopy(self.evaluate(args[0], env))
        if func in ("importlib.import_module", "import_module") and len(args) == 1:
            module = self.evaluate(args[0], env)
            return ReleaseModule(module) if isinstance(module, str) else UNKNOWN
        if func in ("isinstance", "issubclass") and len(args) == 2 and not node.keywords:
            return self._is_a(func, self.evaluate(args[0], env), args[1], env, node)
        if func == "get_args" and len(args) == 1 and isinstance(args[0], ast.Name):
            names = self.scope.literals(args[0].id)
            return UNKNOWN if names is None else tuple(sorted(names))
        if func in ("getattr", "hasattr") and len(args) in (2, 3) and not node.keywords:
            return self._getattr(func, args, node, env)
        if func in ("any", "all", "sum") and len(args) == 1 and not node.keywords:
            return self._quantified(func, args[0], env)
        if func in _PURE and not node.keywords:
            values = [self.evaluate(a, env) for a in args]
            if any(isinstance(v, dict) and CLASS in v for v in values):
                return Unknown(f"{func}() of an object of the release")
            if self.explains and any(isinstance(v, EngineObject) for v in values):
                return next((v for v in values if isinstance(v, Unknown)), UNKNOWN)
            return pure(func, values)
        if self.explains and func in ("type", "callable") and len(args) == 1 and not node.keywords:
            value = self.evaluate(args[0], env)
            if isinstance(value, Unknown) or not isinstance(value, EngineObject):
                return value if isinstance(value, Unknown) else type(value) if func == "type" else callable(value)
            site = ast.unparse(node)
            explaining = self._explaining()
            return explaining.read(value, "__class__", site) if func == "type" else \
                explaining.holds(value, "__call__", site)
        if func is not None:
            return self._follow(func, node, env)
        # `get_speculator_config_class(self)(self)`; `s.replace(..).replace(..)` on its receiver played above
        callee = self._callee(node.func, receiver, env) if isinstance(node.func, ast.Attribute) \
            else self.evaluate(node.func, env)
        return self._construct(callee, node, env) if isinstance(callee, ReleaseClass) else UNKNOWN

    @staticmethod
    def _object_slot(func: str, values: list[Any]) -> Any:
        """``object.__setattr__(obj, name, value)`` and ``object.__getattribute__(obj, name)`` on an object of the
        release: its own attribute, past the class's __setattr__ and __getattr__ (the views that forward them)."""
        this, name = values[0], values[1]
        if not isinstance(this, dict) or not isinstance(this.get(CLASS), str) or not isinstance(name, str):
            return UNKNOWN
        if func == "object.__setattr__":
            this[name] = values[2]
            return None
        return this.get(name, Unknown(f"{name} (not set on the object)"))

    @staticmethod
    def _setattr(owner: Any, name: Any, value: Any) -> None:
        """``setattr(obj, name, value)`` on a config or an object of the release; a name not known leaves a config
        open (ConfigObject.open)."""
        if isinstance(owner, dict) and isinstance(name, str):
            owner[name] = value
        elif isinstance(owner, ConfigObject):
            owner.open = True

    def _super(self, name: str, node: ast.Call, env: dict[str, Any]) -> Any:
        """``super().name(...)`` in a method of the class played: the next definition of ``name`` along the object's
        MRO after the class that defines the method; past the release's classes, a library's (the transformers
        config's ``__init__``)."""
        defining, this = self.scope.this_class, env.get("self")
        named = self._named(node, env)
        if defining is None or not isinstance(this, dict) or not isinstance(this.get(CLASS), str) or named is None \
                or any(isinstance(a, ast.Starred) for a in node.args) or self.depth >= MAX_CALLS:
            return UNKNOWN
        passed = [self.evaluate(a, env) for a in node.args]
        member = self.scope.member(this[CLASS], name, after=defining)
        if member is not None and isinstance(member.node, ast.FunctionDef):
            return self._invoke(member.node, member.scope, node, env, passed, named, {"self": this})
        if member is None and name == "__init__" and transformers.is_config_class(self.scope.outside_bases(
                this[CLASS])):
            transformers.initialize(this, passed, named)
            return None
        return UNKNOWN

    def _named(self, node: ast.Call, env: dict[str, Any]) -> dict[str, Any] | None:
        """A call's keyword arguments, a ``**mapping`` spread where the mapping is known; None where one is not."""
        named: dict[str, Any] = {}
        for keyword in node.keywords:
            value = self.evaluate(keyword.value, env)
            if keyword.arg is not None:
                named[keyword.arg] = value
            elif isinstance(value, dict) and not isinstance(value, ConfigObject) and CLASS not in value \
                    and all(isinstance(key, str) for key in value):
                named.update(value)
            else:
                return None
        return named

    def _getattr(self, func: str, args: list[ast.expr], node: ast.Call, env: dict[str, Any]) -> Any:
        attribute = self.evaluate(args[1], env)
        if not isinstance(attribute, str):
            return UNKNOWN
        owner = self.evaluate(args[0], env)
        if isinstance(owner, EngineObject) and self.explains:
            explaining, site = self._explaining(), ast.unparse(node)
            if func == "hasattr":
                return explaining.holds(owner, attribute, site)
            if len(args) == 3 and explaining.holds(owner, attribute, site) is False:
                return self.evaluate(args[2], env)
            return explaining.read(owner, attribute, site)
        if isinstance(owner, EngineObject) and self.objects is not None:
            if func == "hasattr":
                return self.objects.has(owner, attribute)
            if len(args) == 3 and self.objects.has(owner, attribute) is False:
                return self.evaluate(args[2], env)
            return self.objects.attribute(owner, attribute)
        if isinstance(owner, (ReleaseClass, ReleaseModule)) or (isinstance(owner, dict) and CLASS in owner
                                                                   and attribute not in owner):
            cls = owner.name if isinstance(owner, ReleaseClass) else owner[CLASS] if isinstance(owner, dict) else None
            missing = cls is not None and self.scope.member(cls, attribute) is None
            if missing and isinstance(owner, ConfigObject):  # a transformers config: its attributes are all it has
                return self._config_getattr(func, owner, attribute, args, env)
            if missing and isinstance(owner, dict):
                return UNKNOWN  # an object of the release holds only the fields known: the rest may be set
            if func == "hasattr":
                return not missing
            if missing:  # neither the class nor a base defines it: the default
                return self.evaluate(args[2], env) if len(args) == 3 else UNKNOWN
            return self._attribute(owner, attribute, node, env)
        if not isinstance(owner, dict):
            return UNKNOWN
        if isinstance(owner, ConfigObject) and attribute not in owner:
            return self._config_getattr(func, owner, attribute, args, env)
        if func == "hasattr":
            return attribute in owner
        default = self.evaluate(args[2], env) if len(args) == 3 else UNKNOWN
        return owner.get(attribute, default)

    def _config_getattr(self, func: str, owner: ConfigObject, attribute: str, args: list[ast.expr],
                        env: dict[str, Any]) -> Any:
        """``getattr``/``hasattr`` of an attribute a transformers config does not hold (transformers.attribute)."""
        found = transformers.attribute(owner, attribute)
        if func == "hasattr":
            return found if isinstance(found, Unknown) else found is not transformers.ABSENT
        if found is transformers.ABSENT:
            return self.evaluate(args[2], env) if len(args) == 3 else UNKNOWN
        return found

    def _is_a(self, func: str, value: Any, kinds: ast.expr, env: dict[str, Any], site: ast.AST | None = None) -> Any:
        """``isinstance``/``issubclass`` on a plain value, an object or a class of the release, against builtin types
        and the release's classes (along the MRO)."""
        if self.explains and func == "isinstance" and (isinstance(value, (Unknown, EngineObject))
                                                       or isinstance(self._quiet(kinds, env), EngineObject)):
            return self._explained_is_a(value, kinds, env, ast.unparse(site or kinds))
        if isinstance(value, (Unknown, EngineObject)):
            return UNKNOWN
        answers: list[bool | Unknown] = []
        for kind in kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]:
            if isinstance(kind, ast.Name) and (kind.id in _TYPES or kind.id == "type"):
                if func == "issubclass":
                    answers.append(UNKNOWN)
                elif kind.id == "type":
                    answers.append(isinstance(value, (ReleaseClass, type)))
                else:
                    plain = not isinstance(value, (ReleaseClass, ReleaseModule, ConfigObject)) and not (
                        isinstance(value, dict) and CLASS in value)
                    answers.append(plain and isinstance(value, _TYPES[kind.id]))
                continue
            if func == "isinstance" and isinstance(value, ConfigObject):
                answers.append(self._config_is_a(value, kind, env))
                continue
            cls = self.evaluate(kind, env)
            own = value.name if func == "issubclass" and isinstance(value, ReleaseClass) else \
                value.get(CLASS) if func == "isinstance" and isinstance(value, dict) else None
            lineage = self.scope.mro(own) if isinstance(cls, ReleaseClass) and isinstance(own, str) else []
            answers.append(cls.name in lineage if lineage and isinstance(cls, ReleaseClass) else UNKNOWN)
        if any(a is True for a in answers):
            return True
        return False if all(a is False for a in answers) else UNKNOWN

    def _explained_is_a(self, value: Any, kinds: ast.expr, env: dict[str, Any], site: str) -> Any:
        """Explaining: ``isinstance`` of an engine object, or against one, as ``Explaining.instance_of`` says for each
        kind: true where one holds, else the first not known, else false."""
        if isinstance(value, Unknown):
            return value
        kind = self.evaluate(kinds, env)
        answers = [self._explaining().instance_of(value, k, site) for k in
                   (kind if isinstance(kind, (tuple, list)) else [kind])]
        if any(a is True for a in answers):
            return True
        return next((a for a in answers if isinstance(a, Unknown)), False)

    def _config_is_a(self, config: ConfigObject, kind: ast.expr, env: dict[str, Any]) -> bool | Unknown:
        """``isinstance(config, kind)``: a transformers config is one of its base class; of a class of the release
        where it is an object of it (``CLASS``), and not of one whose ``model_type`` is another than its own (the
        type AutoConfig chose its class by)."""
        if self.scope.origin(ast.unparse(kind)) in transformers.CONFIG_BASES:
            return True
        cls = self.evaluate(kind, env)
        if not isinstance(cls, ReleaseClass):
            return UNKNOWN
        if isinstance(config.get(CLASS), str):
            return cls.name in self.scope.mro(config[CLASS])
        declared = self._class_attribute(cls.name, "model_type", kind, env)
        own = config.get("model_type")
        return False if isinstance(declared, str) and isinstance(own, str) and declared != own else UNKNOWN

    def _construct(self, cls: ReleaseClass, node: ast.Call, env: dict[str, Any]) -> Any:
        """An object of a class of the release: its ``__init__`` played on it where the class (or a base) defines
        one (a transformers config, a ConfigObject); else (a dataclass, a pydantic model) built from the keywords
        given (Scope.instance)."""
        named = self._named(node, env)
        if named is None:
            return UNKNOWN
        init = self.scope.member(cls.name, "__init__")
        if init is None or not isinstance(init.node, ast.FunctionDef):
            return self.scope.instance(cls.name, named) if not node.args else UNKNOWN
        if self.depth >= MAX_CALLS or any(isinstance(a, ast.Starred) for a in node.args):
            return UNKNOWN
        config = transformers.is_config_class(self.scope.outside_bases(cls.name))
        this: dict[str, Any] = ConfigObject({CLASS: cls.name}) if config else {CLASS: cls.name}
        self._invoke(init.node, init.scope, node, env, [self.evaluate(a, env) for a in node.args], named,
                     {"self": this})
        return this

    def _engine_call(self, callee: EngineObject, node: ast.Call, env: dict[str, Any]) -> Any:
        assert self.objects is not None
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return UNKNOWN
        args = [self.evaluate(a, env) for a in node.args]
        named = {k.arg: self.evaluate(k.value, env) for k in node.keywords if k.arg}
        if self.explains:
            return self._explaining().invoke(callee, args, named, ast.unparse(node))
        return self.objects.call(callee, args, named)

    @staticmethod
    def _grow(items: list[Any], method: str, value: Any, receiver: str | None, env: dict[str, Any]) -> None:
        """``items.append(value)``, ``items.extend(value)``, in place (the way's own copy); extended by what is not a
        known list or tuple, the list is no longer known."""
        if method == "append":
            items.append(value)
        elif isinstance(value, (list, tuple)):
            items.extend(value)
        elif receiver is not None and receiver in env:
            env[receiver] = value if isinstance(value, Unknown) else UNKNOWN
        return None

    def _follow(self, func: str, node: ast.Call, env: dict[str, Any], this: dict[str, Any] | None = None,
                receiver: ReleaseClass | None = None) -> Any:
        """A call of the release's own function, played out on the values of its arguments: what it returns. The
        objects passed are rewritten as it rewrites them, where it takes one way. ``this``: the object whose method
        ``func`` ("module:Class.method") is, played out with ``self`` the object itself; ``receiver``: the class a
        classmethod is called on; a class called builds an object of it (_construct)."""
        head, _, rest = func.partition(".")
        imported = env.get(head)
        if isinstance(imported, _Imported):  # imported in the function itself
            func = ".".join(filter(None, (imported.name, rest)))
        if self.depth >= MAX_CALLS or any(isinstance(a, ast.Starred) for a in node.args):
            return UNKNOWN
        found = self.scope.function(func)
        named = self._named(node, env)
        if named is None:
            return UNKNOWN
        if found is None:
            if this is not None or receiver is not None:
                return UNKNOWN
            callee = self._quiet(node.func, env)
            if isinstance(callee, ReleaseClass):  # `ModelConfig(model=...)`, `config_cls(spec)`
                return self._construct(callee, node, env)
            origin = self.scope.origin(func)
            if self.explains and origin == "typing.cast" and len(node.args) == 2:
                return self.evaluate(node.args[1], env)  # the value, whatever the type says
            if origin is not None:  # a library's: `AutoConfig.for_model(**model)`
                value = transformers.call(origin, [self.evaluate(a, env) for a in node.args], named)
                return UNKNOWN if value is None else value
            return self.scope.instance(func, named) if not node.args else UNKNOWN
        function, scope = found
        # `self` passed whole from a frame that holds its fields one by one: what the callee writes to it, read back
        whole_self = [i for i, a in enumerate(node.args) if isinstance(a, ast.Name) and a.id == "self"
                      and "self" not in env]
        passed = [self.evaluate(a, env) for a in node.args]
        before = [dict(passed[i]) if isinstance(passed[i], dict) else {} for i in whole_self]
        # A method of the object played out (`self.use_dspark()`) reads its fields as they stand, and they stand as
        # it leaves them; a method of an object of the release (`self.draft_model_config.verify_...()`) reads it.
        fields = {"self": this} if this is not None else \
            copy.deepcopy({k: v for k, v in env.items() if k == "self" or k.startswith("self.")}) \
            if func.startswith("self.") else None
        value = self._invoke(function, scope, node, env, passed, named, fields, receiver)
        for i, old in zip(whole_self, before):
            if isinstance(passed[i], dict):
                self._written_back(passed[i], old, env)
        return value

    def _invoke(self, function: ast.FunctionDef, scope: Scope, site: ast.AST, env: dict[str, Any], passed: list[Any],
                named: dict[str, Any], fields: dict[str, Any] | None, receiver: ReleaseClass | None = None) -> Any:
        """A function of the release played out on these values (``fields``: ``self`` or its fields; ``receiver``:
        a classmethod's class): what it returns, or Raised where every way raises."""
        given = self._given.get(id(site))
        if given is not None:  # the statement played again for one end of the call: the ways that end so
            outcomes, ways = given, len(given)
        else:
            try:
                # What the launch binds of calls (`has_arctic_inference()`) holds in the callee too.
                bound = {k: v for k, v in env.items() if k.endswith("()")}
                outcomes, ways = call(function, scope, passed, named, self.depth + 1, fields, self.coverage, bound,
                                      self.forks_every, self.objects, receiver)
            except (ValueError, RecursionError):
                return UNKNOWN
            ends = _ends(outcomes) if self.forks_every else []
            if len(ends) > 1 and isinstance(site, ast.Call):
                raise _Split(site, ends)
        running = [o for o in outcomes if o.raises is None]
        if not running:
            raise _raise_of(outcomes, scope.where)
        if fields is not None and "self" not in fields:  # what a method assigns to the fields, the caller reads back
            joined: dict[str, Any] = {}
            _join(joined, [{k: v for k, v in o.env.items() if k.startswith("self.")} for o in running])
            env.update(joined)
        # Each way rewrote its own copy of an object passed (played again for one end: the caller's copy is a fresh
        # one): what they agree on, the object holds.
        if ways > 1 or given is not None:
            params = _parameters(function)
            if _receives(function) != "nothing" and (fields is not None or receiver is not None):
                this = fields.get("self") if fields is not None else None
                if isinstance(this, dict):
                    _join(this, [o.env.get(params[0], UNKNOWN) for o in running])
                params = params[1:]
            for param, value in [*zip(params, passed), *named.items()]:
                if isinstance(value, dict):
                    _join(value, [o.env.get(param, UNKNOWN) for o in running])
        values = [o.method for o in running]
        return values[0] if all(v == values[0] for v in values) else UNKNOWN

    def _quantified(self, func: str, over: ast.expr, env: dict[str, Any]) -> Any:
        """``any``/``all``/``sum`` of a generator or list written in the call, item by item (what is known of an
        ``any`` decides it), or of a sequence the function built before (``iup = (... for p in ...)``, ``any(iup)``).
        Explaining, a generator's items are played up to the first that decides, as Python does."""
        if self.explains and func != "sum" and isinstance(over, (ast.GeneratorExp, ast.ListComp)):
            sequence = self.evaluate(over.generators[0].iter, env)
            if isinstance(sequence, Unknown):
                return sequence
            rounds = self._rounds(over.generators, env)
            if rounds is None:
                return UNKNOWN
            unknown = None
            for each in rounds:
                holds = truth(self.evaluate(over.elt, each))
                if isinstance(holds, Unknown):
                    unknown = unknown or holds
                elif holds == (func == "any"):
                    return holds
            return unknown or func == "all"
        if isinstance(over, (ast.GeneratorExp, ast.ListComp)):
            rounds = self._rounds(over.generators, env)
            if rounds is None:
                return UNKNOWN
            values = [self.evaluate(over.elt, each) for each in rounds]
        else:
            built = self.evaluate(over, env)
            if not isinstance(built, (list, tuple, frozenset, set)):
                return built if isinstance(built, Unknown) else UNKNOWN
            values = list(built)
        unknown = next((v for v in values if isinstance(v, Unknown)), None)
        if func == "sum":
            return unknown or pure("sum", [values])
        if func == "any":
            return True if any(not isinstance(v, Unknown) and _truth(v) for v in values) else unknown or False
        return False if any(not isinstance(v, Unknown) and not _truth(v) for v in values) else unknown or True

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
                       env: dict[str, Any]) -> Any:
        """A comprehension over sequences the launch fixes, played item by item: its list (a generator's too), set
        or dict; unknown where a sequence, a condition or an item is not known."""
        rounds = self._rounds(node.generators, env)
        if rounds is None:
            return UNKNOWN
        keys = [self.evaluate(node.key, each) for each in rounds] if isinstance(node, ast.DictComp) else []
        items = [self.evaluate(node.value if isinstance(node, ast.DictComp) else node.elt, each) for each in rounds]
        unknown = next((i for i in keys + items if isinstance(i, Unknown)), None)
        if unknown is not None:
            return unknown
        try:
            return dict(zip(keys, items)) if isinstance(node, ast.DictComp) else frozenset(items) \
                if isinstance(node, ast.SetComp) else items
        except TypeError:  # an item Python cannot hash (a config as a set's item): not this player's to say
            return UNKNOWN

    def _rounds(self, generators: list[ast.comprehension], env: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The frames a comprehension's element is played in: one for each item its ``for``s give and its ``if``s
        keep, in Python's order; None where a sequence or a condition is not known, or past MAX_ITEMS."""
        rounds = [dict(env)]  # its own names: they do not leak into the frame (Python 3)
        for generator in generators:
            kept = []
            for outer in rounds:
                items = None if generator.is_async else _items(self.evaluate(generator.iter, outer), MAX_ITEMS)
                if items is None:
                    return None
                for item in items:
                    each = dict(outer)
                    if not self._bind(generator.target, item, each):
                        return None
                    holds: Any = True
                    for test in generator.ifs:  # the first false one decides: the rest are not evaluated
                        holds = self.evaluate(test, each)
                        if isinstance(holds, Unknown):
                            return None
                        if not _truth(holds):
                            break
                    if _truth(holds):
                        kept.append(each)
                if len(kept) > MAX_ITEMS:
                    return None
            rounds = kept
        return rounds


def call(function: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope, passed: list[Any], named: dict[str, Any],
         depth: int = 0, fields: dict[str, Any] | None = None, coverage: Coverage | None = None,
         bound: dict[str, Any] | None = None, forks_every: bool = False,
         objects: Objects | None = None, receiver: ReleaseClass | None = None,
         stop: tuple[ast.stmt, ast.expr] | None = None) -> tuple[list[Outcome], int]:
    """Every way through a function of the release called with these values (its parameters' defaults for the rest):
    what each returns, and how many ways there were. The objects passed are the very ones it rewrites (no copy on
    entry): where it takes one way, its rewrites are the caller's. ``fields``: for a method, ``self`` (the object) or
    ``self.*`` as known; ``receiver``: for a classmethod, its class (that of ``self`` where it is called on an
    object); ``bound``: the calls the launch fixes (``has_arctic_inference()``), which hold in every function;
    ``forks_every``, ``objects``: as the Player's, for it and every function it calls; ``stop``: as the Player's, for
    this function."""
    params = _parameters(function)
    player = Player("__return__", {}, scope, (), True, depth, coverage, forks_every, objects, stop=stop)
    frame: dict[str, Any] = {**(bound or {}), **(fields or {})}
    receives = _receives(function)
    if receives == "class":
        this = (fields or {}).get("self")
        cls = receiver if receiver is not None else ReleaseClass(this[CLASS]) \
            if isinstance(this, dict) and isinstance(this.get(CLASS), str) else None
        if cls is None:
            return [Outcome(UNKNOWN)], 1  # a classmethod of a class it does not know
        frame.pop("self", None)
        frame[params[0]] = cls
        params = params[1:]
    elif receives == "self":
        if fields is None or params[0] != "self":
            return [Outcome(UNKNOWN)], 1  # a method of an object it does not model
        params = params[1:]
    defaults = dict(zip(reversed(params), reversed(function.args.defaults)))
    defaults |= {a.arg: d for a, d in zip(function.args.kwonlyargs, function.args.kw_defaults) if d is not None}
    keywords = params + [a.arg for a in function.args.kwonlyargs]
    for position, param in enumerate(keywords):
        if position < len(params) and position < len(passed):
            frame[param] = passed[position]
        elif param in named:
            frame[param] = named[param]
        else:
            frame[param] = player.evaluate(defaults[param], {}) if param in defaults else UNKNOWN
    if function.args.vararg is not None:  # `*args`: the positions past the parameters
        frame[function.args.vararg.arg] = tuple(passed[len(params):])
    if function.args.kwarg is not None:  # `**kwargs`: the keywords no parameter takes
        frame[function.args.kwarg.arg] = {k: v for k, v in named.items() if k not in keywords}
    ways = player.play(function, [_Way(frame)])
    for way in ways:
        if way.done is None:
            way.end(None)  # it falls off its end: it returns None
    return [w.done for w in ways if w.done is not None], len(ways)


def _items(value: Any, limit: int = MAX_ITERATIONS) -> list[Any] | tuple[Any, ...] | str | None:
    """What a ``for`` over ``value`` goes through, where it is a sequence the launch fixes of at most ``limit`` items
    (a dict's keys; a set's items in an order of their own: no launch depends on a hash's order)."""
    if isinstance(value, dict) and CLASS not in value:
        value = list(value)
    elif isinstance(value, (set, frozenset)):
        value = sorted(value, key=repr)
    if not isinstance(value, (list, tuple, str)) or len(value) > limit:
        return None
    return value


def message(stmt: ast.Raise, values: dict[str, Any], scope: Scope | None = None) -> str:
    """What a raise of the release prints on these values (an expression as written, ``self.model.fc.input_size``,
    to its value), what they do not fix shown as its code: the refusal a launch meets, said before it is launched."""
    return Player("", {}, scope or LiteralScope())._raised(stmt, dict(values), holes=True)


def answer(outcomes: list[Outcome], where: str) -> Any:
    """The one end of every way through a call: the value they all return, or Raised where they all raise the same
    (``where``: the function's file, for a raise of its own); else an Unknown that says why, the first condition not
    known that the ways forked on (its first read not known, else its code)."""
    ends = _ends(outcomes)
    if len(ends) == 1 and outcomes[0].raises is not None:
        raise _raise_of(outcomes, where)
    if len(ends) == 1:
        return outcomes[0].method
    forked = next((b for o in outcomes for b in o.branches if b.unknown is not None), None)
    if forked is None:
        return Unknown("the ways through it end differently")
    return Unknown(forked.unknown.why if forked.unknown is not None and forked.unknown.why else forked.test)


def _raise_of(outcomes: list[Outcome], where: str) -> Raised:
    """The raise of the first way that raises, where it is: in a function it calls, or in its own file."""
    first = next(o for o in outcomes if o.raises is not None)
    line, _, code = (first.raises or "0: ").partition(": ")
    return Raised(first.error or "an exception", first.site or (where, int(line), code))


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [a.arg for a in function.args.posonlyargs + function.args.args]


def _receives(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """What a function's first parameter is bound to: "class" (a classmethod), "self" (a method), "nothing"."""
    decorators = {dotted(d) for d in function.decorator_list}
    params = _parameters(function)
    if "staticmethod" in decorators or not params:
        return "nothing"
    if "classmethod" in decorators:
        return "class"
    return "self" if params[0] in ("self", "cls") else "nothing"


def _ends(outcomes: list[Outcome]) -> list[list[Outcome]]:
    """A call's outcomes by how they end, in the order first met: the value returned, or the raise met."""
    ends: list[list[Outcome]] = []
    for outcome in outcomes:
        key = (outcome.raises, outcome.error) if outcome.raises is not None else None
        for end in ends:
            first = end[0]
            if (key is None and first.raises is None and first.method == outcome.method) or \
                    (key is not None and (first.raises, first.error) == key):
                end.append(outcome)
                break
        else:
            ends.append([outcome])
    return ends


def _join(target: dict[Any, Any], versions: list[Any]) -> None:
    """``target`` as the ways through a call left their copies of it: a key they agree on keeps their value, any
    other is not known."""
    if any(not isinstance(v, dict) for v in versions):  # a way rebound the parameter: its object is not followed
        target.update({key: UNKNOWN for key in target})
        return
    for key in {k for v in versions for k in v} | set(target):
        values = [v.get(key, UNKNOWN) for v in versions]
        if all(x == values[0] for x in values):
            target[key] = values[0]
        elif all(isinstance(x, dict) and x.get(CLASS) == values[0].get(CLASS) for x in values):
            # the same object, its fields rewritten differently: those the ways disagree on are not known
            joined: dict[Any, Any] = dict(values[0])
            _join(joined, values)
            target[key] = joined
        else:
            target[key] = UNKNOWN


def _truth(value: Any) -> bool:
    """A known value's truth (play.values.truth; an object of the release is true, whatever fields it has)."""
    return truth(value) is True


def dotted(node: ast.expr | None) -> str | None:
    """``self.draft_model_config.model`` as text; None for anything that is not a name or an attribute chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _called_name(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _mutates(node: ast.AST, variable: str) -> bool:
    """Whether a node rewrites the object ``variable`` names: an attribute of it assigned, or its ``update``."""
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Attribute) and (dotted(t) or "").startswith(variable + ".") for t in targets)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update" \
        and dotted(node.func.value) == variable
