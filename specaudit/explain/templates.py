"""One pass over a file of engine source: every message it raises, asserts or logs, as a template.

A template is where the message is made (function, line), what makes it (``raise ValueError``, ``assert``,
``logger.warning``), its text as parts (messages.py), and the condition that guards it: the innermost enclosing
``if`` test (negated in its ``else``), an assert's own condition (negated: it raises when that is false), or the
``except`` clause it is raised in. An assert with no message is a template too: its statement, as ast writes it,
which is what a paste of its bare AssertionError shows above it. The names the guard compares are kept with what
would make it false: the fix, once a name is known to be a flag (knobs.py).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .messages import Parts, message_parts

MAX_WAY = 8  # the innermost conditions (an elif chain's tests) on the way kept, each of at most MAX_SOURCE characters
MAX_SOURCE = 240
MAX_REACHING = 8  # names whose assigned value is kept, at most this many a template, MAX_REACHING_DEPTH steps back
MAX_REACHING_DEPTH = 3
# An assert with no message is kept where its statement tells a site (as raise_sites.MIN_LITERAL_TO_TELL: "assert x is
# not None" is in a thousand places, and a third of the atlas) and a paste can hold it whole.
MIN_BARE_ASSERT, MAX_BARE_ASSERT = 40, 200
# A call of a function is kept (for the callers of a raise: atlas_build.link_callers) where what it passes or the
# conditions it is made under may name a knob: under a condition, or handing on a name or an attribute; at most
# MAX_CALL_ARGS arguments of it. Calls of Python's builtins and of the commonest methods are not kept.
MAX_CALL_ARGS = 8
_NOT_CALLEES = frozenset({
    "len", "isinstance", "issubclass", "getattr", "setattr", "hasattr", "print", "str", "int", "float", "bool", "list",
    "dict", "set", "tuple", "frozenset", "super", "range", "enumerate", "zip", "min", "max", "sum", "any", "all",
    "sorted", "reversed", "type", "repr", "iter", "next", "map", "filter", "abs", "round", "append", "extend", "get",
    "items", "keys", "values", "pop", "update", "format", "join", "split", "strip", "startswith", "endswith",
    "replace", "lower", "upper", "add", "copy", "view", "reshape", "to", "size", "item", "cuda", "cpu", "contiguous",
    "numel", "dim", "tolist", "info", "debug", "warning", "warning_once", "info_once", "error", "exception",
    "setdefault", "insert", "remove", "index", "count", "encode", "decode", "zeros", "empty", "ones", "tensor",
    "arange", "full", "cat", "stack", "field", "partial", "wraps", "cast"})
_LOGGER = re.compile(r"^_?(?:logger|log|LOGGER|_LOG)$")
LOG_LEVELS = frozenset({"info", "info_once", "warning", "warning_once", "warn", "error", "error_once", "exception",
                        "critical", "fatal"})


@dataclass(frozen=True)
class Template:
    kind: str  # "raise", "assert", or the logger's method: "logger.warning_once"
    exception: str  # the exception's type as written (ValueError, torch.OutOfMemoryError); a logger's level
    function: str  # Class.method, or <module>
    line: int
    parts: Parts
    guard: str  # the condition it is raised under, as source text; "" where it is raised unconditionally
    # (name the guard reads, the value that makes the guard false): ("self.num_speculative_tokens", "at most 1")
    remedies: tuple[tuple[str, str], ...] = ()
    # the conditions on the way to it in its function, outermost first: (source, whether it holds there: False in an
    # `else` and for an assert's own condition); the innermost is the guard
    way: tuple[tuple[str, bool], ...] = ()
    # (name, the source of what reaches it): what the function (or, for a literal, its module) last assigned
    # a name the conditions read, before the raise; and what reaches the names those read, a few steps back
    reaching: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Call:
    """A call of a function by its name (``self.check(x)``, ``check(x)``, ``Check(x)``: the class's ``__init__``), where
    the caller makes it: what it passes and the conditions it is made under, as a template carries them."""

    callee: str  # the name called: "_raise_for_unsupported", or a class's name
    function: str  # the caller: Class.method, or <module>
    line: int
    receiver: str  # "" for a bare name's call, "self" for ``self.f(...)``, "." for any other attribute's
    args: tuple[str, ...]  # the positional arguments' source
    keywords: tuple[tuple[str, str], ...]  # (keyword, its argument's source); ``**x`` has no keyword and is not kept
    way: tuple[tuple[str, bool], ...] = ()  # the conditions on the way to the call in the caller, outermost first
    reaching: tuple[tuple[str, str], ...] = ()  # what reaches the names the conditions and the arguments read
    owner: str = ""  # what an attribute's call is made on, where it is a dotted name: "ModelRegistry", "self.cfg"


@dataclass(frozen=True)
class Signature:
    """A function's parameters, to bind a call's arguments to them."""

    params: tuple[str, ...]  # positional-or-keyword (and positional-only) parameters, ``self`` included
    keyword_only: tuple[str, ...] = ()
    star: bool = False  # *args
    double_star: bool = False  # **kwargs


@dataclass(frozen=True)
class FileFacts:
    """What one pass over a file finds: its templates, its flag classes' fields, the functions it defines and the
    calls it makes that may carry a knob to a callee."""

    templates: list[Template]
    fields: dict[str, list[str]]
    defs: dict[str, Signature]  # qualified name -> its parameters
    calls: list[Call]
    # name the module binds by an import (anywhere in it) -> what it imports, as written: "vllm.config.ModelConfig",
    # relative ones with their dots (".registry.ModelRegistry"); "" for a name bound to two different things; a star
    # import's module under "*1", "*2", ...
    imports: dict[str, str]


# The classes whose fields are a launch's flags: vLLM's engine arguments and speculative config, SGLang's server
# arguments (knobs.py maps a guard's names onto them).
FLAG_CLASSES = frozenset({"EngineArgs", "SpeculativeConfig", "ServerArgs"})


def file_templates(source: bytes) -> tuple[list[Template], dict[str, list[str]]]:
    """The file's templates, in source order, and the fields of the flag classes it defines; none where the file
    does not parse."""
    facts = file_facts(source)
    return facts.templates, facts.fields


def file_facts(source: bytes) -> FileFacts:
    """The file's templates, flag fields, functions and calls (``FileFacts``); none where the file does not parse."""
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return FileFacts([], {}, {}, [], {})
    walker = _Walker(source.decode("utf-8", errors="replace"))
    walker.body(module.body)
    return FileFacts(walker.found, walker.fields, walker.defs, walker.calls, walker.imports)


_TRY = (ast.Try, getattr(ast, "TryStar", ast.Try))  # try/except*, from Python 3.11
Guard = tuple[ast.AST, bool]  # an `if` test and whether the branch is its body; or an except handler


class _Walker:
    """Statements only, in source order: a raise, an assert and a logger's call (an expression statement) are
    statements, and the expressions around them need not be walked."""

    def __init__(self, text: str) -> None:
        # what ast.get_source_segment splits again at every call; at ast's line breaks only (not str.splitlines')
        self.lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self.scope: list[str] = []
        self.guards: list[Guard] = []
        self.assigned: dict[str, ast.expr] = {}  # name -> what the current function last assigned it, so far
        self.literals: dict[str, ast.expr] = {}  # name -> a literal its module or an enclosing function assigned it
        self.in_class = False
        self.found: list[Template] = []
        self.fields: dict[str, list[str]] = {}
        self.defs: dict[str, Signature] = {}
        self.calls: list[Call] = []
        self.imports: dict[str, str] = {}

    def body(self, statements: list[ast.stmt], guard: Guard | None = None) -> None:
        if guard is not None:
            self.guards.append(guard)
        for statement in statements:
            self.statement(statement)
        if guard is not None:
            self.guards.pop()

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            self._enter(node)
        elif isinstance(node, ast.If):
            self.body(node.body, (node.test, True))
            self.body(node.orelse, (node.test, False))
        elif isinstance(node, _TRY):
            self.body(node.body)
            for handler in node.handlers:
                self.body(handler.body, (handler, True))
            self.body(node.orelse)
            self.body(node.finalbody)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While | ast.With | ast.AsyncWith):
            self.body(node.body)
            self.body(getattr(node, "orelse", []))
        elif isinstance(node, ast.Match):
            for case in node.cases:
                self.body(case.body)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            self._import(node)
        elif isinstance(node, ast.Raise):
            self._raise(node)
        elif isinstance(node, ast.Assert) and node.msg is not None:
            self._add("assert", "AssertionError", node.lineno, node.msg, [(node.test, False)],
                      way=[*self.guards, (node.test, False)])
        elif isinstance(node, ast.Assert):
            self._bare_assert(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            self._logged(node.value)
            self._calls(node.value)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.Return) and node.value is not None:
            self._calls(node.value)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.assigned[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                self.assigned[node.target.id] = node.value

    def _enter(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        saved = self.scope, self.guards, self.assigned, self.literals, self.in_class
        if not self.in_class:  # a class body's names are not a method's bare names
            self.literals = {**self.literals, **{n: v for n, v in self.assigned.items() if _literal(v)}}
        self.scope, self.guards, self.assigned = [*self.scope, node.name], [], {}
        self.in_class = isinstance(node, ast.ClassDef)
        if not self.in_class:
            a = node.args  # type: ignore[union-attr]
            self.defs[".".join(self.scope)] = Signature(
                tuple(p.arg for p in [*a.posonlyargs, *a.args]), tuple(p.arg for p in a.kwonlyargs),
                a.vararg is not None, a.kwarg is not None)
        flags = _flag_class(node) if isinstance(node, ast.ClassDef) else None
        if flags is not None:
            self.fields.setdefault(flags, []).extend(
                s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name))
        self.body(node.body)
        self.scope, self.guards, self.assigned, self.literals, self.in_class = saved

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        """The names an import binds, and what each is (a function's own imports count as its module's: a name
        imported to two different things is left unknown)."""
        for alias in node.names:
            if isinstance(node, ast.Import):
                name, target = (alias.asname, alias.name) if alias.asname else (alias.name.partition(".")[0],) * 2
            elif alias.name == "*":  # kept as "*1", "*2", ...: the modules whose names it binds, in order
                name = f"*{sum(k.startswith('*') for k in self.imports) + 1}"
                target = "." * node.level + (node.module or "")
            else:
                base = "." * node.level + (f"{node.module}." if node.module else "")
                name, target = alias.asname or alias.name, base + alias.name
            if self.imports.setdefault(name, target) != target:
                self.imports[name] = ""

    def _raise(self, node: ast.Raise) -> None:
        call = node.exc
        if isinstance(call, ast.Call) and len(call.args) == 1:
            self._add("raise", ast.unparse(call.func), node.lineno, call.args[0], self.guards[-1:])

    def _calls(self, value: ast.expr) -> None:
        """The calls a statement of a function makes, where they may carry a knob to the callee: made under a
        condition, or handing it a name or an attribute."""
        if not self.scope or self.in_class:
            return
        for node in ast.walk(value):
            if not isinstance(node, ast.Call) or len(node.args) + len(node.keywords) > MAX_CALL_ARGS:
                continue
            func = node.func
            callee = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if not callee or callee in _NOT_CALLEES or callee.startswith("__") or \
                    any(isinstance(a, ast.Starred) for a in node.args):
                continue
            handed = [a for a in [*node.args, *(k.value for k in node.keywords)] if _is_knob(a)]
            if not handed and not self.guards:
                continue
            args = tuple(self._source(a) for a in node.args)
            keywords = tuple((k.arg, self._source(k.value)) for k in node.keywords if k.arg is not None)
            if any(len(text) > MAX_SOURCE for text in [*args, *(v for _, v in keywords)]):
                continue
            way, reaching = self._way(self.guards, handed)
            owner = func.value if isinstance(func, ast.Attribute) else None
            receiver = "" if owner is None else "self" if isinstance(owner, ast.Name) and owner.id == "self" else "."
            self.calls.append(Call(callee, ".".join(self.scope), node.lineno, receiver, args, keywords, way, reaching,
                                   _dotted(owner) if owner is not None else ""))

    def _bare_assert(self, node: ast.Assert) -> None:
        """An assert with no message: Python prints a bare AssertionError, and a paste shows the statement above it
        (its frame's source line); the template is that statement as ast writes it, all literal."""
        statement = f"assert {ast.unparse(node.test)}"
        if not MIN_BARE_ASSERT <= len(statement) <= MAX_BARE_ASSERT:
            return
        guard, remedies = self._guard(node.test, False)
        way, reaching = self._way([*self.guards, (node.test, False)])
        self.found.append(Template("assert", "AssertionError", ".".join(self.scope) or "<module>", node.lineno,
                                   (statement,), guard, remedies, way, reaching))

    def _logged(self, call: ast.Call) -> None:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in LOG_LEVELS and call.args and _is_logger(func.value):
            self._add(f"logger.{func.attr}", func.attr.partition("_")[0].upper(), call.lineno, call.args[0],
                      self.guards[-1:], call.args[1:])

    def _add(self, kind: str, exception: str, line: int, message: ast.expr, guards: list[Guard],
             logged: list[ast.expr] | None = None, way: list[Guard] | None = None) -> None:
        parts = message_parts(message, self.assigned.get, logged)
        if parts is None:
            return
        guard, remedies = self._guard(*guards[0]) if guards else ("", ())
        conditions, reaching = self._way(self.guards if way is None else way)
        self.found.append(Template(kind, exception, ".".join(self.scope) or "<module>", line, parts, guard, remedies,
                                   conditions, reaching))

    def _way(self, guards: list[Guard], also: Sequence[ast.expr] = ()) -> tuple[tuple[tuple[str, bool], ...],
                                                                             tuple[tuple[str, str], ...]]:
        """The conditions on the way (an ``except`` clause is none), the innermost MAX_WAY, and what reaches the
        names they read (and the names ``also`` reads): the function's last assignment of each, or a literal of its
        module or class."""
        tests = [(test, branch) for test, branch in guards if isinstance(test, ast.expr)][-MAX_WAY:]
        way = tuple((text, branch) for test, branch in tests for text in [self._source(test)] if len(text) <= MAX_SOURCE)
        reaching: dict[str, str] = {}
        todo = [*(test for test, _ in tests), *also]
        for _ in range(MAX_REACHING_DEPTH):
            found = []
            for name in dict.fromkeys(n.id for test in todo for n in ast.walk(test) if isinstance(n, ast.Name)):
                value = self.assigned.get(name) or self.literals.get(name)
                if value is None or name in reaching or len(reaching) >= MAX_REACHING or \
                        any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(value)):
                    continue  # a name that reaches itself (``x = [x]`` in a branch) says nothing of where it came from
                text = ast.unparse(value)
                if len(text) <= MAX_SOURCE:
                    reaching[name] = text
                    found.append(value)
            todo = found
        return way, tuple(reaching.items())

    def _guard(self, test: ast.AST, branch: bool) -> tuple[str, tuple[tuple[str, str], ...]]:
        if isinstance(test, ast.ExceptHandler):
            return f"except {self._source(test.type)}" if test.type else "except", ()
        assert isinstance(test, ast.expr)
        text = self._source(test)
        return (text if branch else f"not ({text})"), tuple(remedies_of(test, branch))

    def _source(self, node: ast.AST) -> str:
        """The node's source text as written where it is on one line; a condition spread over several lines as
        ``ast.unparse`` writes it (one line, without the brackets and commas the line breaks left)."""
        line, end = node.lineno - 1, node.end_lineno  # type: ignore[attr-defined]
        if end != node.lineno or line >= len(self.lines) or node.end_col_offset is None:  # type: ignore[attr-defined]
            return ast.unparse(node)
        return self.lines[line].encode()[node.col_offset:node.end_col_offset].decode(  # type: ignore[attr-defined]
            "utf-8", errors="replace")


