"""vLLM's parallel drafters: DFlash (``dflash``, 0.20 on), DSpark (``dspark``, 0.26 on) and P-EAGLE (an EAGLE-3 head
launched with ``parallel_drafting: true``). Each check reads what the release does with the drafter's config.json by
playing the release's own function out on it (``_Play``: its statements run over the config's values, never
imported), so that a key one release reads and another does not, or a layer id one shifts by one, is judged as that
release judges it:

- the fc the draft class builds (vLLM 0.20 and 0.26: ``(target_hidden_size or hidden_size) x`` the number of
  ``target_layer_ids`` of ``dflash_config``, else the draft's own ``num_hidden_layers``, in DFlashQwen3Model.__init__;
  0.33: ``_get_dflash_fc_input_size``, the number of layer ids the runner reads) against the checkpoint's fc.weight;
- the target layers the runner hands the drafter (``GPUModelRunner._get_eagle3_aux_layers_from_config`` on V1,
  ``eagle3_utils.get_eagle3_aux_layers_from_config`` on V2: ``dflash_config.target_layer_ids`` as they are in 0.20,
  plus one from 0.26 on, and DSpark's ``dspark_target_layer_ids`` / ``target_layer_ids``), against the target's layers
  and that fc;
- the mask token of the parallel slots (``SpecDecodeBaseProposer._init_parallel_drafting_params`` on V1,
  ``get_parallel_drafting_token_id`` on V2: which keys each release accepts), present and inside the vocabulary;
- P-EAGLE's ``mask_hidden`` tensor, which the EAGLE-3 draft class's load_weights requires under parallel drafting.

The function read is the one of the runner the launch takes (on its traced path); a release without it has nothing
to say (no finding).
"""

from __future__ import annotations

import ast
import copy
import fnmatch
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...core.types import EngineFunction, Finding, Rule, Status
from ...play.operators import METHODS, PURE, TYPES, UNARY, binary, compare, pure
from ...play.player import dotted
from ...play.values import EngineObject, Raised, Unknown, truth
from ..facts import SyntaxProblem
from ..judge import Judge
from .context import DraftContext, check, draft_finding, engine_finding, site_of, unread_finding

# -- playing a function of the release out on a drafter config ---------------------------------------------------------


class _NotKnown(Exception):
    """The played code reads what the drafter's files do not fix."""


class _Raised(Exception):
    def __init__(self, error: str, file: str, line: int):
        super().__init__(error)
        self.error, self.file, self.line = error, file, line


class _Returned(Exception):
    def __init__(self, value: Any):
        super().__init__("return")
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


@dataclass
class Obj(EngineObject):
    """An engine object the played code reads attributes of (a config, the speculative config): its fields. A field
    it lacks is not known, except to ``getattr`` with a default and ``hasattr``, which answer from the fields."""

    fields: dict[str, Any] = field(default_factory=dict)


_UNSET = object()  # a name assigned what the drafter's files do not fix
# The methods of plain values it may call beside play.operators' pure ones: those that rewrite the played code's own
# copies of the drafter's values.
_MUTATORS: dict[str, type | tuple[type, ...]] = {"update": dict}
MAX_DEPTH = 3  # calls of the release's own functions followed from the one played


@dataclass
class _Module:
    name: str
    relpath: str
    tree: ast.Module


class _Code:
    """The release's modules, from the judge's index (parsed on first use); none where the code is played on its own
    (``judge`` None)."""

    def __init__(self, judge: Judge | None):
        self.release = judge.release if judge is not None else None
        self.by_path = {relpath: name for name, relpath in self.release.files.items()} if self.release else {}

    def module(self, name: str | None = None, relpath: str | None = None) -> _Module | None:
        if self.release is None:
            return None
        name = name or self.by_path.get(relpath or "")
        relpath = relpath or self.release.files.get(name or "")
        if not name or not relpath:
            return None
        try:
            tree = self.release.syntax(relpath)
        except (SyntaxProblem, OSError):
            return None
        return _Module(name, relpath, tree)

    def function(self, module: _Module, name: str, env: dict[str, Any]) -> tuple[ast.FunctionDef, _Module] | None:
        """A module-level function of that name as ``module`` sees it: its own, or imported (at its top or, recorded
        in ``env``, inside the function played)."""
        for stmt in module.tree.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                return stmt, module
        imported = env.get(f"import:{name}")
        for stmt in module.tree.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                for alias in stmt.names:
                    if (alias.asname or alias.name) == name:
                        imported = (stmt.module, alias.name)
        if imported is None:
            return None
        other = self.module(imported[0])
        if other is None:
            return None
        return next(((s, other) for s in other.tree.body if isinstance(s, ast.FunctionDef) and s.name == imported[1]),
                    None)


