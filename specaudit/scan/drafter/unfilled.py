"""Parameters a drafter builds because its config asks for them and that no tensor of its checkpoint fills, where the
release's loader does not check what was loaded (issue 39).

vLLM's EAGLE heads build their layers from the drafter's config: llama.py's ``LlamaDecoderLayer.__init__`` reads
``attention_bias`` or ``bias`` (0.33.0 llama.py:268) and hands it to the attention, whose ``QKVParallelLinear`` and
``RowParallelLinear`` then hold a bias ``Parameter(torch.empty(...))`` (layers/linear.py, under ``if bias:``). A head
trained without biases ships no tensor for them. The model loader checks that every parameter was loaded
(DefaultModelLoader.load_weights: "Following weights were not initialized from checkpoint") only where the model's
``load_weights`` returns the names it loaded, and the EAGLE heads' ``load_weights`` returns nothing: the biases keep
whatever memory ``torch.empty`` was given.

All of it is read or played from the release: the modules the drafter class builds are walked as contract.Built walks
them, but with the values each ``__init__`` is called with (its caller's arguments, played on the drafter's config up
to the call that builds the module); a layer's optional parameters are those its ``__init__`` chain creates under
``if <its parameter>:``; a parameter is filled where a tensor the loader is handed names it, after the renames the
release's modules declare (``orig_to_new_stacked``, ``orig_to_new_substr``); the key that builds it is the one whose
removal from the config leaves it unbuilt; and whether the loader checks is DefaultModelLoader.load_weights played with
the drafter's ``load_weights`` returning what it returns.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import Any

from ...play.modules import ModuleScope, literal
from ...play.player import Coverage, LiteralScope, call, dotted
from ...play.values import CLASS, UNKNOWN
from ..judge import Judge
from . import classes as c

Path = tuple[str, ...]


@dataclass(frozen=True)
class OptionalParameter:
    """A parameter a layer of the drafter holds only where an argument of its construction says so."""

    path: Path  # model.layers.*.self_attn.o_proj.bias ("*": each layer of a ModuleList)
    built: Any  # the argument's value for this config: True / False / UNKNOWN
    where: str  # the layer's statement that creates it ("layers/linear.py:1757")
    empty: bool  # created from torch.empty: holds what memory held until a tensor is loaded into it


# -- what a layer may hold ------------------------------------------------------------------------------------------

def _guards(judge: Judge, layer: ModuleScope) -> dict[str, tuple[str, str, bool]]:
    """The parameters a layer class creates only under ``if <p>:``, ``p`` a parameter of the ``__init__`` it is called
    with (ColumnParallelLinear: ``if bias: self.bias = Parameter(torch.empty(...))``): p -> (the parameter's name,
    where it is created, whether from torch.empty)."""
    chain = c.initialised(judge, layer)
    if not chain:
        return {}
    first = chain[0][1].args
    names = {a.arg for a in [*first.args, *first.kwonlyargs]}
    guards: dict[str, tuple[str, str, bool]] = {}
    for owner, init in chain:
        for node in ast.walk(init):
            if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id in names):
                continue
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call) \
                        and (dotted(stmt.value.func) or "").rsplit(".", 1)[-1] == "Parameter" \
                        and (dotted(stmt.targets[0]) or "").count(".") == 1 \
                        and (dotted(stmt.targets[0]) or "").startswith("self."):
                    empty = any(isinstance(n, ast.Call) and dotted(n.func) == "torch.empty" for n in ast.walk(stmt.value))
                    guards.setdefault(node.test.id, ((dotted(stmt.targets[0]) or "").split(".")[1],
                                                     f"{owner.where}:{stmt.lineno}", empty))
    return guards


# -- the modules the drafter builds, with the values they are built with --------------------------------------------

def _arguments(call_node: ast.Call, callee: ast.FunctionDef) -> list[tuple[str, ast.expr]]:
    """The call's arguments by the callee's parameter names (positional ones after ``self``)."""
    params = [a.arg for a in callee.args.args[1:]]
    named = [(params[i], a) for i, a in enumerate(call_node.args) if i < len(params) and not isinstance(a, ast.Starred)]
    return named + [(k.arg, k.value) for k in call_node.keywords if k.arg is not None]


def _values(init: ast.FunctionDef, owner: ModuleScope, config: dict, given: dict[str, Any], stmt: ast.stmt,
            wanted: list[tuple[str, ast.expr]]) -> dict[str, Any]:
    """The values the ``wanted`` expressions have where ``stmt`` runs, the ``__init__`` played on the config with the
    values it was called with; UNKNOWN where the ways disagree or it is not reached."""
    if not wanted:
        return {}
    params = {a.arg for a in [*init.args.args, *init.args.kwonlyargs]}
    named = {k: v for k, v in given.items() if k in params}
    if "config" in params and not isinstance(named.get("config"), dict):
        named["config"] = config
    config = copy.deepcopy(config)  # a play may write to it (vLLM: self.config.draft_vocab_size = ...)
    # A config handed down from the caller's play is the drafter's: this play reads its own copy.
    named = {k: config if isinstance(v, dict) and v.get("architectures") == config.get("architectures") else v
             for k, v in named.items()}
    fields: dict[str, Any] = {f"self.{t.attr}": UNKNOWN for node in ast.walk(init) if isinstance(node, ast.Assign)
                              for t in node.targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                              and t.value.id == "self"}
    probe = ast.Dict([ast.Constant(k) for k, _ in wanted], [e for _, e in wanted])  # a list would fold to UNKNOWN
    try:
        outcomes, _ = call(init, LiteralScope(where=owner.where), [], named,
                           fields={**fields, **c.config_of(init, config)}, stop=(stmt, probe))
    except (ValueError, RecursionError):
        return {k: UNKNOWN for k, _ in wanted}
    ends = [o.method for o in outcomes if o.raises is None and isinstance(o.method, dict)]
    return {k: ends[0].get(k, UNKNOWN) if ends and all(e.get(k) == ends[0].get(k) for e in ends) else UNKNOWN
            for k, _ in wanted}


def _callee(judge: Judge, owner: ModuleScope, init: ast.FunctionDef, node: ast.Call, given: dict[str, Any]
            ) -> ModuleScope | None:
    """The class a call builds: a name of the module, or a parameter of the ``__init__`` holding a class (its
    default where the caller passes none: llama.py's ``attn_layer_type=LlamaAttention``)."""
    called = dotted(node.func) or ""
    if "." in called or not called:
        return None
    args = init.args
    defaults = dict(zip([a.arg for a in args.args][len(args.args) - len(args.defaults):], args.defaults)) | {
        a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
    if called in defaults or called in given:
        chosen = given.get(called)
        if isinstance(chosen, str):
            return c.named(judge, owner, chosen)
        if called in given:
            return None  # handed a value not read here (a class is handed on by its name: _walk)
        default = defaults.get(called)
        return c.named(judge, owner, default.id) if isinstance(default, ast.Name) else None
    return c.named(judge, owner, called)


def optional_parameters(judge: Judge, found: ModuleScope, config: dict,
                        modules: dict[str, ast.Module] | None = None) -> dict[Path, OptionalParameter]:
    """Every optional parameter (_guards) of the layers the drafter class builds, with whether this config builds it:
    the ``__init__``s walked base first (a subclass's ``self.self_attn.qkv_proj = ...`` replaces its base's).
    ``modules``: filled with the syntax trees of the model modules walked, by file."""
    out: dict[Path, OptionalParameter] = {}
    _walk(judge, found, config, (), {}, 0, out, {} if modules is None else modules)
    return out


def _walk(judge: Judge, found: ModuleScope, config: dict, prefix: Path, given: dict[str, Any], depth: int,
          out: dict[Path, OptionalParameter], modules: dict[str, ast.Module]) -> None:
    if depth > c.MAX_DEPTH:
        return
    modules.setdefault(found.where, found.tree)
    for owner, init in reversed(c.initialised(judge, found)):
        statements = sorted((s for s in ast.walk(init) if isinstance(s, ast.Assign) and len(s.targets) == 1
                             and isinstance(s.value, ast.Call)), key=lambda s: s.lineno)
        for stmt in statements:
            path = dotted(stmt.targets[0]) or ""
            if not path.startswith("self."):
                continue
            at = prefix + tuple(path.split(".")[1:])
            built = stmt.value
            assert isinstance(built, ast.Call)
            if (dotted(built.func) or "").rsplit(".", 1)[-1] in ("ModuleList", "Sequential"):
                items = built.args[0] if built.args else None
                element = items.elt if isinstance(items, ast.ListComp) else None
                if not isinstance(element, ast.Call):
                    continue
                built, at = element, at + ("*",)
            cls = _callee(judge, owner, init, built, given)
            chain = c.initialised(judge, cls) if cls is not None else []
            if cls is None or not chain:
                continue
            for name in [p for p in out if p[:len(at)] == at]:
                del out[name]  # rebuilt here: what an earlier statement (a base's __init__) built there is gone
            arguments = _arguments(built, chain[0][1])
            if "/models/" in cls.where:
                wanted = [(k, e) for k, e in arguments if literal(e) is UNKNOWN or isinstance(e, ast.Name)]
                values = _values(init, owner, config, given, stmt, wanted)
                passed = {k: literal(e) for k, e in arguments if (k, e) not in wanted}
                passed |= {k: e.id for k, e in wanted if isinstance(e, ast.Name) and values.get(k) is UNKNOWN
                           and c.named(judge, owner, e.id) is not None}  # a class handed on by name
                _walk(judge, cls, config, at, {**values, **passed}, depth + 1, out, modules)
                continue
            guards = _guards(judge, cls)
            wanted = [(k, e) for k, e in arguments if k in guards]
            values = _values(init, owner, config, given, stmt, [(k, e) for k, e in wanted if literal(e) is UNKNOWN])
            for k, e in wanted:
                parameter, where, empty = guards[k]
                value = values.get(k, literal(e))
                out[at + (parameter,)] = OptionalParameter(at + (parameter,), value, where, empty)


# -- what fills them ---------------------------------------------------------------------------------------------------

def renames(tree: ast.Module) -> list[tuple[str, str]]:
    """The renames the drafter's module declares for the names its loaders are handed (vLLM's
    ``WeightsMapper(orig_to_new_substr={"midlayer.": "layers.0."}, orig_to_new_stacked={".q_proj": (".qkv_proj",
    "q"), ...})`` and ``stacked_params_mapping = [(".qkv_proj", ".q_proj", "q"), ...]``): (from, to)."""
    pairs: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("orig_to_new_stacked", "orig_to_new_substr") \
                and isinstance(node.value, ast.Dict):
            for key, value in zip(node.value.keys, node.value.values):
                new = value.elts[0] if isinstance(value, ast.Tuple) and value.elts else value
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(new, ast.Constant) \
                        and isinstance(new.value, str):
                    pairs.append((key.value, new.value))
        if isinstance(node, ast.Assign) and any(dotted(t) == "stacked_params_mapping" for t in node.targets) \
                and isinstance(node.value, (ast.List, ast.Tuple)):
            for item in node.value.elts:
                if isinstance(item, ast.Tuple) and len(item.elts) >= 2 and all(
                        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in item.elts[:2]):
                    pairs.append((str(literal(item.elts[1])), str(literal(item.elts[0]))))
    return pairs


def fills(path: Path, names: list[str], pairs: list[tuple[str, str]]) -> bool:
    """Whether a name the loader is handed, as the release renames it, is the parameter at ``path``."""
    for name in names:
        variants = {name}
        for old, new in pairs:
            variants |= {v.replace(old, new) for v in variants if old in v}
        for variant in variants:
            parts = variant.split(".")
            if len(parts) == len(path) and all(p == q or q == "*" and p.isdigit() for p, q in zip(parts, path)):
                return True
    return False


# -- does the loader check --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Unchecked:
    """The model loader's check of what was loaded, and that the drafter's load_weights never lets it run."""

    gate: str  # "file:line" of the statement that reads what load_weights returned (`... loaded_weights is not None`)
    raises: str  # "file:line" of the check's raise
    function: str  # the loader's method ("DefaultModelLoader.load_weights")
    returned: str  # what the drafter's load_weights returns, in words


def _returns_nothing(load: ast.FunctionDef) -> bool:
    """Whether every way out of the function returns None: no ``return <value>`` of its own (a nested function's
    are not its)."""
    def own(node: ast.AST) -> list[ast.AST]:
        found = []
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            found += [child, *own(child)]
        return found
    return not any(isinstance(n, ast.Return) and n.value is not None and literal(n.value) is not None
                   or isinstance(n, ast.Yield) for n in own(load))


def unchecked(judge: Judge, loader: str, load: ast.FunctionDef) -> Unchecked | None:
    """Where the release's model loader (``loader``: "module:Class", the rule's data) checks that every parameter was
    loaded, and that it does not for this drafter: its ``load_weights`` played with the model's ``load_weights``
    returning None (what the drafter's returns: _returns_nothing) reaches no raise that it reaches where the model's
    returns the names it loaded. None where the drafter's returns something, or the play does not show it."""
    if not _returns_nothing(load):
        return None
    module, _, name = loader.partition(":")
    found = c.class_named(judge, module, name)
    method = c.method(judge, found, "load_weights") if found is not None else None
    if found is None or method is None:
        return None
    owner, function = method
    model = function.args.args[1].arg if len(function.args.args) > 1 else None
    result = next((s for s in function.body if isinstance(s, ast.Assign) and len(s.targets) == 1
                   and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Call)
                   and dotted(s.value.func) == f"{model}.load_weights"), None)
    if result is None:
        return None
    assert isinstance(result.targets[0], ast.Name)
    returned = result.targets[0].id
    gate = next((s for s in function.body if s.lineno > result.lineno and any(
        isinstance(n, ast.Compare) and isinstance(n.left, ast.Name) and n.left.id == returned
        and any(isinstance(o, ast.IsNot) for o in n.ops) for n in ast.walk(s))), None)
    if gate is None:
        return None

    # The method from the statement after the call on, played with what the call returned (the statements before
    # it prepare the weights and read nothing of it).
    names = [a.arg for a in function.args.args]
    tail = ast.parse(f"def tail({', '.join([*names, returned])}):\n    pass").body[0]
    assert isinstance(tail, ast.FunctionDef)
    tail.body = function.body[function.body.index(result) + 1:]

    def raised(value: Any) -> set[int]:
        try:
            outcomes, _ = call(tail, owner, [UNKNOWN] * (len(names) - 1) + [value], {},
                               fields={"self": {CLASS: name}}, coverage=Coverage(), forks_every=True)
        except (ValueError, RecursionError):
            return {-1}
        return {int(o.raises.split(":", 1)[0]) for o in outcomes if o.raises is not None and o.raises[:1].isdigit()}

    checks = raised(UNKNOWN) - raised(None)  # the lines that raise only where load_weights returns its names
    if not checks or -1 in checks:
        return None
    line = min(checks)
    callee = next((n for n in ast.walk(function) if isinstance(n, ast.Call) and n.lineno == line
                   and (dotted(n.func) or "").startswith("self.")), None)
    target = c.method(judge, found, (dotted(callee.func) or "").split(".")[1]) if callee is not None else None
    raise_at = next((n.lineno for n in ast.walk(target[1]) if isinstance(n, ast.Raise)), line) if target else line
    where = owner.where if target is None else target[0].where
    return Unchecked(f"{owner.where}:{gate.lineno}", f"{where}:{raise_at}", f"{name}.load_weights",
                     "None (no return statement)")


# -- the keys that build them ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Unfilled:
    key: str
    value: Any
    read_at: str  # "file:line" of the read of the key that decides it
    parameters: list[OptionalParameter]


def _read_line(inits: list[tuple[str, ast.FunctionDef]], key: str) -> str:
    for file, init in inits:
        for node in ast.walk(init):
            if isinstance(node, ast.Call) and dotted(node.func) in ("getattr", "hasattr") and len(node.args) >= 2 \
                    and literal(node.args[1]) == key or isinstance(node, ast.Attribute) and node.attr == key \
                    and "config" in (dotted(node.value) or ""):
                return f"{file}:{node.lineno}"
    return ""


def unfilled(judge: Judge, found: ModuleScope, config: dict, keys: list[str], names: list[str],
             inits: list[tuple[str, ast.FunctionDef]]) -> list[Unfilled]:
    """The declared ``keys`` (read by the ``__init__``s that build the drafter) each of which makes the drafter build
    a parameter from torch.empty that no name in ``names`` (the loader's, as load_weights hands them) fills."""
    modules: dict[str, ast.Module] = {}
    built = optional_parameters(judge, found, config, modules)
    pairs = [p for tree in modules.values() for p in renames(tree)]
    empty = {p: o for p, o in built.items() if o.built is True and o.empty and not fills(p, names, pairs)}
    if not empty:
        return []
    found_keys = []
    for key in keys:
        if key not in config:
            continue
        without = optional_parameters(judge, found, {k: v for k, v in config.items() if k != key})
        made = [o for p, o in empty.items() if without.get(p) is None or without[p].built is False]
        if made:
            found_keys.append(Unfilled(key, config[key], _read_line(inits, key), made))
    return found_keys
