"""The method a launch runs, resolved as the release's own code resolves it (play/player.py plays that code
out), and the release's own list of methods."""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import operator
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, is_dataclass, replace
from dataclasses import fields as dataclass_fields
from typing import Any, Protocol

from ..launch.request import Launch
from ..play.modules import ModuleScope, assigned, declared_default, declared_fields, module_of, strings_declared
from ..play.player import Coverage, Outcome, Player, call, dotted
from ..play.values import CLASS, UNKNOWN, ConfigObject, Raised, ReleaseClass, Unknown
from .catalog import INSTALLED, EngineMethods


class ReleaseCode(Protocol):
    """What resolution reads of a release: a module's syntax tree and its path in the tree, or None."""

    def module_tree(self, name: str) -> tuple[ast.Module, str] | None: ...

    def memo(self, name: str, compute: Callable[[], Any]) -> Any:
        """What ``compute`` derives from the release's modules, kept while none of the files it read changes
        (scan.index.TreeIndex.memo): a warm scan neither parses nor plays them again."""

    def installed(self, module: str) -> bool | None:
        """Whether the environment the release is installed in has ``module`` (None: the tree is not an
        environment, a release fetched on its own, say)."""

    def model_class(self, architecture: str) -> str | None:
        """"module:Class" the release's model registry maps an architecture to, where it was read."""


@dataclass(frozen=True)
class Resolution:
    requested: str | None  # the method as the launch names it, lower case; None: it names none
    method: str | None  # the method the engine will run, lower case; None: it cannot be told before launch
    how: tuple[str, ...]  # the engine's own steps that made it so, "file:line: code (where ...)"
    release_methods: tuple[str, ...]  # what the release has, lower case
    listed_at: str  # where that list comes from: "file:line Name", or the functions whose comparisons name them
    listed: bool  # True: the release declares the list; False: it is what its resolving code compares with
    problem: str = ""  # why the method cannot be told, when it cannot
    checked: str = "requested"  # which the engine looks up in its list: the method as named, or as resolved
    # Where every way through the resolving code ends in a raise for this launch: (file, line, the statement's code,
    # what it raises).
    stops: tuple[str, int, str, str] | None = None
    warnings: tuple[str, ...] = ()  # "file:line: message" of what the engine logs as a warning on the way
    draft_config: dict[str, Any] | None = None  # the draft's config as the engine rewrites it, where it is known
    separate_draft: str = ""  # the drafter the launch names, where it is not the target's own checkpoint
    # Where the resolving functions went on this launch's values: the raises in them no way reaches.
    coverage: Coverage = field(default_factory=Coverage, compare=False)
    # The speculative config's fields as the resolving code leaves them (those every way agrees on and knows).
    fields: dict[str, Any] = field(default_factory=dict, compare=False)
    # What `self.<expression>` is on the speculative config as those fields leave it, played out: a method of its own
    # called (`use_eagle()`), a property or class attribute, through the objects it builds (0.34.0's
    # `speculator_config.draft_has_own_vocab`, a property that looks the method's config class up by name); UNKNOWN
    # where the release has none of that name or its ways disagree.
    member: Callable[[str], Any] = field(default=lambda expression: UNKNOWN, compare=False)
    plugins: str = ""  # "file:line name" of the release's API by which a plugin registers a method, where it has one

    @property
    def in_release(self) -> bool | None:
        """Whether the release has the launch's method (None: no method named, or no list to tell)."""
        looked_up = self.requested if self.checked == "requested" else self.method
        if self.requested is None or looked_up is None or not self.release_methods:
            return None
        return looked_up in self.release_methods