class _Play:
    """Runs one function of the release over known values: the drafter's config as an Obj, the engine objects around
    it as Objs. What it reads that is not given is not known (_NotKnown), unless only a statement whose effect no
    later statement reads depends on it; a raise of the function itself is the release's refusal (_Raised)."""

    def __init__(self, code: _Code, module: _Module, owner: ast.ClassDef | None = None, depth: int = 0,
                 stop: ast.stmt | None = None, stop_value: ast.expr | None = None):
        self.code, self.module, self.owner, self.depth = code, module, owner, depth
        self.stop, self.stop_value = stop, stop_value  # the statement where the play ends, and what it gives there

    def call(self, function: ast.FunctionDef, args: list[Any], kwargs: dict[str, Any], this: Obj | None = None
             ) -> tuple[Any, dict[str, Any]]:
        """What the function returns, and the names it leaves (``self.x`` included)."""
        params = [a.arg for a in function.args.posonlyargs + function.args.args]
        env: dict[str, Any] = {}
        if this is not None and params[:1] == ["self"]:
            env["self"] = this
            params = params[1:]
        defaults = dict(zip(reversed(params), reversed(function.args.defaults)))
        defaults |= {a.arg: d for a, d in zip(function.args.kwonlyargs, function.args.kw_defaults) if d is not None}
        for position, param in enumerate(params + [a.arg for a in function.args.kwonlyargs]):
            if position < len(params) and position < len(args):
                env[param] = args[position]
            elif param in kwargs:
                env[param] = kwargs[param]
            elif param in defaults:
                env[param] = self.value(defaults[param], {})
            else:
                env[param] = _UNSET
        try:
            self.block(function.body, env)
        except _Returned as returned:
            return returned.value, env
        return None, env

    # ---- statements

    def block(self, body: list[ast.stmt], env: dict[str, Any]) -> None:
        for stmt in body:
            self.statement(stmt, env)

    def statement(self, stmt: ast.stmt, env: dict[str, Any]) -> None:
        if stmt is self.stop and self.stop_value is not None:
            raise _Returned(self.value(self.stop_value, env))
        if isinstance(stmt, ast.Expr):
            if not isinstance(stmt.value, ast.Constant):
                self._quiet(lambda: self.value(stmt.value, env))  # for what it changes: `d.update(...)`
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if stmt.value is None:
                return
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]

            def computed() -> Any:
                value = self.value(stmt.value, env)  # type: ignore[arg-type]
                if isinstance(stmt, ast.AugAssign):
                    value = _operated(stmt, binary, stmt.op, self.value(stmt.target, env), value)
                return value

            value = self._quiet(computed)
            for target in targets:
                self.assign(target, value, env)
        elif isinstance(stmt, ast.If):
            try:
                holds = _truth(self.value(stmt.test, env))
            except _NotKnown:
                if _exits(stmt) or (self.stop is not None and _holds(stmt, self.stop)):
                    raise
                for name in _assigned(stmt):
                    env[name] = _UNSET
                return
            self.block(stmt.body if holds else stmt.orelse, env)
        elif isinstance(stmt, ast.For):
            self._loop(stmt, env)
        elif isinstance(stmt, ast.Return):
            raise _Returned(self.value(stmt.value, env) if stmt.value is not None else None)
        elif isinstance(stmt, ast.Raise):
            raise _Raised(self.error(stmt.exc, env), self.module.relpath, stmt.lineno)
        elif isinstance(stmt, ast.Break):
            raise _Break
        elif isinstance(stmt, ast.Continue):
            raise _Continue
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            env.update({f"import:{a.asname or a.name}": (stmt.module, a.name) for a in stmt.names})
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            self.block(stmt.body, env)
        elif isinstance(stmt, (ast.Assert, ast.Import, ast.Pass, ast.Global, ast.Nonlocal)):
            return  # the engine's own sanity asserts hold for what it built; imports of modules are not read
        else:  # while, try, nested definitions: what they assign is not known
            if _exits(stmt):
                raise _NotKnown(type(stmt).__name__)
            for name in _assigned(stmt):
                env[name] = _UNSET

    def _loop(self, stmt: ast.For, env: dict[str, Any]) -> None:
        items = self.value(stmt.iter, env)
        if not isinstance(items, (list, tuple, set, frozenset, dict, str)):
            raise _NotKnown(ast.unparse(stmt.iter))
        for item in items:
            self.assign(stmt.target, item, env)
            try:
                self.block(stmt.body, env)
            except _Break:
                return
            except _Continue:
                continue
        self.block(stmt.orelse, env)

    def assign(self, target: ast.expr, value: Any, env: dict[str, Any]) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = list(value) if isinstance(value, (list, tuple)) and len(value) == len(target.elts) else None
            for i, element in enumerate(target.elts):
                self.assign(element, values[i] if values is not None else _UNSET, env)
        elif isinstance(target, ast.Attribute):
            name = dotted(target)
            if name and name.startswith("self."):
                env[name] = value
            owner = self._quiet(lambda: self.value(target.value, env))
            if isinstance(owner, Obj):
                owner.fields[target.attr] = value
        elif isinstance(target, ast.Subscript):
            owner, key = self._quiet(lambda: self.value(target.value, env)), \
                self._quiet(lambda: self.value(target.slice, env))
            if isinstance(owner, dict) and key is not _UNSET:
                owner[key] = value

    @staticmethod
    def _quiet(compute: Callable[[], Any]) -> Any:
        """A value where it can be had; _UNSET where it reads what is not known or a function it follows raises."""
        try:
            return compute()
        except (_NotKnown, _Raised, _Break, _Continue, ArithmeticError, LookupError, TypeError, ValueError,
                AttributeError):
            return _UNSET

    # ---- expressions

    def value(self, node: ast.expr, env: dict[str, Any]) -> Any:
        name = dotted(node)
        if name is not None and name in env:
            return _known(env[name], name)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.Attribute):
            owner = self.value(node.value, env)
            if isinstance(owner, Obj):
                if node.attr not in owner.fields:
                    raise _NotKnown(ast.unparse(node))
                return _known(owner.fields[node.attr], ast.unparse(node))
            raise _NotKnown(ast.unparse(node))
        if isinstance(node, ast.Subscript):
            owner, key = self.value(node.value, env), self.value(node.slice, env)
            try:
                return _known(owner[key], ast.unparse(node))
            except (LookupError, TypeError):
                raise _NotKnown(ast.unparse(node)) from None
        if isinstance(node, ast.BoolOp):
            result: Any = None
            for operand in node.values:
                result = self.value(operand, env)
                if _truth(result) == isinstance(node.op, ast.Or):
                    return result
            return result
        if isinstance(node, ast.UnaryOp):
            operand = self.value(node.operand, env)
            if type(node.op) not in UNARY:
                raise _NotKnown(ast.unparse(node))
            if isinstance(node.op, ast.Not):
                return not _truth(operand)
            try:
                return UNARY[type(node.op)](operand)
            except TypeError:
                raise _NotKnown(ast.unparse(node)) from None
        if isinstance(node, ast.BinOp):
            return _operated(node, binary, node.op, self.value(node.left, env), self.value(node.right, env))
        if isinstance(node, ast.Compare):
            left = self.value(node.left, env)
            for op, comparator in zip(node.ops, node.comparators):
                right = self.value(comparator, env)
                if not _operated(node, compare, op, left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self.value(node.body if _truth(self.value(node.test, env)) else node.orelse, env)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = [self.value(e, env) for e in node.elts]
            return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise _NotKnown(ast.unparse(node))
            return {self.value(k, env): self.value(v, env) for k, v in zip(node.keys, node.values)  # type: ignore[arg-type]
                    }
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            items = list(self._comprehension(node.generators, node.elt, dict(env)))
            return set(items) if isinstance(node, ast.SetComp) else items
        if isinstance(node, ast.JoinedStr):
            return "".join(self._piece(p, env) for p in node.values)
        if isinstance(node, ast.Call):
            return self.invoke(node, env)
        raise _NotKnown(ast.unparse(node))

    def _name(self, name: str) -> Any:
        if name in TYPES:
            return TYPES[name]
        for stmt in self.module.tree.body:  # a module constant: a literal, or frozenset/set/tuple of one
            if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
                continue
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                node: ast.expr = stmt.value
                convert: Callable[[Any], Any] = lambda v: v  # noqa: E731
                if isinstance(node, ast.Call) and dotted(node.func) in ("frozenset", "set", "tuple") and \
                        len(node.args) == 1:
                    convert, node = PURE[dotted(node.func) or "set"], node.args[0]
                try:
                    return convert(ast.literal_eval(node))
                except (ValueError, TypeError, SyntaxError):
                    raise _NotKnown(name) from None
        raise _NotKnown(name)

    def _comprehension(self, generators: list[ast.comprehension], elt: ast.expr, env: dict[str, Any]) -> Iterator[Any]:
        if not generators:
            yield self.value(elt, env)
            return
        first, rest = generators[0], generators[1:]
        items = self.value(first.iter, env)
        if not isinstance(items, (list, tuple, set, frozenset, dict, str)):
            raise _NotKnown(ast.unparse(first.iter))
        for item in items:
            self.assign(first.target, item, env)
            if all(_truth(self.value(test, env)) for test in first.ifs):
                yield from self._comprehension(rest, elt, env)

    def _piece(self, part: ast.expr, env: dict[str, Any]) -> str:
        if isinstance(part, ast.Constant):
            return str(part.value)
        assert isinstance(part, ast.FormattedValue)
        try:
            value = self.value(part.value, env)
        except _NotKnown:
            return "{" + ast.unparse(part.value) + "}"
        return repr(value) if part.conversion == ord("r") else str(value)

    def error(self, exc: ast.expr | None, env: dict[str, Any]) -> str:
        """What a raise prints: ``Name: message``, the message filled where its values are known."""
        if not isinstance(exc, ast.Call):
            return ast.unparse(exc) if exc is not None else "raise"
        name = dotted(exc.func) or ast.unparse(exc.func)
        if not exc.args:
            return name
        try:
            text = self.value(exc.args[0], env)
        except _NotKnown:
            text = ast.unparse(exc.args[0])
        return f"{name}: {text}"

    def invoke(self, node: ast.Call, env: dict[str, Any]) -> Any:
        func, args = node.func, node.args
        if any(isinstance(a, ast.Starred) for a in args) or any(k.arg is None for k in node.keywords):
            raise _NotKnown(ast.unparse(node))
        if isinstance(func, ast.Name):
            name = func.id
            if name in ("getattr", "hasattr") and len(args) in (2, 3):
                owner, key = self.value(args[0], env), self.value(args[1], env)
                fields = owner.fields if isinstance(owner, Obj) else None
                if name == "hasattr":
                    return key in fields if fields is not None else hasattr(owner, key)
                if fields is not None:
                    if key in fields:
                        return _known(fields[key], f"{ast.unparse(args[0])}.{key}")
                    if len(args) == 3:
                        return self.value(args[2], env)
                    raise _NotKnown(f"{ast.unparse(args[0])}.{key}")
                return getattr(owner, key, *([self.value(args[2], env)] if len(args) == 3 else []))
            if name == "isinstance" and len(args) == 2:
                kinds = self.value(args[1], env)
                kinds = kinds if isinstance(kinds, tuple) else (kinds,)
                flat = tuple(k for kind in kinds for k in (kind if isinstance(kind, tuple) else (kind,)))
                if not all(isinstance(k, type) for k in flat):
                    raise _NotKnown(ast.unparse(node))
                return isinstance(self.value(args[0], env), flat)
            if name in ("any", "all", "sum") and len(args) == 1:
                values = self.value(args[0], env)
                folds: dict[str, Callable[[Any], Any]] = {"any": any, "all": all, "sum": sum}
                return folds[name](values)
            if name in PURE:
                return _operated(node, pure, name, [self.value(a, env) for a in args])
            return self.follow(name, node, env)
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id == "self" and self.owner is not None:
                method = next((f for f in self.owner.body if isinstance(f, ast.FunctionDef) and f.name == func.attr),
                              None)
                if method is not None and isinstance(env.get("self"), Obj):
                    return self._nested(method, node, env, self.module, this=env["self"])
            owner = self.value(func.value, env)
            kinds = METHODS.get(func.attr) or _MUTATORS.get(func.attr)
            if kinds is not None and isinstance(owner, kinds) and not isinstance(owner, Obj):
                try:
                    return _known(getattr(owner, func.attr)(*[self.value(a, env) for a in args]), ast.unparse(node))
                except (TypeError, ValueError, LookupError):
                    raise _NotKnown(ast.unparse(node)) from None
        raise _NotKnown(ast.unparse(node))

    def follow(self, name: str, node: ast.Call, env: dict[str, Any]) -> Any:
        found = self.code.function(self.module, name, env) if self.depth < MAX_DEPTH else None
        if found is None:
            raise _NotKnown(ast.unparse(node))
        return self._nested(found[0], node, env, found[1])

    def _nested(self, function: ast.FunctionDef, node: ast.Call, env: dict[str, Any], module: _Module,
                this: Obj | None = None) -> Any:
        args = [self.value(a, env) for a in node.args]
        kwargs = {k.arg: self.value(k.value, env) for k in node.keywords if k.arg}
        play = _Play(self.code, module, self.owner if this is not None else None, self.depth + 1)
        value, left = play.call(function, args, kwargs, this)
        if this is not None:  # what a method of the object assigns, the caller reads back
            env.update({k: v for k, v in left.items() if k.startswith("self.")})
        return value


def _known(value: Any, what: str) -> Any:
    if value is _UNSET:
        raise _NotKnown(what)
    return value


def _truth(value: Any) -> bool:
    return truth(value) is True  # an engine object (an Obj) is there


def _operated(node: ast.AST, operation: Callable[..., Any], *operands: Any) -> Any:
    """An operation's value (play.operators), or not known where it is unknown or fails on these values."""
    try:
        value = operation(*operands)
    except Raised:
        raise _NotKnown(ast.unparse(node)) from None
    if isinstance(value, Unknown):
        raise _NotKnown(ast.unparse(node))
    return value


def _exits(stmt: ast.stmt) -> bool:
    """Whether a statement holds a return or a raise of its own (not in a nested definition)."""
    return any(isinstance(n, (ast.Return, ast.Raise)) for n in ast.walk(stmt))


def _holds(stmt: ast.stmt, inner: ast.stmt) -> bool:
    return any(n is inner for n in ast.walk(stmt))


def _assigned(stmt: ast.stmt) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(stmt):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For)) else []
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, (ast.Name, ast.Attribute)) and dotted(sub):
                    names.add(dotted(sub) or "")
    return names


