"""The drafter's whole contract: every tensor of its checkpoint and every head key of its config accounted for by the
release's own drafter class. A tensor is loaded (into which parameter, at which line of ``load_weights``), skipped
(the line that skips it), dropped (no statement of ``load_weights`` takes it, or the loader's name map drops it), or
loaded and then replaced by the target's; a key is read (by which function), defaulted, or ignored.

``load_weights`` is played per tensor by the one player (play.player), on a copy of its loop over the weights in which
every statement the tensor flows into ends the way with its line, and every ``continue`` of the loop with its own:
the names the way leaves say where the tensor went. SGLang's ``params_dict`` (the model's parameters) is answered by
the modules the drafter class builds (``self.x = Layer(...)`` in the ``__init__``s of its classes, those the
drafter's own module defines played on its config.json, so that a module its config does not ask for is not built);
vLLM's post-loop name map (``orig_to_new_substr[<part>] = None`` under ``if not self.model.<flag>``) drops what its
flag, played on the config from the model class's ``__init__``, turns off.

vLLM's EAGLE-1 heads (llama_eagle.py and its kin) have no such loop: ``load_weights`` renames each pair by a function
it defines (``transform``) and hands ``map(transform, weights)`` to the loader. That function is played per tensor: a
tensor is loaded under the name it returns, at the line that hands the pairs over, but where the loader passes it
over (AutoWeightsLoader's unexpected ``.bias``, on a layer the model builds with ``bias=False``). A name the model
does not build (EagleLlamaForCausalLM builds no lm_head: its ``__init__`` calls ``nn.Module.__init__``, and a class's
modules are those of the ``__init__``s a call of it runs) is played through the loader's own branch for it
(Unexpected): passed over (dropped) or raised on (the launch is BLOCKED there, with the loader's message). The
drafter's class is the one the release registers for its architectures as the release's config class renames them
for the method (EAGLEConfig: ``Eagle{arch}``).
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core.types import EngineFunction, Finding, Rule, Status
from ...play.modules import ModuleScope, literal, module_of
from ...play.player import Coverage, LiteralScope, call, dotted
from ...play.values import CLASS, UNKNOWN
from ..judge import Judge
from .classes import MAX_DEPTH
from .classes import class_named as _class
from .classes import config_of as _config_of
from .classes import initialised as _initialised
from .classes import method as _method
from .classes import named as _named
from .classes import own as _own
from .context import DraftContext, check, degrades, draft_finding, engine_finding, warns
from .dflash import engine_architectures
from .engine_code import config_reads
from .unfilled import Unchecked, Unfilled, renames, unchecked, unfilled

LOADED, SKIPPED, DROPPED, REPLACED, RAISES = "loaded", "skipped", "dropped", "replaced", "raises"
UNFILLED = "unfilled"  # a parameter the drafter builds from torch.empty that no tensor fills (unfilled.py)


@dataclass(frozen=True)
class Part:
    """One tensor of the checkpoint or one key of the config, and what the release does with it."""

    name: str
    fate: str  # loaded / skipped / dropped / replaced (tensors); read / defaulted / ignored (keys)
    where: str  # "file:line" of the code that decides it
    into: str = ""  # the parameter a tensor is loaded into, or the function that reads a key; what a raise says
    by: str = ""  # the function of the code at ``where`` (a loader's method), where it is not load_weights


# -- the modules it builds (what SGLang's params_dict holds) ----------------------------------------------------------

def _played_init(function: ast.FunctionDef, found: ModuleScope, config: dict,
                 stop: tuple[ast.stmt, ast.expr] | None = None) -> tuple[Coverage, Any]:
    """A drafter ``__init__`` played on a copy of the config: what it ran, and the value at ``stop`` (if any)."""
    coverage = Coverage()
    fields: dict[str, Any] = {f"self.{t.attr}": UNKNOWN for node in ast.walk(function) if isinstance(node, ast.Assign)
                              for t in node.targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                              and t.value.id == "self"}
    config = copy.deepcopy(config)
    try:
        outcomes, _ = call(function, LiteralScope(where=found.where), [], {"config": config},
                           fields={**fields, **_config_of(function, config)}, coverage=coverage, stop=stop)
    except (ValueError, RecursionError):
        return Coverage(), UNKNOWN
    values = {repr(o.method): o.method for o in outcomes if o.raises is None}
    return coverage, next(iter(values.values())) if len(values) == 1 else UNKNOWN


@dataclass
class Built:
    """The parameter names a drafter model builds, as patterns: a module path, ``*`` for an index of a ModuleList, and
    a leaf layer (a class outside the release's models) holding any one parameter, but a ``bias`` where the call that
    builds it passes ``bias=False`` (``unbiased``). ``inits``: the ``__init__``s walked (file, function), the code that
    builds the drafter's modules from its config.

    Module by module (a path of the release's classes walked: ``classes``), what AutoWeightsLoader's ``_load_module``
    reads as ``module.named_children()`` and ``named_parameters(recurse=False)``: the names its ``__init__``s assign
    (``children``), where every one of them is known (not ``open``: an assignment of what a function returns, or of a
    name that may hold a module); ``loads``: the modules below the drafter whose class loads its own weights (the
    loader hands them theirs)."""

    leaves: set[tuple[str, ...]]
    unbiased: set[tuple[str, ...]] = field(default_factory=set)
    inits: list[tuple[str, ast.FunctionDef]] = field(default_factory=list)
    classes: dict[tuple[str, ...], str] = field(default_factory=dict)
    children: dict[tuple[str, ...], set[str]] = field(default_factory=dict)
    open: set[tuple[str, ...]] = field(default_factory=set)
    # The names a module's __init__s assign a value not read here (``self.quant_config = get_draft_quant_config(...)``,
    # a local that may hold a module): a part of one of these names may be a child; any other name is not.
    unread: dict[tuple[str, ...], set[str]] = field(default_factory=dict)
    loads: set[tuple[str, ...]] = field(default_factory=set)
    # Of those, the ones whose load_weights hands its weights on to a loader of its own (vLLM's LlamaModel:
    # ``loader = AutoWeightsLoader(self)``, ``return loader.load_weights(weights, mapper=self.hf_to_vllm_mapper)``):
    # the class and that method, and the renames its module declares for the names (unfilled.renames).
    delegated: dict[tuple[str, ...], tuple[ModuleScope, ast.FunctionDef]] = field(default_factory=dict)
    renamed: dict[tuple[str, ...], list[tuple[str, str]]] = field(default_factory=dict)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        parts = name.split(".")
        return any(len(parts) == len(leaf) + 1 and all(p == q or q == "*" and p.isdigit() for p, q in zip(parts, leaf))
                   and not (parts[-1] == "bias" and leaf in self.unbiased) for leaf in self.leaves)

    def without_bias(self, name: str) -> bool:
        """Whether ``name`` is the bias of a layer the model builds with ``bias=False``."""
        parts = name.split(".")
        return parts[-1] == "bias" and any(len(parts) == len(leaf) + 1 and all(
            p == q or q == "*" and p.isdigit() for p, q in zip(parts, leaf)) for leaf in self.unbiased)

    def unbuilt(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None:
        """Where the loader meets ``name`` as neither a module nor a parameter the model builds: the module whose
        loader meets it (``()``, the drafter's; or one below that hands its weights on to a loader of its own:
        ``delegated``, the rest of the name renamed as its module declares), the module it is looking in (a path of
        ``classes``) and the part it does not find there; None where the model builds it, or where that is not known
        here (a leaf's own parameters, a module not walked or ``open``, one that loads its own weights otherwise, an
        index of a ModuleList)."""
        at: tuple[str, ...] = ()
        root: tuple[str, ...] = ()
        parts = name.split(".")
        i = 0
        while i < len(parts):
            if at in self.loads:
                if at not in self.delegated or at == root:
                    return None
                root, rest = at, ".".join(parts[i:])
                for old, new in self.renamed.get(at, []):
                    rest = rest.replace(old, new)
                parts = parts[:i] + rest.split(".")
            part = parts[i]
            if at not in self.children:
                return None
            if part in self.children[at] or part.isdigit() and "*" in self.children[at]:
                at += ("*" if part not in self.children[at] else part,)
                i += 1
                continue
            if part in self.unread.get(at, ()):
                return None
            return (root, at, at + (part,)) if at in self.classes and at not in self.open else None
        return None

    def __deepcopy__(self, memo: dict) -> Built:
        return self  # never rewritten by the code played: the player's forks share it


def built(judge: Judge, found: ModuleScope, config: dict, drafter_module_name: str) -> Built:
    made = Built(set())
    _walk(judge, found, config, drafter_module_name, (), made, 0)
    return made


# What registers a child of a module under the name its first argument gives (nn.Module's own methods).
REGISTERS = ("register_buffer", "register_parameter", "register_module", "add_module")


def _walk(judge: Judge, found: ModuleScope, config: dict, own: str, prefix: tuple[str, ...], made: Built,
          depth: int) -> None:
    if depth > MAX_DEPTH:
        made.leaves.add(prefix)  # deeper than read: any parameter under it is taken as built
        return
    assert found.owner is not None
    made.classes[prefix] = found.owner.name
    children = made.children.setdefault(prefix, set())
    loads = _method(judge, found, "load_weights") if prefix else None
    if loads is not None:
        made.loads.add(prefix)
        if _hands_on(loads[1]):
            made.delegated[prefix] = loads
            made.renamed[prefix] = renames(loads[0].tree)
    for owner, init in _initialised(judge, found):
        made.inits.append((owner.where, init))
        coverage = _played_init(init, owner, config)[0] if module_of(owner.where) == own else None
        made_here = {t.id for node in ast.walk(init) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                     for t in node.targets if isinstance(t, ast.Name)}  # local names that may hold a module
        for stmt in ast.walk(init):
            if coverage is not None and isinstance(stmt, ast.stmt) and coverage.not_reached(owner.where, stmt.lineno):
                continue
            if isinstance(stmt, ast.Call) and isinstance(stmt.func, ast.Attribute) and stmt.func.attr in REGISTERS \
                    and dotted(stmt.func.value) == "self":
                name = literal(stmt.args[0]) if stmt.args else None
                children.add(name) if isinstance(name, str) else made.open.add(prefix)
            if isinstance(stmt, ast.Call) and dotted(stmt.func) == "setattr" and stmt.args \
                    and dotted(stmt.args[0]) == "self":
                made.open.add(prefix)
            if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
                continue
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if len(targets) != 1:
                continue
            if isinstance(targets[0], ast.Tuple):  # self.a, self.b = ...: what each is, not read
                made.unread.setdefault(prefix, set()).update(e.attr for e in targets[0].elts if isinstance(
                    e, ast.Attribute) and dotted(e) == f"self.{e.attr}")
            path = dotted(targets[0])
            if path is None or not path.startswith("self."):
                continue
            name = path.split(".")[1]
            if not isinstance(stmt.value, ast.Call):
                if path.count(".") == 1:
                    _child(stmt.value, name, prefix, children, made, made_here)
                continue
            if _built_by(judge, owner, stmt.value, config, own, prefix + tuple(path.split(".")[1:]), made, depth):
                children.add(name) if path.count(".") == 1 else None
            elif path.count(".") == 1:
                made.unread.setdefault(prefix, set()).add(name)  # self.x = <a function's result>: a module or not


def _hands_on(load: ast.FunctionDef) -> bool:
    """Whether load_weights does nothing but build a loader of the model (``loader = AutoWeightsLoader(self)``) and
    hand it the weights (``return loader.load_weights(weights, mapper=...)``)."""
    body = [s for s in load.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 2 or not isinstance(body[0], ast.Assign) or not isinstance(body[0].value, ast.Call):
        return False
    made, handed = body[0].value, body[1]
    loader = dotted(body[0].targets[0]) if len(body[0].targets) == 1 else None
    value = handed.value if isinstance(handed, (ast.Return, ast.Expr)) else None
    return isinstance(made.func, ast.Name) and made.func.id[:1].isupper() and [dotted(a) for a in made.args] == ["self"] \
        and not made.keywords and isinstance(value, ast.Call) and dotted(value.func) == f"{loader}.load_weights"


def _child(value: ast.expr, name: str, prefix: tuple[str, ...], children: set[str], made: Built,
           made_here: set[str]) -> None:
    """``self.<name> = <value>`` where the value is not a call: one of the module's own (``self.model.embed_tokens``,
    a child under a second name), a local name that may hold a module (open), or a value that is none (a config's
    field, a number)."""
    source = dotted(value) or ""
    if source.startswith("self."):
        children.add(name)
    elif isinstance(value, ast.Name) and value.id in made_here:
        made.unread.setdefault(prefix, set()).add(name)


def _built_by(judge: Judge, owner: ModuleScope, value: ast.Call, config: dict, own: str, at: tuple[str, ...],
              made: Built, depth: int) -> bool:
    """What one ``self.x = <call>`` builds at ``at``: a class of the release's models (walked), a ModuleList of them
    (``*``), or a layer (a leaf); False where the call is none of them (a function's result)."""
    called = dotted(value.func) or ""
    if called.rsplit(".", 1)[-1] in ("ModuleList", "Sequential"):
        items = value.args[0] if value.args else None
        element = items.elt if isinstance(items, ast.ListComp) else items.elts[0] \
            if isinstance(items, (ast.List, ast.Tuple)) and items.elts else None
        if isinstance(element, ast.Call):
            made.children.setdefault(at, set()).add("*")
            _built_by(judge, owner, element, config, own, at + ("*",), made, depth)
        return True  # a list of what it does not read: its children are not known (not in ``children``)
    inner = _named(judge, owner, called) if called and "." not in called else None
    if inner is not None and "/models/" in inner.where:
        _walk(judge, inner, config, own, at, made, depth + 1)
        return True
    if called.rsplit(".", 1)[-1][:1].isupper() or inner is not None:
        made.leaves.add(at)  # a layer: Linear, RMSNorm, an embedding
        if any(k.arg == "bias" and literal(k.value) is False for k in value.keywords):
            made.unbiased.add(at)  # ReplicatedLinear(..., bias=False): no bias parameter
        return True
    return False


# -- load_weights played per tensor ----------------------------------------------------------------------------------

class _Marked(ast.NodeTransformer):
    """The loop body with each statement the tensor (``weight``) flows into ended as ``return ("loaded", line)``
    and each ``continue`` of the loop itself as ``return ("skipped", line)``."""

    def __init__(self, weight: str):
        self.weight, self.loops = weight, 0

    def visit_For(self, node: ast.For) -> ast.AST:
        self.loops += 1
        self.generic_visit(node)
        self.loops -= 1
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return node  # a nested definition is not the loop's

    def visit_Continue(self, node: ast.Continue) -> ast.AST:
        return self._end(SKIPPED, node) if self.loops == 0 else node

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        return self._flows(node)

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        return self._flows(node)

    def _flows(self, node: ast.Expr | ast.Assign) -> ast.AST:
        if any(isinstance(n, ast.Name) and n.id == self.weight for n in ast.walk(node.value)):
            return self._end(LOADED, node)
        return node

    @staticmethod
    def _end(fate: str, node: ast.stmt) -> ast.stmt:
        return ast.copy_location(ast.Return(ast.Tuple([ast.Constant(fate), ast.Constant(node.lineno)], ast.Load())),
                                 node)


def _per_tensor(load: ast.FunctionDef) -> tuple[ast.FunctionDef, str] | None:
    """load_weights as a function of one tensor: its statements before the loop over the weights (the tables it
    renames by), the loop's body marked (_Marked) and played with the loop's names as parameters."""
    at = next((i for i, s in enumerate(load.body) if isinstance(s, ast.For) and isinstance(s.target, ast.Tuple)
               and len(s.target.elts) == 2 and all(isinstance(e, ast.Name) for e in s.target.elts)), None)
    if at is None:
        return None
    loop = load.body[at]
    assert isinstance(loop, ast.For) and isinstance(loop.target, ast.Tuple)
    name, weight = (e.id for e in loop.target.elts if isinstance(e, ast.Name))
    before = [s for s in load.body[:at] if not (isinstance(s, ast.Assign) and dotted(s.targets[0]) == "params_dict")]
    marker = _Marked(weight)
    body = [marker.visit(copy.deepcopy(s)) for s in loop.body]
    played = ast.parse(f"def played(self, {name}, {weight}, params_dict):\n    pass").body[0]
    assert isinstance(played, ast.FunctionDef)
    played.body = [*copy.deepcopy(before), *body]
    return ast.fix_missing_locations(played), name


def _dropped_by_map(judge: Judge, found: ModuleScope, load: ast.FunctionDef, config: dict) -> dict[str, int]:
    """vLLM: the parts of a name the loader's map drops (``orig_to_new_substr["fc."] = None`` under ``if not
    self.model.use_aux_hidden_state``), where the model's flag is off for this config: part -> the line."""
    dropped: dict[str, int] = {}
    for node in ast.walk(load):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)):
            continue
        flag = dotted(node.test.operand) or ""
        for stmt in node.body:
            part = _dropped_part(stmt)
            if part is not None and flag.count(".") == 2 and _flag(judge, found, flag, config) is False:
                dropped[part] = stmt.lineno
    return dropped