def launch_facts(launch: Launch, draft_config: Any = UNKNOWN) -> dict[str, Any]:
    """The launch's own values that the engines' resolving code reads (catalog.LAUNCH_FACTS); ``draft_config``: the
    draft's config as the engine rewrites it (draft_config_of), where it is known."""
    spec = launch.speculative
    model = launch.named_draft  # --draft names the speculative config's model
    target = launch.target
    drafter = launch.drafter.config if launch.drafter is not None else None
    own = model is None  # no drafter named: the draft is the target's own checkpoint (MTP), or none at all
    rewritten = isinstance(draft_config, dict)
    return {
        "method": launch.method,
        "model": model,
        # A scan given no speculative config imagines a launch of the method: its token count is not one it fixed.
        "num_speculative_tokens": spec.get("num_speculative_tokens") if spec else UNKNOWN,
        "target_path": target.name if target else UNKNOWN,
        "draft_path": model if model is not None else (target.name if target else UNKNOWN),
        "draft_architectures": list(draft_config.get("architectures") or []) if rewritten
        else list(drafter.get("architectures") or []) if drafter is not None
        else (target.architectures if own and target else UNKNOWN),
        "draft_model_type": draft_config.get("model_type", UNKNOWN) if rewritten
        else drafter.get("model_type", UNKNOWN) if drafter is not None else UNKNOWN,
        "draft_config": drafter if drafter is not None else (None if own else UNKNOWN),
        "draft_hf_config": draft_config,
        # The engine's model config of the target, as an object: its fields the resolving code reads.
        "target_model_config": {"model": target.name, "model_weights": target.name,
                                "hf_config": ConfigObject.of(target.config),
                                "hf_text_config": ConfigObject.of(target.text_config), "architectures": target.architectures,
                                "model_arch_config": _arch_config(target.text_config)}
        if target else UNKNOWN,
        "target_model_type": target.model_type if target else UNKNOWN,
        "target_text_model_type": target.text_model_type if target else UNKNOWN,
        "target_architectures": target.architectures if target else UNKNOWN,
        # The draft's model config as an object, where the launch names a drafter whose config.json is here; none
        # where it names no draft model (the field's value until the engine builds one).
        "draft_model_config": {"model": model, "architectures": list(drafter.get("architectures") or []),
                               "hf_config": ConfigObject.of(drafter),
                               "hf_text_config": ConfigObject.of(_text_config(drafter)),
                               "model_arch_config": _arch_config(_text_config(drafter))}
        if drafter is not None and not own else None if model is None else UNKNOWN,
        # ModelConfig.get_vocab_size(): the text config's vocab_size
        "target_vocab_size": target.text_config.get("vocab_size", UNKNOWN) if target else UNKNOWN,
        "draft_vocab_size": _text_config(drafter).get("vocab_size", UNKNOWN) if drafter is not None else UNKNOWN,
        # The target's parallel config: what the launch command sets (sizes 1 where it sets none); the rest are
        # the class's declared defaults where the methods file names its class (`classes`).
        "target_parallel_config": {name: _size(launch.options.get(flag, 1)) for name, flag in _PARALLEL.items()}
        | ({"enable_expert_parallel": True} if launch.options.get("enable-expert-parallel") else {}),
        # vLLM's custom proposer: `pkg.module.Class`, dotted identifiers and no path separator
        "model_is_class_path": isinstance(model, str) and "/" not in model and len(model.split(".")) >= 2
        and all(p.isidentifier() for p in model.split(".")),
    }


# The parallel config's sizes, by the engine arguments that set them.
_PARALLEL = {"tensor_parallel_size": "tensor-parallel-size", "pipeline_parallel_size": "pipeline-parallel-size",
             "data_parallel_size": "data-parallel-size"}


def _arch_config(text: dict[str, Any]) -> dict[str, Any]:
    """vLLM's ModelArchConfig of a checkpoint's text config, as its default convertor reads it."""
    return {"total_num_attention_heads": text.get("num_attention_heads", UNKNOWN)}


def _typed(facts: dict[str, Any], code: ReleaseCode, spec: EngineMethods) -> dict[str, Any]:
    """The object facts of a class the methods file names (``classes``), as objects of the release's class: its
    declared defaults under what the launch gives, what the registry reads off its checkpoint's model class
    (``model_attributes``), and the class, whose methods the player then follows."""
    typed = dict(facts)
    for fact, candidates in spec.classes.items():
        found = next((c for c in (_class(code, name) for name in candidates) if c is not None), None)
        if isinstance(facts.get(fact), dict) and found is not None:
            cls, scope, relpath = found
            qualified = f"{module_of(relpath)}:{cls.name}"
            read = {attribute: _model_attribute(code, scope, facts[fact].get("architectures"), declared)
                    for attribute, declared in spec.model_attributes.items()
                    if scope.member(qualified, attribute) is not None}
            typed[fact] = {**declared_fields(cls), **read, **facts[fact], CLASS: qualified}
    return typed