# -- what the release reads of the drafter ----------------------------------------------------------------------------


def _config(ctx: DraftContext) -> Obj:
    """The draft's hf_config as the engine holds it: the drafter config's keys as attributes (EAGLEConfig copies them
    onto itself for dflash and eagle3; DSpark's Qwen3 and Gemma-4 drafts keep their own config)."""
    return Obj(copy.deepcopy(dict(ctx.draft_config)))


def _speculative(ctx: DraftContext, hf_config: Obj) -> Obj:
    return Obj({"draft_model_config": Obj({"hf_config": hf_config, "model": ctx.draft.path,
                                           "architectures": list(ctx.draft_config.get("architectures") or [])}),
                "method": ctx.launch.method, "num_speculative_tokens": ctx.launch.speculative.get(
                    "num_speculative_tokens"), "parallel_drafting": True})


def _played(ctx: DraftContext, fn: EngineFunction, args: Callable[[Obj], tuple[list[Any], Obj | None]]
            ) -> tuple[str, Any, dict[str, Any]]:
    """("returns", value, names left) or ("raises", error, {}) or ("unknown", what, {}) of one function of the release
    played out on the drafter's config."""
    code = _Code(_judge(ctx))
    module = code.module(relpath=fn.file)
    if module is None:
        return "unknown", f"{fn.file} could not be read", {}
    owner = next((c for c in ast.walk(module.tree) if isinstance(c, ast.ClassDef) and any(f is fn.node for f in c.body)),
                 None)
    passed, this = args(_config(ctx))
    try:
        value, left = _Play(code, module, owner).call(fn.node, passed, {}, this)
    except _Raised as raised:
        return "raises", raised.error, {"__raised__": EngineFunction(raised.file, raised.line, fn.name, fn.node, fn.on_path)}
    except _NotKnown as unknown:
        return "unknown", f"{site_of(fn)} reads {unknown}, which the drafter's files do not fix", {}
    except (RecursionError, _Break, _Continue):
        return "unknown", f"{site_of(fn)} could not be played out", {}
    return "returns", value, left