def _dropped_part(stmt: ast.stmt) -> str | None:
    """The part of a name a statement tells the loader to drop: ``orig_to_new_substr["fc."] = None`` (0.33: the
    WeightsMapper maps it to nothing) or ``skip_substrs.append("fc.")`` (0.26: AutoWeightsLoader skips it)."""
    if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Subscript) \
            and isinstance(stmt.value, ast.Constant) and stmt.value.value is None \
            and isinstance(stmt.targets[0].slice, ast.Constant):
        return str(stmt.targets[0].slice.value)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute) \
            and stmt.value.func.attr == "append" and "skip" in (dotted(stmt.value.func.value) or "") \
            and len(stmt.value.args) == 1 and isinstance(stmt.value.args[0], ast.Constant):
        return str(stmt.value.args[0].value)
    return None


def _flag(judge: Judge, found: ModuleScope, flag: str, config: dict) -> Any:
    """``self.<part>.<attribute>`` of the drafter model for this config: the part's class ``__init__`` played to the
    statement after the one that sets the attribute."""
    _, part, attribute = flag.split(".")
    init = _method(judge, found, "__init__")
    call_of = next((s.value for s in ast.walk(init[1]) if isinstance(s, ast.Assign) and dotted(s.targets[0]) ==
                    f"self.{part}" and isinstance(s.value, ast.Call)), None) if init else None
    inner = _named(judge, found, dotted(call_of.func) or "") if call_of is not None else None
    part_init = _method(judge, inner, "__init__") if inner is not None else None
    if part_init is None:
        return UNKNOWN
    body = part_init[1].body
    at = next((i for i, s in enumerate(body) if any(isinstance(n, ast.Assign) and any(
        dotted(t) == f"self.{attribute}" for t in n.targets) for n in ast.walk(s))), None)
    if at is None or at + 1 >= len(body):
        return UNKNOWN
    return _played_init(part_init[1], part_init[0], config, (body[at + 1], ast.parse(f"self.{attribute}",
                                                                                        mode="eval").body))[1]


