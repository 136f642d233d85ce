"""Decide the traced path's obligations against a launch, in three values.

Each condition the tracer recorded (trace.py) is played by play.player, explaining what it cannot know, over the
engine objects the Evaluator stands for (play.player.Explaining): the target model is its class (attributes and
methods through the MRO, instance attributes its methods assign, Protocol conformance as ``isinstance`` decides
it), its config is the checkpoint's ``config.json``, the method is the launch's. Whatever else a condition reads
(the environment, the hardware, state built at run time) is *unknown*, and the unknown carries the text that was not
understood; where evaluating it fails as Python would on the launch's values, it raises (play.values.Raised). An
obligation:

- **blocks** when every condition on the way to it holds (and, for a read, the member is missing);
- **passes** when one of them is false (or the member is there);
- is **unknown** when it reads the target and cannot be decided; **undecided** when it reads only the launch.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.types import Finding, Phase, Status
from ..launch.target import Target
from ..play.libraries.transformers import PRETRAINED_CONFIG_DEFAULTS, PRETRAINED_CONFIG_METHODS
from ..play.modules import PROPERTIES
from ..play.player import Player, WithoutClasses
from ..play.values import UNKNOWN, EngineObject, Raised, Unknown, truth
from .facts import ClassInfo, ModuleInfo, dotted_name
from .gates import render_message
from .registry import Registry
from .resolve import External, Protocol, Resolver, Unresolved
from .trace import (
    CONFIG,
    DRAFT_CONFIG,
    METHOD,
    MODEL_CONFIG,
    OPTIONS,
    OUTPUT,
    SPECULATIVE,
    SPECULATIVE_CONFIG,
    TARGET,
    TEXT_CONFIG,
    Condition,
    Obligation,
    Summary,
    TracedPath,
    is_docstring,
    placeholder,
    reads_target,
    runs,
)


@dataclass(frozen=True)
class TargetModel(EngineObject):
    """An instance of a known class: the target model, or a part that its class builds (``self.model``)."""

    cls: ClassInfo


@dataclass(frozen=True)
class Config(EngineObject):
    values: dict
    class_name: str
    complete: bool  # a whole config.json: an absent key is a missing attribute, not an unlisted one
    label: str  # how the engine reaches it, for messages: config, config.text_config


@dataclass(frozen=True)
class ModelConfig(EngineObject):
    """The engine's config object of the target model (vLLM's ModelConfig), or one it holds (``prefix``
    ``multimodal_config.``): what it answers is declared in the path file, over the target's config."""

    prefix: str = ""


@dataclass(frozen=True)
class SpeculativeFields(EngineObject):
    """The engine's speculative config object, or an object it holds: its fields as the engine's resolving code leaves
    them for the launch (methods/resolve.py), the others not known; ``member``: what ``self.<expression>`` is on it,
    played by the methods stage's player (``use_eagle()``, a property, a class attribute of what a property builds)."""

    values: dict[str, Any]
    member: Callable[[str], Any] | None = None

    def holding(self, name: str, value: dict[str, Any]) -> SpeculativeFields:
        """The object held under ``name``: its members are played from this one's (``speculator_config.x``)."""
        member = self.member
        return SpeculativeFields(value, None if member is None else lambda expression: member(f"{name}.{expression}"))


@dataclass(frozen=True)
class ClassValue(EngineObject):
    cls: ClassInfo


@dataclass(frozen=True)
class Method(EngineObject):
    """A method of the target class, looked up but not called."""

    owner: TargetModel
    name: str


@dataclass(frozen=True)
class Function(EngineObject):
    summary: Summary


@dataclass(frozen=True)
class Builtin:
    """A builtin a condition names (``isinstance(config, dict)``'s ``dict``): the player plays its calls."""

    name: str


@dataclass(frozen=True)
class _Bound(EngineObject):
    """A method of the speculative config read to be called (``site``: its code), played with the call."""

    owner: SpeculativeFields
    name: str
    site: str


@dataclass(frozen=True)
class Decision:
    obligation: Obligation
    status: Status
    why: str
    error: str | None
    unknown: str | None = None  # what was not understood, when the status is unknown or undecided
    # Not reached for what the launch fixes (its method, its values, a drafter flag), not because the target fails
    # on the way: the gate itself stops nothing for this launch.
    bypassed: bool = False


_BUILTINS = frozenset({"isinstance", "hasattr", "getattr", "type", "any", "all", "len", "str", "bool", "tuple",
                       "list", "set", "frozenset", "sorted", "issubclass", "int", "callable"})


