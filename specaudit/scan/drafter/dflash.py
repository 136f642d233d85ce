"""vLLM's parallel drafters: DFlash (``dflash``, 0.20 on), DSpark (``dspark``, 0.26 on) and P-EAGLE (an EAGLE-3 head
launched with ``parallel_drafting: true``). Each check reads what the release does with the drafter's config.json by
playing the release's own function out on it (``specaudit.play``: its statements run over the config's values, never
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
from dataclasses import replace
from typing import Any

from ...core.types import EngineFunction, Finding, Rule, Status
from ...play.modules import ModuleScope, module_of
from ...play.player import Player, answer, call, dotted, message
from ...play.values import CLASS, Raised, Unknown
from ..facts import ReleaseModules
from ..judge import Judge
from .context import DraftContext, check, draft_finding, engine_finding, site_of, unread_finding
from .fc import layers_lost

# -- playing a function of the release out on a drafter config ---------------------------------------------------------


def _config(ctx: DraftContext) -> dict[str, Any]:
    """The draft's hf_config as the engine holds it: the drafter config's keys as attributes (EAGLEConfig copies them
    onto itself for dflash and eagle3; DSpark's Qwen3 and Gemma-4 drafts keep their own config)."""
    return copy.deepcopy(dict(ctx.draft_config))


def _speculative(ctx: DraftContext, hf_config: dict[str, Any]) -> dict[str, Any]:
    return {"draft_model_config": {"hf_config": hf_config, "model": ctx.draft.path,
                                   "architectures": list(ctx.draft_config.get("architectures") or [])},
            "method": ctx.launch.method, "num_speculative_tokens": ctx.launch.speculative.get("num_speculative_tokens"),
            "parallel_drafting": True}


def _scope(ctx: DraftContext, module: str, function: ast.FunctionDef | None = None) -> ModuleScope | None:
    """A module of the release as the player reads it, from the judge's index; ``function``: a method of one of its
    classes, played out on an object of it (``self``)."""
    code = ReleaseModules(_judge(ctx).release)
    found = code.module_tree(module)
    if found is None:
        return None
    tree, where = found
    owner = next((c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and function in c.body), None) \
        if function is not None else None
    return ModuleScope(code, tree, where, owner=owner)


def _this(scope: ModuleScope, fields: dict[str, Any]) -> dict[str, Any]:
    """``self`` for a method played out: an object of its class holding these fields."""
    return {**fields, CLASS: scope.this_class} if scope.this_class is not None else fields


def _played(ctx: DraftContext, fn: EngineFunction, passed: list[Any], fields: dict[str, Any] | None,
            read: str | None = None) -> tuple[str, Any, EngineFunction]:
    """One function of the release played out on the drafter's config: ("returns", its value, fn), ("raises", the
    error, where it raises) or ("unknown", why, fn). ``fields``: for a method, those of ``self``; ``read``: a field of
    ``self`` the method sets, whose value is the answer."""
    scope = _scope(ctx, module_of(fn.file), fn.node)
    if scope is None:
        return "unknown", f"{fn.file} could not be read", fn
    try:
        outcomes, _ = call(fn.node, scope, passed, {},
                           fields={"self": _this(scope, fields)} if fields is not None else None)
        if read is not None:
            outcomes = [o if o.raises is not None else
                        replace(o, method=(o.env.get("self") or {}).get(read, Unknown(f"self.{read}")))
                        for o in outcomes]
        value = answer(outcomes, scope.where)
    except Raised as raised:
        file, line, _ = raised.site or (fn.file, fn.line, "")
        return "raises", raised.error, EngineFunction(file, line, fn.name, fn.node, fn.on_path)
    except (ValueError, RecursionError):
        return "unknown", f"{site_of(fn)} could not be played out", fn
    if isinstance(value, Unknown):
        return "unknown", f"{site_of(fn)} reads {_what(value)} the drafter's files do not fix", fn
    return "returns", value, fn


def _what(unknown: Unknown) -> str:
    return f"{unknown.why}, which" if unknown.why else "what"


def _is_method(fn: EngineFunction) -> bool:
    return bool(fn.node.args.args) and fn.node.args.args[0].arg == "self"


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
    spec = _speculative(ctx, _config(ctx))
    method = _is_method(reader)
    kind, value, _ = _played(ctx, reader, [] if method else [spec], {"speculative_config": spec} if method else None)
    return reader, kind, value


def engine_architectures(ctx: DraftContext, method: str) -> list[str]:
    """The drafter's architectures as the release's EAGLEConfig renames them for ``method`` (its comprehension in the
    ``method == "<method>"`` branch, played out on each); as they are where it has none (DSpark)."""
    raw = [str(a) for a in ctx.draft_config.get("architectures") or []]
    scope = _scope(ctx, EAGLE_CONFIG)
    branch = next((n for n in ast.walk(scope.tree) if isinstance(n, ast.If) and isinstance(n.test, ast.Compare)
                   and isinstance(n.test.comparators[0], ast.Constant) and n.test.comparators[0].value == method),
                  None) if scope is not None else None
    comp = next((n for s in branch.body for n in ast.walk(s) if isinstance(n, ast.ListComp)), None) if branch else None
    architectures = dotted(comp.generators[0].iter) if comp is not None and len(comp.generators) == 1 else None
    if scope is None or comp is None or architectures is None:
        return raw
    renamed = []
    for arch in raw:  # each played on its own: one the release's comprehension cannot rename stays as it is
        one = Player("", {}, scope).evaluate(comp, {architectures: [arch]})
        renamed.append(str(one[0]) if isinstance(one, list) and len(one) == 1 else arch)
    return renamed


def _draft_class_modules(ctx: DraftContext, architectures: list[str]) -> tuple[Any, list[ModuleScope]]:
    """The registry's entry for the draft architectures, and the modules of its class's MRO (the fc is built by the
    model class a module beside it defines: qwen3_dflash.py's DFlashQwen3Model for DFlashQwen3ForCausalLM)."""
    judge = _judge(ctx)
    entry = judge.registered(architectures)
    if entry is None:
        return None, []
    names = [entry.module, *(module for module, _ in judge.mro(entry.module, entry.class_name))]
    return entry, [m for m in (_scope(ctx, n) for n in dict.fromkeys(names)) if m is not None]


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
            call_built = built.value
            assert isinstance(call_built, ast.Call)
            width = call_built.args[0] if call_built.args else next(
                (k.value for k in call_built.keywords if k.arg in ("input_size", "in_features")), None)
            where = EngineFunction(module.where, built.lineno, function.name, function)
            if width is None:
                return None, f"{site_of(where)} builds fc with no input size specaudit can read", where
            scope = _scope(ctx, module_of(module.where), function) or module
            config = _config(ctx)
            vllm_config = {"speculative_config": _speculative(ctx, config), "model_config": {}}
            text = " ".join(ast.unparse(width).split())
            try:
                outcomes, _ = call(function, scope, [], {"vllm_config": vllm_config, "config": config, "prefix": "",
                                                         "start_layer_id": 0},
                                   fields={"self": _this(scope, {})}, stop=(built, width))
                value = answer(outcomes, scope.where)
            except Raised as raised:
                return None, f"{site_of(where)}: the release raises before it builds fc ({raised.error})", where
            except (ValueError, RecursionError):
                value = Unknown()
            if isinstance(value, Unknown):
                return None, f"{site_of(where)} builds fc with {text} inputs, which reads {_what(value)} the " \
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
    lost = layers_lost(ids, kept, "ids", layers, f"it keeps 0, its input, to {layers}, its last layer's output")
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
    scope = _scope(ctx, module_of(default.file), default.node)
    if scope is None:
        return None
    # The model as these fields only, not an object of its class: `hasattr(self, "language_model")` answers from them
    # (a text model's __init__ sets none), where an object of the class may hold fields its __init__ sets.
    this = {"model": {"layers": [None] * layers}, "config": dict(ctx.target_text)}
    try:
        outcomes, _ = call(default.node, scope, [], {}, fields={"self": this})
        value = answer(outcomes, scope.where)
    except (Raised, ValueError, RecursionError):
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
            raised = next((n for n in ast.walk(function) if isinstance(n, ast.Raise)), None)
            if raised is not None:
                return message(raised, {"expected": width, "hidden_states": {"shape": (given,)}}, module)
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
    config, method = _config(ctx), _is_method(reader)
    kind, value, where = _played(ctx, reader, [] if method else [config],
                                 {"draft_model_config": {"hf_config": config}} if method else None,
                                 read="parallel_drafting_token_id" if method else None)
    evidence = f"{site_of(reader)} reads the mask token of the drafter config"
    if kind == "raises":
        return engine_finding(rule, ctx, Status.BLOCKS, "the drafter config names the parallel slots' token under none "
                               f"of the keys {site_of(reader)} accepts", evidence, where, str(value))
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
                requirement = (EngineFunction(module.where, raised.lineno, function.name, function),
                               message(raised, {}, module))
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
