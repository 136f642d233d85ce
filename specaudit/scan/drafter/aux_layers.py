"""The target layers an EAGLE-3 head is fed. The ids are ``eagle_aux_hidden_state_layer_ids`` of the drafter
config, else the target class's default ``(2, L // 2, L - 3)`` (LlamaForCausalLM.get_eagle3_aux_hidden_state_layers):
ids outside the target's layers fail the launch; ids the release does not read, or a head an algorithm does not
feed them to, make the launch run with a drafter that does not help (DEGRADED).
"""

from __future__ import annotations

import ast

from ...core.types import EngineFunction, Finding, Rule, Status
from .context import DEFAULT_AUX_LAYERS, DraftContext, check, degrades, draft_finding, engine_finding, site_of
from .engine_code import (
    AUX_DECLARED,
    capture_guard,
    captured_layers,
    config_reads,
    declared_aux,
    evaluate_layers,
    file_functions,
    predicate_members,
    release_fc,
    skips_fc,
    without_aux,
)
from .fc import layers_lost

# What a head that skips fc accepts: it drafts from a state it was not trained on, on every request.
_NO_FC = "acceptance length 1.00, no draft token accepted (sglang PR #21272: an EAGLE-3 head given the target's last " \
         "hidden state)"


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
        return draft_finding(rule, ctx, Status.UNKNOWN,
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
        return draft_finding(rule, ctx, Status.PASSES, f"the target keeps {len(kept_without_last)} aux hidden states "
                        f"(layers {kept_without_last}) of width {hidden}: the {width} inputs of fc", evidence)
    if any(fits):
        return draft_finding(rule, ctx, Status.UNKNOWN,
                        f"aux layer id {count} is the output of the target's last layer: kept by releases that "
                        f"collect after each layer (vLLM 0.18 on), not by earlier ones, and fc needs it", evidence)
    lost = layers_lost(layers, kept_with_last, "ids", count)
    kept = kept_without_last
    handed = f"{len(kept)} aux hidden states (layers {kept})"
    if kept_with_last != kept:
        handed += f", or {len(kept_with_last)} where the release keeps layer {count}, the last one's output,"
    return draft_finding(rule, ctx, Status.BLOCKS,
                    f"the target hands the drafter {handed} of width {hidden}, fc takes {width}"
                    + (f"; {'; '.join(lost)}" if lost else ""),
                    evidence, error=f"RuntimeError: shape '[-1, {width}]' is invalid for input of size "
                                    f"(tokens x {len(kept) * hidden})")


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
    reader = _id_setter(ctx, engine)
    if reader is None:
        return draft_finding(rule, ctx, Status.UNKNOWN, f"no function of this release sets {sets} from the drafter config "
                        f"(looked for {', '.join(engine.get('readers') or ())}): which aux layers the target captures "
                        "is not known", f"fc takes {width} inputs")
    reads = config_reads(reader.node)
    declared = declared_aux(ctx.draft_config)
    used = next((where for where in declared if where in reads), None)
    ids = declared[used] if used else None
    if not isinstance(count, int) or not isinstance(hidden, int):
        return engine_finding(rule, ctx, Status.UNKNOWN, "the target config lacks num_hidden_layers or hidden_size: "
                               f"how many aux hidden states of which width reach fc ({width} inputs) cannot be told",
                               f"fc takes {width} inputs", reader)
    layers = captured_layers(capture.node, ids, count)
    read = ", ".join(".".join(r) for r in sorted(reads) if r[-1] in {w[-1] for w in AUX_DECLARED}) or "no aux ids"
    unread = [".".join(w) for w in declared if w != used]
    source = (f"ids {ids} from the drafter config's {'.'.join(used)}" if used else "no ids") + \
        f" ({site_of(reader)} reads {read}" + (f"; not {', '.join(unread)}, which the drafter config declares" if unread
                                              else "") + f"), turned into layers by {site_of(capture)}"
    if layers is None:
        return engine_finding(rule, ctx, Status.UNKNOWN, f"which layers {site_of(capture)} captures for {ids} could "
                               "not be read from its code", source, capture)
    kept = sorted({i for i in layers if 0 <= i < count})
    evidence = f"{source}: it captures layers {layers}; target num_hidden_layers = {count}, " \
               f"hidden_size = {hidden}; fc takes {width} inputs ({how})"
    given = len(kept) * hidden
    if given == width:
        return engine_finding(rule, ctx, Status.PASSES, f"the target keeps {len(kept)} aux hidden states (layers "
                               f"{kept}) of width {hidden}: the {width} inputs of fc", evidence, reader)
    lost = layers_lost(layers, kept, "layers", count, f"0 to {count - 1}")
    why = f"the target hands the drafter {len(kept)} aux hidden states (layers {kept}) of width {hidden} = {given} " \
          f"inputs, fc takes {width}" + (f"; {'; '.join(lost)}" if lost else "") + \
          (f" (this release reads no ids where the drafter config declares them: {', '.join(unread)})"
           if unread and not used else "")
    skip = skips_fc(ctx, str(engine.get("builder") or "fc"))
    if skip is not None and given == ctx.draft_config.get("hidden_size"):
        return degrades(rule, ctx, f"{why}: {given} is the drafter's own hidden size, so {site_of(skip)} skips fc and "
                        "the head drafts from a state it was not trained on (no error)", _NO_FC, evidence, skip)
    return engine_finding(rule, ctx, Status.BLOCKS, why, evidence, reader,
                           f"RuntimeError: mat1 and mat2 shapes cannot be multiplied (tokens x {given} and {width} x "
                           f"{ctx.draft_config.get('hidden_size')})")


def _id_setter(ctx: DraftContext, engine: dict) -> EngineFunction | None:
    """The function of ``engine.readers`` in ``engine.files`` that sets ``engine.sets`` from the drafter config: on the
    traced path first, else in the files (a name the path meets elsewhere, ``__init__``, must not hide the reader the
    path does not reach: 0.5.8's ModelRunner.__init__)."""
    judge = ctx.judge
    assert judge is not None
    sets = str(engine.get("sets") or "eagle_aux_hidden_state_layer_ids")
    names, files = list(engine.get("readers") or ()), list(engine.get("files") or ())

    def setter(found: list[EngineFunction]) -> EngineFunction | None:
        return next((f for f in found if any(isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == sets for t in n.targets) for n in ast.walk(f.node))), None)

    return setter(judge.engine_functions(names, files)) or setter(file_functions(judge, names, files))


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
    if engine.get("capture"):  # the release turns the ids into the layers it captures, its default for none
        return _captured_fallback(rule, ctx, engine, layers)
    readers = judge.engine_functions(engine.get("readers") or (), engine.get("files") or ())
    if not readers:
        return None  # the release reads no aux layer ids from a drafter config: nothing to fall back from
    reader = next((f for f in readers if f.on_path), readers[0])
    reads = config_reads(reader.node)
    default = next((f for f in map(judge.target_method, engine.get("defaults") or ()) if f is not None), None)
    fallback = evaluate_layers(default.node, layers) if default is not None else None
    fallback_text = f"{fallback} ({site_of(default)}, for the target's {layers} layers)" if fallback and default else \
        f"{[2, layers // 2, layers - 3]} (the default {DEFAULT_AUX_LAYERS}, for the target's {layers} layers)"
    fallback = fallback or [2, layers // 2, layers - 3]
    declared = declared_aux(ctx.draft_config)
    read_text = ", ".join(".".join(r) for r in sorted(reads) if r[-1] in {w[-1] for w in AUX_DECLARED}) or "none"
    evidence = f"{site_of(reader)} reads {read_text}"
    if not declared:
        return engine_finding(rule, ctx, Status.UNDECIDED,
                               f"the drafter config names no aux layer ids: the engine captures the target's layers "
                               f"{fallback_text}; whether the head was trained on those cannot be told from its files "
                               "(specaudit smoke measures it)", evidence, reader)
    used = [where for where in declared if where in reads]
    if used:
        return engine_finding(rule, ctx, Status.PASSES, f"the engine reads the ids where the drafter config declares "
                               f"them ({'.'.join(used[0])} = {declared[used[0]]})", evidence, reader)
    where, ids = next(iter(declared.items()))
    evidence += f"; the drafter config declares {'.'.join(where)} = {ids}"
    if sorted(set(ids)) == sorted(set(fallback)):
        return engine_finding(rule, ctx, Status.PASSES,
                               f"the engine does not read {'.'.join(where)}, and its fallback {fallback_text} is the "
                               "same layers", evidence, reader)
    return _fell_back(rule, ctx, f"{ids} ({'.'.join(where)})", fallback_text, evidence, reader)


def _fell_back(rule: Rule, ctx: DraftContext, trained: str, captured: str, evidence: str,
               reader: EngineFunction) -> Finding:
    return degrades(rule, ctx, f"the drafter was trained on the target's layers {trained}, which this release does "
                    f"not read: it captures {captured} instead, and the head drafts from hidden states it never saw "
                    "(no error, no log line)",
                    "near zero, about 1% of draft tokens where the trained layers give about 59% (vllm PR #50170: "
                    "every request's draft reads layers the head was not trained on)", evidence, reader)


def _captured_fallback(rule: Rule, ctx: DraftContext, engine: dict, layers: int) -> Finding | None:
    """aux_layer_fallback where the target's ``engine.capture`` method turns ids into the layers it captures (SGLang's
    set_eagle3_layers_to_capture: id + 1 each, its default list for none): the layers the declared ids would capture
    against those the release captures, reading the ids only where ``engine.readers`` reads them."""
    judge = ctx.judge
    assert judge is not None
    capture, reader = judge.target_method(str(engine["capture"])), _id_setter(ctx, engine)
    declared = declared_aux(ctx.draft_config)
    if capture is None or reader is None or not declared:
        return None  # no capture, no reader, or no ids declared: aux_layer_ids says what the target hands the fc
    reads = config_reads(reader.node)
    read_text = ", ".join(".".join(r) for r in sorted(reads) if r[-1] in {w[-1] for w in AUX_DECLARED}) or "none"
    where, ids = next(iter(declared.items()))
    used = next((w for w in declared if w in reads), None)
    taken = captured_layers(capture.node, declared[used] if used else None, layers)
    trained = captured_layers(capture.node, ids, layers)
    evidence = f"{site_of(reader)} reads {read_text}; the drafter config declares {'.'.join(where)} = {ids}; " \
               f"{site_of(capture)} turns them into layers {trained}"
    if taken is None or trained is None:
        return None  # the capture method has another shape: aux_layer_ids says it is not read
    if used:
        return engine_finding(rule, ctx, Status.PASSES, f"the engine reads the ids where the drafter config declares "
                               f"them ({'.'.join(used)} = {declared[used]})", evidence, reader)
    fallback_text = f"layers {taken} ({site_of(capture)} for no ids, on the target's {layers} layers)"
    if sorted(set(taken)) == sorted(set(trained)):
        return engine_finding(rule, ctx, Status.PASSES, f"the engine does not read {'.'.join(where)}, and its fallback "
                               f"{fallback_text} is the same layers", evidence, reader)
    return _fell_back(rule, ctx, f"{ids} ({'.'.join(where)}: captured as layers {trained})", fallback_text, evidence,
                      reader)


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
    guard = next((g for g in (capture_guard(f.node, str(engine.get("flag") or "")) for f in setters) if g), None)
    if guard is None:
        return None  # the release captures aux states under no predicate specaudit can read
    predicates = judge.engine_functions([guard], engine.get("algorithms") or ())
    members = next((m for m in (predicate_members(p.node) for p in predicates) if m is not None), None)
    if members is None or not predicates:
        return None
    algorithm = (ctx.launch.method or "").upper()
    where = f"{setters[0].file}:{setters[0].line} {setters[0].name} sets {engine.get('flag')} under {guard}() " \
            f"({predicates[0].file}:{predicates[0].line}: {' or '.join(sorted(members))})"
    evidence = f"{where}; {fc.describe()}: {states} target hidden states of {hidden}"
    if algorithm in members:
        return engine_finding(rule, ctx, Status.PASSES, f"{algorithm} hands the drafter the {states} fused aux hidden "
                               "states its fc takes", evidence, setters[0])
    return degrades(rule, ctx, f"the drafter is an EAGLE-3 head (its fc takes {states} x {hidden} inputs: fused aux "
                    f"hidden states), and {algorithm} captures none: the head gets the target's last hidden state "
                    "instead, skips fc and drafts from a state it was not trained on", _NO_FC, evidence, setters[0])