def _renamer(load: ast.FunctionDef) -> tuple[ast.FunctionDef, int] | None:
    """load_weights of the other form (vLLM's EAGLE-1 heads: llama_eagle.py, deepseek_eagle.py, llama4_eagle.py
    ``load_weights``): a function it defines renames each (name, tensor) pair (``transform``: ``"model." + name``
    but for lm_head), and the loader is handed ``map(<it>, weights)``. That function, and the line of the statement
    that hands the pairs to the loader."""
    weights = {a.arg for a in load.args.args[1:2]}
    nested = {s.name: s for s in load.body if isinstance(s, ast.FunctionDef)}
    for stmt in load.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "map" \
                    and len(node.args) == 2 and isinstance(node.args[0], ast.Name) and node.args[0].id in nested \
                    and isinstance(node.args[1], ast.Name) and node.args[1].id in weights:
                return nested[node.args[0].id], stmt.lineno
    return None


WEIGHT = "<the tensor>"  # what the renamer is handed as the tensor: it comes back beside the name it is loaded as


def _renamed(renamer: tuple[ast.FunctionDef, int], owner: ModuleScope, tensor: str, fields: dict[str, Any]
             ) -> tuple[tuple[str, int] | None, str, int] | None:
    """One tensor through the renamer, as the loop's ends are: (loaded, the line that hands it over), the name it
    is loaded as; None where the renamer's ways disagree or it hands back another tensor."""
    function, line = renamer
    try:
        outcomes, _ = call(function, LiteralScope(where=owner.where), [(tensor, WEIGHT)], {},
                           fields={"self": {}, **fields})
    except (ValueError, RecursionError):
        return None
    names = {o.method[0] if isinstance(o.method, tuple) and len(o.method) == 2 and o.method[1] == WEIGHT
             and isinstance(o.method[0], str) else None for o in outcomes if o.raises is None}
    if len(names) != 1 or None in names:
        return None
    return (LOADED, line), str(names.pop()), line


