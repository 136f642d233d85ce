"""Heads that draft from the target's last hidden state with no decoder layer of their own, against what the release
builds for the launch: Medusa's residual blocks and lm heads (vllm/model_executor/models/medusa.py) and the
MLPSpeculator's stages (mlp_speculator.py), the width of the state they are fed, and the vocabulary their ids are
in; and a custom proposer class (custom_class), which the release imports by the path the launch names.

What the release builds is read from its code: its config class's defaults (MedusaConfig, MLPSpeculatorConfig
``__init__``), and two things SpeculativeConfig.__post_init__ does to the draft's config in every release that has
these methods (0.8 to 0.26): ``num_lookahead_tokens = num_speculative_tokens``, which MedusaConfig's setter turns
into ``num_heads`` and the MLPSpeculator reads as its number of stages (``max_speculative_tokens``), so the draft
builds one head or stage per draft token; and, from 0.26 on, the draft's ``vocab_size`` set to the target's for
Medusa (read where the release does it). A head the draft builds with no tensor in the checkpoint fails
DefaultModelLoader's strict check ("Following weights were not initialized from checkpoint"); one of another shape
fails its weight loader.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any

from ...core.types import EngineFunction, Finding, Rule, Status
from .context import DraftContext, as_count, check, degrades, draft_finding, engine_finding, site_of, unread_finding
from .engine_code import class_method, drafter_module

MEDUSA_CONFIG = ("vllm.transformers_utils.configs.medusa", "MedusaConfig")
MLP_CONFIG = ("vllm.transformers_utils.configs.mlp_speculator", "MLPSpeculatorConfig")
SPECULATIVE_FILES = ("vllm/config/speculative.py", "vllm/config.py")
# vLLM 0.8's V0 SpecDecodeWorker._vocab_size: `assert all(vocab_sizes[0] == vocab_size for ...)` over the proposer
# worker's and the scorer's (the target's) vocabulary sizes, when the worker is set up.
V0_VOCAB_CHECK = ("_vocab_size", "vllm/spec_decode/spec_decode_worker.py")


def _defaults(ctx: DraftContext, module: str, class_name: str) -> dict[str, Any] | None:
    """The literal defaults of a config class's ``__init__`` in the release; None where it cannot be read."""
    if ctx.judge is None:
        return None
    _, init = class_method(ctx.judge, module, class_name, "__init__")
    if not isinstance(init, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    args = init.args.args[len(init.args.args) - len(init.args.defaults):]
    found: dict[str, Any] = {}
    for arg, default in zip(args, init.args.defaults):
        try:
            found[arg.arg] = ast.literal_eval(default)
        except ValueError:
            continue
    return found


def _config(ctx: DraftContext, defaults: dict[str, Any], renames: bool = False) -> dict[str, Any]:
    """The drafter's config.json as the release's config class reads it: MedusaConfig.from_pretrained first renames
    any key with "num" and "heads" in it to num_heads ("medusa_num_heads") and with "num" and "layers" to
    num_hidden_layers; then the class's defaults fill what is missing."""
    config = dict(ctx.draft_config)
    if renames:
        for key in list(config):
            if "num" in key and "heads" in key:
                config["num_heads"] = config.pop(key)
            elif "num" in key and "layers" in key:
                config["num_hidden_layers"] = config.pop(key)
    return {**defaults, **{k: v for k, v in config.items() if v is not None or k not in defaults}}


def _own_tensors(ctx: DraftContext, prefix: str) -> dict[str, Any]:
    """The checkpoint's tensors under the names the model's load_weights gives them (it drops ``prefix``)."""
    return {name.replace(prefix, ""): tensor for name, tensor in ctx.draft.tensors.items()}


def _medusa_vocab_override(ctx: DraftContext) -> EngineFunction | None:
    """Where the release sets a Medusa draft's vocab_size to the target's (0.26: __post_init__, ``if self.method ==
    "medusa": ... draft_hf.vocab_size = target_vocab``)."""
    if ctx.judge is None:
        return None
    for fn in ctx.judge.engine_functions(["__post_init__"], SPECULATIVE_FILES):
        if not fn.file.startswith("vllm/config"):
            continue
        for node in ast.walk(fn.node):
            if isinstance(node, ast.If) and "'medusa'" in ast.unparse(node.test):
                for stmt in ast.walk(node):
                    if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "vocab_size"
                                                            for t in stmt.targets):
                        return EngineFunction(fn.file, stmt.lineno, fn.name, fn.node, fn.on_path)
    return None