class Evaluator:
    """Three-valued evaluation of conditions over the abstract target."""

    def __init__(self, resolver: Resolver, target: Target, target_class: ClassInfo | None, method: str,
                 path: TracedPath, class_problem: str = "", options: dict[str, Any] | None = None,
                 registry: Registry | None = None, speculative: dict[str, Any] | None = None,
                 fixed: dict[str, Any] | None = None, speculative_fields: dict[str, Any] | None = None,
                 draft_config: dict[str, Any] | None = None, speculative_member: Callable[[str], Any] | None = None):
        self.resolver = resolver
        # What the launch's platform fixes, as the engine writes it (`HAS_TRITON`, `current_platform.is_rocm()`).
        self.fixed = dict(fixed or {})
        self.registry = registry
        self.parts = path.target_parts
        self.target = target
        self.target_class = target_class
        self.class_problem = class_problem
        self.functions = path.functions
        self.model_config = {k: ast.parse(v, mode="eval").body for k, v in path.model_config.items()}
        self.external_members = path.external_members
        complete = "_about" not in target.config  # a preset that is a snapshot of some keys says so
        config_class = _config_class(target)
        self.env: dict[str, Any] = {
            placeholder(METHOD): method,
            placeholder(OPTIONS): dict(options or {}),
            placeholder(SPECULATIVE): dict(speculative or {}),
            placeholder(SPECULATIVE_CONFIG): SpeculativeFields(dict(speculative_fields or {}), speculative_member),
            placeholder(DRAFT_CONFIG): dict(draft_config or {}),  # the drafter's config.json, for the path's facts
            placeholder(CONFIG): Config(target.config, config_class, complete, "config"),
            placeholder(TEXT_CONFIG): Config(target.text_config, config_class if target.text_config is target.config
                                             else "PretrainedConfig", complete, "text config"),
            placeholder(MODEL_CONFIG): ModelConfig(),
            placeholder(OUTPUT): Unknown("the target's output"),
            placeholder(TARGET): TargetModel(target_class) if target_class else
            Unknown(f"the target model class ({class_problem})"),
        }
        # Target conditions of the gates already met that block: a later obligation is reported as the launch
        # meets it once those are opened (an unpack of the aux outputs after the interface check, say).
        self.opened: list[Condition] = []
        self._parsed: dict[str, ast.expr] = {}  # a condition's source -> its expression
        self._summaries: dict[str, ast.Module] = {}  # a summary's source -> its statements
        self._depth = 0
        self._names = {**self.fixed, **self.env}  # the names a condition reads first, the launch's
        self._players: dict[str, Player] = {}  # a module -> the player of its conditions

    # ---- entry points ----

    def condition(self, condition: Condition) -> Any:
        """The condition's value for the launch; Raised where evaluating it fails as the engine's code would."""
        return self._eval(self._parse(condition.source), {}, condition.module)

    def printed(self, source: str, module: str) -> Any:
        """What an expression a message formats in prints for the launch (play.player.Player.printed); Raised where
        evaluating it fails."""
        return self._eval(self._parse(source), {}, module, printed=True)

    def satisfied(self, condition: Condition) -> bool | Unknown | Raised:
        try:
            value = self.condition(condition)
        except Raised as raised:
            return raised
        if isinstance(value, Unknown):
            return value
        holds = truth(value)
        if isinstance(holds, Unknown):
            return holds
        return holds == condition.holds

    def _parse(self, source: str) -> ast.expr:
        if source not in self._parsed:
            self._parsed[source] = ast.parse(source, mode="eval").body
        return self._parsed[source]

    # ---- expressions, played by play.player ----

    def eval(self, node: ast.AST, local: dict[str, Any], module: str) -> Any:
        """An expression's value, or the Raised met evaluating it."""
        try:
            return self._eval(node, local, module)
        except Raised as raised:
            return raised

    def _eval(self, node: ast.AST, local: dict[str, Any], module: str, printed: bool = False) -> Any:
        """``node``'s value in ``module`` (its names as the resolver reads them), ``local`` over the launch's names
        (``printed``: what a message prints of it): played by the player, which explains what it cannot know (a gate's
        condition), the engine objects read here (play.player.Explaining); Raised where Python would fail on the
        launch's values."""
        if not isinstance(node, ast.expr):
            return Unknown(_text(node))
        player = self._players.get(module)
        if player is None:
            player = self._players[module] = Player("", {}, _Module(self, module), objects=self, explains=True)
        return (player.printed if printed else player.evaluate)(node, {**self._names, **local} if local else self._names)

    def _global(self, dotted: str, module: str) -> Any:
        info = self.resolver.index.module(module)
        if info is None:
            return Unknown(dotted)
        literal = self.resolver.literal(info, dotted) if "." not in dotted else None
        if literal is not None:
            return literal
        found = self.resolver.resolve(info, dotted)
        owner, _, name = dotted.rpartition(".")
        if not isinstance(found, ClassInfo) and self.resolver.index.has_module(owner):
            found = self.resolver.find_class(owner, name)  # an absolute name: a function's own import
        if isinstance(found, ClassInfo):
            return ClassValue(found)
        if isinstance(found, External) and found.qualname == "typing.cast":
            return Builtin("cast")
        if isinstance(found, External) and found.qualname.startswith("builtins."):
            name = found.qualname.split(".", 1)[1]
            return getattr(builtins, name) if name in ("True", "False", "None") else Builtin(name)
        if isinstance(found, External):
            return Unknown(f"{dotted} ({found.qualname})")
        if isinstance(found, Unresolved):
            return Unknown(f"{dotted} ({found.reason})")
        return Unknown(dotted)


    # ---- the engine's objects, as the player reads them (play.player.Objects, Explaining) ----

    def has(self, owner: Any, name: str, text: str = "") -> bool | Unknown:
        """``hasattr(owner, name)``: False where reading it raises; a config's own methods are there, and whatever
        else is not known stays unknown."""
        if name == "__call__" and isinstance(owner, EngineObject):  # callable(): a method or a function is
            return True if isinstance(owner, (Method, Function)) else Unknown(text or name)
        try:
            value = self.attribute(owner, name, text or f"hasattr({name})")
        except Raised:
            return False
        if isinstance(value, Unknown):
            return True if isinstance(owner, Config) and "snapshot" not in value.why else value
        return True

    holds = has

    def read(self, owner: Any, name: str, site: str) -> Any:
        return self.attribute(owner, name, site)

    def method(self, owner: EngineObject, name: str, site: str) -> Any:
        """A method of the speculative config (``use_eagle()``) is played with its call; any other member is read."""
        if isinstance(owner, SpeculativeFields) and owner.member is not None:
            return _Bound(owner, name, site)
        return self.attribute(owner, name, site)

    def invoke(self, owner: EngineObject, args: list[Any], named: dict[str, Any], site: str) -> Any:
        return self.call(owner, args, named, site)

    def same(self, op: ast.cmpop, left: Any, right: Any) -> Any:
        """``is`` between the target's configs (the text config is the config itself for a text model), and against
        None; any other comparison of the engine's objects is not known."""
        if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(left, Config) and isinstance(right, Config):
            return (left.values is right.values) == isinstance(op, ast.Is)
        if isinstance(op, (ast.Is, ast.IsNot)) and right is None:
            return isinstance(op, ast.IsNot)
        return UNKNOWN

    def item(self, owner: EngineObject, key: Any, site: str) -> Any:
        """``config["key"]`` reads the key as its attribute."""
        return self.attribute(owner, key, site) if isinstance(owner, Config) and isinstance(key, str) else UNKNOWN

    def attribute(self, base: Any, name: str, text: str = "") -> Any:
        """``base.name`` (``text``: the expression, for what is not known): a value, an engine object, or an Unknown;
        Raised where the engine's object has no such attribute."""
        text = text or name
        if isinstance(base, SpeculativeFields):
            value = base.values.get(name, UNKNOWN)
            if isinstance(value, Unknown) and base.member is not None:
                value = base.member(name)  # a property or a class attribute, played on the object
            if isinstance(value, Unknown):
                return Unknown(f"{text} (the speculative config's {name})")
            return base.holding(name, value) if isinstance(value, dict) else value
        if isinstance(base, ModelConfig):
            key = base.prefix + name
            found = self.model_config.get(key)
            if found is None:
                return Unknown(f"{text} (the engine's model config)")
            value = self._eval(found, {}, "")
            if any(k.startswith(f"{key}.") for k in self.model_config):  # an object of its own, where it exists
                exists = truth(value)
                return ModelConfig(f"{key}.") if exists is True else None if exists is False else exists
            return value
        if isinstance(base, Config):
            if name in base.values:
                value = base.values[name]
                return Config(value, "PretrainedConfig", base.complete, f"{base.label}.{name}") \
                    if isinstance(value, dict) and name.endswith("config") else value
            if name in PRETRAINED_CONFIG_DEFAULTS:
                return PRETRAINED_CONFIG_DEFAULTS[name]
            if name in PRETRAINED_CONFIG_METHODS or name.startswith("__"):
                return Unknown(f"{text}(...)")
            if not base.complete:
                return Unknown(f"{text}: the target's config is a snapshot of some keys, without {name}")
            raise Raised(f"AttributeError: '{base.class_name}' object has no attribute '{name}'")
        if isinstance(base, TargetModel):
            if name == "__class__":
                return ClassValue(base.cls)
            has = self.member(base.cls, name)
            if has is True:
                if name in base.cls.defaults:
                    return base.cls.defaults[name]
                part = self.resolver.part_class(base.cls, name) or self._registered_part(base.cls, name)
                if part:
                    return TargetModel(part)
                # A property is read, not called: what its body returns, where that body is one return (a body
                # with checks before it stays the member it is, as any method).
                value = self.returned(Method(base, name)) if self._is_property(base.cls, name) else None
                return Method(base, name) if value is None else value
            if has is False:
                raise Raised(f"AttributeError: '{base.cls.name}' object has no attribute '{name}'")
            return has
        if isinstance(base, ClassValue):
            if name == "__name__":
                return base.cls.name
            if name in base.cls.defaults:
                return base.cls.defaults[name]
            return Unknown(text)
        return Unknown(text)

    def _is_property(self, cls: ClassInfo, name: str) -> bool:
        found = self.resolver.method_node(cls, name)
        return found is not None and any(ast.unparse(d) in PROPERTIES for d in found[1].decorator_list)

    def _registered_part(self, cls: ClassInfo, name: str) -> ClassInfo | None:
        """The class of a part that a builder builds from the registry (``self.language_model =
        init_vllm_registered_model(..., architectures=["DeepseekV2ForCausalLM"])``)."""
        found = self.resolver.part_calls(cls).get(name)
        return self._registry_class(*found) if found else None

    def _registry_class(self, module: ModuleInfo, call: ast.Call) -> ClassInfo | None:
        """The class a declared builder call makes: the registry's entry for its literal ``architectures``, or,
        built from the target's text config (``hf_config=config.text_config``), for the architectures that config
        names (a config without them is resolved by transformers' own tables, which the tree does not hold)."""
        dotted = dotted_name(call.func)
        builder = self.resolver.resolve(module, dotted) if dotted else None
        if self.registry is None or not isinstance(builder, External) or builder.qualname not in self.parts.builders:
            return None
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        listed, source = keywords.get("architectures"), keywords.get("hf_config")
        try:
            architectures = ast.literal_eval(listed) if listed is not None else None
        except ValueError:
            return None
        if listed is None and source is not None and self.target.text_config is not self.target.config \
                and (dotted_name(source) or "").endswith(".text_config"):
            architectures = self.target.text_config.get("architectures")
        entry = self.registry.lookup(architectures) if isinstance(architectures, list) else None
        found = self.resolver.find_class(entry.module, entry.class_name) if entry else None
        return found if isinstance(found, ClassInfo) else None

    def returned(self, method: Method) -> Any:
        """What a method of the target returns when its body is one ``return`` of an expression over ``self``
        (``def get_language_model(self): return self.language_model``); None when it is not that simple."""
        found = self.resolver.method_node(method.owner.cls, method.name)
        if found is None:
            return None
        owner, node = found
        body = [s for s in node.body if not is_docstring(s)]
        if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None or self._depth > 8:
            return None
        self._depth += 1
        try:
            return self._eval(body[0].value, {"self": method.owner}, owner.module)
        finally:
            self._depth -= 1

    def language_model(self, target: TargetModel) -> TargetModel | Unknown:
        """What a ``language_model`` method of the target returns: the one part its class builds with a builder."""
        built = [cls for module, call in self.resolver.part_calls(target.cls).values()
                 if (cls := self._registry_class(module, call)) is not None]
        if len(built) == 1:
            return TargetModel(built[0])
        return Unknown(f"the language model of {target.cls.name} ({len(built)} parts built from the registry)")

    def member(self, cls: ClassInfo, name: str) -> bool | Unknown:
        """``hasattr`` on an instance of ``cls``: a class attribute or method through the MRO, or an instance
        attribute one of its methods assigns."""
        hierarchy = self.resolver.hierarchy(cls)
        for base in hierarchy.linear:
            if isinstance(base, ClassInfo) and (name in base.bound or name in self.resolver.instance_attributes(base)):
                return True
        if name in dir(object):
            return True
        for base in hierarchy.linear:
            if isinstance(base, External) and name in self.external_members.get(base.qualname, ()):
                return True
        if hierarchy.unknown:
            return Unknown(f"whether {cls.name} has {name}: its MRO is incomplete ({hierarchy.unknown[0]})")
        return False

    def call(self, owner: Any, args: list[Any], named: dict[str, Any], text: str = "") -> Any:
        """``owner(*args, **named)``: a function the condition calls, played on its arguments; a method of the target
        whose body is one ``return`` (or its builder's language model); a method of the speculative config, played
        on it; an Unknown for any other."""
        if isinstance(owner, _Bound):
            fields = owner.owner
            assert fields.member is not None  # Explaining.method binds only a config that plays its members
            if args or named:
                value = self.attribute(fields, owner.name, owner.site)
                return value if isinstance(value, Unknown) else Unknown(text or owner.site)
            value = fields.member(f"{owner.name}()")
            return Unknown(f"{text} (the speculative config's {owner.name}())") if isinstance(value, Unknown) \
                else value
        if isinstance(owner, Function):
            return self.run(owner.summary, args, named)
        if isinstance(owner, Method):
            returned = self.returned(owner)
            if returned is None and owner.name in self.parts.language_model:
                return self.language_model(owner.owner)
            if returned is not None:
                return returned
        return Unknown(text or "a call")


    def instance_of(self, value: Any, kind: Any, text: str) -> bool | Unknown:
        """``isinstance(value, kind)`` for one kind: the target model against a class (a Protocol as Python's
        ``isinstance`` decides it, else its MRO), a config against a config class, an engine object against a
        builtin type."""

        if isinstance(value, Unknown):
            return value
        if isinstance(value, TargetModel) and isinstance(kind, ClassValue):
            protocol = self.resolver.protocol(kind.cls)
            if protocol is not None:
                return self.conforms(value.cls, protocol)
            hierarchy = self.resolver.hierarchy(value.cls)
            if any(base is kind.cls for base in hierarchy.linear):
                return True
            return Unknown(f"{text}: the MRO of {value.cls.name} is incomplete") if hierarchy.unknown else False
        if isinstance(value, Config) and isinstance(kind, ClassValue):
            if kind.cls.name == value.class_name:
                return True
            # A config class of the engine declares the model type it loads (`model_type = "falcon_h1"`): a
            # config.json of another model type is loaded as another class (transformers' own, or the engine's for
            # that type), not this one (SGLang's mambaish_config tests a Qwen3 config against its hybrid classes).
            declared, given = kind.cls.defaults.get("model_type"), value.values.get("model_type")
            if value.class_name == "PretrainedConfig" and isinstance(declared, str) and isinstance(given, str) \
                    and declared != given:
                return False
            return Unknown(f"{text}: whether the config class {value.class_name} is a {kind.cls.name}")
        if isinstance(kind, Builtin) and isinstance(value, (TargetModel, Config)):
            return kind.name == "object"  # an instance of the engine's classes, not a builtin type
        if isinstance(kind, Builtin) and not isinstance(value, (TargetModel, Config, ClassValue, Method, Function)):
            python_type = getattr(builtins, kind.name, None)
            return isinstance(value, python_type) if isinstance(python_type, type) else Unknown(text)
        return Unknown(text)

    def conforms(self, cls: ClassInfo, protocol: Protocol) -> bool | Unknown:
        conformance = self.resolver.conformance(cls, protocol)
        if conformance.conforms is None:
            return Unknown(f"isinstance({cls.name}, {protocol.cls.name}): {conformance.reason}")
        return conformance.conforms

    # ---- summaries ----

    def run(self, summary: Summary, args: list, kwargs: dict) -> Any:
        if self._depth > 8:
            return Unknown(f"{summary.qualname}(...): calls too deep")
        local = dict(zip(summary.params, args))
        local.update({k: v for k, v in kwargs.items() if k in summary.params})
        missing = [p for p in summary.params if p not in local]
        if missing:
            return Unknown(f"{summary.qualname}(...) without {', '.join(missing)}")
        body = self._summaries.get(summary.source)
        if body is None:
            body = self._summaries[summary.source] = ast.parse(summary.source)
        self._depth += 1
        try:
            result = self._statements(body.body, local, summary.module)
            return Unknown(f"{summary.qualname}(...) returns nothing specaudit can follow") if result is None \
                else None if result is _NONE else result
        finally:
            self._depth -= 1

    def _statements(self, body: list[ast.stmt], local: dict, module: str) -> Any:
        for stmt in body:
            if isinstance(stmt, ast.Return):
                value = self._eval(stmt.value, local, module) if stmt.value is not None else None
                return _NONE if value is None else value
            if isinstance(stmt, ast.Raise):
                raised = _text(stmt.exc) if stmt.exc is not None else "raise"
                raise Raised(f"{raised} (in a function the condition calls)")
            if isinstance(stmt, ast.Assign):
                value = self._eval(stmt.value, local, module)
                for target in stmt.targets:
                    if not isinstance(target, ast.Name):  # a summary assigns only names (trace._summarizable)
                        return Unknown(f"{_text(stmt)} (in a function the condition calls)")
                    local[target.id] = value
            elif isinstance(stmt, ast.If):
                test = truth(self._eval(stmt.test, local, module))
                if isinstance(test, Unknown):
                    return test
                result = self._statements(stmt.body if test else stmt.orelse, local, module)
                if result is not None:
                    return result
            elif isinstance(stmt, ast.For):
                items = self._eval(stmt.iter, local, module)
                if not isinstance(items, (list, tuple)):
                    return items if isinstance(items, Unknown) else Unknown(_text(stmt.iter))
                if not isinstance(stmt.target, ast.Name):  # a summary loops only over names (trace._summarizable)
                    return Unknown(f"{_text(stmt.target)} (in a function the condition calls)")
                for item in items:
                    local[stmt.target.id] = item
                    result = self._statements(stmt.body, local, module)
                    if result is not None:
                        return result
                result = self._statements(stmt.orelse, local, module)
                if result is not None:
                    return result
        return None