def _loader_drops(judge: Judge, owner: ModuleScope, load: ast.FunctionDef) -> list[tuple[str, str, str]]:
    """vLLM: the parts of a name the loader that load_weights builds never loads, whatever the model builds: a list of
    its class's own (``ROTARY_EMBEDS_UNUSED_WEIGHTS``, rotary buffers such as ``rotary_emb.inv_freq``) added to the
    parts it skips (0.26.0: ``self.skip_substrs += self.ROTARY_EMBEDS_UNUSED_WEIGHTS`` in ``__init__``, which
    ``_can_skip`` reads), or a name map of its class's own that maps them to nothing, joined to the one it applies
    (0.33.0: ``mapper |= self.REMOVE_UNUSED_ROTARY_EMBEDS_MAPPER``, ``orig_to_new_substr={...: None}``). Each as (the
    part, where it is added, the class attribute's name)."""
    made = next((s.value.func.id for s in ast.walk(load) if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                 and isinstance(s.value.func, ast.Name) and s.value.func.id[:1].isupper()), None)
    loader = _named(judge, owner, made) if made is not None else None
    if loader is None or loader.owner is None:
        return []
    constants: dict[str, list[str]] = {}
    for stmt in loader.owner.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            continue
        value = literal(stmt.value)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            constants[stmt.targets[0].id] = [f"skip:{v}" for v in value]
        elif isinstance(stmt.value, ast.Call):
            for keyword in stmt.value.keywords:
                mapped = literal(keyword.value) if keyword.arg == "orig_to_new_substr" else None
                if isinstance(mapped, dict):
                    constants[stmt.targets[0].id] = [f"map:{k}" for k, v in mapped.items() if v is None]
    drops = []
    for name in ("__init__", "load_weights"):
        method = _own(loader, name)
        for node in ast.walk(method) if method is not None else ():
            if not (isinstance(node, ast.AugAssign) and isinstance(node.value, ast.Attribute)
                    and dotted(node.value) == f"self.{node.value.attr}" and node.value.attr in constants):
                continue
            target = dotted(node.target) or ""
            for entry in constants[node.value.attr]:
                kind, _, part = entry.partition(":")
                if kind == "skip" and isinstance(node.op, ast.Add) and "skip" in target \
                        or kind == "map" and isinstance(node.op, ast.BitOr):
                    drops.append((part, f"{loader.where}:{node.lineno}", f"{loader.owner.name}.{node.value.attr}"))
    return drops


def _ignored_unexpected(judge: Judge, owner: ModuleScope, load: ast.FunctionDef) -> tuple[list[str], str] | None:
    """vLLM: the suffixes the loader that load_weights builds (``loader = AutoWeightsLoader(self)``) passes over where
    the model has no such parameter (its load_weights: ``self.ignore_unexpected_suffixes.append(".bias")``, for GPTQ
    checkpoints), and where it says so."""
    made = next((s.value.func.id for s in ast.walk(load) if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                 and isinstance(s.value.func, ast.Name) and s.value.func.id[:1].isupper()), None)
    loader = _named(judge, owner, made) if made is not None else None
    method = _method(judge, loader, "load_weights") if loader is not None else None
    if method is None:
        return None
    appended = [(str(n.args[0].value), n.lineno) for n in ast.walk(method[1]) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute) and n.func.attr == "append"
                and (dotted(n.func.value) or "").endswith("ignore_unexpected_suffixes") and len(n.args) == 1
                and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)]
    return ([suffix for suffix, _ in appended], f"{method[0].where}:{appended[0][1]}") if appended else None