def _judge(ctx: DraftContext) -> Judge:
    assert ctx.judge is not None
    return ctx.judge


# The files of each model runner's code: a reader the traced path does not reach (a base class's __init__, reached
# through super(), which the tracer does not follow) is the one of the runner the launch takes.
RUNNER_FILES = {"v1": ("vllm/v1/spec_decode/*.py", "vllm/v1/worker/gpu_model_runner.py"),
                "v2": ("vllm/v1/worker/gpu/*.py", "vllm/v1/worker/gpu/*/*.py", "vllm/v1/worker/gpu/*/*/*.py")}


def _on_path(ctx: DraftContext, names: tuple[str, ...], files: tuple[str, ...]) -> EngineFunction | None:
    """The first of the release's functions of these names that the launch's path runs: on its traced path, else in
    the code of the model runner it takes (None where that is not decided)."""
    found = _judge(ctx).engine_functions(names, files)
    runner = ctx.judge.runner if ctx.judge is not None else None
    taken = [f for f in found if f.on_path] or \
        [f for f in found if any(fnmatch.fnmatchcase(f.file, g) for g in RUNNER_FILES.get(str(runner), ()))]
    return min(taken, key=lambda f: names.index(f.name)) if taken else None


# The runner's reader of the aux layer ids (vLLM 0.14 on: V1's method, V2's function).
AUX_READERS = ("_get_eagle3_aux_layers_from_config", "get_eagle3_aux_layers_from_config")
AUX_FILES = ("vllm/v1/worker/gpu_model_runner.py", "vllm/v1/worker/gpu/spec_decode/eagle/*.py")
# The reader of the parallel slots' mask token (0.17 on: V1's method; 0.26 on: V2's function).
MASK_READERS = ("_init_parallel_drafting_params", "get_parallel_drafting_token_id")
MASK_FILES = ("vllm/v1/spec_decode/*.py", "vllm/v1/worker/gpu/spec_decode/*.py")
EAGLE_CONFIG = "vllm.transformers_utils.configs.eagle"  # EAGLEConfig: the draft architectures renamed, by method


