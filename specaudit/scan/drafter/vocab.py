"""The drafter's vocabulary against the target's: EAGLE-3's ``lm_head`` has ``draft_vocab_size`` rows (else
``vocab_size``), ``d2t`` maps draft id i to target id ``i + d2t[i]`` (its values read from the safetensors bytes), and
a smaller draft vocab without it, or with offsets all zero, proposes draft index i as target token i (``t2d`` is not
loaded); a draft model's vocabulary equal to the target's; a drafter's own ``lm_head`` or embedding replaced by the
target's when the release shares them.
"""

from __future__ import annotations

import ast
from pathlib import Path

from ...core.types import EngineFunction, Finding, Rule, Status
from ...launch.checkpoint import Checkpoint, LocalFile, TensorInfo
from .context import DraftContext, check, degrades, draft_finding, engine_finding, site_of, unread_finding
from .engine_code import class_method, flag_when_missing, raise_message, shares_under

# What a release does with each problem of a drafter's vocab maps (a vocab_maps rule's ``params.engine.problems``
# names those it has; all but d2t_short where it names none). It fails on these: lm_head_rows (lm_head's rows against
# the config's draft vocab), d2t_length (d2t of another
# length than the draft vocab: vLLM loads it into a parameter of draft_vocab_size entries), d2t_short (d2t shorter
# than it: an engine that keeps d2t as loaded and indexes it by draft id, SGLang's hot_token_id), d2t_range (a draft
# id mapped outside the target vocab).
FAILS = ("lm_head_rows", "d2t_length", "d2t_short", "d2t_range")
# And it runs with these, proposing draft index i as target token i: no_d2t (a draft vocab smaller than the target's
# and no d2t), d2t_identity (such a d2t of offsets all zero). t2d is not a problem of either kind: neither engine loads
# it (vLLM and SGLang load_weights skip it), so its length changes nothing; nor is the drafter config's vocab_size
# (vLLM sizes the draft's logits by it, and nothing compares it with the target's): tokenizer.py judges the tokenizer.
SILENT = ("no_d2t", "d2t_identity")
VOCAB_PROBLEMS = tuple(p for p in FAILS + SILENT if p != "d2t_short")


@check("vocab_maps")
def check_vocab_maps(rule: Rule, ctx: DraftContext) -> Finding | None:
    engine = rule.params.get("engine") or {}
    wanted = set(engine.get("problems") or VOCAB_PROBLEMS)
    target_vocab = ctx.target_text.get("vocab_size")
    draft_vocab = ctx.draft_config.get("draft_vocab_size") or ctx.draft_config.get("vocab_size")
    d2t, t2d = ctx.draft.tensor("d2t"), ctx.draft.tensor("t2d")
    lm_head = ctx.draft.tensor("lm_head.weight")
    if d2t is None and lm_head is None and ctx.draft.unread:
        return unread_finding(rule, ctx, "the vocab maps (d2t, t2d, lm_head)")
    if not isinstance(target_vocab, int):
        return None
    found = _vocab_problems(ctx, wanted, target_vocab, draft_vocab, d2t, lm_head)
    text = "; ".join(t.describe() for t in (lm_head, d2t, t2d) if t is not None) or \
        f"draft vocab {draft_vocab}, target vocab {target_vocab}"
    held = d2t or lm_head
    shown = held.file if held is not None else None  # the weight file the finding names
    fails = [(name, why) for name, why in found if name in FAILS]
    if fails:
        # The engine's error for the first problem it meets, as the rule gives it (params.engine.errors, with the
        # figures of the tensor at fault).
        given = engine.get("error") or (engine.get("errors") or {}).get(fails[0][0])
        figures = {"found": d2t.numel if fails[0][0] == "d2t_length" and d2t else lm_head.shape[0] if lm_head else "",
                   "expected": draft_vocab}
        error = " ".join(str(given).split()).format(**figures) if given else None
        return draft_finding(rule, ctx, Status.BLOCKS, "; ".join(why for _, why in fails), text, shown, error)
    silent = [why for name, why in found if name in SILENT]
    if silent:
        return degrades(rule, ctx, "; ".join(silent) + " (no error, no log line)",
                        "near zero: the draft's ids are read as target ids they were not trained to predict, on every "
                        "request (NVIDIA-NeMo/Automodel PR #2447: without d2t \"the acceptance rate collapsed\"; "
                        "SafeAILab/EAGLE #222: an all-zero d2t; sgl-project/SpecForge PR #534: a remapped d2t, \"a "
                        "catastrophic drop in draft acceptance\")", text, file=shown)
    return draft_finding(rule, ctx, Status.PASSES,
                         f"draft vocab {draft_vocab} maps into the target vocab {target_vocab}", text)