@dataclass(frozen=True)
class Unexpected:
    """How the loader a ``load_weights`` builds (vLLM's ``loader = AutoWeightsLoader(self)``) treats a name of a
    module the model does not build: the loader's method walks the module's children by the first part of each name
    (``for child_prefix, child_weights in self._groupby_prefix(weights)``), and a part that is neither a child module
    nor a parameter falls to the last ``else`` of its ``if`` chain, which passes it over (``continue``: the loader's
    ``_can_skip`` / ``_can_ignore_unexpected``) or raises (vLLM 0.26.0 utils.py:395, 0.33.0 :448: "There is no
    module or parameter named ..."). ``played``: the loop's statements before the chain and that ``else``, a function
    of the method's parameters and the loop's names, each ``continue`` ended as ``return ("skipped", line)``;
    ``fields``: the loader as its ``__init__`` leaves it for the call load_weights makes, with what the loader's own
    ``load_weights`` appends first (``self.ignore_unexpected_suffixes.append(".bias")``)."""

    scope: ModuleScope
    played: ast.FunctionDef
    fields: dict[str, Any]
    drafter_is_module: bool  # the loader is given the drafter itself (``AutoWeightsLoader(self)``)
    method: str  # the loader's method that holds the loop ("AutoWeightsLoader._load_module")
    # The loader's fields for the other values it may be built with (a list load_weights grows under conditions on
    # the whole checkpoint: vLLM 0.26.0's skip_substrs, its fewest and its most items): a name is decided only where
    # every one of them ends it the same way.
    alternatives: tuple[dict[str, Any], ...] = ()

    def play(self, at: tuple[str, ...], part: str, drafter: str, module: str) -> tuple[str, int, str] | None:
        """What the loader does with ``part`` under the module at ``at`` (of class ``module``; the drafter's class
        ``drafter``): ("skipped", line, "") or ("raises", line, the engine's message); None where its ways differ."""
        ends = {self._play(fields, at, part, drafter, module) for fields in (self.fields, *self.alternatives)}
        return ends.pop() if len(ends) == 1 else None

    def _play(self, fields: dict[str, Any], at: tuple[str, ...], part: str, drafter: str, module: str
              ) -> tuple[str, int, str] | None:
        params = [a.arg for a in self.played.args.args[1:]]
        base = params[:-2]  # the method's; the last two are the loop's (the part, and its weights)
        passed = [".".join(at), UNKNOWN, *[UNKNOWN] * (len(base) - 2)][:len(base)] + [part, UNKNOWN]
        try:
            outcomes, _ = call(self.played, self.scope, passed, {}, fields={"self": copy.deepcopy(fields)})
        except (ValueError, RecursionError):
            return None
        ends = set()
        for o in outcomes:
            if o.raises is None and isinstance(o.method, tuple) and len(o.method) == 2 and o.method[0] == SKIPPED:
                ends.add((SKIPPED, int(o.method[1]), ""))
            elif o.raises is not None:
                line = int(o.raises.split(":", 1)[0])
                names = {"self.module._get_name()": drafter if self.drafter_is_module else None,
                         f"{base[1]}._get_name()": module if len(base) > 1 else None}
                ends.add((RAISES, line, self._message(line, o.env, names)))
            else:
                return None
        return ends.pop() if len(ends) == 1 else None

    def _message(self, line: int, env: dict[str, Any], names: dict[str, str | None]) -> str:
        """The raise's text, as Python prints it: its exception and its message, the f-string the message is built
        from filled from the way's names (``{prefix!r}``) and each module's class name (torch's
        ``nn.Module._get_name()``: ``type(self).__name__``); a part not known left as its code in braces."""
        raised = next(n for n in ast.walk(self.played) if isinstance(n, ast.Raise) and n.lineno == line)
        exc = raised.exc
        if not isinstance(exc, ast.Call) or not exc.args:
            return ast.unparse(raised).removeprefix("raise ")
        text = exc.args[0]
        if isinstance(text, ast.Name):
            text = next((s.value for s in ast.walk(self.played) if isinstance(s, ast.Assign) and len(s.targets) == 1
                         and dotted(s.targets[0]) == text.id), text)
        pieces = text.values if isinstance(text, ast.JoinedStr) else [text]
        shown = []
        for piece in pieces:
            if isinstance(piece, ast.Constant):
                shown.append(str(piece.value))
                continue
            code = ast.unparse(piece.value if isinstance(piece, ast.FormattedValue) else piece)
            value = names.get(code) if code in names else env.get(code, UNKNOWN)
            if value is None or value is UNKNOWN or not isinstance(value, (str, int, float)):
                shown.append(f"{{{code}}}")
            else:
                shown.append(repr(value) if isinstance(piece, ast.FormattedValue) and piece.conversion == ord("r")
                             else str(value))
        return f"{dotted(exc.func)}: {''.join(shown)}"


def _unexpected(judge: Judge, owner: ModuleScope, load: ast.FunctionDef) -> Unexpected | None:
    """The loader ``load`` builds and hands the weights to, and how it treats a name the model does not build
    (Unexpected); None where load_weights builds no loader of a class of the release, or its loop has no such
    ``else``."""
    made = next((s.value for s in ast.walk(load) if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                 and isinstance(s.value.func, ast.Name) and s.value.func.id[:1].isupper()), None)
    loader = _named(judge, owner, made.func.id) if made is not None and isinstance(made.func, ast.Name) else None
    if made is None or loader is None or loader.owner is None:
        return None
    cls, scope = loader.owner, loader
    played, walker = next(((p, f.name) for f in cls.body if isinstance(f, ast.FunctionDef)
                           for p in [_unbuilt_branch(f)] if p), (None, ""))
    init = _own(scope, "__init__")
    if played is None or init is None:
        return None
    method = _method(judge, loader, "load_weights")
    bounds = {k.arg: _bounds(load, k.value) for k in made.keywords if k.arg is not None}
    variants = []
    for end in (0, 1) if any(low != high for low, high in bounds.values()) else (0,):
        this = _loader_fields(scope, init, made, {k: v[end] for k, v in bounds.items()},
                              method[1] if method is not None else None)
        if this is None:
            return None
        variants.append(this)
    given_self = bool(made.args) and isinstance(made.args[0], ast.Name) and made.args[0].id == "self"
    alternatives = (variants[1],) if len(variants) > 1 and variants[1] != variants[0] else ()
    return Unexpected(scope, played, variants[0], given_self, f"{cls.name}.{walker}", alternatives)


def _bounds(load: ast.FunctionDef, value: ast.expr) -> tuple[Any, Any]:
    """An argument load_weights hands the loader, at its fewest and its most: a literal as it is; a list it builds
    (``skip_substrs = ["mask_hidden"]``, then ``skip_substrs.append("fc.")`` under conditions on the checkpoint) as
    the list it starts from and that list with every item appended; else UNKNOWN."""
    known = literal(value)
    if known is not UNKNOWN or not isinstance(value, ast.Name):
        return known, known
    assigned = [literal(s.value) for s in ast.walk(load) if isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Name) and s.targets[0].id == value.id]
    appended = [literal(n.args[0]) for n in ast.walk(load) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute) and n.func.attr == "append" and dotted(n.func.value) == value.id
                and len(n.args) == 1]
    if len(assigned) != 1 or not isinstance(assigned[0], list) or any(not isinstance(a, str) for a in appended):
        return UNKNOWN, UNKNOWN
    return assigned[0], assigned[0] + appended