def runner_aux_layers(ctx: DraftContext) -> tuple[EngineFunction, str, Any] | None:
    """The aux layer ids the runner the launch takes reads from the draft config: (its reader, "returns" with the
    ids or None for the target's defaults, or "unknown" with why). None: the path runs no such reader."""
    reader = _on_path(ctx, AUX_READERS, AUX_FILES)
    if reader is None:
        return None
    method = reader.node.args.args[:1] and reader.node.args.args[0].arg == "self"
    kind, value, _ = _played(ctx, reader, lambda config: (
        ([], Obj({"speculative_config": _speculative(ctx, config)})) if method
        else ([_speculative(ctx, config)], None)))
    return reader, kind, value


def engine_architectures(ctx: DraftContext, method: str) -> list[str]:
    """The drafter's architectures as the release's EAGLEConfig renames them for ``method`` (its comprehension in the
    ``method == "<method>"`` branch, played out on each); as they are where it has none (DSpark)."""
    raw = [str(a) for a in ctx.draft_config.get("architectures") or []]
    code = _Code(_judge(ctx))
    module = code.module(EAGLE_CONFIG)
    branch = next((n for n in ast.walk(module.tree) if isinstance(n, ast.If) and isinstance(n.test, ast.Compare)
                   and isinstance(n.test.comparators[0], ast.Constant) and n.test.comparators[0].value == method),
                  None) if module is not None else None
    comp = next((n for s in branch.body for n in ast.walk(s) if isinstance(n, ast.ListComp)), None) if branch else None
    if module is None or comp is None or len(comp.generators) != 1:
        return raw
    renamed = []
    for arch in raw:
        env: dict[str, Any] = {}
        play = _Play(code, module)
        play.assign(comp.generators[0].target, arch, env)
        try:
            renamed.append(str(play.value(comp.elt, env)))
        except _NotKnown:
            renamed.append(arch)
    return renamed


def _draft_class_modules(ctx: DraftContext, architectures: list[str]) -> tuple[Any, list[_Module]]:
    """The registry's entry for the draft architectures, and the modules of its class's MRO (the fc is built by the
    model class a module beside it defines: qwen3_dflash.py's DFlashQwen3Model for DFlashQwen3ForCausalLM)."""
    judge = _judge(ctx)
    entry = judge.registered(architectures)
    if entry is None:
        return None, []
    code = _Code(judge)
    names = [entry.module, *(module for module, _ in judge.mro(entry.module, entry.class_name))]
    modules = [m for m in (code.module(n) for n in dict.fromkeys(names)) if m is not None]
    return entry, modules


def release_fc_width(ctx: DraftContext, architectures: list[str]) -> tuple[int | None, str, EngineFunction | None]:
    """The input width of the fc the release builds for this drafter: the first function in the modules of the draft
    class's MRO that assigns ``self.fc = <Linear>(input_size, ...)``, played out to that statement on the drafter's
    config (the draft class reads it as ``vllm_config.speculative_config.draft_model_config.hf_config``). None where
    the release builds no fc for it (``use_aux_hidden_state`` false), with why."""
    entry, modules = _draft_class_modules(ctx, architectures)
    if entry is None:
        return None, f"the release registers no class for {architectures}: which fc it builds is not known", None
    for module in modules:
        for function in (n for n in ast.walk(module.tree) if isinstance(n, ast.FunctionDef)):
            built = next((s for s in ast.walk(function) if isinstance(s, ast.Assign) and len(s.targets) == 1
                          and dotted(s.targets[0]) == "self.fc" and isinstance(s.value, ast.Call)), None)
            if built is None:
                continue
            call = built.value
            assert isinstance(call, ast.Call)
            width = call.args[0] if call.args else next((k.value for k in call.keywords
                                                         if k.arg in ("input_size", "in_features")), None)
            where = EngineFunction(module.relpath, built.lineno, function.name, function)
            if width is None:
                return None, f"{site_of(where)} builds fc with no input size specaudit can read", where
            code = _Code(_judge(ctx))
            owner = next((c for c in ast.walk(module.tree) if isinstance(c, ast.ClassDef) and function in c.body), None)
            play = _Play(code, module, owner, stop=built, stop_value=width)
            config = _config(ctx)
            vllm_config = Obj({"speculative_config": _speculative(ctx, config), "model_config": Obj({})})
            text = " ".join(ast.unparse(width).split())
            try:
                value, _ = play.call(function, [], {"vllm_config": vllm_config, "config": config, "prefix": "",
                                                    "start_layer_id": 0}, Obj({}))
            except _Raised as raised:
                return None, f"{site_of(where)}: the release raises before it builds fc ({raised.error})", where
            except (_NotKnown, RecursionError, _Break, _Continue) as unknown:
                return None, f"{site_of(where)} builds fc with {text} inputs, which reads {unknown or 'what'} the " \
                    "drafter's files do not fix", where
            if isinstance(value, int) and not isinstance(value, bool):
                return value, f"{text} = {value} ({site_of(where)}, on the drafter config)", where
            return None, f"{site_of(where)} builds no fc for this drafter config (the branch that builds it is not " \
                "taken: use_aux_hidden_state false)", where
    return None, f"{entry.module} (the drafter's module) builds no self.fc specaudit can find", None


