"""SGLang's DSPARK draft against its target: the draft config the release parses (Markov rank and head, mask token id)
and the mask token id against the target's vocabulary, where DSparkWorkerV2 checks them once the draft has loaded.

What the release reads of the draft's config.json, and in which order of keys, is the release's own
``parse_dspark_draft_config`` (speculative/dspark_components/dspark_config.py: the prefixed ``dspark_*`` keys of a
bundled draft first, then ``dspark_config`` (0.5.23 also ``dflash_config``), the text config, the config), played out
on that config.json by ``specaudit.play`` (never run): the values it leaves assigned are the draft's. The
checks are the release's raises, found by their messages and shown with the values filled in:

- ``resolve_runtime_config``: ``if not draft_config.require_markov(): raise ValueError("DSpark draft requires
  markov_rank > 0; ...")`` (the draft class's ``DSparkDraftMixin.__init__`` raises the same first, models/dspark.py),
  ``if draft_config.mask_token_id is None: raise ValueError("DSpark requires mask_token_id to be set in the draft model
  config.")``, ``if mask_token_id >= target_vocab_size: raise ValueError("DSpark mask_token_id=... is outside the
  target vocab size ...")``; the target vocab is ``model_config.vocab_size`` (0.5.17), or the text config's
  ``padded_vocab_size`` where it has one (0.5.23: the worker reads it first);
- a raise of ``parse_dspark_draft_config`` itself that every way meets (a negative Markov rank, an unsupported head).

Unlike DFLASH's, the mask token id is the draft config's, not resolved from the target's tokenizer: it is read here.
"""

from __future__ import annotations

import ast
from typing import Any

from ...core.types import EngineFunction, Finding, Rule, Status
from ...play.modules import ModuleScope
from ..facts import ReleaseModules
from .context import DraftContext, check, engine_finding, site_of
from .engine_code import class_method, module_functions


def _function(ctx: DraftContext, module: str, name: str) -> tuple[ast.FunctionDef, ModuleScope, str] | None:
    if ctx.judge is None:
        return None
    code = ReleaseModules(ctx.judge.release)
    found = code.module_tree(module)
    if found is None:
        return None
    tree, relpath = found
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    return (node, ModuleScope(code, tree, relpath), relpath) if node is not None else None


def _raise_with(function: ast.AST, needle: str, values: dict[str, object]) -> tuple[int, str] | None:
    """The line of the function's first ``raise Exc("...")`` whose message holds ``needle``, and its message with the
    f-string's names filled from ``values`` (``{name}`` where a value is not given)."""
    for node in ast.walk(function):
        if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
            continue
        pieces = node.exc.args[0].values if isinstance(node.exc.args[0], ast.JoinedStr) else [node.exc.args[0]]
        text = []
        for piece in pieces:
            if isinstance(piece, ast.Constant):
                text.append(str(piece.value))
            elif isinstance(piece, ast.FormattedValue):
                name = ast.unparse(piece.value)
                shown = values.get(name, f"{{{name}}}")
                text.append(repr(shown) if piece.conversion == ord("r") else str(shown))
        message = "".join(text)
        if needle in message:
            exception = node.exc.func.id if isinstance(node.exc.func, ast.Name) else "Exception"
            return node.lineno, f"{exception}: {message}"
    return None


@check("dspark_draft_config")
def check_dspark_draft_config(rule: Rule, ctx: DraftContext) -> Finding | None:
    """The DSpark draft's config as the release parses it: a Markov rank above 0 with a head type it builds, and a
    mask token id inside the target's vocabulary, at the release's own raises (``params.engine``: ``module``, the
    module of ``parse``, ``containers`` (the function whose nested config keys it merges) and ``checks``)."""
    engine = rule.params.get("engine") or {}
    module = str(engine.get("module") or "")
    parsed = _function(ctx, module, str(engine.get("parse") or ""))
    checks = [found for name in engine.get("checks") or () if (found := _function(ctx, module, str(name)))]
    if parsed is None or not checks:
        return None  # a release without DSPARK's draft config: nothing of it to hold against
    merged = _function(ctx, module, str(engine.get("containers") or ""))
    read = _read(ctx.draft_config, _nested_keys(merged[0]) if merged else ["dspark_config"])
    evidence = "; ".join(f"{name} = {value!r} ({where})" for name, (value, where) in read.items())
    fn = EngineFunction(checks[0][2], checks[0][0].lineno, checks[0][0].name, checks[0][0])

    def refused(needle: str, values: dict[str, object], why: str) -> Finding:
        # The draft class's own constructor first (DSparkDraftMixin.__init__ parses the config as it is built), then
        # the parse, then the worker's checks.
        for node, _scope, where in [*_draft_inits(ctx), parsed, *checks]:
            found = _raise_with(node, needle, values)
            if found is not None:
                at = EngineFunction(where, found[0], getattr(node, "name", ""), node)
                return engine_finding(rule, ctx, Status.BLOCKS, f"{why}: {site_of(at)} refuses it when the draft "
                                      "loads", evidence, at, found[1])
        return engine_finding(rule, ctx, Status.UNKNOWN, f"{why}, and this release has no check of it that the scan "
                              "found: what the draft does then is not modeled", evidence, fn)

    markov, head, mask = (read[k][0] for k in ("markov_rank", "markov_head_type", "mask_token_id"))
    try:
        markov = int(markov) if markov is not None else 0
        mask = int(mask) if mask is not None else None
    except (TypeError, ValueError):
        return engine_finding(rule, ctx, Status.UNKNOWN, "the drafter config's Markov rank or mask token id is not a "
                              "number", evidence, fn)
    if markov <= 0:
        return refused("draft requires markov_rank > 0", {"draft_config.markov_rank": markov, "markov_rank": markov,
                                                           "dspark_config.markov_rank": markov},
                       f"the drafter config's Markov rank is {markov}; DSPARK's draft needs a Markov head (rank > 0)")
    supported = parsed[1].value(str(engine.get("head_types") or ""))
    if head is None and not any(read[k][1].startswith("dspark_") for k in read):
        return refused("markov_head_type when markov_rank > 0", {},
                       "the drafter config has a Markov rank but no markov_head_type")
    if head is not None and isinstance(supported, (tuple, list)) and str(head).lower() not in supported:
        return refused("Unsupported DSpark markov_head_type", {"markov_head_type": str(head).lower(),
                                                                "SUPPORTED_DSPARK_MARKOV_HEAD_TYPES": tuple(supported)},
                       f"the drafter config's markov_head_type {head!r} is none of {', '.join(supported)}")
    if mask is None:
        return refused("mask_token_id to be set", {}, "the drafter config sets no mask token id")
    vocab, which = _target_vocab(ctx, engine)
    if not isinstance(vocab, int):
        return engine_finding(rule, ctx, Status.UNKNOWN, "the target's config has no vocab_size", evidence, fn)
    if mask >= vocab:
        return refused("is outside the target", {"mask_token_id": mask, "target_vocab_size": vocab},
                       f"the drafter's mask token id {mask} is outside the target's vocabulary ({which} {vocab})")
    return engine_finding(rule, ctx, Status.PASSES, f"Markov rank {markov}; mask token id {mask} inside the target's "
                          f"vocabulary ({which} {vocab})", evidence, fn)


