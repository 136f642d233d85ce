"""A draft that is the target's own class, built a second time where the target was built (the kind
``draft_is_target_class``, gates.py).

Where the engine's rewrite of the target's config into the draft's maps nothing (vLLM 0.34.0's
``SpeculativeConfig.hf_config_override`` has no MTP rewrite for Llama, Qwen3 or Kimi-K2, and no longer refuses the
launch at config time), the draft's architectures are the target's and the registry builds the target's own class
as the draft. Read from the release, not declared:

- the function that builds the draft (a rule's ``load``: 0.34.0's ``load_eagle_model``) calls the builder
  (``build``: ``get_model``) with no ``prefix``: the draft's layers are named from the builder's default prefix;
- the builder hands that prefix on to a loader method (``loader.load_model(..., prefix=prefix)``), which the model
  runner (``target_load``) calls for the target with no prefix: the target's layers are named from that method's
  default. Where the two defaults agree, the draft's layers have the target's names;
- a layer the target builds (its classes' ``__init__``s, what they construct, the methods they call on ``self``, read
  transitively) refuses a name already in the mapping the layers register in (``registry``:
  ``if prefix in compilation_config.static_forward_context: raise ValueError(f"Duplicate layer name: {prefix}")``).

The launch is then refused at that raise when the draft is built. Where the target reaches more than one such raise,
which one it meets first is not told: the finding stands at the draft's build and names them all. Where it reaches
none, the verdict is UNKNOWN, naming what was not found.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

from ..core.types import Finding, Rule, Status
from .facts import ClassInfo, ModuleInfo, SyntaxProblem, dotted_name, raised_exception
from .judge import Judge

MAX_CLASSES = 400  # classes read from the target's, at most: a model's layers are a few dozen


@dataclass(frozen=True)
class Refusal:
    file: str
    line: int
    code: str
    error: str
    owner: str  # the class whose __init__ holds it


def _function(judge: Judge, spec: str) -> tuple[ModuleInfo, ast.FunctionDef] | None:
    """``module:function`` or ``module:Class.method`` in the release."""
    module_name, _, qual = spec.partition(":")
    module = judge.release.module(module_name)
    if module is None:
        return None
    tree = _syntax(judge, module.path)
    if tree is None:
        return None
    owner, _, name = qual.rpartition(".")
    body: list[ast.stmt] = tree.body
    if owner:
        cls = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == owner), None)
        body = cls.body if cls is not None else []
    found = [s for s in body if isinstance(s, ast.FunctionDef) and s.name == name]
    return (module, found[-1]) if found else None


def _syntax(judge: Judge, relpath: str) -> ast.Module | None:
    try:
        tree = judge.release.syntax(relpath)
    except (SyntaxProblem, OSError):
        return None
    judge.release.note_read(relpath)
    return tree


def _calls(function: ast.FunctionDef, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(function) if isinstance(n, ast.Call)
            and (n.func.id if isinstance(n.func, ast.Name) else n.func.attr if isinstance(n.func, ast.Attribute)
                 else None) == name]


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _default(function: ast.FunctionDef, name: str) -> tuple[bool, Any]:
    """Whether ``function`` takes ``name`` with a literal default, and that default."""
    args = function.args
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    for arg, default in pairs:
        if arg.arg == name and isinstance(default, ast.Constant):
            return True, default.value
    return False, None


def _imported_function(judge: Judge, module: ModuleInfo, name: str) -> tuple[ModuleInfo, ast.FunctionDef] | None:
    imported = module.imports.get(name)
    where = f"{imported.module}:{imported.name or name}" if imported is not None else f"{module.name}:{name}"
    return _function(judge, where)


def _same_names(judge: Judge, rule: Rule) -> tuple[str, Any, int, str] | str | None:
    """Where the release builds the draft with the prefix the target was built with: (the load function's file, the
    prefix, the build call's line, the load function's name); None where it does not (no such load function, or the
    draft named under a prefix of its own); else what is not understood of it."""
    params = rule.params
    load = next((f for spec in params["load"] if (f := _function(judge, spec)) is not None), None)
    if load is None:
        return None  # the release builds its drafts elsewhere
    module, function = load
    builds = _calls(function, params["build"])
    if not builds:
        return f"{function.name} calls no {params['build']}"
    if any(_keyword(call, "prefix") is not None for call in builds):
        return None  # the draft's layers are named apart from the target's
    builder = _imported_function(judge, module, params["build"])
    if builder is None:
        return f"{params['build']} is not found from {module.name}"
    builder_module, builder_function = builder
    takes, draft_prefix = _default(builder_function, "prefix")
    if not takes:
        return f"{params['build']} takes no prefix with a default"
    handed = [c for c in ast.walk(builder_function) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
              and isinstance(_keyword(c, "prefix"), ast.Name) and getattr(_keyword(c, "prefix"), "id", "") == "prefix"]
    if len(handed) != 1:
        return f"{params['build']} does not hand its prefix on to one loader method"
    assert isinstance(handed[0].func, ast.Attribute)
    loader_method = handed[0].func.attr
    # The target: the model runner's call of that loader method, with no prefix: the method's own default, in every
    # definition of it under the builder's package (each loader class's).
    target = [f for spec in params["target_load"] if (f := _function(judge, spec)) is not None]
    target_calls = [c for _, f in target for c in _calls(f, loader_method)]
    if not target_calls or any(_keyword(c, "prefix") is not None for c in target_calls):
        return f"the model runner's {loader_method} call of the target is not found, or names a prefix"
    package = builder_module.name if builder_module.is_package else builder_module.name.rpartition(".")[0]
    defaults = set()
    for name, relpath in judge.release.files.items():
        if name != package and not name.startswith(package + "."):
            continue
        tree = _syntax(judge, relpath)
        for node in ast.walk(tree) if tree is not None else ():
            # A loader's method takes the prefix the builder hands on (a same-named method without one is not a
            # loader's: weight_cache/daemon.py's load_model(self) on 0.34.0).
            if isinstance(node, ast.FunctionDef) and node.name == loader_method \
                    and any(a.arg == "prefix" for a in node.args.args + node.args.kwonlyargs):
                takes, value = _default(node, "prefix")
                defaults.add(repr(value) if takes else "<none>")
    if defaults != {repr(draft_prefix)}:
        return f"the target's prefix ({', '.join(sorted(defaults)) or 'none found'}) is not the draft's " \
               f"({draft_prefix!r})"
    return module.path, draft_prefix, builds[0].lineno, f"{module.name}:{function.name}"


def _class_node(judge: Judge, cls: ClassInfo) -> ast.ClassDef | None:
    module = judge.release.module(cls.module)
    tree = _syntax(judge, module.path) if module is not None else None
    return next((s for s in ast.walk(tree) if isinstance(s, ast.ClassDef) and s.name == cls.name), None) \
        if tree is not None else None


def _refusals_in(function: ast.FunctionDef, registry: str) -> Iterator[ast.Raise]:
    """``if <name> in <...>.<registry>: raise ...``: a name refused when it is already registered."""
    for node in ast.walk(function):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1 \
                and isinstance(node.test.ops[0], ast.In) and isinstance(node.test.comparators[0], ast.Attribute) \
                and node.test.comparators[0].attr == registry:
            yield from (s for s in node.body if isinstance(s, ast.Raise) and s.exc is not None)


def reached_refusals(judge: Judge, start: ClassInfo, registry: str, builders: frozenset[str] = frozenset()
                     ) -> tuple[list[Refusal], int]:
    """The registration refusals in the ``__init__``s of the classes building ``start`` reaches (and how many classes
    were read): each class's ``__init__``s along its MRO and the methods they call on ``self``, every class of the
    release they name (what they construct, their defaults' classes), and the registry's class for the architectures a
    call of one of ``builders`` names."""
    resolver = judge.resolver
    queue, seen, found = [start], {start.qualname}, {}
    while queue and len(seen) <= MAX_CLASSES:
        cls = queue.pop(0)
        walked: list[tuple[ClassInfo, ast.FunctionDef]] = []
        for base in resolver.hierarchy(cls).linear:
            node = _class_node(judge, base) if isinstance(base, ClassInfo) else None
            init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None) \
                if node is not None else None
            if init is not None and isinstance(base, ClassInfo):
                walked.append((base, init))
        called = {c.func.attr for _, f in walked for c in ast.walk(f) if isinstance(c, ast.Call)
                  and isinstance(c.func, ast.Attribute) and dotted_name(c.func.value) == "self"}
        for name in sorted(called):
            method = resolver.method_node(cls, name)
            if method is not None:
                walked.append(method)
        for owner, function in walked:
            module = judge.release.module(owner.module)
            if module is None:
                continue
            for raise_ in _refusals_in(function, registry) if function.name == "__init__" else ():
                exception, template = raised_exception(raise_.exc)  # type: ignore[arg-type]
                line = judge.release.source(module.path).decode("utf-8", "replace").splitlines()[raise_.lineno - 1]
                found[(module.path, raise_.lineno)] = Refusal(module.path, raise_.lineno, line.strip(),
                                                              f"{exception}: {template}" if template else str(exception),
                                                              owner.name)
            names = {d for n in ast.walk(function) if isinstance(n, (ast.Name, ast.Attribute))
                     and (d := dotted_name(n)) and not d.startswith("self.")}
            # A part built by the registry's class for a literal architectures=[...] (the path file's target_parts
            # builders: vLLM's init_vllm_registered_model, Kimi-K2.5's language model).
            for call in (c for c in ast.walk(function) if isinstance(c, ast.Call)):
                built = dotted_name(call.func) or ""
                architectures = _keyword(call, "architectures")
                if built.rpartition(".")[2] in builders and isinstance(architectures, ast.List) \
                        and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in architectures.elts):
                    entry = judge.registered([str(cast(ast.Constant, e).value) for e in architectures.elts])
                    part = resolver.find_class(entry.module, entry.class_name) if entry is not None else None
                    if isinstance(part, ClassInfo) and part.qualname not in seen:
                        seen.add(part.qualname)
                        queue.append(part)
            for name in sorted(names):
                resolved = resolver.resolve(module, name)
                if isinstance(resolved, ClassInfo) and resolved.qualname not in seen:
                    seen.add(resolved.qualname)
                    queue.append(resolved)
    return sorted(found.values(), key=lambda r: (r.file, r.line)), len(seen)


def judge_own_draft(rule: Rule, judge: Judge) -> Finding | None:
    resolution = judge.resolution
    if resolution is None or resolution.stops is not None or resolution.separate_draft:
        return None  # refused before a draft is built, or a draft checkpoint of its own
    draft: Any = resolution.draft_config if resolution.draft_config is not None else {}
    architectures = list(draft.get("architectures") or []) if hasattr(draft, "get") else []
    target = judge.target.architectures
    if not architectures or architectures != target:
        return None  # the rewrite made the draft a class of its own (DeepSeekMTPModel ...)
    entry = judge.registered(architectures)
    found = judge.resolver.find_class(entry.module, entry.class_name) if entry is not None else None
    if entry is None or not isinstance(found, ClassInfo):
        return None  # the registry lookup's own gate says so
    shape = _same_names(judge, rule)
    if shape is None:
        return None
    model_type = draft.get("model_type") if hasattr(draft, "get") else None
    rewrite = (f"the engine's draft-config rewrite maps nothing for model type {model_type!r}, so the draft's "
               f"architectures are the target's {architectures}, and the registry builds {entry.class_name} again")
    if isinstance(shape, str):
        return Finding(rule.id, rule.title, rule.phase, Status.UNKNOWN, judge.target.name, 0, "", None,
                       f"{rewrite}; how it is built is not understood: {shape}", rule.hint)
    load_file, prefix, build_line, load_name = shape
    code = judge.release.source(load_file).decode("utf-8", "replace").splitlines()[build_line - 1].strip()
    builders = frozenset(b.rpartition(".")[2] for b in judge.part_builders)
    refusals, read = reached_refusals(judge, found, rule.params["registry"], builders)
    names = (f"{load_name} builds it with {rule.params['build']}() at the loader's default prefix {prefix!r}, as the "
             f"model runner built the target, in the same vLLM config: every layer it makes has the name of one of "
             f"the target's")
    if not refusals:
        return Finding(rule.id, rule.title, rule.phase, Status.UNKNOWN, load_file, build_line, code, None,
                       f"{rewrite}; {names}. No layer of {entry.class_name} found ({read} classes read) refuses a name "
                       f"already in {rule.params['registry']}, so what the second copy does is not understood",
                       rule.hint)
    where = "; ".join(f"{r.owner}.__init__ ({r.file}:{r.line})" for r in refusals)
    if len(refusals) == 1:
        (refusal,) = refusals
        return Finding(rule.id, rule.title, rule.phase, Status.BLOCKS, refusal.file, refusal.line, refusal.code,
                       refusal.error.replace("{", "<").replace("}", ">"),
                       f"{rewrite}; {names}. The first layer that registers its name there, {where}, refuses it: it "
                       f"is already registered by the target", rule.hint)
    errors = sorted({r.error for r in refusals})
    error = errors[0].replace("{", "<").replace("}", ">") if len(errors) == 1 else None
    return Finding(rule.id, rule.title, rule.phase, Status.BLOCKS, load_file, build_line, code, error,
                   f"{rewrite}; {names}. The layers of {entry.class_name} refuse a name already registered, in "
                   f"{where}: the first the draft builds refuses its name (which one it is first is not told here)",
                   rule.hint)