def _model_attribute(code: ReleaseCode, scope: ModuleScope, architectures: Any, name: str) -> Any:
    """A class attribute of the model class the registry maps the checkpoint's architectures to, as the registry
    records it: a class by its qualified name (vLLM 0.34.0 model_executor/models/registry.py:1018, `f"{config_cls.
    __module__}.{config_cls.__qualname__}"`), None where the class (or a base) declares none."""
    model = next((m for m in (code.model_class(a) for a in architectures or () if isinstance(a, str)) if m), None)
    if model is None:
        return UNKNOWN
    member = scope.member(model, name)
    if member is None:
        return None
    value = Player("", {}, member.scope).evaluate(member.node, {}) if not isinstance(member.node, ast.FunctionDef) \
        else UNKNOWN
    return f"{value.module}.{value.qualname}" if isinstance(value, ReleaseClass) else value


def _installed(code: ReleaseCode, fact: str) -> Any:
    found = code.installed(fact.removeprefix(INSTALLED))
    return UNKNOWN if found is None else found


def _size(value: Any) -> Any:
    try:
        return int(value)
    except (TypeError, ValueError):
        return UNKNOWN


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint config's text config (a multimodal wrapper's `text_config`), else the config itself."""
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def keys_as_read(launch: Launch, code: ReleaseCode, spec: EngineMethods) -> Launch:
    """The launch with its speculative config's keys as the release reads them (``keys_from``): `-` rewritten as
    `_` where the release's builder does so, as given elsewhere."""
    if not any("-" in str(k) for k in launch.speculative):
        return launch  # nothing to rewrite: the builder is not read

    def rewrites() -> bool:
        found = _function(code, spec.keys_from)
        return found is not None and any(isinstance(n, ast.DictComp) and _dashes_to_underscores(n.key)
                                         for n in ast.walk(found[0]))

    if not code.memo(f"keys-from:{','.join(spec.keys_from)}", rewrites):
        return launch
    return replace(launch, speculative={str(k).replace("-", "_"): v for k, v in launch.speculative.items()})