_NONE = type("ReturnsNone", (), {"__bool__": lambda self: False})()  # `return` or `return None`: not falling off


class _Module(WithoutClasses):
    """A module of the release as a condition reads its names (play.player's Scope): the small functions the path
    kept whole, the builtins, and what the resolver makes of a name or a dotted global (a class, a module's
    constant; else an Unknown that says why)."""

    def __init__(self, evaluator: Evaluator, module: str):
        self.evaluator, self.where = evaluator, module

    def value(self, name: str) -> Any:
        if name in self.evaluator.functions:
            return Function(self.evaluator.functions[name])
        if name in _BUILTINS:
            return Builtin(name)
        return self.evaluator._global(name, self.where)

    def origin(self, name: str) -> str | None:
        found = self.evaluator._global(name, self.where)
        return "typing.cast" if found == Builtin("cast") else None

    def literals(self, name: str) -> set[str] | None:
        return None

    def function(self, name: str) -> None:
        return None

    def instance(self, name: str, named: dict[str, Any]) -> Any:
        return UNKNOWN


def _bind(target: ast.expr, value: Any, scope: dict) -> bool:
    if isinstance(target, ast.Name):
        scope[target.id] = value
        return True
    if isinstance(target, ast.Tuple) and isinstance(value, (tuple, list)) and len(value) == len(target.elts):
        return all(_bind(t, v, scope) for t, v in zip(target.elts, value))
    return False


