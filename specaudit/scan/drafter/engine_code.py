"""What the drafter checks read of the release's own code, never of the drafter's name: the functions a rule's
``params.engine`` names (found on the launch's traced path first), the drafter-config keys they read, the fc a
drafter module builds (played out on the drafter's config.json), the aux layers a target class captures, and where
the release raises the draft's positions to the target's.
"""

from __future__ import annotations

import ast
import fnmatch

from ...core.types import EngineFunction
from ...play.player import Coverage, LiteralScope, call, dotted
from ...play.values import UNKNOWN
from ..facts import SyntaxProblem
from ..judge import Judge
from .context import DraftContext, site_of

# The release's functions that read an EAGLE-3 head's `eagle_config.use_aux_hidden_state` (vllm PR #27688): the V1
# proposer's (vllm/v1/spec_decode/eagle.py 0.14 to 0.17, llm_base_proposer.py 0.20 on) and Model Runner V2's
# (eagle3_utils.py, 0.33). Where the flag is false and the release reads it, the head runs on the target's last
# hidden state: llama_eagle3.py builds no fc and skips the checkpoint's fc.* weights.
AUX_FLAG_READERS = ("_get_eagle3_use_aux_hidden_state_from_config", "requires_aux_hidden_states")


AUX_FLAG_FILES = ("vllm/v1/spec_decode/*.py", "vllm/v1/worker/gpu/spec_decode/eagle/*.py")


def without_aux(ctx: DraftContext) -> EngineFunction | None:
    """The release's reader of the drafter's ``eagle_config.use_aux_hidden_state``, where the drafter sets it false
    and the release reads it (the function's own code reads that key): the head then takes no aux hidden states."""
    eagle_config = ctx.draft_config.get("eagle_config")
    if not isinstance(eagle_config, dict) or eagle_config.get("use_aux_hidden_state", True) or ctx.judge is None:
        return None
    for fn in ctx.judge.engine_functions(AUX_FLAG_READERS, AUX_FLAG_FILES):
        reads = config_reads(fn.node)
        if ("eagle_config", "use_aux_hidden_state") in reads or ("use_aux_hidden_state",) in reads:
            return fn
    return None


# Where a drafter config may declare the target layers its head was trained on (vLLM, SGLang, speculators, ModelOpt).
AUX_DECLARED: tuple[tuple[str, ...], ...] = (
    ("eagle_aux_hidden_state_layer_ids",), ("eagle_config", "eagle_aux_hidden_state_layer_ids"),
    ("aux_hidden_state_layer_ids",), ("eagle_config", "layer_ids"))


def declared_aux(config: dict) -> dict[tuple[str, ...], list[int]]:
    found: dict[tuple[str, ...], list[int]] = {}
    for where in AUX_DECLARED:
        value: object = config
        for key in where:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, list) and value and all(isinstance(i, int) for i in value):
            found[where] = value
    return found


def config_reads(function: ast.AST) -> set[tuple[str, ...]]:
    """The config keys a function reads: ``getattr(c, "k")``, ``hasattr(c, "k")`` and ``hf_config.k`` as ("k",);
    ``v.get("k")`` and ``v["k"]`` as ("c", "k") where ``v = getattr(c, "c")`` (or ``c["c"]``, or a loop over names)."""
    loops: dict[str, list[str]] = {}  # a loop variable over literal names
    for node in ast.walk(function):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, (ast.Tuple, ast.List)):
            loops[node.target.id] = [e.value for e in node.iter.elts if isinstance(e, ast.Constant)
                                     and isinstance(e.value, str)]
    containers: dict[str, list[str]] = {}
    configs = {"hf_config", "config", "draft_hf_config"}
    reads: set[tuple[str, ...]] = set()

    def keys(node: ast.expr | None) -> list[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        return loops.get(node.id, []) if isinstance(node, ast.Name) else []

    def named(node: ast.AST) -> list[str]:  # getattr(c, "k") / c.get("k") / c["k"] -> the keys
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                and len(node.args) >= 2:
            return keys(node.args[1])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            return keys(node.args[0])
        if isinstance(node, ast.Subscript):
            return keys(node.slice)
        return []

    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Attribute) and value.attr in configs or \
                    isinstance(value, ast.Name) and value.id in configs:
                configs.add(node.targets[0].id)
            elif named(value):
                containers[node.targets[0].id] = named(value)
    for node in ast.walk(function):
        base = node.args[0] if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args else \
            node.func.value if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else \
            node.value if isinstance(node, (ast.Subscript, ast.Attribute)) else None
        owner = base.id if isinstance(base, ast.Name) else None
        if isinstance(node, ast.Attribute) and owner in configs and not isinstance(node.ctx, ast.Store):
            reads.add((node.attr,))  # not what it assigns: SGLang's `config.eagle_aux_hidden_state_layer_ids = ...`
        for key in named(node):
            if owner in containers and not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                reads |= {(container, key) for container in containers[owner]}
            else:
                reads.add((key,))
    return reads