def _architectures(ctx: DraftContext) -> list[str]:
    """The draft's architectures as the release names them before it builds the draft: EAGLEConfig's renaming
    (dflash, eagle3), or __post_init__'s Qwen3 DSpark conversion (0.33)."""
    method = ctx.launch.method or ""
    if method in ("dflash", "eagle3"):
        return engine_architectures(ctx, method)
    raw = [str(a) for a in ctx.draft_config.get("architectures") or []]
    if method == "dspark" and "DSparkDraftModel" in raw and ctx.draft_config.get("model_type") == "qwen3":
        rewrite = _dspark_rewrite(ctx)
        if rewrite is not None and _converts_qwen3_dspark(rewrite):
            return ["Qwen3DSparkModel"]
    return raw


def _dspark_rewrite(ctx: DraftContext) -> EngineFunction | None:
    """Where __post_init__ rewrites a DSpark draft into DeepSeek-V4's ``DSparkDraftModel`` (0.26 on)."""
    for fn in _judge(ctx).engine_functions(("__post_init__",), ("vllm/config/speculative.py",)):
        found = next((EngineFunction(fn.file, n.lineno, fn.name, fn.node) for n in ast.walk(fn.node)
                      if isinstance(n, ast.Assign) and any(isinstance(c, ast.Constant) and c.value == "DSparkDraftModel"
                                                           for c in ast.walk(n.value))), None)
        if found is not None:
            return found
    return None


# -- the checks ------------------------------------------------------------------------------------------------------