def _v0_vocab_check(ctx: DraftContext) -> EngineFunction | None:
    """The assert of the release's V0 speculative worker that the proposer's and the target's vocabularies are equal."""
    if ctx.judge is None:
        return None
    for fn in ctx.judge.engine_functions([V0_VOCAB_CHECK[0]], [V0_VOCAB_CHECK[1]]):
        assertion = next((n for n in ast.walk(fn.node) if isinstance(n, ast.Assert)), None)
        if fn.file == V0_VOCAB_CHECK[1] and assertion is not None:
            return EngineFunction(fn.file, assertion.lineno, fn.name, fn.node, fn.on_path)
    return None


def _ints(*values: Any) -> tuple[int, ...] | None:
    """The values, where every one is a count (an int, not a bool)."""
    return tuple(values) if all(isinstance(v, int) and not isinstance(v, bool) for v in values) else None


def _draft_tokens(ctx: DraftContext) -> int | None:
    return as_count(ctx.launch.speculative.get("num_speculative_tokens"))


def _quantized(ctx: DraftContext) -> bool:
    return bool(ctx.launch.speculative.get("quantization") or ctx.draft_config.get("quantization_config"))


def _compared(ctx: DraftContext) -> str:
    """What the passing weights check compared."""
    return " (a quantized draft: its modules, not their shapes)" if _quantized(ctx) else ", in the shapes it builds"


def _weights_problem(rule: Rule, ctx: DraftContext, expected: dict[str, tuple[int, ...]], tensors: dict[str, Any],
                     what: str, evidence: str, errors: dict[str, str]) -> Finding | None:
    """The first tensor the draft builds that the checkpoint lacks or holds in another shape, as the loader fails.
    A quantized draft's tensors are named and shaped by its quantization (``qweight``, scales): only whether each
    module the draft builds has some tensor is read, and DefaultModelLoader checks what loaded "for non-quantized
    models" only, so a module with none loads without a word."""
    if ctx.draft.unread:
        return None
    if _quantized(ctx):
        modules = dict.fromkeys(name.rpartition(".")[0] for name in expected)
        empty = [m for m in modules if not any(t.startswith(m + ".") for t in tensors)]
        if not empty:
            return None
        return degrades(rule, ctx, f"the checkpoint has no tensor of {', '.join(empty[:4])}"
                        f"{' and more' if len(empty) > 4 else ''}, which the release builds for {what}; the draft is "
                        "quantized, so the loader does not check what it loaded, and those heads draft from "
                        "uninitialised weights (no error)", "near zero for what those heads draft: weights never "
                        "loaded propose tokens unrelated to the target's", evidence)
    missing = [name for name in expected if name not in tensors]
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        return draft_finding(
            rule, ctx, Status.BLOCKS, f"the checkpoint lacks tensors the release builds for {what}: {shown}",
            evidence, error="ValueError: Following weights were not initialized from checkpoint: "
                            f"{{{', '.join(repr(m) for m in missing[:4])}{', ...' if len(missing) > 4 else ''}}}")
    for name, shape in expected.items():
        tensor = tensors[name]
        if tuple(tensor.shape) != tuple(shape):
            kind = next((k for k in errors if k in name), "")
            error = errors.get(kind) or f"AssertionError: Attempted to load weight (torch.Size({list(tensor.shape)})) " \
                                        f"into parameter (torch.Size({list(shape)}))"
            return draft_finding(rule, ctx, Status.BLOCKS, f"{tensor.describe()}: the release builds {list(shape)} "
                                 f"for {what}", evidence, tensor.file, error.format(shape=list(tensor.shape),
                                                                                   built=list(shape)))
    return None


# -- Medusa ----------------------------------------------------------------------------------------------------------

