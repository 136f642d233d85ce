"""How a drafter's classes are read from the release: a class by its module and name, the class a name of its module
stands for, its MRO, its own and inherited methods, and the ``__init__``s that making an object of it runs. Shared by
the drafter's contract (contract.py) and the parameters its config builds (unfilled.py)."""

from __future__ import annotations

import ast
from typing import Any

from ...play.modules import ModuleScope, defined_class, module_of
from ...play.player import dotted
from ..facts import ReleaseModules
from ..judge import Judge

MAX_DEPTH = 5  # modules within modules walked from the drafter class (model -> layers.i -> self_attn -> qkv_proj)


# -- the release's drafter class ---------------------------------------------------------------------------------------
# Read as the rest of the scan reads a release: a name and a class's MRO by the index (``judge.mro``, the resolver's
# C3 order through imports, relative ones and aliases), a class and what it defines by the player's ModuleScope.


def class_named(judge: Judge, module: str, name: str) -> ModuleScope | None:
    """The class ``module:name`` as the player reads it: its module's scope, the class its owner."""
    return defined_class(ReleaseModules(judge.release), f"{module}:{name}")


def named(judge: Judge, found: ModuleScope, name: str) -> ModuleScope | None:
    """The class a name of the class's module stands for (one it defines, or one it imports): the index's answer."""
    resolved = judge.mro(module_of(found.where), name)
    return class_named(judge, *resolved[0]) if resolved else None


def lineage(judge: Judge, found: ModuleScope) -> list[ModuleScope]:
    """The class and each base of it the release defines, in MRO order."""
    assert found.owner is not None
    classes = [class_named(judge, *c) for c in judge.mro(module_of(found.where), found.owner.name)]
    return [c for c in classes if c is not None] or [found]


def own(owner: ModuleScope, name: str) -> ast.FunctionDef | None:
    """The method the class itself defines under ``name`` (ModuleScope.member, where the class is its owner)."""
    member = owner.member(owner.this_class or "", name)
    if member is None or member.owner != owner.this_class or not isinstance(member.node, ast.FunctionDef):
        return None
    return member.node


def method(judge: Judge, found: ModuleScope, name: str) -> tuple[ModuleScope, ast.FunctionDef] | None:
    """The method an object of the class calls: the first definition along its MRO in the release."""
    for owner in lineage(judge, found):
        method = own(owner, name)
        if method is not None:
            return owner, method
    return None


def config_of(function: ast.FunctionDef, config: dict) -> dict[str, Any]:
    """The bindings that give a class's ``__init__`` the drafter's config: its ``config`` parameter, and every
    ``<...>.hf_config`` it reads (vLLM's ``speculative_config.draft_model_config.hf_config``)."""
    bound: dict[str, Any] = {name: config for node in ast.walk(function) if isinstance(node, ast.Attribute)
                             and node.attr == "hf_config" and (name := dotted(node))}
    return bound


def initialised(judge: Judge, found: ModuleScope) -> list[tuple[ModuleScope, ast.FunctionDef]]:
    """The ``__init__``s that making an object of the class runs, in order: the first along its MRO, and the next
    while each calls its base's (``super().__init__(...)``, ``Base.__init__(self, ...)`` of a class of the release).
    vLLM's EagleLlamaForCausalLM, a LlamaForCausalLM, calls ``nn.Module.__init__(self)``: llama.py's lm_head is not
    built."""
    chain = []
    for owner in lineage(judge, found):
        init = own(owner, "__init__")
        if init is None:
            continue
        chain.append((owner, init))
        if not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "__init__"
                   and (isinstance(n.func.value, ast.Call) and dotted(n.func.value.func) == "super"
                        or isinstance(n.func.value, ast.Name) and named(judge, owner, n.func.value.id) is not None)
                   for n in ast.walk(init)):
            break
    return chain
