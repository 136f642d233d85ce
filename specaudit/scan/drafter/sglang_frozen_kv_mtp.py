"""SGLang's FROZEN_KV_MTP draft (a Gemma-4 assistant) against its target: the assistant has no KV cache of its own,
each of its layers reads the KV of one of the target's last two layers, by layer type; and its pre-projection takes
the target's embedding beside the target's hidden state.

0.5.17 and 0.5.23 models/gemma4_mtp.py Gemma4AssistantForCausalLM:
- ``build_frozen_kv_mtp_context`` (called by FrozenKVMTPDraftWorker.alloc_memory_pool, while the worker is built):
  ``by_type = {target_text.layer_types[i]: kv_owner(i) for i in (L - 2, L - 1)}``, then for each assistant layer ``if t
  not in by_type: raise ValueError("Frozen-KV MTP assistant layer {i} has type {t!r}, expected one of
  {sorted(by_type)}.")``;
- ``__init__``: ``self.pre_projection = ReplicatedLinear(2 * self.backbone_hidden_size, ...)`` over ``torch.cat([token_embed,
  prev_hidden])``, the target's embedding and hidden state: a ``backbone_hidden_size`` other than the target's
  hidden size fails the first draft forward.
"""

from __future__ import annotations

import ast

from ...core.types import EngineFunction, Finding, Rule, Status
from .context import DraftContext, check, draft_finding, engine_finding, site_of
from .engine_code import class_method


def _method(ctx: DraftContext, name: str) -> EngineFunction | None:
    """The drafter's registered class's method of that name, the first in its MRO that defines it."""
    judge = ctx.judge
    entry = judge.registered(list(ctx.draft_config.get("architectures") or ())) if judge is not None else None
    if judge is None or entry is None:
        return None
    for module, base in judge.mro(entry.module, entry.class_name):
        relpath, node = class_method(judge, module, base, name)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return EngineFunction(relpath, node.lineno, node.name, node)
    return None


def _raise_line(fn: EngineFunction, needle: str) -> int:
    return next((n.lineno for n in ast.walk(fn.node) if isinstance(n, ast.Raise) and needle in ast.unparse(n)), fn.line)


@check("frozen_kv_assistant")
def check_frozen_kv_assistant(rule: Rule, ctx: DraftContext) -> Finding | None:
    draft = ctx.draft_config
    nested = draft.get("text_config")
    text: dict = nested if isinstance(nested, dict) else draft
    target = ctx.target_text
    binder = _method(ctx, "build_frozen_kv_mtp_context")
    if binder is None:
        return None  # the release builds no frozen-KV context for this drafter: nothing of the target's KV it reads
    layers, types = target.get("num_hidden_layers"), target.get("layer_types")
    evidence = f"assistant layer_types = {text.get('layer_types')}; target layer_types[-2:] = " \
               f"{types[-2:] if isinstance(types, list) else types}; backbone_hidden_size = " \
               f"{draft.get('backbone_hidden_size')}; target hidden_size = {target.get('hidden_size')}"
    if not isinstance(layers, int) or not isinstance(types, list) or len(types) < layers or layers < 2 \
            or not isinstance(text.get("layer_types"), list):
        return engine_finding(rule, ctx, Status.UNKNOWN, "the target's or the assistant's config has no layer_types "
                              "(their config class fills them in at load, which a scan does not run)", evidence,
                              binder)
    by_type = sorted({types[layers - 2], types[layers - 1]})
    for i, kind in enumerate(text["layer_types"]):
        if kind not in by_type:
            line = _raise_line(binder, "has type")
            return engine_finding(
                rule, ctx, Status.BLOCKS, f"assistant layer {i} is {kind!r}, and the target's last two layers, whose "
                f"KV it reads, are {', '.join(by_type)}: {site_of(binder)} refuses it while the draft worker is built",
                evidence, EngineFunction(binder.file, line, binder.name, binder.node, binder.on_path),
                f"ValueError: Frozen-KV MTP assistant layer {i} has type {kind!r}, expected one of {by_type}.")
    backbone, hidden = draft.get("backbone_hidden_size"), target.get("hidden_size")
    if isinstance(backbone, int) and isinstance(hidden, int) and backbone != hidden:
        init = _method(ctx, "__init__") or binder
        return engine_finding(
            rule, ctx, Status.BLOCKS, f"the assistant's pre-projection joins the target's embedding and hidden state "
            f"(2 x {hidden}) into a layer built for 2 x backbone_hidden_size = {2 * backbone} ({site_of(init)}): the "
            "first draft forward fails", evidence, init,
            f"RuntimeError: mat1 and mat2 shapes cannot be multiplied (Nx{2 * hidden} and {2 * backbone}x"
            f"{text.get('hidden_size')})")
    if not isinstance(backbone, int) or not isinstance(hidden, int):
        return draft_finding(rule, ctx, Status.UNKNOWN, "the assistant's backbone_hidden_size or the target's "
                             "hidden_size is not in their configs", evidence)
    return engine_finding(rule, ctx, Status.PASSES, f"each assistant layer reads a target layer of its type "
                          f"({', '.join(by_type)}); backbone_hidden_size is the target's hidden size ({hidden})",
                          evidence, binder)