def evaluate_layers(function: ast.FunctionDef | ast.AsyncFunctionDef, layers: int) -> list[int] | None:
    """The layer ids a target's default-layers method returns for a model of ``layers`` layers, played out
    (play.player) with every ``<...>.num_hidden_layers`` it reads the layer count and every ``len(<...>)`` of a named
    sequence that many layers; None where it plays a statement only in part or its ways do not agree on a list of ints."""
    counts = {name: layers for node in ast.walk(function) if isinstance(node, ast.Attribute)
              and node.attr == "num_hidden_layers" and (name := dotted(node))}
    sequences = {name: range(layers) for node in ast.walk(function) if isinstance(node, ast.Call)
                 and dotted(node.func) == "len" and len(node.args) == 1 and (name := dotted(node.args[0]))}
    coverage = Coverage()
    try:
        outcomes, _ = call(function, LiteralScope(), [], {}, fields={"self": {}, **counts, **sequences},
                           coverage=coverage)
    except (ValueError, RecursionError):
        return None
    if coverage.opaque:  # a statement it could not play (an if on what it does not know, a loop) may change them
        return None
    returned = {tuple(o.method) if isinstance(o.method, (list, tuple)) else None for o in outcomes if o.raises is None}
    found = returned.pop() if len(returned) == 1 and len(outcomes) == 1 else None
    return list(found) if found is not None and all(type(i) is int for i in found) else None


def predicate_members(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str] | None:
    """The enum members for which a predicate method answers True: ``return self == E.A`` or ``return self in (E.A,
    E.B)``; None for any other body."""
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return)]
    if len(returns) != 1 or not isinstance(returns[0].value, ast.Compare):
        return None
    test = returns[0].value
    if len(test.ops) != 1 or not isinstance(test.left, ast.Name) or test.left.id != "self":
        return None
    right = test.comparators[0]
    members = right.elts if isinstance(test.ops[0], ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)) \
        else [right] if isinstance(test.ops[0], ast.Eq) else []
    names = {m.attr for m in members if isinstance(m, ast.Attribute)}
    return names if names and len(names) == len(members) else None


def capture_guard(function: ast.AST, flag: str) -> str | None:
    """The predicate (``spec_algorithm.is_eagle3()``) under which a function sets ``<config>.<flag> = True``."""
    for node in ast.walk(function):
        if not isinstance(node, ast.If) or not isinstance(node.test, ast.Call):
            continue
        called = node.test.func
        sets = any(isinstance(s, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == flag
                                                     for t in s.targets)
                   and isinstance(s.value, ast.Constant) and s.value.value is True for s in node.body)
        if sets and isinstance(called, ast.Attribute):
            return called.attr
    return None


RAISES_POSITIONS = ("_maybe_override_draft_max_position_embeddings",)  # vLLM 0.32 on (config/speculative.py)


def positions_raised(judge: Judge) -> EngineFunction | None:
    """The release's function that raises an EAGLE draft's max_position_embeddings to the target's max model len:
    one that assigns ``max_position_embeddings`` on the draft's config (vLLM 0.32 on; none before)."""
    for fn in judge.engine_functions(RAISES_POSITIONS, ("vllm/config/speculative.py",)):
        if any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "max_position_embeddings"
                                                for t in n.targets) for n in ast.walk(fn.node)):
            return fn
    return None