def _text(node: ast.AST) -> str:
    return ast.unparse(node)




def _config_class(target: Target) -> str:
    auto = (target.config.get("auto_map") or {}).get("AutoConfig")
    return auto.rsplit(".", 1)[-1] if isinstance(auto, str) else "PretrainedConfig"


# -- obligations --------------------------------------------------------------------------------------


def decide(path: TracedPath, evaluator: Evaluator) -> list[Decision]:
    """Each obligation in launch order, as met once the gates before it are opened: a gate that blocks on a
    condition of the target counts as opened for the obligations after it (see ``Evaluator.opened``)."""
    decisions = []
    for obligation in sorted(path.obligations, key=lambda o: o.step):
        decision = decide_one(obligation, evaluator)
        if decision.status is Status.BLOCKS and obligation.kind in ("raise", "assert"):
            evaluator.opened.extend(c for c in obligation.guards if reads_target(c.source))
        decisions.append(decision)
    return decisions


def decide_one(obligation: Obligation, evaluator: Evaluator) -> Decision:
    """Whether the launch reaches the obligation, and fails there. A condition that reads the target and cannot
    be decided makes it unknown; one that reads only the launch's state makes it undecided (not the target's)."""
    on_target: tuple[Condition, Unknown] | None = None
    on_launch: tuple[Condition, Unknown] | None = None
    for condition in obligation.guards:
        value = evaluator.satisfied(condition)
        if isinstance(value, Raised) and reads_target(condition.source):
            # The launch fails on the way, evaluating the condition: that is where it stops.
            return Decision(obligation, Status.BLOCKS, f"the launch fails evaluating {condition.written}, on the "
                            f"way to it: {value.error}", value.error)
        if isinstance(value, Raised):
            return Decision(obligation, Status.NOT_APPLICABLE,
                            f"the launch fails before it, evaluating {condition.written} ({value.error})", None)
        if value is False:
            return Decision(obligation, Status.PASSES,
                            f"not reached: {condition.written} is {'false' if condition.holds else 'true'} "
                            f"for this launch", None, bypassed=not reads_target(condition.source))
        if isinstance(value, Unknown) and condition.checked:
            continue  # a check passed on the way: whether it does is that check's own decision
        if isinstance(value, Unknown):
            if reads_target(condition.source) and not _launch_state(value):
                on_target = on_target or (condition, value)
            else:
                on_launch = on_launch or (condition, value)
    error = _error(obligation, evaluator)
    check = _MEMBER_CHECKS.get(obligation.kind)
    if check is not None:
        present, why = check(obligation, evaluator)
        if present is True:
            return Decision(obligation, Status.PASSES, why, None)
        if isinstance(present, Unknown):
            return Decision(obligation, Status.UNKNOWN, f"{why}; cannot decide {present.why}", error, present.why)
    else:
        conditions = [c.written if c.holds else f"not ({c.written})" for c in obligation.guards]
        why = (f"every condition on the way holds for this launch: {' and '.join(conditions)}" if conditions
               else "reached on every launch of this method")
    for pending, status in ((on_target, Status.UNKNOWN), (on_launch, Status.UNDECIDED)):
        if pending is not None:
            condition, value = pending
            if check is None:
                why = f"raised if {condition.written if condition.holds else f'not ({condition.written})'}"
            else:
                why = f"{why}, reached if {condition.written if condition.holds else f'not ({condition.written})'}"
            return Decision(obligation, status, f"{why}; cannot decide {value.why}", error, value.why)
    return Decision(obligation, Status.BLOCKS, why, error)