@check("dflash_fc_input_width")
def check_dflash_fc_input_width(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The checkpoint's fc.weight against the fc the release builds for the drafter: another width fails the weight
    load (ReplicatedLinear.weight_loader's assert)."""
    if ctx.judge is None:
        return None
    fc = ctx.draft.tensor("fc.weight")
    if fc is None:
        return unread_finding(rule, ctx, "the width of fc.weight")
    built, how, where = release_fc_width(ctx, _architectures(ctx))
    evidence = f"{fc.describe()}; {how}"
    if built is None:
        if where is not None and "builds no fc" in how:
            return engine_finding(rule, ctx, Status.PASSES, f"{how}: the checkpoint's fc.* is not loaded", evidence,
                                   where)
        return draft_finding(rule, ctx, Status.UNKNOWN, how, evidence, fc.file)
    if len(fc.shape) != 2 or fc.shape[1] != built:
        size = f"torch.Size([{fc.shape[0]}, {built}])"
        return draft_finding(rule, ctx, Status.BLOCKS,
                             f"the release builds fc with {how.split(' (')[0]} inputs, the checkpoint's fc.weight has "
                             f"{fc.shape[-1]}", evidence, fc.file,
                             f"AssertionError: Tried to load weights of size torch.Size({list(fc.shape)})to a "
                             f"parameter of size {size}")
    return draft_finding(rule, ctx, Status.PASSES, f"fc.weight has the {built} inputs the release builds", evidence,
                         fc.file)


@check("dflash_target_layers")
def check_dflash_target_layers(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The target layers the runner hands the drafter (its reader played out on the drafter config; none: the target
    class's default layers) against the target's layers and the fc they fill. The target keeps one hidden state per
    distinct id from 0 (before its first layer) to L (after its last): vLLM 0.18 on collects after each layer (``idx +
    1``). Fewer states than fc takes fail the drafter's first forward."""
    if ctx.judge is None:
        return None
    read = runner_aux_layers(ctx)
    layers, hidden = ctx.target_text.get("num_hidden_layers"), ctx.target_text.get("hidden_size")
    if read is None or not isinstance(layers, int) or not isinstance(hidden, int):
        return None
    reader, kind, ids = read
    defaulted = not ids
    if kind != "returns":
        return engine_finding(rule, ctx, Status.UNKNOWN, f"which target layers the runner hands the drafter is not "
                               f"known: {ids}", f"{site_of(reader)}", reader)
    declared = _declared_layer_ids(ctx.draft_config)
    source = f"{site_of(reader)} reads {list(ids)}" + (f" from {declared}" if declared else "") if ids else \
        f"{site_of(reader)} reads no layer ids from the drafter config"
    if not ids:
        default = _judge(ctx).target_method("get_eagle3_default_aux_hidden_state_layers")
        ids = _default_layers(ctx, default, layers) if default is not None else None
        if ids is None or default is None:
            return engine_finding(rule, ctx, Status.UNKNOWN, f"{source}, and the target's default layers could not "
                                   "be read", source, reader)
        source += f"; the target's default layers {list(ids)} ({site_of(default)}) are captured instead"
    built, how, where = release_fc_width(ctx, _architectures(ctx))
    fc = ctx.draft.tensor("fc.weight")
    if built is None and where is not None and "builds no fc" in how:
        return None  # the draft takes the states as they come: no fc for them to fill
    width = built or (fc.shape[-1] if fc is not None else None)
    if width is None:
        return None  # no fc here to hold them against
    kept = sorted({i for i in ids if isinstance(i, int) and 0 <= i <= layers})
    given = len(kept) * hidden
    evidence = f"{source}; target num_hidden_layers = {layers}, hidden_size = {hidden}; fc takes {width} inputs" + \
        (f" ({how.split(' (')[0]})" if built else "")
    if given == width:
        return engine_finding(rule, ctx, Status.PASSES, f"the target keeps {len(kept)} hidden states (layers {kept}) "
                               f"of width {hidden}: the {width} inputs of fc", evidence, reader)
    lost = []
    if len(set(ids)) < len(ids):
        lost.append(f"ids repeat ({list(ids)}): the target keeps each layer once")
    outside = sorted({i for i in ids if not (isinstance(i, int) and 0 <= i <= layers)})
    if outside:
        lost.append(f"ids {outside} are outside the target's {layers} layers (it keeps 0, its input, to {layers}, "
                    f"its last layer's output): never kept")
    error = _combine_error(ctx, width, given) or \
        f"RuntimeError: mat1 and mat2 shapes cannot be multiplied (tokens x {given} and {width} x " \
        f"{ctx.draft_config.get('hidden_size')})"
    if defaulted:
        lost.append("the drafter config names no layer ids this release reads, so the target's default layers are "
                    "captured")
    return engine_finding(rule, ctx, Status.BLOCKS, f"the target hands the drafter {len(kept)} hidden states (layers "
                           f"{kept}) of width {hidden} = {given} inputs, fc takes {width}"
                           + (f"; {'; '.join(lost)}" if lost else ""), evidence, reader, error)


def _default_layers(ctx: DraftContext, default: EngineFunction, layers: int) -> list[int] | None:
    """The layers the target class's ``get_eagle3_default_aux_hidden_state_layers`` returns, played out on a model of
    ``layers`` decoder layers (``len(self.model.layers)``)."""
    code = _Code(_judge(ctx))
    module = code.module(relpath=default.file)
    if module is None:
        return None
    owner = next((c for c in ast.walk(module.tree) if isinstance(c, ast.ClassDef) and default.node in c.body), None)
    model = Obj({"model": Obj({"layers": [None] * layers}), "config": Obj(dict(ctx.target_text))})
    try:
        value, _ = _Play(code, module, owner).call(default.node, [], {}, model)
    except (_NotKnown, _Raised, _Break, _Continue, RecursionError):
        return None
    return list(value) if isinstance(value, (list, tuple)) and all(isinstance(i, int) for i in value) else None


def _declared_layer_ids(config: dict) -> str:
    for where in (("eagle_aux_hidden_state_layer_ids",), ("dflash_config", "target_layer_ids"),
                  ("dspark_target_layer_ids",), ("target_layer_ids",)):
        value: Any = config
        for key in where:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, list):
            return f"{'.'.join(where)} = {value}"
    return ""


def _combine_error(ctx: DraftContext, width: int, given: int) -> str | None:
    """The draft class's own check of the aux states it is handed (0.26 on: combine_hidden_states raises ``DFlash
    drafter expects ... concatenated aux hidden features``), rendered for this launch."""
    _, modules = _draft_class_modules(ctx, _architectures(ctx))
    for module in modules:
        for function in (n for n in ast.walk(module.tree) if isinstance(n, ast.FunctionDef)
                         and n.name == "combine_hidden_states"):
            for raised in (n for n in ast.walk(function) if isinstance(n, ast.Raise)):
                play = _Play(_Code(_judge(ctx)), module)
                env = {"expected": width, "hidden_states.shape[-1]": given}
                message = play.error(raised.exc, env)
                shape = next((n for n in ast.walk(raised) if isinstance(n, ast.Subscript)
                              and dotted(n.value) == "hidden_states.shape"), None)
                if shape is not None:
                    message = message.replace("{" + ast.unparse(shape) + "}", str(given))
                return message
    return None


@check("parallel_drafting_token")
def check_parallel_drafting_token(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The token the parallel slots are fed (DFlash and DSpark always draft in parallel; EAGLE-3 under
    ``parallel_drafting``, P-EAGLE): the release's reader on the launch's path, played out on the drafter config,
    raises where none of the keys it accepts is there; an id past the draft's vocabulary indexes out of its
    embedding at the first draft."""
    if ctx.judge is None or not _parallel(ctx):
        return None
    reader = _on_path(ctx, MASK_READERS, MASK_FILES)
    if reader is None:
        return None
    method = reader.node.args.args[:1] and reader.node.args.args[0].arg == "self"
    kind, value, left = _played(ctx, reader, lambda config: (
        ([], Obj({"draft_model_config": Obj({"hf_config": config})})) if method else ([config], None)))
    if method and kind == "returns":
        value = left.get("self.parallel_drafting_token_id", _UNSET)
        kind, value = ("returns", value) if value is not _UNSET else ("unknown", f"{site_of(reader)} sets no token")
    evidence = f"{site_of(reader)} reads the mask token of the drafter config"
    if kind == "raises":
        return engine_finding(rule, ctx, Status.BLOCKS, "the drafter config names the parallel slots' token under none "
                               f"of the keys {site_of(reader)} accepts", evidence, left.get("__raised__", reader),
                               str(value))
    if kind != "returns" or not isinstance(value, int) or isinstance(value, bool):
        return engine_finding(rule, ctx, Status.UNKNOWN, f"the mask token is not known: {value}", evidence, reader)
    vocab = ctx.draft_config.get("vocab_size") or ctx.target_text.get("vocab_size")
    evidence += f": {value}; vocab_size = {vocab}"
    if isinstance(vocab, int) and not 0 <= value < vocab:
        return engine_finding(rule, ctx, Status.BLOCKS, f"the mask token {value} is outside the draft's vocabulary "
                               f"(0 to {vocab - 1}): its embedding lookup indexes past the table at the first draft",
                               evidence, reader, "IndexError: index out of range in self (on CUDA: device-side assert "
                               "triggered)")
    return engine_finding(rule, ctx, Status.PASSES, f"the parallel slots are fed token {value}, inside the draft's "
                           "vocabulary", evidence, reader)


def _parallel(ctx: DraftContext) -> bool:
    """Whether the launch drafts in parallel: DFlash and DSpark always (SpeculativeConfig.__post_init__ sets
    parallel_drafting), another method where its speculative config says so (P-EAGLE: eagle3)."""
    return ctx.launch.method in ("dflash", "dspark") or bool(ctx.launch.speculative.get("parallel_drafting"))


@check("parallel_mask_hidden")
def check_parallel_mask_hidden(rule: Rule, ctx: DraftContext) -> Finding | None:
    """P-EAGLE: an EAGLE-3 head launched with ``parallel_drafting`` loads a ``mask_hidden`` tensor (the hidden state of
    the masked slots, fc's width) where its draft class requires one: its load_weights raises without it (vLLM 0.17
    on: llama_eagle3.py, qwen3_eagle3.py)."""
    if ctx.judge is None or not _parallel(ctx) or ctx.launch.method not in ("eagle", "eagle3"):
        return None
    _, modules = _draft_class_modules(ctx, _architectures(ctx))
    requirement = None
    for module in modules[:1]:
        for function in (n for n in ast.walk(module.tree) if isinstance(n, ast.FunctionDef) and n.name == "load_weights"):
            raised = next((n for n in ast.walk(function) if isinstance(n, ast.Raise)
                           and "mask_hidden" in ast.unparse(n)), None)
            if raised is not None:
                requirement = (EngineFunction(module.relpath, raised.lineno, function.name, function),
                               _Play(_Code(_judge(ctx)), module).error(raised.exc, {}))
                break
    if requirement is None:
        return None  # this release's draft class loads no mask_hidden
    where, error = requirement
    tensor = next((t for name, t in ctx.draft.tensors.items() if name.rsplit(".", 1)[-1] == "mask_hidden"), None)
    if tensor is None:
        found = unread_finding(rule, ctx, "the mask_hidden tensor")
        return found or engine_finding(rule, ctx, Status.BLOCKS, "the launch drafts in parallel and the drafter's "
                                       f"weights hold no mask_hidden, which {site_of(where)} requires",
                                       f"no mask_hidden among the drafter's {len(ctx.draft.tensors)} tensors", where,
                                       error)
    width, how = ctx.fc_inputs()
    evidence = f"{tensor.describe()}; fc takes {how}"
    if isinstance(width, int) and tensor.numel != width:
        return draft_finding(rule, ctx, Status.BLOCKS, f"mask_hidden has {tensor.numel} values, the draft class holds "
                             f"it as fc's {width} inputs", evidence, tensor.file,
                             f"RuntimeError: shape '[1, -1]' copied into a buffer of size [1, {width}]")
    return draft_finding(rule, ctx, Status.PASSES, "the drafter ships the mask_hidden the parallel slots take",
                         evidence, tensor.file)


@check("dspark_draft", launch_only=True)
def check_dspark_draft(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The draft a DSpark launch builds (SpeculativeConfig.__post_init__, 0.26 on). Naming no drafter, the release takes
    the target's own checkpoint as the draft and, where its architecture is none of the standalone DSpark drafts it
    keeps (Qwen3DSparkModel, Gemma4DSparkModel...), rewrites the draft's config into DeepSeek-V4's ``DSparkDraftModel``,
    whose DSpark stages it loads from the target's weights: only a DeepSeek-V4 checkpoint ships them, and specaudit
    reads none of them. A drafter whose config.json is not here, or of an architecture the release rewrites the same
    way, is not known either. Never READY on what is not read."""
    if ctx.judge is None or ctx.launch.method != "dspark":
        return None
    rewrite = _dspark_rewrite(ctx)
    if rewrite is None:
        return None
    named = ctx.launch.named_draft
    evidence = f"{site_of(rewrite)} rewrites the draft into DeepSeek-V4's DSparkDraftModel"
    if not named:
        target = ctx.launch.target
        kind = (target.text_model_type if target is not None else None) or "?"
        return engine_finding(rule, ctx, Status.UNKNOWN,
                              f"the launch names no drafter: the release drafts with the target's own checkpoint, its "
                              f"config rewritten into DeepSeek-V4's DSparkDraftModel ({site_of(rewrite)}), and loads "
                              f"its DSpark stages from the target's weights, which specaudit does not read (the "
                              f"target's model type is {kind}; only DeepSeek-V4 checkpoints ship DSpark stages)",
                              f"{evidence}; speculative config without a model", rewrite)
    if not ctx.draft.config:
        return engine_finding(rule, ctx, Status.UNKNOWN, f"the drafter's config.json ({named}) is not here: which DSpark "
                              "draft the release builds, and what it reads of it, cannot be told (--draft DIR, or a "
                              "Hub id in the Hub cache)", evidence, rewrite)
    architectures = [str(a) for a in ctx.draft_config.get("architectures") or []]
    entry = _judge(ctx).registered(architectures)
    if entry is not None and "DSpark" in entry.class_name and entry.architecture != "DSparkDraftModel":
        return draft_finding(rule, ctx, Status.PASSES, f"{entry.architecture} is a standalone DSpark draft the release "
                             f"builds as {entry.module}.{entry.class_name}", f"architectures {architectures}")
    if "DSparkDraftModel" in architectures and ctx.draft_config.get("model_type") == "qwen3" and \
            _converts_qwen3_dspark(rewrite):
        return draft_finding(rule, ctx, Status.PASSES, f"a DSparkDraftModel of model type qwen3 is built as "
                             f"Qwen3DSparkModel ({site_of(rewrite)} converts it first)", f"architectures {architectures}")
    return engine_finding(rule, ctx, Status.UNKNOWN,
                          f"the drafter's architectures {architectures} are none of the standalone DSpark drafts this "
                          f"release keeps: it rewrites the draft into DeepSeek-V4's DSparkDraftModel "
                          f"({site_of(rewrite)}), whose stages specaudit does not check",
                          f"{evidence}; architectures {architectures}", rewrite)


def _converts_qwen3_dspark(rewrite: EngineFunction) -> bool:
    """Whether __post_init__ builds a ``DSparkDraftModel`` of model type qwen3 as ``Qwen3DSparkModel`` (vLLM 0.33: an
    ``if`` that tests both and assigns ["Qwen3DSparkModel"] to the draft's architectures)."""
    for node in ast.walk(rewrite.node):
        if isinstance(node, ast.If):
            test = ast.unparse(node.test)
            if "'DSparkDraftModel'" in test and "'qwen3'" in test and any(
                    isinstance(c, ast.Constant) and c.value == "Qwen3DSparkModel"
                    for stmt in node.body if isinstance(stmt, ast.Assign) for c in ast.walk(stmt.value)):
                return True
    return False