def _draft_inits(ctx: DraftContext) -> list[tuple[ast.AST, None, str]]:
    """The ``__init__`` of each class in the MRO of the class the release registers for the drafter's architectures."""
    judge = ctx.judge
    entry = judge.registered(list(ctx.draft_config.get("architectures") or ())) if judge is not None else None
    if judge is None or entry is None:
        return []
    found = []
    for module, name in judge.mro(entry.module, entry.class_name):
        relpath, init = class_method(judge, module, name, "__init__")
        if init is not None:
            found.append((init, None, relpath))
    return found


# The keys parse_dspark_draft_config reads for each value, in its order: the prefixed key of a draft bundled in the
# target's config, then the nested configs it merges, then the text config, then the config itself.
PREFIXED = {"markov_rank": "dspark_markov_rank", "markov_head_type": "dspark_markov_head_type",
            "mask_token_id": "dspark_noise_token_id"}
BUNDLED = ("dspark_block_size", "dspark_markov_rank", "dspark_noise_token_id", "dspark_target_layer_ids")


def _nested_keys(function: ast.AST) -> list[str]:
    """The nested configs a release's ``_get_dspark_config`` merges, the one that wins first: 0.5.17 reads
    ``dspark_config``; 0.5.23 ``{**dflash_config, **dspark_config}``."""
    names = [n.value for n in ast.walk(function) if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and n.value.endswith("_config")]
    return list(reversed(list(dict.fromkeys(names)))) or ["dspark_config"]


def _read(config: dict, nested: list[str]) -> dict[str, tuple[Any, str]]:
    nested_text = config.get("text_config")
    text: dict = nested_text if isinstance(nested_text, dict) else config
    found: dict[str, tuple[Any, str]] = {}
    for name, prefixed in PREFIXED.items():
        places = [(config.get(prefixed), prefixed)]
        places += [((config.get(n) or {}).get(name) if isinstance(config.get(n), dict) else None, f"{n}.{name}")
                   for n in nested]
        places += [(text.get(name), f"text_config.{name}" if text is not config else name), (config.get(name), name)]
        if name == "mask_token_id":  # parse_dflash_draft_config's, the last default
            found_dflash = config.get("dflash_config")
            dflash: dict = found_dflash if isinstance(found_dflash, dict) else {}
            places.append((dflash.get("mask_token_id"), "dflash_config.mask_token_id"))
        found[name] = next(((v, where) for v, where in places if v is not None), (None, f"no {name}"))
    return found


def _target_vocab(ctx: DraftContext, engine: dict) -> tuple[Any, str]:
    """The bound the worker holds the mask token id against: the text config's ``padded_vocab_size`` where the
    release's worker reads it (``params.engine.worker``, a module whose functions name it) and the target has one,
    else ``vocab_size``."""
    text = ctx.target_text
    worker = str(engine.get("worker") or "")
    _, functions = module_functions(ctx.judge, worker) if worker and ctx.judge is not None else ("", [])
    reads_padded = any(isinstance(n, ast.Constant) and n.value == "padded_vocab_size"
                       for f in functions for n in ast.walk(f))
    if reads_padded and isinstance(text.get("padded_vocab_size"), int):
        return text["padded_vocab_size"], "padded_vocab_size"
    return text.get("vocab_size"), "vocab_size"