def _launch_state(value: Unknown) -> bool:
    """What could not be decided is the runner's own state (``self.num_effective_layers``), not the target's:
    conditions are rewritten so that what denotes the target is a placeholder."""
    return value.why.startswith("self.") and not reads_target(value.why) and "target" not in value.why


def _error(obligation: Obligation, evaluator: Evaluator) -> str | None:
    if obligation.kind in ("call", "attribute"):
        cls = evaluator.target_class
        return f"AttributeError: '{cls.name if cls else 'Model'}' object has no attribute '{obligation.member}'"
    if obligation.kind == "config":
        assert obligation.receiver is not None  # the tracer records a config read with the config it reads
        config = evaluator.env[placeholder(obligation.receiver)]
        return f"AttributeError: '{config.class_name}' object has no attribute '{obligation.member}'"
    if obligation.kind == "unpack":
        return f"ValueError: not enough values to unpack (expected {obligation.member})"
    cls = evaluator.target_class
    values: dict[str, Any] = {"model.__class__.__name__": cls.name, "type(model).__name__": cls.name} if cls else {}
    for hole, source in obligation.holes:  # what the launch fixes, as the engine formats it in
        try:
            value = evaluator.printed(source, obligation.module)
        except Raised:
            continue
        if isinstance(value, (str, int, float, bool, type(None), list, tuple)):
            values[hole] = value
    message = render_message(obligation.message, values)
    return f"{obligation.exception}: {message}" if message else obligation.exception


