"""The drafter checkpoint against its target and the engine: checks made from two config.json files and the
safetensors headers, before any launch.

Each check is one function named by a rule of kind ``drafter_contract`` (``params.check``) and returns a
Finding with the numbers on both sides, or None when it has nothing to say (e.g. no d2t tensor). What the
engine does with a drafter is read from vLLM's EAGLE-3 drafter (``model_executor/models/llama_eagle3.py``,
0.11 to 0.33): ``fc`` takes ``target_hidden_size`` (else ``hidden_size``) times 3 inputs, and the target hands
it one hidden state per distinct aux layer id inside its layers; ``lm_head`` has
``draft_vocab_size`` rows (else ``vocab_size``); ``d2t`` maps draft id i to target id ``i + d2t[i]``; without
``d2t`` the logits must have the target's vocab; ``t2d`` is not loaded. The aux layers are
``eagle_aux_hidden_state_layer_ids`` of the drafter config, else the target model's default
``(2, L // 2, L - 3)`` (LlamaForCausalLM.get_eagle3_aux_hidden_state_layers).
"""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.types import EngineFunction, Finding, Judge, Rule, Status
from ..launch.checkpoint import Checkpoint, LocalFile, TensorInfo
from .facts import SyntaxProblem

if TYPE_CHECKING:
    from ..launch.request import Launch

DEFAULT_AUX_LAYERS = "(2, L // 2, L - 3)"