def _loader_fields(scope: ModuleScope, init: ast.FunctionDef, made: ast.Call, named: dict[str, Any],
                   method: ast.FunctionDef | None) -> dict[str, Any] | None:
    """The loader's fields as its ``__init__`` leaves them for the call load_weights makes, with what the loader's own
    ``load_weights`` appends first; None where the ``__init__`` cannot be played."""
    this: dict[str, Any] = {CLASS: scope.this_class}
    try:
        call(init, scope, [UNKNOWN] * len(made.args), dict(named), fields={"self": this})
    except (ValueError, RecursionError):
        return None
    module_param = init.args.args[1].arg if len(init.args.args) > 1 else None
    for stmt in init.body:
        # What the loader reads off the model it is given (vLLM 0.33's aliased_params = _get_tied_embedding_params(
        # module): the names of tied embeddings among the modules it builds) names what the model builds, and a name
        # it does not build is in none of it.
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and module_param is not None and any(
                isinstance(a, ast.Name) and a.id == module_param for a in stmt.value.args):
            for target in stmt.targets:
                key = (dotted(target) or "").removeprefix("self.")
                if this.get(key) is UNKNOWN or key in this and not isinstance(this[key], (list, dict, str, int)):
                    this[key] = {}
    for stmt in method.body if method is not None else ():
        appended = stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
        if appended is not None and isinstance(appended.func, ast.Attribute) and appended.func.attr == "append" \
                and (dotted(appended.func.value) or "").startswith("self.") and len(appended.args) == 1:
            key = (dotted(appended.func.value) or "").removeprefix("self.")
            if isinstance(this.get(key), list):
                this[key] = [*this[key], literal(appended.args[0])]
    # Its methods read from this scope's class (an object of a named class has its methods read from the release's
    # module as it is).
    this.pop(CLASS)
    return this


def _unbuilt_branch(method: ast.FunctionDef) -> ast.FunctionDef | None:
    """The method's loop over the children by name, as a function of one name (Unexpected.played): the loop whose
    body ends in an ``if`` chain (child module / parameter / else) whose last ``else`` raises."""
    for loop in (n for n in ast.walk(method) if isinstance(n, ast.For) and isinstance(n.target, ast.Tuple)
                 and len(n.target.elts) == 2 and all(isinstance(e, ast.Name) for e in n.target.elts)):
        at = next((i for i, s in enumerate(loop.body) if isinstance(s, ast.If)), None)
        if at is None:
            continue
        chain = loop.body[at]
        assert isinstance(chain, ast.If)
        while len(chain.orelse) == 1 and isinstance(chain.orelse[0], ast.If):
            chain = chain.orelse[0]
        if not chain.orelse or not any(isinstance(s, ast.Raise) for s in chain.orelse):
            continue
        assert isinstance(loop.target, ast.Tuple)
        names = [a.arg for a in method.args.args[1:]] + [e.id for e in loop.target.elts if isinstance(e, ast.Name)]
        played = ast.parse(f"def played(self, {', '.join(names)}):\n    pass").body[0]
        assert isinstance(played, ast.FunctionDef)
        marker = _Marked("")
        played.body = [*copy.deepcopy(loop.body[:at]), *(marker.visit(copy.deepcopy(s)) for s in chain.orelse)]
        return ast.fix_missing_locations(played)
    return None


def tensor_parts(ctx: DraftContext, judge: Judge, found: ModuleScope, engine: dict, own: str
                 ) -> tuple[list[Part], Built] | None:
    """Each tensor's fate by the release's load_weights, and what the model builds; None where load_weights has
    neither form this reads (a loop over the weights, or a renamer mapped over them). ``own``: the drafter's
    module, whose ``__init__``s are played on its config."""
    method = _method(judge, found, "load_weights")
    if method is None:
        return None
    owner, load = method
    played = _per_tensor(load)
    renamer = _renamer(load) if played is None else None
    if played is None and renamer is None:
        return None
    params = built(judge, found, ctx.draft_config, own)
    dropped_parts = _dropped_by_map(judge, found, load, ctx.draft_config)
    ignored = _ignored_unexpected(judge, owner, load)
    never = _loader_drops(judge, owner, load)
    fields = {f"self.{k}": v for k, v in (engine.get("fields") or {}).items()}
    fields["self.use_parallel_drafting"] = bool(ctx.launch.speculative.get("parallel_drafting"))
    # A quantized drafter's loader also passes over its quantization's suffixes (load_weights extends the list from
    # the model's quant_config): what it does with a name the model does not build is not read for one.
    unexpected = _unexpected(judge, owner, load) if not ctx.draft_config.get("quantization_config") else None
    loaders: dict[tuple[str, ...], Unexpected | None] = {}  # of the modules below that load their own (Built.delegated)
    assert found.owner is not None
    parts = []
    for tensor in ctx.draft.tensors:
        one = _renamed(renamer, owner, tensor, fields) if renamer is not None else \
            _looped(played, owner, load, tensor, params, fields) if played is not None else None
        if one is None:
            parts.append(Part(tensor, "unknown", f"{owner.where}:{load.lineno}"))
            continue
        end, into, passed = one
        if end is None:  # no statement of the loop took it: SGLang's `if param_name in params_dict` was false
            parts.append(Part(tensor, DROPPED, f"{owner.where}:{passed}", f"{into}, which the model does not build"))
            continue
        fate, line = end
        part = next((p for p in dropped_parts if p in into), None) if fate == LOADED else None
        suffix = next((x for x in ignored[0] if into.endswith(x)), None) if ignored and fate == LOADED else None
        never_loaded = next((d for d in never if d[0] in into), None) if fate == LOADED else None
        if never_loaded is not None:
            parts.append(Part(tensor, SKIPPED, never_loaded[1], f"{into}: the loader drops every name with "
                              f"{never_loaded[0]!r} ({never_loaded[2]}), whatever the model builds"))
        elif part is not None:
            parts.append(Part(tensor, DROPPED, f"{owner.where}:{dropped_parts[part]}", f"{into} (the loader drops "
                              f"{part!r})"))
        elif ignored is not None and suffix == ".bias" and params.without_bias(into):
            parts.append(Part(tensor, DROPPED, ignored[1], f"{into}: the model builds that layer with bias=False and "
                              f"the loader passes over an unexpected {suffix!r}"))
        elif (missing := params.unbuilt(into) if unexpected is not None and fate == LOADED else None) is not None:
            root = missing[0]
            if root and root not in loaders:
                loaders[root] = _unexpected(judge, *params.delegated[root])
            parts.append(_unbuilt(tensor, into, missing, loaders.get(root) if root else unexpected,
                                  found.owner.name, params) or Part(tensor, "unknown", f"{owner.where}:{line}", into))
        else:
            parts.append(Part(tensor, fate, f"{owner.where}:{line}", into if fate == LOADED else ""))
    return parts, params