def positions_guard(judge: Judge, raiser: EngineFunction) -> tuple[frozenset[str], str] | None:
    """The rope types whose drafts the release's raising function raises, where it guards the raise on them (vLLM
    0.33: ``if not _rope_only_sizes_cache(draft_hf_config): return``, the helper testing each rope parameters'
    ``rope_type`` against the module's ``_CACHE_ONLY_ROPE_TYPES``): that set, and the rope type a config without one
    has. None where the raise is unguarded (0.32: every draft is raised)."""
    try:
        tree = judge.release.syntax(raiser.file)
    except (SyntaxProblem, OSError):
        return None
    helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    constants = {t.id: stmt.value for stmt in tree.body if isinstance(stmt, ast.Assign)
                 for t in stmt.targets if isinstance(t, ast.Name)}
    called = {n.func.id for n in ast.walk(raiser.node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    for helper in (helpers[name] for name in sorted(called) if name in helpers):
        for test in (n for n in ast.walk(helper) if isinstance(n, ast.Compare)):
            if len(test.ops) != 1 or not isinstance(test.ops[0], ast.In) or not isinstance(test.comparators[0], ast.Name):
                continue
            names = _strings_of(constants.get(test.comparators[0].id))
            read = test.left
            if names and isinstance(read, ast.Call) and isinstance(read.func, ast.Attribute) and \
                    read.func.attr == "get" and read.args and isinstance(read.args[0], ast.Constant):
                default = read.args[1].value if len(read.args) > 1 and isinstance(read.args[1], ast.Constant) else None
                return names, str(default)
    return None


def _strings_of(node: ast.expr | None) -> frozenset[str]:
    """The strings of ``frozenset({...})``, a set, tuple or list literal of strings (else none)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set") \
            and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, (ast.Set, ast.Tuple, ast.List)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return frozenset(e.value for e in node.elts)  # type: ignore[attr-defined]
    return frozenset()


def rope_types(config: dict, default: str) -> list[str]:
    """The rope types of a checkpoint config as transformers gives the engine its ``rope_parameters`` (a nested dict
    per layer type, or one dict; the legacy ``rope_scaling`` with ``type`` read as ``rope_type``): one per set of
    parameters, ``default`` where a set names none; none where the config has no rope parameters."""
    params = config.get("rope_parameters") or config.get("rope_scaling")
    if not isinstance(params, dict) or not params:
        return []
    nested = [p for p in params.values() if isinstance(p, dict) and p]
    return [str(p.get("rope_type", p.get("type", default))) for p in (nested or [params])]


def matches_any(file: str, globs: list[str] | tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(file, g) for g in globs)


def followed(judge: Judge, start: EngineFunction, follow: set[str], follow_files: list[str],
              depth: int = 3) -> list[EngineFunction]:
    """A function and those it calls on ``self`` (or ``super()``) from its own file, a few calls deep, with the calls of
    other objects' methods named in ``follow`` (where the traced path reaches them, else in ``follow_files``)."""
    seen: dict[tuple[str, int], EngineFunction] = {(start.file, start.line): start}
    frontier = [start]
    for _ in range(depth):
        following = []
        for fn in frontier:
            for node in ast.walk(fn.node):
                if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                    continue
                owner, name = node.func.value, node.func.attr
                own = isinstance(owner, ast.Name) and owner.id == "self" or \
                    isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super"
                if own:
                    found = [f for f in judge.engine_functions([name], [fn.file]) if f.file == fn.file]
                elif name in follow:
                    found = judge.engine_functions([name], follow_files)
                else:
                    continue
                for callee in found:
                    if (callee.file, callee.line) not in seen:
                        seen[callee.file, callee.line] = callee
                        following.append(callee)
        frontier = following
    return list(seen.values())


def draft_build(functions: list[EngineFunction], builder: str, draft: str) -> tuple[EngineFunction, ast.Call] | None:
    """The call that builds the draft model: ``<builder>(..., model_config=<...draft_model_config...>)``."""
    for fn in functions:
        for node in ast.walk(fn.node):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == builder and any(
                    k.arg == "model_config" and draft in ast.unparse(k.value) for k in node.keywords):
                return fn, node
    return None


def reads_name(functions: list[EngineFunction], names: set[str]) -> EngineFunction | None:
    """The first of the functions that reads one of the names (an attribute, or a string naming it)."""
    for fn in functions:
        for node in ast.walk(fn.node):
            if isinstance(node, ast.Attribute) and node.attr in names or \
                    isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                return fn
    return None


def raise_message(function: ast.AST, values: dict[str, object]) -> tuple[int | None, str | None]:
    """The line of the first ``raise Exc("...")`` of a function, and its message, the f-string's names filled from
    ``values``."""
    for node in ast.walk(function):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            name = node.exc.func.id if isinstance(node.exc.func, ast.Name) else "Exception"
            parts: list[str] = []
            for piece in ([node.exc.args[0]] if not isinstance(node.exc.args[0], ast.JoinedStr)
                          else node.exc.args[0].values):
                if isinstance(piece, ast.Constant):
                    parts.append(str(piece.value))
                elif isinstance(piece, ast.FormattedValue):
                    text = ast.unparse(piece.value)
                    parts.append(str(values[text]) if text in values else f"{{{text}}}")
            return node.lineno, f"{name}: {''.join(parts)}"
    return None, None


def flag_when_missing(function: ast.AST, flag: str) -> str | None:
    """The config key whose absence sets ``self.<flag> = True``: ``if <config>.<key> is None: ... self.<flag> = True``
    (SGLang's LlamaForCausalLMEagle3.__init__: ``if config.draft_vocab_size is None: self.load_lm_head_from_target =
    True``)."""
    for node in ast.walk(function):
        test = node.test if isinstance(node, ast.If) else None
        if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Attribute) and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Is) and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value is None):
            continue
        if any(isinstance(s, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == flag for t in s.targets)
               and isinstance(s.value, ast.Constant) and s.value.value is True for s in ast.walk(node)):
            return test.left.attr
    return None