@check("medusa_heads")
def check_medusa_heads(rule: Rule, ctx: DraftContext) -> Finding | None:
    """Medusa's heads as the release builds them for the launch (medusa.py): ``num_heads`` residual blocks of
    ``num_hidden_layers`` hidden x hidden linears (``blocks.{i}.layers.{j}.weight``) and as many lm heads of
    vocab x hidden (``lm_heads.{i}.weight``; one ``lm_head`` where the config sets original_lm_head), with
    num_heads = num_speculative_tokens (the config's num_lookahead_tokens setter), the vocabulary the release gives
    the draft, and a ``token_map`` tensor where truncated_vocab_size is below it (load_weights asserts it)."""
    defaults = _defaults(ctx, *MEDUSA_CONFIG)
    if defaults is None:
        return None  # the release has no MedusaConfig: it builds no Medusa heads
    c = _config(ctx, defaults, renames=True)
    hidden, layers, vocab = c.get("hidden_size"), c.get("num_hidden_layers"), c.get("vocab_size")
    declared, k = c.get("num_heads"), _draft_tokens(ctx)
    heads = k if k is not None else declared
    override = _medusa_vocab_override(ctx)
    target_vocab = ctx.target_text.get("vocab_size")
    if override is not None and isinstance(target_vocab, int):
        vocab = target_vocab
    sizes = _ints(hidden, layers, vocab, heads)
    if sizes is None:
        return draft_finding(rule, ctx, Status.UNKNOWN, "the drafter config leaves the Medusa heads' sizes open "
                             f"(hidden_size {hidden}, num_hidden_layers {layers}, vocab_size {vocab}, heads {heads})",
                             "MedusaConfig")
    hidden, layers, vocab, heads = sizes
    truncated = _ints(c.get("truncated_vocab_size"))
    truncated_vocab = truncated[0] if truncated else vocab
    tensors = _own_tensors(ctx, "medusa_heads.")
    expected: dict[str, tuple[int, ...]] = {}
    for i in range(heads):
        for j in range(layers):
            expected[f"blocks.{i}.layers.{j}.weight"] = (hidden, hidden)
            if c.get("medusa_fc_bias"):
                expected[f"blocks.{i}.layers.{j}.bias"] = (hidden,)
    if c.get("original_lm_head"):
        if "lm_head.weight" not in tensors and "lm_heads.0.weight" in tensors:
            tensors["lm_head.weight"] = tensors["lm_heads.0.weight"]  # load_weights' alias
        expected["lm_head.weight"] = (truncated_vocab, hidden)
    else:
        expected |= {f"lm_heads.{i}.weight": (vocab, hidden) for i in range(heads)}
    if "token_map" in tensors:  # load_weights indexes the lm heads' rows by it: their first dimension is not compared
        expected = {n: s for n, s in expected.items() if "lm_head" not in n}
    vocab_how = f"the target's vocab_size {vocab} ({site_of(override)} sets the draft's to it)" if override else \
        f"vocab_size {vocab}"
    evidence = f"MedusaConfig: hidden_size {hidden}, num_hidden_layers {layers}, {vocab_how}; {heads} head(s) for " \
               f"{'num_speculative_tokens = ' + str(k) if k is not None else 'num_heads'} (the checkpoint's config " \
               f"declares {declared})"
    unread = unread_finding(rule, ctx, "the Medusa heads' tensors")
    found = _weights_problem(rule, ctx, expected, tensors, f"{heads} Medusa head(s)", evidence,
                             {"lm_head": "AssertionError (VocabParallelEmbedding.weight_loader: loaded_weight.shape"
                                         "[output_dim] == self.org_vocab_size; checkpoint {shape}, built {built})"})
    if found is not None:
        return found
    if unread is not None:
        return unread
    if truncated_vocab < vocab and "token_map" not in tensors:
        return draft_finding(rule, ctx, Status.BLOCKS, f"truncated_vocab_size {truncated_vocab} is below vocab_size {vocab} "
                             "and the checkpoint has no token_map tensor, which Medusa.load_weights asserts",
                             evidence, error="AssertionError")
    unused = f"; the checkpoint's heads past {heads} are not loaded" if isinstance(declared, int) and declared > heads \
        else ""
    return draft_finding(rule, ctx, Status.PASSES, f"the checkpoint holds the {heads} head(s) the release builds for "
                         f"this launch{_compared(ctx)}{unused}", evidence)


# -- MLPSpeculator ---------------------------------------------------------------------------------------------------