def _literal(node: ast.expr) -> bool:
    """A value written out whole in the source: a constant, or a list, tuple, set or dict of them (a module's
    ``SUPPORTED_BACKENDS = ["FLASH_ATTN", ...]``), perhaps through ``frozenset(...)``, ``set(...)``, ``tuple(...)``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set", "tuple",
                                                                                          "list") and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return all(isinstance(e, ast.Constant) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(isinstance(k, ast.Constant) for k in node.keys if k is not None)
    return False


def _flag_class(node: ast.ClassDef) -> str | None:
    """The flag class ``node`` is, or holds fields of: SGLang's later releases declare ServerArgs' fields in
    namespace classes (``arg_groups/fields/``, each marked by its ``_NS_PATH``)."""
    if node.name in FLAG_CLASSES:
        return node.name
    namespace = any(isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_NS_PATH" for t in s.targets)
                    for s in node.body)
    return "ServerArgs" if namespace else None


def _is_logger(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and bool(_LOGGER.match(node.id)) or \
        isinstance(node, ast.Attribute) and bool(_LOGGER.match(node.attr))


# What makes `name OP value` false, and what makes it true: the fix is the side the engine does not raise on.
_FALSE = {ast.Gt: "at most {}", ast.GtE: "below {}", ast.Lt: "at least {}", ast.LtE: "above {}", ast.Eq: "other than {}",
          ast.NotEq: "{}", ast.In: "none of {}", ast.NotIn: "one of {}", ast.Is: "other than {}", ast.IsNot: "{}"}
_TRUE = {ast.Gt: "above {}", ast.GtE: "at least {}", ast.Lt: "below {}", ast.LtE: "at most {}", ast.Eq: "{}",
         ast.NotEq: "other than {}", ast.In: "one of {}", ast.NotIn: "none of {}", ast.Is: "{}", ast.IsNot: "other than {}"}
_MIRROR = {ast.Gt: ast.Lt, ast.Lt: ast.Gt, ast.GtE: ast.LtE, ast.LtE: ast.GtE}


def remedies_of(test: ast.expr, raises_when: bool) -> list[tuple[str, str]]:
    """(name, value) for each name the condition reads that a value of it makes the condition ``not raises_when``:
    of a condition joined by ``and`` (raising when all hold) any one suffices, of ``or`` every one is needed."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return remedies_of(test.operand, not raises_when)
    if isinstance(test, ast.BoolOp):
        return [r for value in test.values for r in remedies_of(value, raises_when)]
    if _is_knob(test):
        return [(ast.unparse(test), "unset (false)" if raises_when else "set (true)")]
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return []
    left, op, right = test.left, type(test.ops[0]), test.comparators[0]
    if not _is_knob(left) and _is_knob(right) and op in _MIRROR:
        left, op, right = right, _MIRROR[op], left
    if not _is_knob(left):
        return []
    value = ast.unparse(right)
    if op in (ast.Is, ast.IsNot) and value == "None":
        return [(ast.unparse(left), "set" if (op is ast.Is) == raises_when else "unset (None)")]
    return [(ast.unparse(left), (_FALSE if raises_when else _TRUE)[op].format(value))]


def _is_knob(node: ast.expr) -> bool:
    """A name a launch may set: a variable or attribute chain, an environment variable read (``os.getenv("X")``,
    ``os.environ.get("X")``, ``envs.X``)."""
    if isinstance(node, ast.Name | ast.Attribute):
        return all(isinstance(n, ast.Name | ast.Attribute) for n in ast.walk(node) if n is not node and
                   not isinstance(n, ast.expr_context))
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        return ast.unparse(node.func) in ("os.getenv", "os.environ.get")
    return False


def _dotted(node: ast.expr) -> str:
    """A dotted name's source (``ModelRegistry``, ``envs.x``), "" for any other expression."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(names)]) if isinstance(node, ast.Name) else ""