def shares_under(function: ast.AST, flag: str, setter: str) -> bool:
    """Whether a function calls ``<model>.<setter>(...)`` under an ``if`` that reads ``<model>.<flag>``."""
    for node in ast.walk(function):
        if isinstance(node, ast.If) and any(isinstance(n, ast.Attribute) and n.attr == flag for n in ast.walk(node.test)) \
                and any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == setter
                        for s in node.body for n in ast.walk(s)):
            return True
    return False


def class_method(judge: Judge, module: str, class_name: str, name: str) -> tuple[str, ast.AST | None]:
    """A class's own method, read from its module in the release (the judge's index: engine_functions answers with the
    functions of that name on the traced path first, wherever they are)."""
    relpath = judge.release.files.get(module)
    if relpath is None:
        return module.replace(".", "/") + ".py", None
    try:
        tree = judge.release.syntax(relpath)
    except (SyntaxProblem, OSError):  # a file that does not parse: nothing read from it
        return relpath, None
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == class_name:
            return relpath, next((f for f in stmt.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                                  and f.name == name), None)
    return relpath, None


def module_functions(judge: Judge, module: str) -> tuple[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    """The functions and methods of one module of the release, in file order (the judge's index)."""
    relpath = judge.release.files.get(module)
    if relpath is None:
        return module.replace(".", "/") + ".py", []
    try:
        tree = judge.release.syntax(relpath)
    except (SyntaxProblem, OSError):  # a file that does not parse: nothing read from it
        return relpath, []
    return relpath, [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def self_call(stmt: ast.stmt, attribute: str) -> ast.Call | None:
    """The call of ``self.<attribute> = <Call>(...)``."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute) \
            and stmt.targets[0].attr == attribute and isinstance(stmt.targets[0].value, ast.Name) \
            and stmt.targets[0].value.id == "self" and isinstance(stmt.value, ast.Call):
        return stmt.value
    return None


def drafter_module(ctx: DraftContext) -> tuple[str, str] | None:
    """The module and class the release registers for the drafter's architectures."""
    entry = ctx.judge.registered(list(ctx.draft_config.get("architectures") or ())) if ctx.judge else None
    return (entry.module, entry.class_name) if entry is not None else None


def release_fc(ctx: DraftContext, attribute: str) -> tuple[int | None, str, EngineFunction | None]:
    """The input width of the fc the release builds for this drafter: the function of the drafter class's module that
    assigns ``self.<attribute> = Linear(<in>, ...)`` (SGLang's llama_eagle3.py LlamaModel.__init__), its statements
    before that one played out on the drafter's config.json (``specaudit.play``, never run) and ``<in>``
    evaluated there. SGLang 0.5.8 builds ``hidden_size_in * 3``; 0.5.17 and 0.5.23 ``hidden_size_in *
    num_aux_hidden_states`` (the config's num_aux_hidden_states, else the length of eagle_config's
    eagle_aux_hidden_state_layer_ids, else 3); hidden_size_in is target_hidden_size where the config has one."""
    import copy


    found = drafter_module(ctx)
    if found is None:
        return None, "the release registers no class for the drafter's architectures: which fc it builds is not known", \
            None
    relpath, functions = module_functions(judge_of(ctx), found[0])
    for function in functions:
        at = next((i for i, stmt in enumerate(function.body) if self_call(stmt, attribute)), None)
        if at is None:
            continue
        built = self_call(function.body[at], attribute)
        assert built is not None
        width = built.args[0] if built.args else next(
            (k.value for k in built.keywords if k.arg in ("in_features", "input_size")), None)
        where = EngineFunction(relpath, function.body[at].lineno, function.name, function)
        if width is None:
            break
        played = ast.parse("def played(self, config):\n    pass").body[0]
        assert isinstance(played, ast.FunctionDef)
        played.args = function.args
        played.body = [*function.body[:at], ast.copy_location(ast.Return(width), function.body[at])]
        fields = {f"self.{t.attr}": UNKNOWN for stmt in function.body[:at] for node in ast.walk(stmt)
                  if isinstance(node, ast.Assign) for t in node.targets
                  if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
        try:
            outcomes, _ = call(played, LiteralScope(where=relpath), [], {"config": copy.deepcopy(ctx.draft_config)},
                               fields=fields)
        except (ValueError, RecursionError):
            outcomes = []
        values = {o.method for o in outcomes if o.raises is None}
        code = " ".join(ast.unparse(width).split())
        if len(values) == 1 and isinstance(next(iter(values)), int):
            value = next(iter(values))
            return value, f"{code} ({site_of(where)}, on the drafter config)", where
        return None, f"{site_of(where)} builds fc with {code} inputs, which this drafter config does not fix", where
    return None, f"{relpath} (the drafter's module) assigns no self.{attribute}: which fc it builds is not known", None


def file_functions(judge: Judge, names: list[str], files: list[str]) -> list[EngineFunction]:
    """The functions of these names in the files the globs name, on the traced path or not."""
    found = []
    for module, relpath in sorted(judge.release.files.items()):
        if matches_any(relpath, files):
            found += [EngineFunction(relpath, f.lineno, f.name, f) for f in module_functions(judge, module)[1]
                      if f.name in names]
    return found


def judge_of(ctx: DraftContext) -> Judge:
    assert ctx.judge is not None
    return ctx.judge


def layers_of(statements: list[ast.stmt], result: ast.expr, layers: int) -> list[int] | None:
    """A list expression evaluated after the simple assignments among ``statements``, for a target of ``layers``
    layers (evaluate_layers on a function made of them)."""
    function = ast.parse("def _():\n    pass").body[0]
    assert isinstance(function, ast.FunctionDef)
    function.body = [s for s in statements if isinstance(s, ast.Assign) and len(s.targets) == 1
                     and isinstance(s.targets[0], ast.Name)] + [ast.copy_location(ast.Return(result), result)]
    return evaluate_layers(ast.fix_missing_locations(function), layers)


def captured_layers(function: ast.FunctionDef | ast.AsyncFunctionDef, ids: list[int] | None,
                    layers: int) -> list[int] | None:
    """The layer indices a target's ``set_eagle3_layers_to_capture(layer_ids)`` captures, read from its code: under
    ``if layer_ids is None`` the list literal it sets (SGLang's ``[2, num_layers // 2, num_layers - 3]``), else the
    comprehension over the ids (``[val + 1 for val in layer_ids]``: the model captures the input of layer i, the output
    of layer i - 1). None where the method has another shape."""
    params = [a.arg for a in function.args.args]
    if len(params) < 2:
        return None
    param = params[1]
    for node in ast.walk(function):
        test = node.test if isinstance(node, ast.If) else None
        if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == param
                and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.IsNot))
                and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None):
            continue
        assert isinstance(node, ast.If)
        default, given = (node.body, node.orelse) if isinstance(test.ops[0], ast.Is) else (node.orelse, node.body)
        if ids is None:
            lists = [n for s in default for n in ast.walk(s) if isinstance(n, (ast.List, ast.Tuple)) and n.elts]
            return layers_of([*function.body, *default], lists[0], layers) if len(lists) == 1 else None
        comps = [n for s in given for n in ast.walk(s) if isinstance(n, ast.ListComp) and len(n.generators) == 1
                 and isinstance(n.generators[0].target, ast.Name) and isinstance(n.generators[0].iter, ast.Name)
                 and n.generators[0].iter.id == param]
        if len(comps) != 1:
            return None
        target = comps[0].generators[0].target
        assert isinstance(target, ast.Name)
        kept = []
        for i in ids:
            value = layers_of([ast.Assign([ast.Name(target.id, ast.Store())], ast.Constant(i))],
                               ast.List([comps[0].elt], ast.Load()), layers)
            if value is None:
                return None
            kept += value
        return kept
    return None


def skips_fc(ctx: DraftContext, attribute: str) -> EngineFunction | None:
    """The drafter module's function that applies fc only where the states differ in width from the embeddings
    (SGLang's llama_eagle3.py forward: ``if hidden_states.shape[-1] != embeds.shape[-1]: ... self.fc(...)``)."""
    found = drafter_module(ctx)
    if found is None:
        return None
    relpath, functions = module_functions(judge_of(ctx), found[0])
    for function in functions:
        for node in ast.walk(function):
            if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1 \
                    and isinstance(node.test.ops[0], ast.NotEq) and "shape" in ast.unparse(node.test) \
                    and any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == attribute
                            for s in node.body for n in ast.walk(s)):
                return EngineFunction(relpath, node.lineno, function.name, function)
    return None