def _has_member(obligation: Obligation, evaluator: Evaluator) -> tuple[bool | Unknown, str]:
    cls = evaluator.target_class
    if cls is None:
        return Unknown(f"the target model class ({evaluator.class_problem})"), "the target class is not known"
    assert obligation.member is not None  # the tracer records a call or attribute read with its member
    found = evaluator.member(cls, obligation.member)
    if found is True:
        return True, f"{cls.name} has {obligation.member}"
    if isinstance(found, Unknown):
        return found, f"{cls.name} may lack {obligation.member}"
    what = "method" if obligation.kind == "call" else "attribute"
    return False, f"{cls.name} ({cls.module}) has no {what} {obligation.member} anywhere in its MRO"


def _config_has(obligation: Obligation, evaluator: Evaluator) -> tuple[bool | Unknown, str]:
    # The tracer records a config read with its member and the config it reads it from.
    assert obligation.receiver is not None and obligation.member is not None
    config = evaluator.env[placeholder(obligation.receiver)]
    try:
        value = evaluator.attribute(config, obligation.member, f"{config.label}.{obligation.member}")
    except Raised:
        return False, f"the target's {config.label} has no {obligation.member}"
    if isinstance(value, Unknown):
        return value, f"the target's {config.label} may lack {obligation.member}"
    return True, f"the target's {config.label} has {obligation.member}"