def _vocab_problems(ctx: DraftContext, wanted: set[str], target_vocab: int, draft_vocab: object,
                    d2t: TensorInfo | None, lm_head: TensorInfo | None) -> list[tuple[str, str]]:
    """The problems of the drafter's vocab maps that the release has (``wanted``), each with what it is; d2t's values
    read from its bytes (a few KB) where its length lets the release read it."""
    found: list[tuple[str, str]] = []
    if lm_head is not None and draft_vocab and lm_head.shape[0] != draft_vocab:
        found.append(("lm_head_rows", f"lm_head has {lm_head.shape[0]} rows, the config's draft vocab is {draft_vocab}"))
    reduced = isinstance(draft_vocab, int) and draft_vocab < target_vocab
    if d2t is None and reduced:
        found.append(("no_d2t", f"the draft vocab is {draft_vocab} tokens of the target's {target_vocab} and the "
                                "checkpoint has no d2t: the release maps draft id i to target id i (vLLM's "
                                "draft_id_to_target_id stays zeros, SGLang maps nothing), so the head's ids name the "
                                f"first {draft_vocab} tokens of the target's vocabulary"))
    if d2t is not None and d2t.numel != draft_vocab:
        found.append(("d2t_length", f"d2t has {d2t.numel} entries, the draft vocab is {draft_vocab}"))
        if isinstance(draft_vocab, int) and d2t.numel < draft_vocab:
            found.append(("d2t_short", f"d2t has {d2t.numel} entries, the draft vocab is {draft_vocab}: draft ids "
                                       f"{d2t.numel} to {draft_vocab - 1} index past its end at the first draft step"))
    if d2t is not None and not ({"d2t_length", "d2t_short"} & wanted & {name for name, _ in found}):
        offsets = ctx.draft.integers(d2t)[:draft_vocab] if isinstance(draft_vocab, int) else ctx.draft.integers(d2t)
        bad = [i for i, off in enumerate(offsets) if not 0 <= i + off < target_vocab]
        if bad:
            found.append(("d2t_range", f"{len(bad)} draft ids map outside the target vocab (first: {bad[0]} -> "
                                       f"{bad[0] + offsets[bad[0]]}, target vocab {target_vocab})"))
        elif reduced and not any(offsets):
            found.append(("d2t_identity", f"d2t's {len(offsets)} offsets are all zero: draft id i is target id i, so "
                                          f"the head's ids name the first {len(offsets)} tokens of the target's "
                                          f"{target_vocab}, not the ones it was trained on"))
    return [(name, why) for name, why in found if name in wanted]


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
        return engine_finding(rule, ctx, Status.UNKNOWN, "the draft's or the target's config has no vocab_size",
                               evidence, fn)
    if draft == target:
        return engine_finding(rule, ctx, Status.PASSES, f"both vocabularies have {draft} tokens (the engine may "
                               "also compare the tokenizers' token-to-id maps, which a scan does not read)", evidence,
                               fn)
    if fn is None:
        return draft_finding(rule, ctx, Status.UNKNOWN, f"the draft's vocabulary ({draft}) is not the target's ({target}), "
                        "and this release does not compare them at load: what the draft's ids do to the target is not "
                        "modeled", evidence)
    line, message = raise_message(fn.node, {"target_vocab_size": target, "draft_vocab_size": draft})
    return engine_finding(rule, ctx, Status.BLOCKS, f"the draft's vocabulary ({draft}) is not the target's ({target}): "
                           f"{site_of(fn)} refuses it once both models have loaded", evidence,
                           EngineFunction(fn.file, line or fn.line, fn.name, fn.node, fn.on_path), message)


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
    pairs = [(mine.read(head.start + r * row, row), theirs.read(other.start + r * row, row)) for r in rows]
    # Rows of zero bytes are no weights to compare: a copy of a checkpoint that kept its headers and not its floats
    # (smoke's probe mirrors a node's checkpoints so), or a head never trained.
    if any(not any(a) or not any(b) for a, b in pairs):
        return None
    return all(a == b for a, b in pairs)


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
    module_file, init = class_method(judge, entry.module, entry.class_name, "__init__")
    key = flag_when_missing(init, flag) if init is not None else None
    sharers = [f for f in judge.engine_functions(engine.get("sharers") or (), engine.get("files") or ())
               if shares_under(f.node, flag, setter)]
    if key is None or not sharers:
        return None  # the release keeps a drafter's own head whatever its config says
    sharer = next((f for f in sharers if f.on_path), sharers[0])
    evidence = f"{entry.class_name} ({module_file}) sets {flag} where the drafter config has no {key}; " \
               f"{site_of(sharer)} then calls {setter}(target embed, target head); the drafter checkpoint has " \
               f"{head.describe()}"
    if ctx.draft_config.get(key) is not None:
        return engine_finding(rule, ctx, Status.PASSES, f"the drafter config sets {key}: the release keeps the "
                               "drafter's own lm_head", evidence, sharer)
    # The first read in the source (ast.walk goes breadth first: a shallower read further down would come first).
    read = min((n for n in ast.walk(init) if isinstance(n, ast.Attribute) and n.attr == key
                and isinstance(n.ctx, ast.Load)), key=lambda n: (n.lineno, n.col_offset), default=None) \
        if init is not None else None
    if key not in ctx.draft_config and read is not None:
        # `if config.<key> is None` reads the key as an attribute: a transformers config made from a config.json
        # without it has no such attribute (null and absent are not the same), and building the draft class fails.
        where = EngineFunction(module_file, read.lineno, f"{entry.class_name}.__init__", init)
        return engine_finding(rule, ctx, Status.BLOCKS, f"the drafter config has no {key} at all (null would keep "
                               f"the launch running): {entry.class_name}.__init__ reads config.{key}, which a "
                               "config made without that key does not have", evidence, where,
                               f"AttributeError: the drafter's config (model type "
                               f"{ctx.draft_config.get('model_type')}) has no attribute '{key}'")
    target = ctx.launch.target_weights
    other = target.tensor("lm_head.weight") if target is not None else None
    same = _same_rows(ctx.draft, head, target, other) if target is not None and other is not None else None
    replaced = f"the drafter config has no {key}, so the release replaces the drafter's lm_head (and embedding) by " \
               "the target's"
    if same is None:
        return engine_finding(rule, ctx, Status.UNDECIDED, f"{replaced}; whether the drafter's head is a copy of the "
                               "target's cannot be told without the target's lm_head here (its checkpoint as a directory: "
                               "--model DIR, or the launch command's model; specaudit smoke measures it)", evidence, sharer)
    if same:
        return engine_finding(rule, ctx, Status.PASSES, f"{replaced}; the sampled rows of both heads are identical: "
                               "a copy, nothing lost", evidence, sharer)
    return degrades(rule, ctx, f"{replaced}, and the drafter's own head differs from the target's (rows sampled over "
                    "the vocabulary): the head it was trained with is silently replaced (no error, no log line)",
                    "near zero: the drafter's last hidden states were trained against its own head, and the "
                    "target's reads them as other tokens on every request", evidence, sharer)