@dataclass(frozen=True)
class DraftContext:
    launch: Launch
    draft: Checkpoint
    weights: bool = True  # False: a draft of the target's own layers whose checkpoint is not here (a preset)
    judge: Judge | None = None  # the release's code, for the checks that read what the engine does with the files

    @property
    def target_text(self) -> dict:
        target = self.launch.target
        if target is None:
            return {}  # no target (a landscape scan judges no drafter): nothing of the target's to check against
        return target.text_config

    @property
    def draft_config(self) -> dict:
        return self.draft.config

    def aux_layers(self) -> tuple[list[int], str]:
        declared = self.draft_config.get("eagle_aux_hidden_state_layer_ids")
        if declared is None:
            declared = (self.draft_config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
        if declared is not None:
            return list(declared), "eagle_aux_hidden_state_layer_ids of the drafter config"
        layers = self.target_text.get("num_hidden_layers")
        if not isinstance(layers, int):
            return [], "the target config has no num_hidden_layers"
        return [2, layers // 2, layers - 3], f"the default {DEFAULT_AUX_LAYERS} for L = {layers}"


    def fc_inputs(self, states: int | None = None, width: tuple[str, ...] = ("target_hidden_size", "hidden_size")
                  ) -> tuple[int | None, str]:
        """The input width of the fc the engine builds, and how: the first of the ``width`` keys of the drafter
        config times the number of states fc joins. That number is ``states`` where the head fixes it (EAGLE-1: the
        token's embedding and the target's last hidden state, 2); for EAGLE-3 the number of aux states: 3, and from
        vLLM 0.22 on, num_aux_hidden_states or the length of eagle_config's aux ids when the config gives one."""
        config = self.draft_config
        hidden = next((config[k] for k in width if config.get(k)), None)
        if not isinstance(hidden, int):
            return None, f"the drafter config has none of {', '.join(width)}"
        if states is not None:
            return hidden * states, f"{hidden} x {states}"
        declared = config.get("num_aux_hidden_states")
        if declared is None:
            declared = len((config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids") or ()) or None
        if declared not in (None, 3):
            return None, (f"the drafter config asks for {declared} aux states: releases before vLLM 0.22 build fc "
                          f"for 3, later ones for {declared}")
        return hidden * 3, f"{hidden} x 3"


Check = Callable[[Rule, DraftContext], Finding | None]
CHECKS: dict[str, Check] = {}  # what a rule's params.check names: filled by @check below
OWN_LAYERS: set[str] = set()  # the checks whose draft is layers of the target's own checkpoint (MTP)


def check(name: str, own_layers: bool = False) -> Callable[[Check], Check]:
    """Register a check under the name rules give it; ``own_layers``: it reads the target's checkpoint as the
    draft's (the draft of MTP is the target's extra layers)."""

    def register(function: Check) -> Check:
        CHECKS[name] = function
        if own_layers:
            OWN_LAYERS.add(name)
        return function

    return register


def _finding(rule: Rule, ctx: DraftContext, status: Status, why: str, evidence: str, file: str | None = None,
             error: str | None = None) -> Finding:
    # Shards sit in the checkpoint directory: name them under the path the user gave (host:path for a remote one).
    shown = f"{ctx.draft.path}/{Path(file).name if file else 'config.json'}"
    return Finding(rule.id, rule.title, rule.phase, status, shown, 0, evidence,
                   error, why, rule.hint)


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


def _unread(rule: Rule, ctx: DraftContext, what: str) -> Finding | None:
    """Where weight files of the drafter could not be read (a legacy .bin), what was not checked for it."""
    if not ctx.draft.unread:
        return None
    file, why = next(iter(ctx.draft.unread.items()))
    more = f" (and {len(ctx.draft.unread) - 1} more file(s))" if len(ctx.draft.unread) > 1 else ""
    return _finding(rule, ctx, Status.UNKNOWN, f"{what} not checked: the tensors of {Path(file).name}{more} could not "
                    f"be read ({why})", f"{Path(file).name}: {why}", file)


@check("fc_input_width")
def check_fc_input_width(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The checkpoint's fc against the fc the engine builds: a mismatch fails the drafter's weight load."""
    reader = without_aux(ctx)
    if reader is not None:
        return _engine_finding(rule, ctx, Status.PASSES, "the drafter config sets eagle_config.use_aux_hidden_state "
                               "false, which this release reads: it builds no fc (the checkpoint's fc.* is skipped)",
                               "eagle_config.use_aux_hidden_state = false", reader)
    fc = ctx.draft.tensor("fc.weight")
    if fc is None:
        return _unread(rule, ctx, "the width of fc.weight")
    if len(fc.shape) != 2:
        return None
    engine = rule.params.get("engine") or {}
    if engine.get("builder"):  # the release's own fc, played out on the drafter config (SGLang)
        built, how, _ = release_fc(ctx, str(engine["builder"]))
    else:
        built, how = ctx.fc_inputs(rule.params.get("states"), tuple(rule.params.get("width")
                                                                     or ("target_hidden_size", "hidden_size")))
    evidence = fc.describe()
    if built is None:
        return _finding(rule, ctx, Status.UNKNOWN, how, evidence, fc.file)
    if built != fc.shape[1]:
        # model_loader/weight_utils.py default_weight_loader
        return _finding(rule, ctx, Status.BLOCKS,
                        f"the engine builds fc with {how} = {built} inputs, the checkpoint's fc.weight has "
                        f"{fc.shape[1]}", evidence, fc.file,
                        f"AssertionError: Attempted to load weight (torch.Size({list(fc.shape)})) into parameter "
                        f"(torch.Size([{fc.shape[0]}, {built}]))")
    return _finding(rule, ctx, Status.PASSES, f"fc.weight has the {how} = {built} inputs the engine builds",
                    evidence, fc.file)


@check("target_hidden_size")
def check_target_hidden_size(rule: Rule, ctx: DraftContext) -> Finding | None:
    hidden = ctx.target_text.get("hidden_size")
    declared = ctx.draft_config.get("target_hidden_size")
    key = "target_hidden_size"
    if declared is None:
        declared, key = ctx.draft_config.get("hidden_size"), "hidden_size (no target_hidden_size)"
    if not isinstance(hidden, int) or declared is None:
        return None
    evidence = f"drafter {key} = {declared}; target hidden_size = {hidden}"
    if declared != hidden:
        return _finding(rule, ctx, Status.BLOCKS, f"the drafter declares {key} {declared}, the target's is {hidden}",
                        evidence)
    return _finding(rule, ctx, Status.PASSES, f"{key} {declared} equals the target's hidden size", evidence)


@check("aux_layer_ids")
def check_aux_layer_ids(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The aux hidden states the target hands the drafter against the width of the drafter's fc: a mismatch
    fails the drafter's first forward (combine_hidden_states). The target keeps the hidden state of each layer
    whose id is in the set of aux ids (EagleModelMixin._set_aux_hidden_state_layers: sorted(set(ids))), so a
    repeated id or one past the last layer gives fewer states than ids."""
    if without_aux(ctx) is not None:
        return None  # the head takes the target's last hidden state, not aux ones (fc_input_width says where)
    engine = rule.params.get("engine") or {}
    if engine.get("capture"):  # the ids where the release reads them, the layers as its target captures them
        return _captured_aux_layers(rule, ctx, engine)
    layers, source = ctx.aux_layers()
    count, hidden = ctx.target_text.get("num_hidden_layers"), ctx.target_text.get("hidden_size")
    fc = ctx.draft.tensor("fc.weight")
    built, _ = ctx.fc_inputs()
    width = built or (fc.shape[1] if fc is not None and len(fc.shape) == 2 else None)
    if width is None:
        return None  # no fc to fill: nothing to hold the aux states against
    if not isinstance(count, int) or not isinstance(hidden, int) or not layers:
        # The drafter takes aux states, but how many the target hands it cannot be told: never a silent pass.
        return _finding(rule, ctx, Status.UNKNOWN,
                        f"the target config lacks num_hidden_layers or hidden_size ({source}): how many aux hidden "
                        f"states of which width reach fc ({width} inputs) cannot be told", f"aux layers {layers}")
    ids = {i for i in layers if isinstance(i, int)}
    # Id L, the last layer's output, is kept by releases that collect after each layer (`idx + 1`, vLLM 0.18
    # on) and not by earlier ones (`if idx in aux_hidden_state_layers` before each layer).
    kept_without_last = sorted(i for i in ids if 0 <= i < count)
    kept_with_last = sorted(i for i in ids if 0 <= i <= count)
    evidence = f"aux layers {layers} from {source}; target num_hidden_layers = {count}, hidden_size = {hidden}; " \
               f"fc takes {width} inputs"
    fits = [len(kept) * hidden == width for kept in (kept_without_last, kept_with_last)]
    if all(fits):
        return _finding(rule, ctx, Status.PASSES, f"the target keeps {len(kept_without_last)} aux hidden states "
                        f"(layers {kept_without_last}) of width {hidden}: the {width} inputs of fc", evidence)
    if any(fits):
        return _finding(rule, ctx, Status.UNKNOWN,
                        f"aux layer id {count} is the output of the target's last layer: kept by releases that "
                        f"collect after each layer (vLLM 0.18 on), not by earlier ones, and fc needs it", evidence)
    lost = []
    if len(set(layers)) < len(layers):
        lost.append(f"ids repeat ({layers}): the target keeps each layer once")
    outside = sorted(i for i in ids if i not in kept_with_last)
    if outside:
        lost.append(f"ids {outside} are outside the target's {count} layers: never kept")
    kept = kept_without_last
    handed = f"{len(kept)} aux hidden states (layers {kept})"
    if kept_with_last != kept:
        handed += f", or {len(kept_with_last)} where the release keeps layer {count}, the last one's output,"
    return _finding(rule, ctx, Status.BLOCKS,
                    f"the target hands the drafter {handed} of width {hidden}, fc takes {width}"
                    + (f"; {'; '.join(lost)}" if lost else ""),
                    evidence, error=f"RuntimeError: shape '[-1, {width}]' is invalid for input of size "
                                    f"(tokens x {len(kept) * hidden})")


# What a release fails on in a drafter's vocab maps (a vocab_maps rule's ``params.engine.problems``; all but d2t_short
# where it names none, as vLLM loads d2t into a parameter of draft_vocab_size entries): lm_head_rows (lm_head's rows
# against the config's draft vocab), vocab_size (the drafter's vocab_size against the target's), no_d2t (no d2t and a
# draft vocab other than the target's), d2t_length (d2t of another length than the draft vocab), d2t_short (d2t
# shorter than it: an engine that keeps d2t as loaded and indexes it by draft id, SGLang's hot_token_id), d2t_range
# (a draft id mapped outside the target vocab), t2d_length (t2d of another length than the target vocab).
VOCAB_PROBLEMS = ("lm_head_rows", "vocab_size", "no_d2t", "d2t_length", "d2t_range", "t2d_length")


@check("vocab_maps")
def check_vocab_maps(rule: Rule, ctx: DraftContext) -> Finding | None:
    engine = rule.params.get("engine") or {}
    wanted = set(engine.get("problems") or VOCAB_PROBLEMS)
    target_vocab = ctx.target_text.get("vocab_size")
    draft_vocab = ctx.draft_config.get("draft_vocab_size") or ctx.draft_config.get("vocab_size")
    d2t, t2d = ctx.draft.tensor("d2t"), ctx.draft.tensor("t2d")
    lm_head = ctx.draft.tensor("lm_head.weight")
    if d2t is None and lm_head is None and ctx.draft.unread:
        return _unread(rule, ctx, "the vocab maps (d2t, t2d, lm_head)")
    if not isinstance(target_vocab, int):
        return None
    problems, evidence = [], []
    if lm_head is not None:
        evidence.append(lm_head.describe())
        if "lm_head_rows" in wanted and draft_vocab and lm_head.shape[0] != draft_vocab:
            problems.append(f"lm_head has {lm_head.shape[0]} rows, the config's draft vocab is {draft_vocab}")
    declared_vocab = ctx.draft_config.get("vocab_size")
    if "vocab_size" in wanted and declared_vocab is not None and declared_vocab != target_vocab:
        problems.append(f"the drafter's vocab_size {declared_vocab} differs from the target's {target_vocab}")
    if d2t is None:
        if "no_d2t" in wanted and draft_vocab and draft_vocab != target_vocab:
            problems.append(f"no d2t map, so the draft vocab ({draft_vocab}) must be the target's ({target_vocab})")
    else:
        evidence.append(d2t.describe())
        if "d2t_length" in wanted and d2t.numel != draft_vocab:
            problems.append(f"d2t has {d2t.numel} entries, the draft vocab is {draft_vocab}")
        elif "d2t_short" in wanted and isinstance(draft_vocab, int) and d2t.numel < draft_vocab:
            problems.append(f"d2t has {d2t.numel} entries, the draft vocab is {draft_vocab}: draft ids {d2t.numel} "
                            f"to {draft_vocab - 1} index past its end at the first draft step")
        elif "d2t_range" in wanted:
            offsets = ctx.draft.integers(d2t)[:draft_vocab] if isinstance(draft_vocab, int) else \
                ctx.draft.integers(d2t)  # the entries the draft ids read
            bad = [i for i, off in enumerate(offsets) if not 0 <= i + off < target_vocab]
            if bad:
                problems.append(f"{len(bad)} draft ids map outside the target vocab (first: {bad[0]} -> "
                                f"{bad[0] + offsets[bad[0]]}, target vocab {target_vocab})")
    if t2d is not None and "t2d_length" in wanted:
        evidence.append(t2d.describe())
        if t2d.numel != target_vocab:
            problems.append(f"t2d has {t2d.numel} entries, the target vocab is {target_vocab}")
    text = "; ".join(evidence) or f"draft vocab {draft_vocab}, target vocab {target_vocab}"
    if problems:
        shown = d2t or lm_head
        error = str(engine["error"]) if engine.get("error") else \
            f"RuntimeError: The size of tensor a ({draft_vocab}) must match the size of tensor b " \
            f"({d2t.numel if d2t else target_vocab})"
        return _finding(rule, ctx, Status.BLOCKS, "; ".join(problems), text, shown.file if shown else None, error)
    return _finding(rule, ctx, Status.PASSES,
                    f"draft vocab {draft_vocab} maps into the target vocab {target_vocab}", text)


@check("max_positions")
def check_max_positions(rule: Rule, ctx: DraftContext) -> Finding | None:
    positions = ctx.draft_config.get("max_position_embeddings")
    requested = ctx.launch.options.get("max-model-len") or ctx.target_text.get("max_position_embeddings")
    if positions is None or requested is None:
        return None
    if ctx.judge is not None and _positions_raised(ctx.judge):
        return None  # the release raises the draft's positions to the served length: draft_context says what it costs
    requested = int(requested)
    evidence = f"drafter max_position_embeddings = {positions}; max model len = {requested}"
    if positions < requested:
        return _finding(rule, ctx, Status.BLOCKS,
                        f"the drafter's rotary cache covers {positions} positions, the launch serves up to {requested}: "
                        f"positions past {positions} index out of bounds", evidence)
    return _finding(rule, ctx, Status.PASSES, f"{positions} positions cover the max model len {requested}", evidence)


@check("draft_tensor_parallel")
def check_draft_tensor_parallel(rule: Rule, ctx: DraftContext) -> Finding | None:
    draft_tp = ctx.launch.speculative.get("draft_tensor_parallel_size")
    target_tp = int(ctx.launch.options.get("tensor-parallel-size") or 1)
    if draft_tp is None:
        return None
    evidence = f"draft_tensor_parallel_size = {draft_tp}; tensor_parallel_size = {target_tp}"
    if draft_tp not in (1, target_tp):
        return _finding(rule, ctx, Status.BLOCKS, f"the draft TP size must be 1 or the target's ({target_tp})", evidence,
                        error=f"ValueError: speculative_draft_tensor_parallel_size={draft_tp} cannot be other value "
                              "than 1 or target model tensor_parallel_size")
    return _finding(rule, ctx, Status.PASSES, "the draft TP size is 1 or the target's", evidence)


@check("mtp_layer_weights", own_layers=True)
def check_mtp_layer_weights(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The MTP layers the draft loads, against the target checkpoint's tensors: the engine rewrites the target's
    config into the draft's (its architecture and ``n_predict``, launch.draft_config), and the draft class loads
    layer i from the names the rule's ``params.layers`` gives for that architecture. A re-upload without them fails
    the draft's weight load (vLLM's DefaultModelLoader: "Following weights were not initialized from checkpoint")."""
    draft = ctx.launch.draft_config or {}
    architectures = draft.get("architectures") or []
    if not architectures:  # never a silent pass: which layers the draft loads is not known
        return _finding(rule, ctx, Status.UNKNOWN, "the engine's rewrite of the target's config into its draft's "
                        "could not be played out: the draft's class and its layers are not known", "draft unknown")
    layout = (rule.params.get("layers") or {}).get(architectures[0])
    if layout is None:
        return _finding(rule, ctx, Status.UNKNOWN, f"the rule does not say where {architectures[0]} keeps its MTP "
                        "layers in a checkpoint, so their weights are not checked", f"draft {architectures[0]}")
    text = ctx.target_text
    hidden, layers = text.get("hidden_size"), text.get("num_hidden_layers")
    count = draft.get("n_predict")
    count = count if isinstance(count, int) else layout.get("default_layers", 1)
    key = layout.get("layers_key")  # the draft class reads its number of layers from this key, and refuses some
    if key:
        if key not in draft and layout.get("missing_key_error"):
            return _finding(rule, ctx, Status.BLOCKS, f"the target's config has no {key}, which the draft class reads",
                            f"draft {architectures[0]}", error=str(layout["missing_key_error"]))
        count = draft.get(key, count)
        allowed = layout.get("layers_allowed")
        if allowed and count not in allowed:
            return _finding(rule, ctx, Status.BLOCKS, f"the target's config has {key} = {count}; the draft class "
                            f"loads {' or '.join(map(str, allowed))}", f"draft {architectures[0]}",
                            error=str(layout.get("layers_error") or ""))
    if not ctx.weights:
        return None  # no checkpoint here to hold the layers against
    if not isinstance(hidden, int) or not isinstance(layers, int):
        return _finding(rule, ctx, Status.UNKNOWN, "the target config lacks hidden_size or num_hidden_layers",
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
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        error = f"ValueError: Following weights were not initialized from checkpoint: " \
                f"{{{', '.join(repr(m) for m in missing[:4])}...}}"
        if whole_layers and layout.get("missing_layer_error"):
            error = " ".join(str(layout["missing_layer_error"]).split()).format(layer=whole_layers[0])
        return _finding(rule, ctx, Status.BLOCKS, f"the checkpoint lacks the MTP layer tensors the draft loads: {shown}",
                        evidence, error=error)
    if wrong:
        return _finding(rule, ctx, Status.BLOCKS, "; ".join(wrong), evidence,
                        error="AssertionError: Attempted to load weight into a parameter of another shape")
    if unloaded:
        return _finding(rule, ctx, Status.BLOCKS,
                        f"no tensor in the checkpoint matches {', '.join(unloaded)}: the engine's checks of the layer "
                        "pass on its norms and projections, and the draft runs on uninitialised weights (no error; "
                        "acceptance near zero)", evidence)
    return _finding(rule, ctx, Status.PASSES, f"the {count} MTP layer(s) the draft loads are in the checkpoint",
                    evidence)


def _dimension(text: object, hidden: int) -> int:
    """A dimension as a rule writes it: a number, ``hidden``, or ``N * hidden``."""
    factor, _, name = str(text).replace(" ", "").rpartition("*")
    value = hidden if name == "hidden" else int(name)
    return value * int(factor) if factor else value


# -- what degrades: the launch runs, and the drafter silently does not help ----------------------------------------
# Each check below reads what the release does with the drafter's files from its own code (the functions the rule's
# ``params.engine`` names, found on the launch's traced path first), never from the drafter's name.

# Where a drafter config may declare the target layers its head was trained on (vLLM, SGLang, speculators, ModelOpt).
AUX_DECLARED: tuple[tuple[str, ...], ...] = (
    ("eagle_aux_hidden_state_layer_ids",), ("eagle_config", "eagle_aux_hidden_state_layer_ids"),
    ("aux_hidden_state_layer_ids",), ("eagle_config", "layer_ids"))


def _declared_aux(config: dict) -> dict[tuple[str, ...], list[int]]:
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
    """The layer ids a target's default-layers method returns for a model of ``layers`` layers: its body played out
    where it is assignments of arithmetic on the layer count and a returned tuple or list; None otherwise."""
    names: dict[str, int] = {}

    def value(node: ast.expr) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len":
            return layers  # len(self.model.layers)
        if isinstance(node, ast.Attribute) and node.attr == "num_hidden_layers":
            return layers
        if isinstance(node, ast.BinOp):
            left, right = value(node.left), value(node.right)
            operations = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__,
                          ast.FloorDiv: int.__floordiv__}
            if type(node.op) in operations:
                return operations[type(node.op)](left, right)
        raise ValueError(ast.dump(node))

    try:
        for stmt in function.body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # the docstring
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                names[stmt.targets[0].id] = value(stmt.value)
            elif isinstance(stmt, ast.Return) and isinstance(stmt.value, (ast.Tuple, ast.List)):
                return [value(e) for e in stmt.value.elts]
            else:
                return None
    except (ValueError, ZeroDivisionError):
        return None
    return None


def _where(fn: EngineFunction) -> str:
    return f"{fn.file}:{fn.line} {fn.name}"


def _engine_finding(rule: Rule, ctx: DraftContext, status: Status, why: str, evidence: str, fn: EngineFunction | None,
                    error: str | None = None) -> Finding:
    """A finding placed at the engine's code that decides it (a finding about the drafter's files: at config.json)."""
    if fn is None:
        return _finding(rule, ctx, status, why, evidence, error=error)
    return Finding(rule.id, rule.title, rule.phase, status, fn.file, fn.line, evidence, error, why, rule.hint)


@check("aux_layer_fallback")
def check_aux_layer_fallback(rule: Rule, ctx: DraftContext) -> Finding | None:
    """Where the engine reads the aux layer ids in the drafter config (the functions ``params.engine.readers`` names,
    on the launch's path), against where the drafter config declares them. Read nowhere, the engine captures the
    target's default layers (the target class's ``params.engine.defaults`` method, played out for its layer count):
    a head trained on other layers drafts from representations it never saw (acceptance about 1%, vllm PR #50170)."""
    engine, judge = rule.params.get("engine") or {}, ctx.judge
    layers = ctx.target_text.get("num_hidden_layers")
    if judge is None or not isinstance(layers, int):
        return None
    readers = judge.engine_functions(engine.get("readers") or (), engine.get("files") or ())
    if not readers:
        return None  # the release reads no aux layer ids from a drafter config: nothing to fall back from
    reader = next((f for f in readers if f.on_path), readers[0])
    reads = config_reads(reader.node)
    default = next((f for f in map(judge.target_method, engine.get("defaults") or ()) if f is not None), None)
    fallback = evaluate_layers(default.node, layers) if default is not None else None
    fallback_text = f"{fallback} ({_where(default)}, for the target's {layers} layers)" if fallback and default else \
        f"{[2, layers // 2, layers - 3]} (the default {DEFAULT_AUX_LAYERS}, for the target's {layers} layers)"
    fallback = fallback or [2, layers // 2, layers - 3]
    declared = _declared_aux(ctx.draft_config)
    read_text = ", ".join(".".join(r) for r in sorted(reads) if r[-1] in {w[-1] for w in AUX_DECLARED}) or "none"
    evidence = f"{_where(reader)} reads {read_text}"
    if not declared:
        return _engine_finding(rule, ctx, Status.UNDECIDED,
                               f"the drafter config names no aux layer ids: the engine captures the target's layers "
                               f"{fallback_text}; whether the head was trained on those cannot be told from its files "
                               "(specaudit smoke measures it)", evidence, reader)
    used = [where for where in declared if where in reads]
    if used:
        return _engine_finding(rule, ctx, Status.PASSES, f"the engine reads the ids where the drafter config declares "
                               f"them ({'.'.join(used[0])} = {declared[used[0]]})", evidence, reader)
    where, ids = next(iter(declared.items()))
    evidence += f"; the drafter config declares {'.'.join(where)} = {ids}"
    if sorted(set(ids)) == sorted(set(fallback)):
        return _engine_finding(rule, ctx, Status.PASSES,
                               f"the engine does not read {'.'.join(where)}, and its fallback {fallback_text} is the "
                               "same layers", evidence, reader)
    return _engine_finding(rule, ctx, Status.DEGRADES,
                           f"the drafter was trained on the target's layers {ids} ({'.'.join(where)}), which this "
                           f"release does not read: it captures {fallback_text} instead, and the head drafts from "
                           "hidden states it never saw (no error, no log line; acceptance near zero)", evidence, reader)


def _predicate_members(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str] | None:
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


def _capture_guard(function: ast.AST, flag: str) -> str | None:
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


@check("algorithm_takes_head")
def check_algorithm_takes_head(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The algorithm the launch names against the head its drafter is. SGLang hands a drafter the target's fused aux
    hidden states only under the algorithms for which the predicate guarding ``eagle_use_aux_hidden_state = True``
    answers True (``params.engine.capture``: _resolve_eagle_aux_hidden_state, guarded by is_eagle3(), which is
    ``self == SpeculativeAlgorithm.EAGLE3``); under any other the drafter gets the target's last hidden state, of
    the width of its embeddings, and an EAGLE-3 head (its fc takes 3 target hidden states: read from the safetensors
    header) skips fc and drafts from a state it was not trained on: acceptance length 1.00 (sglang PR #21272)."""
    engine, judge = rule.params.get("engine") or {}, ctx.judge
    fc = ctx.draft.tensor("fc.weight")
    hidden = ctx.target_text.get("hidden_size")
    if judge is None or fc is None or len(fc.shape) != 2 or not isinstance(hidden, int) or not hidden:
        return None
    states, rest = divmod(fc.shape[1], hidden)
    if rest or states < 3:
        return None  # not a head of fused aux states (EAGLE-1's fc takes its embedding and one hidden state: 2)
    if ctx.draft_config.get("hidden_size") != hidden:
        return None  # a narrower head gets a state fc cannot take either way: not the silent case
    setters = judge.engine_functions(engine.get("capture") or (), engine.get("files") or ())
    guard = next((g for g in (_capture_guard(f.node, str(engine.get("flag") or "")) for f in setters) if g), None)
    if guard is None:
        return None  # the release captures aux states under no predicate specaudit can read
    predicates = judge.engine_functions([guard], engine.get("algorithms") or ())
    members = next((m for m in (_predicate_members(p.node) for p in predicates) if m is not None), None)
    if members is None or not predicates:
        return None
    algorithm = (ctx.launch.method or "").upper()
    where = f"{setters[0].file}:{setters[0].line} {setters[0].name} sets {engine.get('flag')} under {guard}() " \
            f"({predicates[0].file}:{predicates[0].line}: {' or '.join(sorted(members))})"
    evidence = f"{where}; {fc.describe()}: {states} target hidden states of {hidden}"
    if algorithm in members:
        return _engine_finding(rule, ctx, Status.PASSES, f"{algorithm} hands the drafter the {states} fused aux hidden "
                               "states its fc takes", evidence, setters[0])
    return _engine_finding(rule, ctx, Status.DEGRADES,
                           f"the drafter is an EAGLE-3 head (its fc takes {states} x {hidden} inputs: fused aux hidden "
                           f"states), and {algorithm} captures none: the head gets the target's last hidden state "
                           "instead, skips fc and drafts from a state it was not trained on (acceptance length 1.00)",
                           evidence, setters[0])


RAISES_POSITIONS = ("_maybe_override_draft_max_position_embeddings",)  # vLLM 0.32 on (config/speculative.py)


def _positions_raised(judge: Judge) -> EngineFunction | None:
    """The release's function that raises an EAGLE draft's max_position_embeddings to the target's max model len:
    one that assigns ``max_position_embeddings`` on the draft's config (vLLM 0.32 on; none before)."""
    for fn in judge.engine_functions(RAISES_POSITIONS, ("vllm/config/speculative.py",)):
        if any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "max_position_embeddings"
                                                for t in n.targets) for n in ast.walk(fn.node)):
            return fn
    return None


@check("draft_context")
def check_draft_context(rule: Rule, ctx: DraftContext) -> Finding | None:
    """A drafter whose context (its config's max_position_embeddings) is shorter than the served length, on a release
    that raises it to the served length instead of failing (``_positions_raised``): the launch runs, and past that
    position the head drafts at positions it was never trained at. Where the release does not raise it, the rotary
    cache is too small and ``max_positions`` blocks."""
    positions = ctx.draft_config.get("max_position_embeddings")
    requested = ctx.launch.options.get("max-model-len") or ctx.target_text.get("max_position_embeddings")
    if not isinstance(positions, int) or requested is None or ctx.judge is None:
        return None
    raised = _positions_raised(ctx.judge)
    if raised is None:
        return None
    requested = int(requested)
    evidence = f"drafter max_position_embeddings = {positions}; max model len = {requested}; {_where(raised)} " \
               "raises the draft's to the max model len"
    if positions >= requested:
        return _engine_finding(rule, ctx, Status.PASSES, f"the drafter's {positions} positions cover the max model len "
                               f"{requested}", evidence, raised)
    return _engine_finding(rule, ctx, Status.DEGRADES,
                           f"the drafter's context is {positions} positions and the launch serves {requested}: the "
                           f"release raises the draft's max_position_embeddings to {requested} (no error), and past "
                           f"position {positions} the head drafts at positions it was never trained at, so acceptance "
                           "falls on every request longer than that", evidence, raised)


# -- a draft tensor-parallel size the engine accepts and does not use ----------------------------------------------


def _count(value: object) -> int | None:
    """A count a launch gives (a number, or its digits from a command line's dotted form); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _matches(file: str, globs: list[str] | tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(file, g) for g in globs)


def _followed(judge: Judge, start: EngineFunction, follow: set[str], follow_files: list[str],
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


def _draft_build(functions: list[EngineFunction], builder: str, draft: str) -> tuple[EngineFunction, ast.Call] | None:
    """The call that builds the draft model: ``<builder>(..., model_config=<...draft_model_config...>)``."""
    for fn in functions:
        for node in ast.walk(fn.node):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == builder and any(
                    k.arg == "model_config" and draft in ast.unparse(k.value) for k in node.keywords):
                return fn, node
    return None


def _reads_name(functions: list[EngineFunction], names: set[str]) -> EngineFunction | None:
    """The first of the functions that reads one of the names (an attribute, or a string naming it)."""
    for fn in functions:
        for node in ast.walk(fn.node):
            if isinstance(node, ast.Attribute) and node.attr in names or \
                    isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                return fn
    return None


@check("draft_tp_ignored")
def check_draft_tp_ignored(rule: Rule, ctx: DraftContext) -> Finding | None:
    """A draft tensor-parallel size other than the target's that the release accepts (``_verify_and_get_draft_tp``:
    1 or the target's) and then does not use: the function that builds the draft on the launch's path (the loaders
    ``params.engine`` names, and what they call on ``self``) hands ``get_model`` a config without the draft's parallel
    config. vLLM 0.14 to 0.33: EAGLE's proposer builds the drafter with ``self.vllm_config`` (V1:
    EagleProposer.load_model / SpecDecodeBaseProposer._get_model and _create_draft_vllm_config) or the target's config
    with kernel overrides (V2: eagle/utils.py load_eagle_model, apply_draft_overrides); only the draft_model method's
    proposer (draft_model.py _create_draft_vllm_config) reads ``draft_parallel_config``."""
    engine, judge = rule.params.get("engine") or {}, ctx.judge
    asked = _count(ctx.launch.speculative.get("draft_tensor_parallel_size"))
    target_tp = int(ctx.launch.options.get("tensor-parallel-size") or 1)
    if judge is None or asked is None or asked == target_tp or asked != 1:
        return None  # nothing to ignore; a size other than 1 or the target's is refused (draft_tensor_parallel)
    files = list(engine.get("files") or ())
    loaders = [f for f in judge.engine_functions(engine.get("loaders") or (), files) if f.on_path and _matches(f.file, files)]
    for loader in loaders:
        chain = _followed(judge, loader, set(engine.get("follow") or ()), list(engine.get("follow_files") or ()))
        build = _draft_build(chain, str(engine.get("builder") or "get_model"), "draft_model_config")
        if build is None:
            continue
        fn, call = build
        evidence = f"draft_tensor_parallel_size = {asked}; tensor_parallel_size = {target_tp}; {_where(fn)} builds " \
                   f"the draft: {' '.join(ast.unparse(call).split())}"
        reader = _reads_name(chain, set(engine.get("reads") or ("draft_parallel_config",)))
        if reader is not None:
            return _engine_finding(rule, ctx, Status.PASSES, f"the release builds the draft with its own parallel "
                                   f"config (read in {_where(reader)}): TP {asked}", evidence, fn)
        return _engine_finding(rule, ctx, Status.DEGRADES,
                               f"the release accepts draft_tensor_parallel_size = {asked} and builds the draft with the "
                               f"target's parallel config (nothing from {_where(loader)} on reads the draft's): the "
                               f"drafter runs sharded over the target's {target_tp} GPUs, each draft step paying the "
                               f"all-reduces TP {asked} was asked to avoid, with no error and no log line (acceptance "
                               "is unchanged; the speed-up is smaller)", evidence, fn)
    return None


# -- more draft tokens than the drafter declares ---------------------------------------------------------------------


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
    asked = _count(ctx.launch.speculative.get("num_speculative_tokens"))
    if judge is None or not declared or asked is None:
        return None
    readers = judge.engine_functions(engine.get("readers") or (), engine.get("files") or ())
    reader = next((f for f in readers if ("speculative_tokens",) in config_reads(f.node)), None)
    if reader is None:
        return None  # the release does not read the declaration: what it means to it cannot be told
    trained = max(declared)
    evidence = f"num_speculative_tokens = {asked}; speculators_config.proposal_methods[].speculative_tokens = " \
               f"{declared}; {_where(reader)} reads speculative_tokens"
    if asked <= trained:
        return _engine_finding(rule, ctx, Status.PASSES, f"the launch drafts {asked} token(s), within the {trained} the "
                               "drafter declares", evidence, reader)
    return _engine_finding(rule, ctx, Status.DEGRADES,
                           f"the drafter declares {trained} draft token(s) and the launch drafts {asked}: the release "
                           f"takes the launch's count without a word, and positions {trained} to {asked - 1} are ones "
                           "the head was not trained to draft at (their tokens are mostly rejected, and each costs a "
                           "draft forward: acceptance rate falls, the speed-up with it)", evidence, reader)


@check("equal_vocab")
def check_equal_vocab(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The draft's vocabulary size against the target's, where the engine requires them equal (a whole draft model
    that proposes token ids of its own vocabulary). The engine's check is the function ``params.engine.checks``
    names (in ``params.engine.files``): the finding stands there, with its raise's message; a release without it
    does not check at load, and what a draft of another vocabulary does there is not known."""
    engine, judge = rule.params.get("engine") or {}, ctx.judge
    draft = ctx.draft_config.get("vocab_size", (ctx.draft_config.get("text_config") or {}).get("vocab_size"))
    target = ctx.target_text.get("vocab_size")
    evidence = f"draft vocab_size = {draft}; target vocab_size = {target}"
    checks = judge.engine_functions(engine.get("checks") or (), engine.get("files") or ()) if judge else []
    fn = next((f for f in checks if f.on_path), checks[0] if checks else None)
    if not isinstance(draft, int) or not isinstance(target, int):
        return _engine_finding(rule, ctx, Status.UNKNOWN, "the draft's or the target's config has no vocab_size",
                               evidence, fn)
    if draft == target:
        return _engine_finding(rule, ctx, Status.PASSES, f"both vocabularies have {draft} tokens (the engine may "
                               "also compare the tokenizers' token-to-id maps, which a scan does not read)", evidence,
                               fn)
    if fn is None:
        return _finding(rule, ctx, Status.UNKNOWN, f"the draft's vocabulary ({draft}) is not the target's ({target}), "
                        "and this release does not compare them at load: what the draft's ids do to the target is not "
                        "modeled", evidence)
    line, message = _raise_message(fn.node, {"target_vocab_size": target, "draft_vocab_size": draft})
    return _engine_finding(rule, ctx, Status.BLOCKS, f"the draft's vocabulary ({draft}) is not the target's ({target}): "
                           f"{_where(fn)} refuses it once both models have loaded", evidence,
                           EngineFunction(fn.file, line or fn.line, fn.name, fn.node, fn.on_path), message)


def _raise_message(function: ast.AST, values: dict[str, object]) -> tuple[int | None, str | None]:
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


# -- a drafter's own lm_head and embedding replaced by the target's -------------------------------------------------


def _flag_when_missing(function: ast.AST, flag: str) -> str | None:
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


def _shares_under(function: ast.AST, flag: str, setter: str) -> bool:
    """Whether a function calls ``<model>.<setter>(...)`` under an ``if`` that reads ``<model>.<flag>``."""
    for node in ast.walk(function):
        if isinstance(node, ast.If) and any(isinstance(n, ast.Attribute) and n.attr == flag for n in ast.walk(node.test)) \
                and any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == setter
                        for s in node.body for n in ast.walk(s)):
            return True
    return False


def _class_method(judge: Judge, module: str, class_name: str, name: str) -> tuple[str, ast.AST | None]:
    """A class's own method, read from its module in the release (the judge's index: engine_functions answers with the
    functions of that name on the traced path first, wherever they are)."""
    index = getattr(getattr(judge, "resolver", None), "index", None)
    relpath = index.files.get(module) if index is not None else None
    if index is None or relpath is None:
        return module.replace(".", "/") + ".py", None
    try:
        tree = index.syntax(relpath)
    except (SyntaxProblem, OSError):  # a file that does not parse: nothing read from it
        return relpath, None
    for stmt in tree.body if tree else ():
        if isinstance(stmt, ast.ClassDef) and stmt.name == class_name:
            return relpath, next((f for f in stmt.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                                  and f.name == name), None)
    return relpath, None


SAMPLED_ROWS = 4  # rows of the two heads compared, spread over the vocabulary


def _same_rows(draft: Checkpoint, head: TensorInfo, target: Checkpoint, other: TensorInfo) -> bool | None:
    """Whether two heads of one dtype and shape hold the same bytes in a few rows spread over the vocabulary (read by
    offset, never whole); None where they cannot be compared so."""
    if head.dtype != other.dtype or head.shape != other.shape or len(head.shape) != 2 or head.start < 0 \
            or other.start < 0 or not head.shape[0]:
        return None
    row = (head.end - head.start) // head.shape[0]
    rows = sorted({round(i * (head.shape[0] - 1) / (SAMPLED_ROWS - 1)) for i in range(SAMPLED_ROWS)})
    mine = draft.sources.get(head.file) or LocalFile(Path(head.file))
    theirs = target.sources.get(other.file) or LocalFile(Path(other.file))
    return all(mine.read(head.start + r * row, row) == theirs.read(other.start + r * row, row) for r in rows)


@check("head_overwritten")
def check_head_overwritten(rule: Rule, ctx: DraftContext) -> Finding | None:
    """A drafter whose checkpoint has its own lm_head, on a release that replaces it by the target's: the draft class
    sets a flag when its config lacks a key (``params.engine.flag`` / the key read from the class: SGLang's
    ``load_lm_head_from_target`` when ``draft_vocab_size`` is None), and the worker (``params.engine.sharers``) then
    calls ``set_embed_and_head`` with the target's embedding and head. A head that is a copy of the target's loses
    nothing; one trained on its own is silently replaced, and the drafter's distribution is no longer the one it was
    trained to produce. Which it is is read from a few rows of both heads, where the target's weights are here."""
    engine, judge = rule.params.get("engine") or {}, ctx.judge
    head = ctx.draft.tensor("lm_head.weight")
    if judge is None or head is None or ctx.draft_config.get("tie_word_embeddings"):
        return None
    flag, setter = str(engine.get("flag") or ""), str(engine.get("setter") or "")
    entry = judge.registered(list(ctx.draft_config.get("architectures") or ()))
    if entry is None:
        return None
    module_file, init = _class_method(judge, entry.module, entry.class_name, "__init__")
    key = _flag_when_missing(init, flag) if init is not None else None
    sharers = [f for f in judge.engine_functions(engine.get("sharers") or (), engine.get("files") or ())
               if _shares_under(f.node, flag, setter)]
    if key is None or not sharers:
        return None  # the release keeps a drafter's own head whatever its config says
    sharer = next((f for f in sharers if f.on_path), sharers[0])
    evidence = f"{entry.class_name} ({module_file}) sets {flag} where the drafter config has no {key}; " \
               f"{_where(sharer)} then calls {setter}(target embed, target head); the drafter checkpoint has " \
               f"{head.describe()}"
    if ctx.draft_config.get(key) is not None:
        return _engine_finding(rule, ctx, Status.PASSES, f"the drafter config sets {key}: the release keeps the "
                               "drafter's own lm_head", evidence, sharer)
    target = ctx.launch.target_weights
    other = target.tensor("lm_head.weight") if target is not None else None
    same = _same_rows(ctx.draft, head, target, other) if target is not None and other is not None else None
    replaced = f"the drafter config has no {key}, so the release replaces the drafter's lm_head (and embedding) by " \
               "the target's"
    if same is None:
        return _engine_finding(rule, ctx, Status.UNDECIDED, f"{replaced}; whether the drafter's head is a copy of the "
                               "target's cannot be told without the target's lm_head here (scan with --model DIR; "
                               "specaudit smoke measures it)", evidence, sharer)
    if same:
        return _engine_finding(rule, ctx, Status.PASSES, f"{replaced}; the sampled rows of both heads are identical: "
                               "a copy, nothing lost", evidence, sharer)
    return _engine_finding(rule, ctx, Status.DEGRADES,
                           f"{replaced}, and the drafter's own head differs from the target's (rows sampled over the "
                           "vocabulary): the head it was trained with is silently replaced, so it drafts from a "
                           "distribution it was not trained to produce (no error, no log line)", evidence, sharer)


# -- what the release builds of an EAGLE-3 head and what its target captures (SGLang) --------------------------------
# SGLang's drafter checks read both from the release's code: the fc that the drafter class's module builds (played out
# on the drafter's config.json) and, for the aux hidden states, where the release reads the ids in the drafter config
# and how the target class turns them (or none) into the layers it captures.


def _module_functions(judge: Judge, module: str) -> tuple[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    """The functions and methods of one module of the release, in file order (the judge's index)."""
    index = getattr(getattr(judge, "resolver", None), "index", None)
    relpath = index.files.get(module) if index is not None else None
    if index is None or relpath is None:
        return module.replace(".", "/") + ".py", []
    try:
        tree = index.syntax(relpath)
    except (SyntaxProblem, OSError):  # a file that does not parse: nothing read from it
        return relpath, []
    return relpath, [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))] if tree else []


def _self_call(stmt: ast.stmt, attribute: str) -> ast.Call | None:
    """The call of ``self.<attribute> = <Call>(...)``."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute) \
            and stmt.targets[0].attr == attribute and isinstance(stmt.targets[0].value, ast.Name) \
            and stmt.targets[0].value.id == "self" and isinstance(stmt.value, ast.Call):
        return stmt.value
    return None


def _drafter_module(ctx: DraftContext) -> tuple[str, str] | None:
    """The module and class the release registers for the drafter's architectures."""
    entry = ctx.judge.registered(list(ctx.draft_config.get("architectures") or ())) if ctx.judge else None
    return (entry.module, entry.class_name) if entry is not None else None


def release_fc(ctx: DraftContext, attribute: str) -> tuple[int | None, str, EngineFunction | None]:
    """The input width of the fc the release builds for this drafter: the function of the drafter class's module that
    assigns ``self.<attribute> = Linear(<in>, ...)`` (SGLang's llama_eagle3.py LlamaModel.__init__), its statements
    before that one played out on the drafter's config.json (``specaudit.methods.interpret``, never run) and ``<in>``
    evaluated there. SGLang 0.5.8 builds ``hidden_size_in * 3``; 0.5.17 and 0.5.23 ``hidden_size_in *
    num_aux_hidden_states`` (the config's num_aux_hidden_states, else the length of eagle_config's
    eagle_aux_hidden_state_layer_ids, else 3); hidden_size_in is target_hidden_size where the config has one."""
    import copy

    from ..methods.interpret import UNKNOWN, LiteralScope, call

    found = _drafter_module(ctx)
    if found is None:
        return None, "the release registers no class for the drafter's architectures: which fc it builds is not known", \
            None
    relpath, functions = _module_functions(_judge_of(ctx), found[0])
    for function in functions:
        at = next((i for i, stmt in enumerate(function.body) if _self_call(stmt, attribute)), None)
        if at is None:
            continue
        built = _self_call(function.body[at], attribute)
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
            return value, f"{code} ({_where(where)}, on the drafter config)", where
        return None, f"{_where(where)} builds fc with {code} inputs, which this drafter config does not fix", where
    return None, f"{relpath} (the drafter's module) assigns no self.{attribute}: which fc it builds is not known", None


def _file_functions(judge: Judge, names: list[str], files: list[str]) -> list[EngineFunction]:
    """The functions of these names in the files the globs name, on the traced path or not."""
    index = getattr(getattr(judge, "resolver", None), "index", None)
    found = []
    for module, relpath in sorted(index.files.items()) if index is not None else ():
        if _matches(relpath, files):
            found += [EngineFunction(relpath, f.lineno, f.name, f) for f in _module_functions(judge, module)[1]
                      if f.name in names]
    return found


def _judge_of(ctx: DraftContext) -> Judge:
    assert ctx.judge is not None
    return ctx.judge


def _layers_of(statements: list[ast.stmt], result: ast.expr, layers: int) -> list[int] | None:
    """A list expression evaluated after the simple assignments among ``statements``, for a target of ``layers``
    layers (evaluate_layers on a function made of them)."""
    function = ast.parse("def _():\n    pass").body[0]
    assert isinstance(function, ast.FunctionDef)
    function.body = [s for s in statements if isinstance(s, ast.Assign) and len(s.targets) == 1
                     and isinstance(s.targets[0], ast.Name)] + [ast.Return(result)]
    return evaluate_layers(function, layers)


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
            return _layers_of([*function.body, *default], lists[0], layers) if len(lists) == 1 else None
        comps = [n for s in given for n in ast.walk(s) if isinstance(n, ast.ListComp) and len(n.generators) == 1
                 and isinstance(n.generators[0].target, ast.Name) and isinstance(n.generators[0].iter, ast.Name)
                 and n.generators[0].iter.id == param]
        if len(comps) != 1:
            return None
        target = comps[0].generators[0].target
        assert isinstance(target, ast.Name)
        kept = []
        for i in ids:
            value = _layers_of([ast.Assign([ast.Name(target.id, ast.Store())], ast.Constant(i))],
                               ast.List([comps[0].elt], ast.Load()), layers)
            if value is None:
                return None
            kept += value
        return kept
    return None


def _skips_fc(ctx: DraftContext, attribute: str) -> EngineFunction | None:
    """The drafter module's function that applies fc only where the states differ in width from the embeddings
    (SGLang's llama_eagle3.py forward: ``if hidden_states.shape[-1] != embeds.shape[-1]: ... self.fc(...)``)."""
    found = _drafter_module(ctx)
    if found is None:
        return None
    relpath, functions = _module_functions(_judge_of(ctx), found[0])
    for function in functions:
        for node in ast.walk(function):
            if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1 \
                    and isinstance(node.test.ops[0], ast.NotEq) and "shape" in ast.unparse(node.test) \
                    and any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == attribute
                            for s in node.body for n in ast.walk(s)):
                return EngineFunction(relpath, node.lineno, function.name, function)
    return None


def _captured_aux_layers(rule: Rule, ctx: DraftContext, engine: dict) -> Finding | None:
    """aux_layer_ids as the release reads and captures them (``params.engine``): the ids are read where the reader
    (a function of ``readers`` in ``files`` that reads a drafter-config key of AUX_DECLARED and sets ``sets``) reads
    them, else none; the target class's ``capture`` method turns them, or none, into the layers it captures, and the
    target keeps one hidden state per distinct layer inside its layers (the layer loop's ``if i in
    layers_to_capture``). Their width against the fc the release builds (``builder``) fails the first forward."""
    judge = ctx.judge
    count, hidden = ctx.target_text.get("num_hidden_layers"), ctx.target_text.get("hidden_size")
    if judge is None:
        return None
    capture = judge.target_method(str(engine["capture"]))
    if capture is None:
        return None  # the target cannot capture aux states at all: a rule on the method says so (required_method)
    built, how, _ = release_fc(ctx, str(engine.get("builder") or "fc"))
    fc = ctx.draft.tensor("fc.weight")
    width = built or (fc.shape[1] if fc is not None and len(fc.shape) == 2 else None)
    if width is None:
        return None  # no fc to fill
    sets = str(engine.get("sets") or "eagle_aux_hidden_state_layer_ids")
    names, files = list(engine.get("readers") or ()), list(engine.get("files") or ())

    def setter(found: list[EngineFunction]) -> EngineFunction | None:
        return next((f for f in found if any(isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == sets for t in n.targets) for n in ast.walk(f.node))), None)

    # On the traced path first, else in the files: a name the path meets elsewhere (``__init__``) must not hide the
    # reader the path does not reach (0.5.8's ModelRunner.__init__).
    reader = setter(judge.engine_functions(names, files)) or setter(_file_functions(judge, names, files))
    if reader is None:
        return _finding(rule, ctx, Status.UNKNOWN, f"no function of this release sets {sets} from the drafter config "
                        f"(looked for {', '.join(engine.get('readers') or ())}): which aux layers the target captures "
                        "is not known", f"fc takes {width} inputs")
    reads = config_reads(reader.node)
    declared = _declared_aux(ctx.draft_config)
    used = next((where for where in declared if where in reads), None)
    ids = declared[used] if used else None
    if not isinstance(count, int) or not isinstance(hidden, int):
        return _engine_finding(rule, ctx, Status.UNKNOWN, "the target config lacks num_hidden_layers or hidden_size: "
                               f"how many aux hidden states of which width reach fc ({width} inputs) cannot be told",
                               f"fc takes {width} inputs", reader)
    layers = captured_layers(capture.node, ids, count)
    read = ", ".join(".".join(r) for r in sorted(reads) if r[-1] in {w[-1] for w in AUX_DECLARED}) or "no aux ids"
    unread = [".".join(w) for w in declared if w != used]
    source = (f"ids {ids} from the drafter config's {'.'.join(used)}" if used else "no ids") + \
        f" ({_where(reader)} reads {read}" + (f"; not {', '.join(unread)}, which the drafter config declares" if unread
                                              else "") + f"), turned into layers by {_where(capture)}"
    if layers is None:
        return _engine_finding(rule, ctx, Status.UNKNOWN, f"which layers {_where(capture)} captures for {ids} could "
                               "not be read from its code", source, capture)
    kept = sorted({i for i in layers if 0 <= i < count})
    evidence = f"{source}: it captures layers {layers}; target num_hidden_layers = {count}, " \
               f"hidden_size = {hidden}; fc takes {width} inputs ({how})"
    given = len(kept) * hidden
    if given == width:
        return _engine_finding(rule, ctx, Status.PASSES, f"the target keeps {len(kept)} aux hidden states (layers "
                               f"{kept}) of width {hidden}: the {width} inputs of fc", evidence, reader)
    lost = []
    if len(set(layers)) < len(layers):
        lost.append(f"layers repeat ({layers}): the target keeps each once")
    outside = sorted({i for i in layers if not 0 <= i < count})
    if outside:
        lost.append(f"layers {outside} are outside the target's {count} layers (0 to {count - 1}): never kept")
    why = f"the target hands the drafter {len(kept)} aux hidden states (layers {kept}) of width {hidden} = {given} " \
          f"inputs, fc takes {width}" + (f"; {'; '.join(lost)}" if lost else "") + \
          (f" (this release reads no ids where the drafter config declares them: {', '.join(unread)})"
           if unread and not used else "")
    skip = _skips_fc(ctx, str(engine.get("builder") or "fc"))
    if skip is not None and given == ctx.draft_config.get("hidden_size"):
        return _engine_finding(rule, ctx, Status.DEGRADES, f"{why}: {given} is the drafter's own hidden size, so "
                               f"{_where(skip)} skips fc and the head drafts from a state it was not trained on (no "
                               "error)", evidence, skip)
    return _engine_finding(rule, ctx, Status.BLOCKS, why, evidence, reader,
                           f"RuntimeError: mat1 and mat2 shapes cannot be multiplied (tokens x {given} and {width} x "
                           f"{ctx.draft_config.get('hidden_size')})")