def _returns_aux(obligation: Obligation, evaluator: Evaluator) -> tuple[bool | Unknown, str]:
    """A target returns its aux hidden states beside the final ones when its class has the aux-layer methods
    the path calls on it; the trace keeps those calls as obligations of their own."""
    cls = evaluator.target_class
    if cls is None:
        return Unknown(f"the target model class ({evaluator.class_problem})"), "the target class is not known"
    hierarchy = evaluator.resolver.hierarchy(cls)
    names = {n for base in hierarchy.linear if isinstance(base, ClassInfo) for n in base.bound}
    aux = sorted(n for n in names if "aux_hidden_state" in n or "eagle3" in n)
    if aux:
        return True, f"{cls.name} implements {', '.join(aux)}: its forward returns the aux hidden states"
    # A gate before it that tests the model object itself (an interface check, not a config value) is the one
    # that asks for the aux outputs; once it is opened, the model returns them.
    interface = next((c for c in evaluator.opened if placeholder(TARGET) in c.source), None)
    if interface is not None:
        return True, (f"reached only once the gate before it on the model itself ({interface.written}) is opened, "
                      f"which gives {cls.name} the aux hidden-state outputs")
    return False, (f"{cls.name} has no aux hidden-state methods: its forward returns one value, which the path "
                   f"unpacks into {obligation.member}")