@check("mlp_speculator_stages")
def check_mlp_speculator_stages(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The MLPSpeculator's stages as the release builds them (mlp_speculator.py): max_speculative_tokens =
    num_lookahead_tokens = num_speculative_tokens stages, each an emb (vocab x inner), a proj (inner x emb_dim for
    the first, inner x inner after), a head (vocab x inner) and an ln (inner); with tie_weights one of each (two
    projs), shared by every stage. The config class asserts ``len(top_k_tokens_per_head) == n_predict`` (its default
    has 3) and the tied model n_predict > 1. More draft tokens than the checkpoint's n_predict (a multiple of it, which
    __post_init__ requires) build stages the checkpoint does not have."""
    defaults = _defaults(ctx, *MLP_CONFIG)
    if defaults is None or ctx.judge is None or drafter_module(ctx) is None:
        return None  # no MLPSpeculator in this release, or its registry refuses it (the registered rule says so)
    c = _config(ctx, defaults)
    n_predict, emb, vocab = c.get("n_predict"), c.get("emb_dim"), c.get("vocab_size")
    inner = c.get("inner_dim") or emb
    k = _draft_tokens(ctx)
    stages = k if k is not None else n_predict
    sizes = _ints(n_predict, emb, vocab, inner, stages)
    if sizes is None:
        return draft_finding(rule, ctx, Status.UNKNOWN, "the drafter config leaves the MLPSpeculator's sizes open "
                             f"(n_predict {n_predict}, emb_dim {emb}, inner_dim {inner}, vocab_size {vocab})",
                             "MLPSpeculatorConfig")
    n_predict, emb, vocab, inner, stages = sizes
    top_k = c.get("top_k_tokens_per_head")
    top_k = [5, 4, 3] if top_k is None else top_k  # MLPSpeculatorConfig.__init__'s own default
    evidence = f"MLPSpeculatorConfig: n_predict {n_predict}, emb_dim {emb}, inner_dim {inner}, vocab_size {vocab}, " \
               f"tie_weights {bool(c.get('tie_weights'))}; {stages} stage(s) for " \
               f"{'num_speculative_tokens = ' + str(k) if k is not None else 'n_predict'}"
    if isinstance(top_k, list) and len(top_k) != n_predict:
        return draft_finding(rule, ctx, Status.BLOCKS, f"top_k_tokens_per_head has {len(top_k)} entries (the config "
                             f"class's default where the drafter config has none) and n_predict is {n_predict}: "
                             "MLPSpeculatorConfig asserts they are equal when the draft's config loads", evidence,
                             error="AssertionError")
    if c.get("tie_weights") and n_predict <= 1:
        return draft_finding(rule, ctx, Status.BLOCKS, "tie_weights with n_predict 1: the model asserts there are "
                             "stages to tie", evidence,
                             error="AssertionError: You cannot tie weights between stages when only 1 exists")
    tensors = _own_tensors(ctx, "speculator.")
    expected: dict[str, tuple[int, ...]] = {}
    for i in range(1 if c.get("tie_weights") else stages):
        expected |= {f"emb.{i}.weight": (vocab, inner), f"head.{i}.weight": (vocab, inner),
                     f"ln.{i}.weight": (inner,), f"ln.{i}.bias": (inner,)}
    for i in range(min(stages, 2) if c.get("tie_weights") else stages):
        expected[f"proj.{i}.weight"] = (inner, emb if i == 0 else inner)
    unread = unread_finding(rule, ctx, "the MLPSpeculator's tensors")
    found = _weights_problem(rule, ctx, expected, tensors, f"{stages} MLPSpeculator stage(s)", evidence,
                             {"emb.": "AssertionError (VocabParallelEmbedding.weight_loader; checkpoint {shape}, "
                                      "built {built})",
                              "head.": "AssertionError (VocabParallelEmbedding.weight_loader; checkpoint {shape}, "
                                       "built {built})"})
    if found is not None:
        if stages > n_predict and "not initialized" in (found.error or ""):
            found = replace(found, why=f"{found.why} (num_speculative_tokens {k} is above the checkpoint's n_predict "
                                       f"{n_predict}: the release builds a stage per draft token)")
        return found
    if unread is not None:
        return unread
    return draft_finding(rule, ctx, Status.PASSES, f"the checkpoint holds the {stages} stage(s) the release builds "
                         f"for this launch{_compared(ctx)}", evidence)


# -- what both heads are fed and what they propose ------------------------------------------------------------------

_WIDTH_KEYS = {"medusa": ("hidden_size", MEDUSA_CONFIG), "mlp_speculator": ("emb_dim", MLP_CONFIG)}


@check("head_input_width")
def check_head_input_width(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The width a Medusa head (hidden_size) or an MLPSpeculator (emb_dim) takes against the target's hidden size:
    both are fed the target's last hidden state as it is (MedusaProposer.propose: ``self.model(target_hidden_states)``;
    V0's workers alike). The proposer's dummy run uses the draft's own width, so a mismatch passes loading and fails
    the first request's draft step."""
    key, config_class = _WIDTH_KEYS.get(str(ctx.launch.method), (None, None))
    if key is None or config_class is None:
        return None
    defaults = _defaults(ctx, *config_class)
    if defaults is None:
        return None
    config = _config(ctx, defaults)
    width = config.get(key)
    out = config.get("inner_dim") or width if key == "emb_dim" else width  # the first linear's outputs (proj.0)
    hidden = ctx.target_text.get("hidden_size")
    if not isinstance(width, int) or not isinstance(hidden, int):
        return None
    evidence = f"drafter {key} = {width}{'' if key in ctx.draft_config else ' (the config class default)'}; " \
               f"target hidden_size = {hidden}"
    if width != hidden:
        return draft_finding(rule, ctx, Status.BLOCKS, f"the drafter takes states of width {width}, the target hands "
                             f"it its last hidden state of {hidden}: the first draft step fails", evidence,
                             error=f"RuntimeError: mat1 and mat2 shapes cannot be multiplied (Nx{hidden} and {width}x{out})")
    return draft_finding(rule, ctx, Status.PASSES, f"{key} {width} equals the target's hidden size", evidence)