def _dashes_to_underscores(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace" \
        and [getattr(a, "value", None) for a in node.args] == ["-", "_"]


def resolve(launch: Launch, code: ReleaseCode, spec: EngineMethods) -> Resolution:
    """The method the release runs for ``launch``: each of the engine's resolving functions that the release defines
    played out in turn on the launch's values (and on the draft's config as the engine rewrites it), then its
    lookup's aliases; with the release's own list of methods.

    Kept in the tree's index by what the resolution reads of the launch (``_launch_key``) while none of the release's
    files it read changes: a warm scan of the same launch neither parses nor plays the resolving modules (vLLM
    0.33.0's arg_utils.py, config/speculative.py, model.py, parallel.py: ~0.14 s). The resolution is kept as its
    pickle, so that each scan gets its own copy; ``member`` plays on the release when it is asked."""
    key = _launch_key(launch, code, spec)
    kept = code.memo(f"resolution:{key}", lambda: pickle.dumps(replace(_resolve(launch, code, spec), member=_no_member),
                                                              protocol=pickle.HIGHEST_PROTOCOL))
    found: Resolution = pickle.loads(kept)
    return replace(found, member=functools.cache(functools.partial(_member, code, spec, found.fields, key)))


def _no_member(expression: str) -> Any:
    """``Resolution.member`` as kept: the member is played when asked, on the release (resolve)."""
    return UNKNOWN


def _member(code: ReleaseCode, spec: EngineMethods, fields: dict[str, Any], key: str, expression: str) -> Any:
    """``_member_value``, kept in the tree's index beside the launch's resolution (as its pickle; one that does not
    pickle is played each time it is asked)."""
    def played() -> bytes | None:
        try:
            return pickle.dumps(_member_value(code, spec, fields, expression), protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError):
            return None

    kept = code.memo(f"member:{key}:{expression}", played)
    return pickle.loads(kept) if kept is not None else _member_value(code, spec, fields, expression)


def _launch_key(launch: Launch, code: ReleaseCode, spec: EngineMethods) -> str:
    """A digest of what resolution reads of the launch (its method, drafter, speculative config, options, the
    target's and the drafter's configs), of whether the packages the methods file binds are installed beside the
    tree, and of the methods file itself: the resolution's key, besides the release's files."""
    target, drafter = launch.target, launch.drafter
    installed = {fact: _installed(code, fact) for fact in spec.bindings.values() if fact.startswith(INSTALLED)}
    read = (launch.method, launch.engine, launch.draft, launch.speculative, launch.options,
            (target.name, target.config) if target is not None else None,
            (drafter.path, drafter.config) if drafter is not None else None, installed, spec)
    return key_digest(read)


def key_digest(value: Any) -> str:
    """A digest of ``value`` that is the same in every process: its repr with every set in sorted order (a set's own
    order follows the process's string hashing, which differs from one run to the next)."""
    return hashlib.blake2b(repr(_ordered(value)).encode(), digest_size=16).hexdigest()


def _ordered(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return ("set", sorted((_ordered(v) for v in value), key=repr))
    if isinstance(value, dict):
        return {k: _ordered(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_ordered(v) for v in value) if type(value) in (list, tuple) else value
    if is_dataclass(value) and not isinstance(value, type):
        return (type(value).__qualname__, *(_ordered(getattr(value, f.name)) for f in dataclass_fields(value)))
    return value


def _resolve(launch: Launch, code: ReleaseCode, spec: EngineMethods) -> Resolution:
    requested = launch.method.lower() if launch.method else None
    spell = str.upper if spec.case == "upper" else str.lower
    draft, rewrite_stop = draft_config_of(launch, code, spec)
    facts = _typed(launch_facts(launch, draft), code, spec)
    declared, refused = speculative_fields(launch, code, spec)
    bindings = declared | {expression: _installed(code, fact) if fact.startswith(INSTALLED) else facts[fact]
                           for expression, fact in spec.bindings.items()}
    current: Any = spell(requested) if requested else None
    how: list[str] = []
    warnings: list[str] = []
    named: set[str] = set()
    functions: list[str] = []
    carried: dict[str, Any] = {}  # what one resolving function leaves for the next (the tracked expressions)
    coverage = Coverage()
    # The object's fields as the code leaves them: from what the launch sets and binds, rewritten as the code runs.
    left = {name.removeprefix("self."): value for name, value in bindings.items()
            if name.startswith("self.") and name.count(".") == 1 and not isinstance(value, Unknown)}

    def resolution(method: str | None, problem: str, stops: tuple[str, int, str, str] | None = None) -> Resolution:
        found = _resolution(requested, method, how, code, spec, named, functions, problem)
        return replace(found, stops=stops, warnings=tuple(warnings), draft_config=draft if isinstance(draft, dict)
                       else None, separate_draft=separate, coverage=coverage, fields=left,
                       member=functools.cache(functools.partial(_member_value, code, spec, left)))

    model = launch.named_draft
    own = launch.target is not None and (model == launch.target.name or launch.drafter is not None
                                         and launch.drafter.config == launch.target.config)
    separate = str(model) if model is not None and not own else ""

    if refused is not None:  # pydantic refuses the config before any of the engine's own code runs
        return resolution(requested, "", refused)
    if rewrite_stop is not None:
        return resolution(requested, "", rewrite_stop)
    # The model configs the engine builds from a checkpoint the launch names (`ModelConfig(model=spec.model, ...)`):
    # the config at that path, as the launch reads it.
    models: dict[str, dict[str, Any]] = {}
    for fact in spec.classes:
        built = facts.get(fact)
        if isinstance(built, dict) and isinstance(built.get(CLASS), str) and isinstance(built.get("model"), str):
            models.setdefault(built[CLASS], {})[built["model"]] = {k: v for k, v in built.items() if k != CLASS}
    for resolver in spec.resolvers:
        found = _function(code, resolver.functions, models)
        if found is None:
            continue
        function, scope, relpath = found
        functions.append(f"{relpath}:{function.lineno} {function.name}")
        named |= methods_named(function, resolver.variable)
        player = Player(resolver.variable, bindings, scope, resolver.tracked, resolver.returns,
                                  coverage=coverage)
        try:
            outcomes = player.run(function, current, carried)
        except (ValueError, RecursionError) as exc:
            return resolution(None, f"{relpath}:{function.lineno}: {exc}")
        chosen, problem = _choose(outcomes)
        if problem:
            return resolution(None, f"{relpath}: {problem}")
        how += [f"{relpath}:{step}" for outcome in chosen[:1] for step in outcome.steps]
        warnings += [f"{relpath}:{w}" for w in chosen[0].warnings if all(w in o.warnings for o in chosen)]
        current = chosen[0].method
        if resolver.variable.startswith("self.") and resolver.variable.count(".") == 1 and isinstance(current, str):
            left[resolver.variable.removeprefix("self.")] = current  # the method field as resolved (inferred ones too)
        started = {**bindings, **carried}
        for name, value in chosen[0].env.items():  # what this function assigned to the object's fields
            if name.startswith("self.") and name.count(".") == 1 and name != resolver.variable \
                    and any(o.env.get(name, UNKNOWN) != started.get(name, UNKNOWN) for o in chosen):
                agreed = not isinstance(value, Unknown) and all(o.env.get(name, UNKNOWN) == value for o in chosen)
                if agreed:
                    left[name.removeprefix("self.")] = value
                else:
                    left.pop(name.removeprefix("self."), None)
        carried = {name: value for name, value in chosen[0].env.items() if name in resolver.tracked
                   and all(o.env.get(name, UNKNOWN) == value for o in chosen)}
        if chosen[0].raises:  # the engine refuses the launch while resolving its method: nothing after it runs
            line, _, statement = chosen[0].raises.partition(": ")
            # at the raise itself, where it is in a function this one calls
            where, at, statement = chosen[0].site or (relpath, int(line), statement)
            method = current.lower() if isinstance(current, str) else None
            return resolution(method, "", (where, at, statement, chosen[0].error or statement))
    for alias in spec.aliases:
        names = _declared_at(code, alias.names)
        if names and isinstance(current, str) and current in names:
            how.append(f"{alias.names}: {current} is an alias of {alias.method}")
            current = alias.method
    method = current.lower() if isinstance(current, str) else None
    return resolution(method, "" if method else "the resolving code leaves no method")


# pydantic's own words for a number a Field(...) constraint refuses.
_CONSTRAINTS: dict[str, tuple[Callable[[Any, Any], bool], str]] = {
    "gt": (operator.gt, "greater than"), "ge": (operator.ge, "greater than or equal to"),
    "lt": (operator.lt, "less than"), "le": (operator.le, "less than or equal to")}


def speculative_fields(launch: Launch, code: ReleaseCode, spec: EngineMethods
                       ) -> tuple[dict[str, Any], tuple[str, int, str, str] | None]:
    """The fields of the engine's speculative config (``fields`` of the methods file) as this launch sets them:
    ``self.<field>`` bound to the launch's value, or to the default the class declares for one it leaves out
    (none where the default is not a constant, or the field is injected by the engine, not validated). And the
    first value a ``Field(gt=..., ge=..., lt=..., le=...)`` constraint refuses: pydantic's ValidationError."""
    found = next((f for f in (_class(code, name) for name in spec.fields) if f is not None), None)
    if found is None:
        return {}, None
    cls, scope, relpath = found
    given = launch.speculative
    bound: dict[str, Any] = {}
    declared = {s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    extra = [k for k in given if k not in declared]
    if extra and _forbids_extra(cls, scope):
        return bound, (relpath, cls.lineno, f"class {cls.name}: extra fields forbidden",
                       f"pydantic ValidationError: 1 validation error for {cls.name}: {extra[0]}: Extra inputs are "
                       "not permitted")
    refused = _field_validators(cls, scope, relpath, given)
    if refused is not None:
        return bound, refused
    for stmt in cls.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name) or stmt.value is None:
            continue
        name = stmt.target.id
        if "SkipValidation" in ast.unparse(stmt.annotation):
            continue  # set by the engine (target_model_config...), not by the launch
        default, constraints = declared_default(stmt.value)
        if name in given:
            value = given[name]
            refusal = _type_refusal(stmt.annotation, value)
            if refusal:
                return bound, (relpath, stmt.lineno, ast.unparse(stmt), f"pydantic ValidationError: 1 validation "
                                                                       f"error for {cls.name}: {name}: {refusal}")
            for key, bound_value in constraints.items():
                holds, words = _CONSTRAINTS[key]
                if isinstance(value, (int, float)) and not isinstance(value, bool) and not holds(value, bound_value):
                    return bound, (relpath, stmt.lineno, ast.unparse(stmt),
                                   f"pydantic ValidationError: 1 validation error for {cls.name}: {name}: Input "
                                   f"should be {words} {bound_value} (given {value})")
            bound[f"self.{name}"] = value
        elif not isinstance(default, Unknown) and launch.speculative:
            bound[f"self.{name}"] = default  # a scan given no speculative config imagines one: nothing is fixed
    return bound, None


def _forbids_extra(cls: ast.ClassDef, scope: ModuleScope) -> bool:
    """Whether pydantic refuses a key the class does not declare: ``ConfigDict(extra="forbid")`` in its
    ``model_config``, its decorator's ``config=``, or the body of the decorator it is made with (vLLM's ``@config``
    merges it into every config class)."""
    def forbids(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Call) and _dotted_text(n.func) == "ConfigDict" and any(
            k.arg == "extra" and isinstance(k.value, ast.Constant) and k.value.value == "forbid" for k in n.keywords)
            for n in ast.walk(node))

    if any(forbids(stmt) for stmt in cls.body if isinstance(stmt, (ast.Assign, ast.AnnAssign))):
        return True
    for decorator in cls.decorator_list:
        if forbids(decorator):
            return True
        name = _dotted_text(decorator.func if isinstance(decorator, ast.Call) else decorator)
        found = scope.function(name) if name else None
        if found is not None and forbids(found[0]):
            return True
    return False


def _member_value(code: ReleaseCode, spec: EngineMethods, fields: dict[str, Any], expression: str) -> Any:
    """What ``self.<expression>`` is on the engine's speculative config (``fields`` of the methods file) holding these
    fields: a method of its own called (``use_eagle()``: every way through it must end in the one value), else the
    expression played on the object (properties played on it, class attributes, the objects they build)."""
    found = next(((f, c) for f, c in ((_class(code, c), c) for c in spec.fields) if f is not None), None)
    if found is None:
        return UNKNOWN
    (cls, scope, _), qualname = found
    name = expression.removesuffix("()")
    if name != expression and name.isidentifier():
        function = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
        if function is None:
            return UNKNOWN
        try:
            outcomes, _ = call(function, scope, [], {}, fields={f"self.{k}": v for k, v in fields.items()})
        except (ValueError, RecursionError):
            return UNKNOWN
        values = [o.method for o in outcomes if o.raises is None]
        return values[0] if values and len(values) == len(outcomes) and all(v == values[0] for v in values) \
            else UNKNOWN
    this = {**copy.deepcopy(fields), CLASS: qualname}  # a property may rewrite the object it is played on
    try:
        return Player("", {}, scope).evaluate(ast.parse(f"self.{expression}", mode="eval").body, {"self": this})
    except (Raised, ValueError, RecursionError, SyntaxError):
        return UNKNOWN


# pydantic's lax reading of a scalar field: what it accepts of each type, and its words for what it refuses.
_SCALARS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "int": (int, "Input should be a valid integer, unable to parse string as an integer"),
    "float": (float, "Input should be a valid number, unable to parse string as a number"),
}


def _type_refusal(annotation: ast.expr, value: Any) -> str:
    """What pydantic says of a launch's value for a field declared ``int``/``float`` (``| None`` or ``Optional``):
    a string that does not parse as one, or a list or an object; "" where it takes the value or the type is another."""
    names = {n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)} - {"None", "Optional"}
    if len(names) != 1 or not names <= set(_SCALARS) or value is None:
        return ""
    convert, words = _SCALARS[next(iter(names))]
    if isinstance(value, (list, dict)):
        return words.partition(",")[0]
    if isinstance(value, str):
        try:
            convert(value.strip())
        except ValueError:
            return f"{words} (given {value!r})"
    return ""