_MEMBER_CHECKS = {"call": _has_member, "attribute": _has_member, "config": _config_has, "unpack": _returns_aux}


# -- findings -----------------------------------------------------------------------------------------

_TITLES = {
    "raise": "{exception} raised on the path ({function})",
    "assert": "Assertion on the path ({function})",
    "call": "Target model class lacks {member}(), which the path calls",
    "attribute": "Target model has no attribute {member}, which the path reads",
    "config": "Target config lacks {member}, which the path reads",
    "unpack": "Target output unpacked into {member} values",
}
_HINTS = {
    "raise": "No rule names this gate yet: its condition reads the target, and holds for this one. Read the code "
             "and the conditions above; open it in the engine, or choose a release where it is gone.",
    "call": "The path calls this method on the target model: the target class (or a base) must define it, as the "
            "classes that serve as EAGLE-3 targets in this release do.",
    "config": "The path reads this attribute from the target's config: the checkpoint's config.json (or its config "
              "class) must have it, or the engine must dispatch this architecture elsewhere.",
    "unpack": "The path expects the target's forward to return the aux hidden states beside the final ones: the "
              "model must collect them at the aux layers, as LlamaModel does.",
}
_HINTS["assert"] = _HINTS["raise"]
_HINTS["attribute"] = _HINTS["call"]
# What a path's decision shows: the gates that decide the verdict, and those left undecided (they read what is known
# only at launch), listed so that a reader sees what the verdict could not weigh.
_RANK = {Status.BLOCKS: 0, Status.UNKNOWN: 1, Status.UNDECIDED: 2}


def path_findings(decisions: list[Decision]) -> list[Finding]:
    """The decisions that matter to the verdict (blocks, unknown) and the undecided ones, one finding per gate: a
    method called at three places is one gate, met first at the first."""
    kept: dict[tuple, Decision] = {}
    also: dict[tuple, list[str]] = {}
    for decision in sorted(decisions, key=lambda d: d.obligation.step):
        if decision.status not in _RANK:
            continue
        o = decision.obligation
        key = (o.kind, o.member, o.receiver) if o.kind in ("call", "attribute", "config") else (o.kind, o.file, o.line)
        first = kept.get(key)
        if first is None or _RANK[decision.status] < _RANK[first.status]:
            kept[key] = decision
        location = f"{o.file}:{o.line}"
        if first is not None and location != f"{first.obligation.file}:{first.obligation.line}":
            also.setdefault(key, []).append(location)
    return [_finding(d, tuple(dict.fromkeys(also.get(key, ())))) for key, d in kept.items()]


def obligation_title(o: Obligation) -> str:
    return _TITLES[o.kind].format(exception=o.exception or "Exception", function=o.function.partition(":")[2],
                                  member=o.member)


def _finding(decision: Decision, also: tuple[str, ...]) -> Finding:
    o = decision.obligation
    title = obligation_title(o)
    why = decision.why
    if o.via:
        why += f" (reached from {o.via[0].split(' ')[0].partition(':')[2]})"
    return Finding(f"path-{o.kind}", title, Phase(o.phase), decision.status, o.file, o.line, o.code, decision.error, why,
                   _HINTS[o.kind], also=tuple(a for a in also if a != f"{o.file}:{o.line}"), step=o.step)


def entry_findings(path: TracedPath) -> list[Finding]:
    """An entry point of the path that is not in the tree, or a file on it that does not parse: the path was not
    traced, so no verdict but UNKNOWN can be earned."""
    found = []
    for entry in path.entries:
        if entry.function is None and entry.required and runs(entry.runner, path.runner):
            found.append(Finding("path-entry", f"Path entry point not found: {entry.role}", Phase(entry.phase),
                                 Status.UNKNOWN, entry.tried[0].partition(":")[0].replace(".", "/") + ".py", 0, "",
                                 None, f"none of the declared entry points is in this tree: {entry.problem}",
                                 "The engine moved or renamed this stage: declare where it now starts in "
                                 "rules/paths/<engine>.yaml (entries are tried in order)."))
    for unparsed in path.unparsed:
        file, _, why = unparsed.partition(": ")
        found.append(Finding("path-unparsed", "A file on the path could not be parsed", Phase.MODEL_CONFIG,
                             Status.UNKNOWN, file, 0, "", None, f"{why}: the gates in it cannot be read",
                             "Check the installation: this file is not valid Python for specaudit's parser."))
    return found