def _unbuilt(tensor: str, into: str, missing: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]],
             unexpected: Unexpected | None, drafter: str, params: Built) -> Part | None:
    """A tensor handed to the loader under a name the model does not build (Built.unbuilt): passed over (dropped, at
    the loader's ``continue``) or raised on (at the loader's ``raise``, with its message); None where the loader's
    ways differ. ``unexpected``: the loader of the module that meets it (the drafter's, or the one a module below it
    builds for itself, whose names are relative to that module)."""
    root, at, qualname = missing
    module_class = params.classes.get(root, drafter) if root else drafter
    end = unexpected.play(at[len(root):], qualname[-1], module_class, params.classes[at]) \
        if unexpected is not None else None
    if end is None:
        return None
    fate, line, message = end
    where = f"{unexpected.scope.where}:{line}" if unexpected is not None else ""
    module = ".".join(at) or drafter
    if fate == RAISES:
        return Part(tensor, RAISES, where, message, unexpected.method if unexpected is not None else "")
    return Part(tensor, DROPPED, where, f"{into}: {module} builds no {qualname[-1]!r} and the loader passes it over")


def _looped(played: tuple[ast.FunctionDef, str], owner: ModuleScope, load: ast.FunctionDef, tensor: str,
            params: Built, fields: dict[str, Any]) -> tuple[tuple[str, int] | None, str, int] | None:
    """One tensor through the loop of load_weights (_per_tensor): how it ends, the name it goes by there, and the
    line of the last test it failed; None where its ways end differently."""
    function, name_var = played
    try:
        outcomes, _ = call(function, LiteralScope(where=owner.where), [tensor, UNKNOWN, params], {},
                           fields={"self": {}, **fields})
    except (ValueError, RecursionError):
        outcomes = []
    ends = {(o.method if isinstance(o.method, tuple) else None, str(o.env.get("param_name") or o.env.get(name_var)),
             next((b.line for b in reversed(o.branches) if not b.taken), load.lineno))
            for o in outcomes if o.raises is None}
    return ends.pop() if len(ends) == 1 else None


# -- the config's head keys ------------------------------------------------------------------------------------------

def key_parts(judge: Judge, found: ModuleScope, config: dict, head_keys: list[str],
              inits: Sequence[tuple[str, ast.FunctionDef]] = ()) -> list[Part]:
    """Each head key (``params.engine.head_keys``) the drafter config declares, or the drafter module reads with a
    default: read (by which function of the drafter's module, else by which ``__init__`` that builds its modules:
    ``inits``, Built's, such as vLLM's llama.py LlamaDecoderLayer.__init__ under an EAGLE-1 head's layer), defaulted,
    or ignored."""
    readers: dict[str, str] = {}
    functions = [(found.where, n) for n in ast.walk(found.tree) if isinstance(n, ast.FunctionDef)]
    for file, node in [*functions, *inits]:
        for read in config_reads(node):
            readers.setdefault(read[-1], f"{file}:{node.lineno} {node.name}")
    nested = config.get("eagle_config")
    nested = nested if isinstance(nested, dict) else {}
    parts = []
    for key in head_keys:
        declared = config.get(key, nested.get(key))
        where = readers.get(key)
        if declared is None and where is None:
            continue
        if declared is None:
            parts.append(Part(key, "defaulted", where or ""))
        elif where is None:
            parts.append(Part(key, "ignored", found.where, repr(declared)))
        else:
            parts.append(Part(key, "read", where, repr(declared)))
    return parts


# -- the check -------------------------------------------------------------------------------------------------------

def drafter_class(ctx: DraftContext) -> tuple[str, str] | None:
    """The module and class the release builds for the drafter: its architectures as the release's config class
    renames them for the launch's method (vLLM's EAGLEConfig: LlamaForCausalLM -> EagleLlamaForCausalLM for eagle,
    played by dflash.engine_architectures; SGLang keeps them), looked up in the release's registry."""
    if ctx.judge is None:
        return None
    entry = ctx.judge.registered(engine_architectures(ctx, ctx.launch.method or ""))
    return (entry.module, entry.class_name) if entry is not None else None


@dataclass(frozen=True)
class Accounted:
    """The drafter's contract: its class, each tensor's and head key's fate, and the keys that make it build parameters
    from torch.empty that no tensor fills where the model loader does not check (unfilled.py; ``unchecked`` says
    where that check is and why it does not run)."""

    drafter: ModuleScope
    tensors: list[Part]
    keys: list[Part]
    unfilled: list[Unfilled] = field(default_factory=list)
    unchecked: Unchecked | None = None


def account(ctx: DraftContext, rule: Rule) -> Accounted | None:
    judge = ctx.judge
    module = drafter_class(ctx)
    if judge is None or module is None:
        return None
    found = _class(judge, *module)
    if found is None:
        return None
    engine = rule.params.get("engine") or {}
    accounted = tensor_parts(ctx, judge, found, engine, module[0])
    if accounted is None:
        return None  # a load_weights of neither form: not accounted here
    tensors, params = accounted
    replaced = _replaced(ctx, judge, found, engine)
    tensors = [Part(p.name, REPLACED, replaced[1], f"{p.into}, then the target's") if p.fate == LOADED and replaced
               and replaced[0] in p.name else p for p in tensors]
    keys = key_parts(judge, found, ctx.draft_config, list(engine.get("head_keys") or ()), params.inits)
    # The keys the __init__s that build the drafter read, where the model loader's check of what loaded is the
    # rule's (vLLM's DefaultModelLoader): does one build a parameter that no tensor fills, and does the check run?
    # A key set to a false value (yuhuili's EAGLE-1 "bias": false) is not played: it asks for no parameter.
    read = [p.name for p in keys if p.fate == "read" and ctx.draft_config.get(p.name)]
    load = _method(judge, found, "load_weights")
    loader = engine.get("model_loader")
    if not read or load is None or not isinstance(loader, str) or ctx.draft_config.get("quantization_config"):
        return Accounted(found, tensors, keys)
    names = [p.into for p in tensors if p.fate == LOADED]
    empty = unfilled(judge, found, ctx.draft_config, read, names, params.inits)
    check = unchecked(judge, loader, load[1]) if empty else None
    return Accounted(found, tensors, keys, empty if check is not None else [], check)