@check("head_vocab")
def check_head_vocab(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The vocabulary a Medusa head or an MLPSpeculator proposes ids in, against the target's. vLLM 0.8's V0
    SpecDecodeWorker asserts them equal when it sets up (``_vocab_size``); 0.26 gives a Medusa draft the target's
    vocab_size itself (its lm heads must then have the target's rows: medusa_heads); 0.20's V1 compares nothing."""
    key, config_class = _WIDTH_KEYS.get(str(ctx.launch.method), (None, None))
    if config_class is None:
        return None
    defaults = _defaults(ctx, *config_class)
    if defaults is None:
        return None
    draft = _config(ctx, defaults).get("vocab_size")
    target = ctx.target_text.get("vocab_size")
    if not isinstance(draft, int) or not isinstance(target, int):
        return None
    evidence = f"draft vocab_size = {draft}{'' if 'vocab_size' in ctx.draft_config else ' (the config class default)'}" \
               f"; target vocab_size = {target}"
    override = _medusa_vocab_override(ctx) if ctx.launch.method == "medusa" else None
    if override is not None:
        return engine_finding(rule, ctx, Status.PASSES, "the release gives the draft the target's vocab_size "
                              f"({target}): the heads' tensors are held against it (medusa_heads)", evidence, override)
    if draft == target:
        return draft_finding(rule, ctx, Status.PASSES, f"both vocabularies have {draft} tokens", evidence)
    assertion = _v0_vocab_check(ctx)
    if assertion is not None:
        return engine_finding(rule, ctx, Status.BLOCKS, f"the draft's vocabulary ({draft}) is not the target's "
                              f"({target}): {site_of(assertion)} asserts them equal when the speculative worker sets "
                              "up", evidence, assertion, "AssertionError")
    if draft > target:
        return draft_finding(rule, ctx, Status.UNKNOWN, f"the draft proposes ids of a vocabulary of {draft}, the "
                             f"target's has {target}, and this release compares neither: ids past {target - 1} reach "
                             "the rejection sampler, which is not modeled", evidence)
    return degrades(rule, ctx, f"the draft proposes ids of a vocabulary of {draft} tokens, the target's has {target}, "
                    "and this release compares neither: the head was trained for another tokenizer (no error, no log "
                    "line)", "near zero: its ids name other tokens of the target's, which the target rejects on every "
                    "request", evidence)


# -- a custom proposer class -----------------------------------------------------------------------------------------

CUSTOM_PROPOSER = ("create_custom_proposer", ("vllm/v1/spec_decode/*.py",))


def _raise_line(fn: EngineFunction, exception: str) -> int:
    """The line of the function's first ``raise <exception>(...)``; the function's own where it has none."""
    for node in ast.walk(fn.node):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name) \
                and node.exc.func.id == exception:
            return node.lineno
    return fn.line


def _module_source(ctx: DraftContext, module_path: str) -> tuple[str, ast.Module | None] | None:
    """The module's file beside the release (its environment's site-packages) and its syntax tree; None where it is
    not there as a file (an extension, a namespace package, an editable install elsewhere)."""
    if ctx.judge is None:
        return None
    root = ctx.judge.release.tree.root
    relative = module_path.replace(".", "/")
    for candidate in (root / f"{relative}.py", root / relative / "__init__.py"):
        if candidate.is_file():
            try:
                return str(candidate), ast.parse(candidate.read_bytes())
            except (SyntaxError, ValueError, OSError):
                return str(candidate), None
    return None


def _binds(tree: ast.Module, name: str) -> bool | None:
    """Whether a module's top level binds ``name`` (a class, a function, an assignment, an import); None where it
    may bind it in a way not read here (a star import, a module ``__getattr__``)."""
    for stmt in tree.body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in (name, "__getattr__"):
            return True if stmt.name == name else None
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if alias.name == "*":
                    return None
                if (alias.asname or alias.name.split(".")[0]) == name:
                    return True
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                return True
        if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(stmt)):
            return None  # bound under an if or a try, or in a loop: not read here
    return False


@check("custom_proposer", launch_only=True)
def check_custom_proposer(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The class a custom_class launch names, as the release's create_custom_proposer takes it (0.26 on): the path's
    form (its own ``"." not in backend`` raise, decided on the traced path), ``importlib.import_module`` of the module
    part, ``getattr`` of the class, the class called with the VllmConfig, and its ``propose``. The module must import
    in the launch's environment: a smoke node's probe says whether it does; an installed tree's environment, whether
    it is there beside the release (a module on the launch's PYTHONPATH or an editable install elsewhere is not seen,
    so its absence there is not a refusal); a release fetched on its own, nothing. The class's construction and its
    propose are the user's code, never run here: a launch of it is UNKNOWN at best, naming the class it imports."""
    model = ctx.launch.named_draft
    if not isinstance(model, str) or "." not in model or ctx.judge is None:
        return None  # no path of the form the release takes: its own raise on the traced path says so
    found = ctx.judge.engine_functions([CUSTOM_PROPOSER[0]], CUSTOM_PROPOSER[1])
    fn = next((f for f in found if f.on_path), found[0] if found else None)
    if fn is None:
        return None
    module_path, class_name = model.rsplit(".", 1)
    top = module_path.split(".")[0]
    at_import = EngineFunction(fn.file, _raise_line(fn, "ImportError"), fn.name, fn.node, fn.on_path)
    evidence = f"speculative_config.model = {model!r}: {site_of(fn)} imports {module_path!r} and calls its " \
               f"{class_name!r} with the VllmConfig"
    tree = ctx.judge.release.tree if ctx.judge is not None else None
    from ...tree.locate import installed_beside

    installed = installed_beside(tree, top) if tree is not None else None
    if installed is False and tree is not None and tree.modules is not None:
        return engine_finding(rule, ctx, Status.BLOCKS, f"the launch's environment cannot import {top!r} (its probe "
                              "lists the modules its python imports)", evidence, at_import,
                              f"ImportError: Cannot import module '{module_path}' for custom proposer '{model}': "
                              f"No module named '{top}'")
    if installed is None:
        return engine_finding(rule, ctx, Status.UNKNOWN, f"the release imports {module_path!r} for {class_name!r} when "
                              "the model runner starts; whether the launch's environment has it is not known to a "
                              "scan of a release fetched on its own (scan the environment vLLM is installed in), and "
                              f"{class_name}'s construction with the VllmConfig and its propose are the user's code",
                              evidence, at_import)
    if not installed:
        return engine_finding(rule, ctx, Status.UNKNOWN, f"{top!r} is not installed beside the release "
                              f"({tree.root if tree else ''}): unless the launch's PYTHONPATH or an editable "
                              "install provides it, the release's import fails with ImportError: Cannot import module "
                              f"'{module_path}' for custom proposer '{model}'", evidence, at_import)
    source = _module_source(ctx, module_path)
    if source is not None and source[1] is not None and _binds(source[1], class_name) is False:
        return engine_finding(rule, ctx, Status.BLOCKS, f"{source[0]} defines no {class_name!r}", evidence,
                              EngineFunction(fn.file, _raise_line(fn, "AttributeError"), fn.name, fn.node, fn.on_path),
                              f"AttributeError: Module '{module_path}' has no attribute '{class_name}' "
                              f"(speculative_config.model='{model}')")
    return engine_finding(rule, ctx, Status.UNKNOWN, f"{module_path!r} is installed beside the release"
                          f"{' and defines ' + repr(class_name) if source is not None and source[1] is not None else ''}"
                          f"; {class_name}'s construction with the VllmConfig and its propose are the user's code, "
                          "which a scan neither runs nor judges", evidence, at_import)