def _field_validators(cls: ast.ClassDef, scope: ModuleScope, relpath: str, given: dict[str, Any]
                      ) -> tuple[str, int, str, str] | None:
    """pydantic's ``@field_validator("name")`` methods, played out on the value the launch gives that field (they run
    before __post_init__): the first raise every way meets, as pydantic reports it."""
    for function in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
        named = [a.value for d in function.decorator_list if isinstance(d, ast.Call)
                 and (_dotted_text(d.func) or "").rsplit(".", 1)[-1] == "field_validator"
                 for a in d.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        params = [a.arg for a in function.args.posonlyargs + function.args.args][1:]  # after cls
        for field_name in (n for n in named if n in given):
            if not params:
                continue
            player = Player("__return__", {params[0]: given[field_name]}, scope, (), True)
            try:
                outcomes = player.run(function, None)
            except (ValueError, RecursionError):
                continue
            if outcomes and all(o.raises for o in outcomes):
                line, _, statement = (outcomes[0].raises or "0: ").partition(": ")
                return relpath, int(line), statement, (f"pydantic ValidationError: 1 validation error for {cls.name}: "
                                                       f"{field_name}: Value error, {outcomes[0].error or statement}")
    return None


def _dotted_text(node: ast.expr) -> str | None:
    return ast.unparse(node) if isinstance(node, (ast.Name, ast.Attribute)) else None


def _class(code: ReleaseCode, candidate: str) -> tuple[ast.ClassDef, ModuleScope, str] | None:
    """The class the release defines under that name, the scope of its module (and of it), and its file."""
    module_name, _, name = candidate.partition(":")
    found = code.module_tree(module_name)
    if found is None:
        return None
    tree, relpath = found
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    return (cls, ModuleScope(code, tree, relpath, owner=cls), relpath) if cls is not None else None


def draft_config_of(launch: Launch, code: ReleaseCode, spec: EngineMethods) -> tuple[Any, tuple[str, int, str, str] | None]:
    """The draft's config as the engine builds it: its rewrite (``draft_config`` of the methods file) played out on
    the drafter's config.json, or on the target's where the draft is the target's own checkpoint; UNKNOWN where
    that config is not here or the rewrite's ways disagree. And where the rewrite itself raises on every way."""
    target = launch.target
    model = launch.named_draft
    if launch.drafter is not None:
        config: Any = launch.drafter.config
    elif target is not None and (model is None or model == target.name):
        config = target.config
    else:
        return UNKNOWN, None
    config = copy.deepcopy(ConfigObject.of(config))  # the engine's config object, from the checkpoint's config.json
    if spec.draft_config is None:
        return config, None
    found = _function(code, spec.draft_config.functions)
    if found is None:
        return config, None
    function, scope, relpath = found
    rewrite = spec.draft_config
    on_self = rewrite.config.startswith("self.")  # a method that rewrites its object's field (SGLang's ModelConfig)
    fields = {**copy.deepcopy(rewrite.fields), rewrite.config: config} if on_self else None
    try:
        outcomes, _ = call(function, scope, [], {} if on_self else {rewrite.config: config}, 0, fields)
    except (ValueError, RecursionError):
        return UNKNOWN, None
    running = [o.env.get(rewrite.config, UNKNOWN) if on_self else o.method for o in outcomes if o.raises is None]
    if not running:
        line, _, statement = (outcomes[0].raises or "0: ").partition(": ")
        return UNKNOWN, (relpath, int(line), statement, outcomes[0].error or statement)
    if not isinstance(running[0], dict) or any(r != running[0] for r in running):
        return UNKNOWN, None
    return running[0], None


def _choose(outcomes: list[Outcome]) -> tuple[list[Outcome], str]:
    """The ways the launch can go: those that do not raise (a raise is a gate, judged on the path), when they agree
    on the method; else the raising ones, whose method is the one the raise met."""
    running = [o for o in outcomes if o.raises is None]
    if not running:
        return outcomes[:1], ""
    if any(isinstance(o.method, Unknown) for o in running):
        return [], "the method is set from a value not known before launch"
    if len({o.method for o in running}) > 1:
        ways = "; ".join(f"{o.method!r} where {' and '.join(o.steps[-1].conditions) or 'otherwise'}"
                         for o in running if o.steps)
        return [], f"the method depends on what is not known before launch: {ways}"
    return running, ""


def _resolution(requested: str | None, method: str | None, how: list[str], code: ReleaseCode, spec: EngineMethods,
                named: set[str], functions: list[str], problem: str) -> Resolution:
    for listed in spec.listed_in:
        names = _declared_at(code, listed)
        if names:
            module_name, _, name = listed.partition(":")
            tree, relpath = code.module_tree(module_name) or (None, module_name)
            line = next((s.lineno for s in tree.body if name in assigned(s)), 0) if tree else 0
            return Resolution(requested, method, tuple(how), _lower(names), f"{relpath}:{line} {name}", True, problem,
                              spec.checked, plugins=_plugin_api(code, spec))
    aliases = {n for a in spec.aliases for n in (_declared_at(code, a.names) or ())}
    return Resolution(requested, method, tuple(how), _lower(named | aliases), ", ".join(functions), False, problem,
                      spec.checked, plugins=_plugin_api(code, spec))


def _plugin_api(code: ReleaseCode, spec: EngineMethods) -> str:
    """Where the release lets a plugin register a method (``plugins`` of the methods file), if it does."""
    found = _function(code, spec.plugins) if spec.plugins else None
    if found is None:
        return ""
    function, _, relpath = found
    return f"{relpath}:{function.lineno} {function.name}"


def _lower(names: set[str]) -> tuple[str, ...]:
    return tuple(sorted({n.lower() for n in names}))


def _function(code: ReleaseCode, candidates: tuple[str, ...], models: dict[str, dict[str, Any]] | None = None
              ) -> tuple[ast.FunctionDef, ModuleScope, str] | None:
    """The first of the candidates the release defines, with the scope of its module (and of its class);
    ``models``: the checkpoints the launch names, as play.modules.ModuleScope reads them."""
    for candidate in candidates:
        module_name, _, qualname = candidate.partition(":")
        found = code.module_tree(module_name)
        if found is None:
            continue
        tree, relpath = found
        node: ast.AST | None = tree
        owner: ast.ClassDef | None = None
        for part in qualname.split("."):
            owner = node if isinstance(node, ast.ClassDef) else owner
            body = getattr(node, "body", [])
            node = next((n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part), None)
        if isinstance(node, ast.FunctionDef):
            return node, ModuleScope(code, tree, relpath, owner=owner, models=models), relpath
    return None


def _declared_at(code: ReleaseCode, spec: str) -> set[str] | None:
    module_name, _, name = spec.partition(":")
    found = code.module_tree(module_name)
    return strings_declared(found[0], name) if found else None


def methods_named(function: ast.FunctionDef | ast.AsyncFunctionDef, variable: str) -> set[str]:
    """The strings ``function`` compares the method with or assigns to it: the methods a release names where it
    declares no list of them."""
    named: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Compare) and variable in {dotted(n) for n in [node.left, *node.comparators]}:
            named |= set(_strings([node.left, *node.comparators]))
        elif isinstance(node, ast.Assign) and any(dotted(t) == variable for t in node.targets):
            named |= set(_strings([node.value]))
    return named


def _strings(nodes: list[ast.expr]) -> Iterator[str]:
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                yield sub.value