def _replaced(ctx: DraftContext, judge: Judge, found: ModuleScope, engine: dict) -> tuple[str, str] | None:
    """("lm_head", where) where the release replaces the drafter's own head by the target's (SGLang: the class sets
    ``params.engine.replaced_flag`` when its config lacks the key, the head_overwritten check's mechanism)."""
    flag = engine.get("replaced_flag")
    init = _method(judge, found, "__init__") if flag else None
    if init is None or ctx.draft_config.get("tie_word_embeddings"):
        return None
    for node in ast.walk(init[1]):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Attribute) \
                and any(isinstance(s, ast.Assign) and any(dotted(t) == f"self.{flag}" for t in s.targets)
                        for s in node.body) and ctx.draft_config.get(node.test.left.attr) is None:
            return "lm_head", f"{init[0].where}:{node.lineno}"
    return None


def describe(parts: list[Part]) -> str:
    return "; ".join(f"{p.name} {p.fate}" + (f" into {p.into}" if p.into and p.fate in (LOADED, REPLACED) else
                                              f" ({p.into})" if p.into else "") + f" at {p.where}" for p in parts)


def _percent(share: float) -> str:
    """A share as a percentage, a tenth of a point, or one figure where it is smaller (an fc bias: 0.002%)."""
    return f"{share:.1%}" if share == 0 or share >= 0.001 else f"{share * 100:.1g}%"


def _numel(ctx: DraftContext, name: str) -> int:
    tensor = ctx.draft.tensor(name)
    return tensor.numel if tensor is not None else 0


@check("drafter_account")
def check_drafter_account(rule: Rule, ctx: DraftContext) -> Finding | None:
    """Every tensor and head key of the drafter accounted for by the release (the module's docstring). A tensor the
    drafter ships and the release drops (``params.engine.unused`` aside: t2d, which neither engine needs at inference)
    is a loss: the share of the drafter's parameters it holds is the figure, and where it is most of them the drafter
    drafts from weights it never loaded (DEGRADED); a head key the drafter sets and the release never reads is a
    warning (the head runs as if it were unset)."""
    found = account(ctx, rule)
    if found is None or ctx.draft.unread:
        return None
    owner, tensors, keys = found.drafter, found.tensors, found.keys
    drafter = owner.owner
    assert drafter is not None
    engine = rule.params.get("engine") or {}
    unused = set(engine.get("unused") or ())
    evidence = f"{drafter.name} ({owner.where}): " + describe(tensors + keys)
    raised = [p for p in tensors if p.fate == RAISES]
    if raised:
        file, line = raised[0].where.rsplit(":", 1)
        names = ", ".join(p.name for p in raised[:4]) + (f" and {len(raised) - 4} more" if len(raised) > 4 else "")
        return engine_finding(rule, ctx, Status.BLOCKS, f"{drafter.name} builds no module or parameter for {names}: "
                              f"the loader its load_weights hands the checkpoint to raises on a name that is neither "
                              f"({raised[0].by} at {raised[0].where})", evidence,
                              EngineFunction(file, int(line), raised[0].by or "load_weights", drafter), raised[0].into)
    empty = [Part(".".join(o.path), UNFILLED, o.where, f"built as {u.key} = {u.value!r} asks ({u.read_at}), from "
                  "torch.empty") for u in found.unfilled for o in u.parameters]
    evidence += "".join(f"; {p.name} {p.fate} ({p.into}) at {p.where}" for p in empty)
    every = [p for p in empty if "*" in p.name.split(".")]  # in each layer of a ModuleList: every layer
    partial: list[tuple[str, str, EngineFunction]] = []
    if found.unchecked is not None and empty:
        check = found.unchecked
        keys_said = ", ".join(f"{u.key} = {u.value!r}" for u in found.unfilled)
        told = (f"the drafter config sets {keys_said}, which makes {drafter.name} build "
                f"{', '.join(p.name for p in empty[:4])}{' and more' if len(empty) > 4 else ''} from torch.empty "
                f"({empty[0].where}); no tensor of the checkpoint fills them, and its load_weights returns "
                f"{check.returned}, so {check.function}'s check that every parameter was loaded ({check.gate}, its "
                f"raise at {check.raises}) does not run (no error, no log line)")
        file, line = check.gate.rsplit(":", 1)
        at = EngineFunction(file, int(line), check.function, drafter)
        if every:
            return degrades(rule, ctx, told + ": the drafter computes with whatever memory those parameters were "
                            "given, in every one of its layers", "near zero but by chance, not predictable from the "
                            "files: every layer adds a bias of uninitialised memory (zero only where the allocator's "
                            "block happened to hold zeros), so the head does not compute what it was trained to",
                            evidence, at)
        partial = [(told, f"{len(empty)} parameter(s) of uninitialised memory, in some of the drafter's layers", at)]
    lost = [p for p in tensors if p.fate == DROPPED and p.name not in unused]
    total = sum(_numel(ctx, p.name) for p in tensors if p.name not in unused) or 1
    share = sum(_numel(ctx, p.name) for p in lost) / total
    where = EngineFunction(lost[0].where.rsplit(":", 1)[0], int(lost[0].where.rsplit(":", 1)[1]), "load_weights",
                           drafter) if lost else None
    shown = ", ".join(f"{p.name} ({p.into})" for p in lost[:4]) + (f" and {len(lost) - 4} more" if len(lost) > 4 else "")
    if lost and share >= 0.5:
        return degrades(rule, ctx, f"the release loads none of {shown}: {share:.0%} of the drafter's parameters, "
                        "so its layers keep the values they were built with (no error, no log line)",
                        "near zero: the drafter drafts from weights it was never given, on every request", evidence,
                        where)
    ignored = [p for p in keys if p.fate == "ignored"]
    said = [f"the release does not load {shown} (no error, no log line)"] if lost else []
    said += [f"the drafter config sets {', '.join(f'{p.name} = {p.into}' for p in ignored)}, which "
             f"{drafter.name} never reads: the head runs as if unset"] if ignored else []
    figures = [f"{_percent(share)} of the drafter's parameters not loaded"] if lost else []
    figures += [f"{len(ignored)} of the head's settings ignored"] if ignored else []
    said, figures = said + [t for t, _, _ in partial], figures + [f for _, f, _ in partial]
    if said:
        return warns(rule, ctx, "; ".join(said), ", ".join(figures), evidence,
                     where or (partial[0][2] if partial else None)
                     or EngineFunction(owner.where, drafter.lineno, drafter.name, drafter))
    unknown = [p.name for p in tensors if p.fate == "unknown"]
    if unknown:
        return draft_finding(rule, ctx, Status.UNKNOWN, f"where {', '.join(unknown[:4])} goes could not be played out "
                             "of the release's load_weights", evidence)
    return draft_finding(rule, ctx, Status.PASSES, f"every tensor and head key of the drafter is accounted for "
                         f"({len(tensors)} tensors, {len(keys)} keys)", evidence)

