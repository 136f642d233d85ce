"""Judging gates. A gate kind is a shape of code and a judgement. Each kind is one class here, named
after its YAML ``kind:``: the parameters a rule gives it (checked when the rules load), the typed ``Details`` its
shape records at a site, and ``judge(rule, site, judge) -> Finding``, which says whether the gate at that site
stops a given launch, and why. Its shape, the libcst half that finds the sites, is ``<Kind>Shape`` in match.py:
kept apart because libcst costs more to import than a warm scan takes, and a warm scan judges cached sites only.

Defining a kind registers it (``KINDS``). Rules in ``rules/`` pick a kind and give it parameters; adding a gate is
a rule file, not code here. Like a Fixit rule, each kind is small, with a clear contract, and each rule carries its
own examples.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from ..core.types import Finding, Rule, Site, Status
from ..launch.checkpoint import Checkpoint
from ..play.player import LiteralScope, Player
from ..play.values import UNKNOWN, Raised, Unknown, truth
from .drafter import CHECKS, LAUNCH_ONLY, OWN_LAYERS, DraftContext
from .facts import copy_tree
from .judge import Judge
from .own_draft import judge_own_draft

# Where a message template formats a value in: {expression}, or {expression=} (the expression and its value).
HOLE = re.compile(r"\{([^{}=]+?)(=?)\}")


def render_message(template: str | None, values: dict[str, Any]) -> str | None:
    """Fill a message template with the values the engine would format in; one not known before the launch
    shows as ``<expr>``, a value left out, not text the engine prints."""
    if template is None:
        return None

    def fill(match: re.Match[str]) -> str:
        expression, equal = match.group(1), match.group(2)
        if expression not in values:
            return f"<{expression}>"
        value = values[expression]
        return f"{expression}={value!r}" if equal else str(value)

    return HOLE.sub(fill, template)


KINDS: dict[str, Kind] = {}  # every kind, by its YAML name: filled as the classes below are defined


class Kind:
    """The judging half of a gate kind."""

    name: ClassVar[str] = ""
    # One gate the engine meets at several places (the same method called from three), reported once.
    merge_repeats: ClassVar[bool] = False
    siteless: ClassVar[bool] = False  # judged once per launch, with no place in the engine's code
    # The kind's parameters (a rule's `params:`) and their types: required, and optional.
    required: ClassVar[dict[str, type]] = {}
    optional: ClassVar[dict[str, type]] = {}

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        KINDS[cls.name] = cls()

    def judge(self, rule: Rule, site: Site, judge: Judge) -> Finding:
        """What the gate at ``site`` does to the launch ``judge`` answers for."""
        raise NotImplementedError

    def judge_launch(self, rule: Rule, judge: Judge) -> Finding | None:
        """A siteless kind's judgement, once per launch: None when it has nothing to say."""
        raise NotImplementedError

    def validate(self, rule: Rule) -> str | None:
        """What is wrong with a rule's parameters for this kind, if anything: a key missing, unknown (a typo) or of
        another type, named as the rule file writes it."""
        known = {**self.required, **self.optional}
        missing = [k for k in self.required if k not in rule.params]
        if missing:
            return f"params.{missing[0]} is missing (kind {self.name} takes {', '.join(known)})"
        unknown = [k for k in rule.params if k not in known]
        if unknown:
            return f"params.{unknown[0]} is not a parameter of kind {self.name} (it takes {', '.join(known)})"
        for key, value in rule.params.items():
            if not isinstance(value, known[key]) or (isinstance(value, list) and not all(isinstance(v, str) for v in value)):
                kind = "list of strings" if known[key] is list else "mapping" if known[key] is dict else "string"
                return f"params.{key} must be a {kind}"
        return None

    @staticmethod
    def finding(rule: Rule, site: Site, status: Status, why: str, error: str | None = None) -> Finding:
        return Finding(rule.id, rule.title, rule.phase, status, site.file, site.line, site.code,
                       error, why, rule.hint)


class ModelTypeAllowlist(Kind):
    """A list of model types the target's must be in (or not be in) for the method."""

    name = "model_type_allowlist"
    required = {"subject": str}
    optional = {"method_attribute": str}

    @dataclass(frozen=True)
    class Details:
        semantics: str  # how the model type is tested: substring, prefix, exact, exact-not
        values: list[str] | None  # the list, None when it is not a literal
        list_name: str | None  # the name the list is bound to, None for a literal in place
        subject: str  # the expression holding the model type, as the engine writes it
        allow: bool  # raise unless listed (an allowlist), else raise if listed
        methods: list[str]  # the methods the test applies to; empty: every method

    def judge(self, rule: Rule, site: Site, judge: Judge) -> Finding:
        d: ModelTypeAllowlist.Details = site.details
        methods = d.methods
        if methods and judge.method not in methods:
            return self.finding(rule, site, Status.NOT_APPLICABLE, f"applies to {', '.join(methods)} only")
        target = judge.target
        if d.values is None:
            return self.finding(rule, site, Status.UNKNOWN, f"the list {d.list_name} is not a literal specaudit can read")
        model_type = target.text_model_type
        values = d.values
        if d.semantics == "substring":
            hits = [v for v in values if v in model_type]
            listed = bool(hits)
            how = (f"substring test: {hits[0]!r} is in {model_type!r}" if hits
                   else f"substring test: none of {values} occurs in {model_type!r}")
        elif d.semantics == "prefix":
            listed = any(model_type.startswith(v) for v in values)
            how = f"prefix test of {model_type!r} against {values}"
        else:
            listed = model_type in values
            how = f"exact membership of {model_type!r} in {values}"
        if d.semantics == "exact-not":
            listed = not listed
        blocked = listed != d.allow
        rendered = render_message(site.message, {
            **({d.list_name: values} if d.list_name else {}),
            d.subject: model_type,
            **{f"self.{rule.params.get('method_attribute', 'method')}": judge.method},
        })
        error = f"{site.exception}: {rendered}" if rendered else site.exception
        subject = f"the target's text model type (hf_text_config.model_type) is {model_type!r}"
        if blocked:
            return self.finding(rule, site, Status.BLOCKS, f"{subject}; {how}", error)
        return self.finding(rule, site, Status.PASSES, f"{subject}; {how}")


class InterfaceCheck(Kind):
    """A raise unless the target class satisfies a protocol of the engine's interfaces."""

    name = "interface_check"
    required = {"call": str, "protocol": str}
    optional = {"message_contains": str, "methods": list}

    @dataclass(frozen=True)
    class Details:
        call: str  # the check function
        protocol: str  # the Protocol it tests

    def judge(self, rule: Rule, site: Site, judge: Judge) -> Finding:
        methods = rule.params.get("methods")
        if methods and judge.method not in methods:
            return self.finding(rule, site, Status.NOT_APPLICABLE, f"applies to {', '.join(methods)} only")
        target_class = judge.target_class()
        if target_class is None:
            return self.finding(rule, site, Status.UNKNOWN, judge.target_class_problem())
        conformance = judge.target_conformance(site.details.protocol)
        error = f"{site.exception}: {site.message}" if site.message else site.exception
        label = f"{target_class.name} ({target_class.module})"
        if conformance is None:
            return self.finding(rule, site, Status.UNKNOWN,
                                f"the engine defines no protocol {site.details.protocol} in this release")
        if conformance.conforms:
            return self.finding(rule, site, Status.PASSES, f"{label} satisfies {conformance.protocol}: {conformance.reason}")
        if conformance.conforms is None:
            return self.finding(rule, site, Status.UNKNOWN, f"{label}: {conformance.reason}")
        return self.finding(rule, site, Status.BLOCKS,
                            f"{label} does not satisfy {conformance.protocol}: {conformance.reason}", error)


class ConfigAttributeDispatch(Kind):
    """Reads of the target's config under a capability guard, dispatched by the target's class name."""

    name = "config_attribute_dispatch"
    required = {"guard": str, "guard_protocol": str}
    optional = {"class_name_calls": list}

    @dataclass(frozen=True)
    class Branch:
        names: list[str] | None  # the class names that take it; None: the fallback (or no dispatch at all)
        reads: list[str]  # the config attributes it reads, as config.x.y
        line: int
        dispatch: bool  # a branch of a class-name dispatch, not a read under the guard alone

    @dataclass(frozen=True)
    class Details:
        guard: str  # the capability call
        subject: str  # the expression the guard is called on: the target model
        branches: list[ConfigAttributeDispatch.Branch]

    def judge(self, rule: Rule, site: Site, judge: Judge) -> Finding:
        target_class = judge.target_class()
        if target_class is None:
            return self.finding(rule, site, Status.UNKNOWN, judge.target_class_problem())
        guard = judge.target_conformance(rule.params["guard_protocol"])
        if guard is None or guard.conforms is None:
            why = guard.reason if guard else f"no protocol {rule.params['guard_protocol']} in this release"
            return self.finding(rule, site, Status.UNKNOWN, f"cannot tell whether {site.details.guard} holds: {why}")
        if not guard.conforms:
            return self.finding(rule, site, Status.NOT_APPLICABLE,
                                f"{target_class.name} is not {rule.params['guard_protocol']}: the branch is skipped")
        branch = next((b for b in site.details.branches if b.names is None or target_class.name in b.names), None)
        if branch is None:
            return self.finding(rule, site, Status.PASSES, f"no branch reads the config of {target_class.name}")
        taken = ("the class-name dispatch sends it to the fallback branch" if branch.dispatch and branch.names is None
                 else f"the class-name dispatch names it (line {branch.line})" if branch.dispatch
                 else "it is read for every multimodal target")
        missing = [r for r in branch.reads if not judge.target.config_value(r.split(".", 1)[1])[0]]
        reads = ", ".join(branch.reads)
        if not missing:
            return self.finding(rule, site, Status.PASSES, f"{target_class.name} reads {reads} ({taken}), which its config has")
        attribute = missing[0].rsplit(".", 1)[1]
        owner = missing[0].rsplit(".", 1)[0].split(".")[-1]
        config_class = judge.config_class_name(owner)
        has = judge.token_attributes()
        also = f"; its config has {', '.join(has)} instead" if has else ""
        error = f"AttributeError: '{config_class}' object has no attribute '{attribute}'"
        return self.finding(rule, site, Status.BLOCKS,
                            f"{target_class.name} reads {missing[0]} ({taken}), which its config lacks{also}", error)


class RegistryLookup(Kind):
    """The engine's refusal of an architecture its registry does not know (no details: the raise is the site)."""

    name = "registry_lookup"
    required = {"message_contains": str}
    # of: target (default), or draft: the drafter a separate draft model loads through the same registry;
    # rename_prefix: the prefix the engine's config gives the drafter's architectures first (EAGLEConfig's `Eagle`)
    optional = {"of": str, "rename_prefix": str}

    def judge(self, rule: Rule, site: Site, judge: Judge) -> Finding:
        if rule.params.get("of") == "draft":
            if judge.drafter is None and not judge.launch.named_draft:
                return self.finding(rule, site, Status.NOT_APPLICABLE, "the launch names no draft model of its own")
            if judge.drafter is None:
                return self.finding(rule, site, Status.UNKNOWN, "the draft model's config.json is not here: its "
                                    "architectures cannot be looked up (--draft DIR, or a Hub id)")
            # its config as the engine rewrites it for the draft (methods/resolve.py), where that is known
            rewritten = judge.resolution.draft_config if judge.resolution is not None else None
            config = rewritten if isinstance(rewritten, dict) else judge.drafter.config
            architectures = list(config.get("architectures") or [])
            prefix = rule.params.get("rename_prefix")
            if prefix:
                architectures = [a if a.startswith(prefix) else f"{prefix}{a}" for a in architectures]
        else:
            architectures = judge.target.architectures
            config = judge.target.config
        entry = judge.registered(architectures)
        if entry is not None:
            return self.finding(rule, site, Status.PASSES,
                                f"{entry.architecture} is registered as {entry.module}.{entry.class_name} ({entry.declared_in})")
        if not judge.registry_read:
            return self.finding(rule, site, Status.UNKNOWN, "the engine's registry could not be read")
        rendered = render_message(site.message, {"architectures": architectures})
        fallback = (" With --trust-remote-code the engine may still try its Transformers backend through the "
                    "config's auto_map, which works only for remote code written for it."
                    if config.get("auto_map") else "")
        return self.finding(rule, site, Status.BLOCKS,
                            f"no architecture of {architectures} is in this release's registry.{fallback}",
                            f"{site.exception}: {rendered}")


class Candidate(Kind):
    """A raise or assert whose condition reads model identity or config attributes, that no rule names."""

    name = "candidate"
    required = {"reads": list}

    @dataclass(frozen=True)
    class Details:
        reads: list[str]  # the attributes of params.reads that its condition reads

    def judge(self, rule: Rule, site: Site, judge: Judge) -> Finding:
        return self.unclassified(rule, site)

    @classmethod
    def unclassified(cls, rule: Rule, site: Site) -> Finding:
        """A candidate is the same finding whatever the launch: a scan with no target lists them too."""
        return cls.finding(rule, site, Status.UNCLASSIFIED,
                            f"its condition reads {', '.join(site.details.reads)}; no rule classifies it yet",
                            f"{site.exception}: {site.message}" if site.message else site.exception)


class DraftClassCheck(Kind):
    """The draft classes the proposer accepts for a method, against the drafter's architecture."""

    name = "draft_class_check"
    required = {"methods": list}

    @dataclass(frozen=True)
    class Details:
        methods: list[str]  # the methods whose branch holds the check
        accepted: list[str]  # the classes the isinstance check accepts, as the engine names them

    def judge(self, rule: Rule, site: Site, judge: Judge) -> Finding:
        draft = judge.drafter
        if judge.method not in site.details.methods:
            return self.finding(rule, site, Status.NOT_APPLICABLE, f"applies to {', '.join(site.details.methods)} only")
        if draft is None:
            return self.finding(rule, site, Status.NOT_APPLICABLE, "no drafter checkpoint to check")
        # vLLM's EAGLEConfig renames a drafter's architectures for eagle3 (transformers_utils/configs/eagle.py).
        archs = [a if a.startswith("Eagle3") or a.endswith("Eagle3") else f"Eagle3{a}"
                 for a in draft.config.get("architectures") or []]
        entry = judge.registered(archs)
        if entry is None:
            return self.finding(rule, site, Status.BLOCKS,
                                f"the drafter's architectures become {archs}, which this release does not register",
                                f"ValueError: Model architectures {archs} are not supported for now.")
        lineage = judge.lineage(entry.module, entry.class_name)
        accepted = site.details.accepted
        if any(name.rsplit(".", 1)[-1] in lineage for name in accepted):
            return self.finding(rule, site, Status.PASSES,
                                f"{archs[0]} loads {entry.class_name}, which the proposer accepts ({', '.join(accepted)})")
        return self.finding(rule, site, Status.BLOCKS,
                            f"{archs[0]} loads {entry.class_name}; the proposer accepts only {', '.join(accepted)}",
                            "AssertionError")


class RequiredMethod(Kind):
    """A method the engine calls on the target model: does the target class have it?"""

    name = "required_method"
    required = {"method": str, "receivers": list}
    optional = {"methods": list}
    merge_repeats = True

    @dataclass(frozen=True)
    class Details:
        method: str
        receiver: str  # the expression it is called on
        guarded: bool  # a hasattr check before the call turns its absence into the engine's own error

    def judge(self, rule: Rule, site: Site, judge: Judge) -> Finding:
        methods = [m.lower() for m in rule.params.get("methods", [])]
        if methods and judge.method.lower() not in methods:
            return self.finding(rule, site, Status.NOT_APPLICABLE, f"called for {', '.join(methods)} only")
        target_class = judge.target_class()
        if target_class is None:
            return self.finding(rule, site, Status.UNKNOWN, judge.target_class_problem())
        method = site.details.method
        found = judge.target_has_method(method)
        if found.conforms:
            return self.finding(rule, site, Status.PASSES,
                                f"{target_class.name} has {method} (from {found.provided_by[method]})")
        if found.conforms is None:
            return self.finding(rule, site, Status.UNKNOWN, f"{target_class.name}: {found.reason}")
        message = render_message(site.message, {"model.__class__.__name__": target_class.name,
                                                "type(model).__name__": target_class.name})
        return self.finding(rule, site, Status.BLOCKS,
                            f"{target_class.name} ({target_class.module}) has no {method} anywhere in its MRO: "
                            f"{found.reason}", f"{site.exception}: {message}")


class ArgumentGate(Kind):
    """Judges the sites of ArgumentGateShape (match.py): do the launch's arguments make the raise fire?

    Arguments are the launch command's, else the defaults the engine declares (class attributes in
    ``params.defaults_files``), with the algorithm taken from the launch's method. Conditions that read
    anything else (environment, hardware, the model config) cannot be decided before launch.

    ``params.facts`` maps an expression as the engine writes it (``attn_dp_enabled_of(view)``) to what it is over the
    arguments (``view.attn_dp_size > 1``): a helper the checks call, or a value the handler sets before them.
    ``params.resolved`` names arguments the engine fills in before these checks where the launch leaves them unset
    (``device``: auto-detected): their declared ``None`` is not their value.
    """

    name = "argument_gate"
    required = {"functions": list, "objects": list, "arguments": list, "defaults_files": list}
    optional = {"facts": dict, "resolved": list, "dedicated": list}

    @dataclass(frozen=True)
    class Details:
        conditions: list[str]  # every condition on the way to the raise, as source (negated in else branches)
        reads: list[str]  # the arguments they read
        constants: dict[str, list[str]]  # the named string lists they test against

    def judge(self, rule: Rule, site: Site, judge: Judge) -> Finding:
        values = judge.argument_values(rule.params["defaults_files"])
        resolved = [k for k in rule.params.get("resolved", ()) if values.get(k) is None]
        values = {k: v for k, v in values.items() if k not in resolved} if resolved else values
        outcome: Any = True
        objects, constants = set(rule.params["objects"]), dict(site.details.constants)
        target = judge.target  # a fact may read the target's config.json (__config__)
        constants[TARGET_CONFIG] = dict(target.config or {}) if target is not None else UNKNOWN
        facts = _facts(rule)
        for condition in site.details.conditions:
            value = evaluate_condition(condition, values, objects, constants, facts)
            if truth(value) is False:
                return self.finding(rule, site, Status.PASSES, f"not triggered: {condition} is false for this launch")
            if isinstance(value, Unknown):
                outcome = UNKNOWN
        error = render_message(site.message, {f"{o}.{k}": v for o in rule.params["objects"] for k, v in values.items()})
        error = f"{site.exception}: {error}" if error else site.exception
        if isinstance(outcome, Unknown):
            unknown = [c for c in site.details.conditions
                       if isinstance(evaluate_condition(c, values, objects, constants, facts), Unknown)]
            unread = _target_facts(unknown, facts)
            if unread:  # what the target's checkpoint holds, which the scan could not read: not the launch's
                return self.finding(rule, site, Status.UNKNOWN,
                                    f"depends on the target's checkpoint, which this scan could not read: "
                                    f"{'; '.join(unread)}", error)
            return self.finding(rule, site, Status.UNDECIDED,
                                f"depends on what the launch does not fix: {'; '.join(unknown)}", error)
        return self.finding(rule, site, Status.BLOCKS,
                            f"the launch's arguments meet every condition: {' and '.join(site.details.conditions)}",
                            error)


# Names a fact may read beside the arguments: the target's config.json (a dict: `__config__.dspark_block_size` is
# its key, None where it has none), and what of the target's checkpoint the scan does not read (always unknown: a
# condition that turns on it is UNKNOWN, not undecided).
TARGET_CONFIG = "__config__"
TARGET_FILES = "__target_files__"


def _target_facts(conditions: list[str], facts: dict[str, ast.expr]) -> list[str]:
    """The facts, among those these conditions read, that read the target's files the scan does not read."""
    found = []
    for condition in conditions:
        try:
            nodes = list(ast.walk(ast.parse(condition.strip(), mode="eval").body))
        except SyntaxError:
            continue
        for node in nodes:
            fact = facts.get(ast.unparse(node)) if isinstance(node, ast.expr) else None
            if fact is not None and any(isinstance(n, ast.Name) and n.id == TARGET_FILES for n in ast.walk(fact)):
                found.append(ast.unparse(node))
    return list(dict.fromkeys(found))


def _facts(rule: Rule) -> dict[str, ast.expr]:
    """A rule's ``params.facts``, keyed by the expression as ``ast.unparse`` writes it."""
    try:
        return {ast.unparse(ast.parse(str(k), mode="eval").body): ast.parse(str(v), mode="eval").body
                for k, v in (rule.params.get("facts") or {}).items()}
    except SyntaxError:
        return {}


def evaluate_condition(source: str, values: dict[str, Any], objects: set[str],
                       constants: dict[str, Any] | None = None, facts: dict[str, ast.expr] | None = None) -> Any:
    """A condition over launch arguments, played (play.player) in three values: a Python value, or Unknown where it
    reads what the launch does not fix. ``<object>.<argument>`` is the argument's value, ``__config__.<key>`` the
    target config's (None where it has no such key), a name one of ``constants``; an expression ``facts`` names is what
    it maps to (itself over the arguments, read as written: a fact does not expand another)."""
    constants = constants or {}
    try:
        condition = _FactsInlined(facts or {}).visit(ast.parse(source.strip(), mode="eval").body)
    except SyntaxError:
        return UNKNOWN
    config = constants.get(TARGET_CONFIG, UNKNOWN)
    read: dict[str, Any] = {}
    for node in ast.walk(condition):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in objects:
            read[f"{node.value.id}.{node.attr}"] = values.get(node.attr, UNKNOWN)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == TARGET_CONFIG:
            read[f"{TARGET_CONFIG}.{node.attr}"] = config.get(node.attr) if isinstance(config, dict) else UNKNOWN
    try:
        return Player("", {}, LiteralScope(constants)).evaluate(condition, read)
    except Raised:  # `None + 1` in a condition: which launch value it is does not settle the gate
        return UNKNOWN


class _FactsInlined(ast.NodeTransformer):
    """A condition with each expression a rule's ``facts`` names replaced by what it maps to."""

    def __init__(self, facts: dict[str, ast.expr]):
        self.facts = facts

    def visit(self, node: ast.AST) -> Any:
        fact = self.facts.get(ast.unparse(node)) if self.facts and isinstance(node, ast.expr) else None
        return copy_tree(fact) if fact is not None else self.generic_visit(node)


class DrafterContract(Kind):
    """Checks of the drafter checkpoint against the target (drafter.py); no code site."""

    name = "drafter_contract"
    required = {"check": str}
    # layers: where a draft of the target's own layers keeps them, by draft architecture; engine: the names of the
    # release's functions a check reads (what the engine does with the drafter's files: drafter.py); states and
    # width: what the head's fc joins, where it is not EAGLE-3's aux states (fc_input_width)
    optional = {"layers": dict, "engine": dict, "states": int, "width": list}
    siteless = True

    def judge_launch(self, rule: Rule, judge: Judge) -> Finding | None:
        # The checks read the whole launch (its options, its speculative config, the drafter's tensors).
        launch, drafter = judge.launch, judge.drafter
        # A draft checkpoint of its own (SGLang's EAGLE with an EAGLE-1 head, where NEXTN drafts with the target's
        # layers) is judged by the drafter's checks, not by those of the target's own layers.
        if rule.params["check"] in OWN_LAYERS and drafter is not None \
                and (launch.target is None or drafter.config != launch.target.config):
            return None
        if rule.params["check"] in OWN_LAYERS and launch.target is not None:
            # The draft is layers of the target's own checkpoint (MTP): its headers where they were read; for a
            # preset, its config alone.
            if launch.target_weights is None and launch.target_weights_problem:
                return Finding(rule.id, rule.title, rule.phase, Status.UNKNOWN, launch.target.name, 0, "", None,
                               f"the target's weights could not be read: {launch.target_weights_problem}", rule.hint)
            weights = launch.target_weights
            own = weights or Checkpoint(launch.target.name, launch.target.config, {})
            return CHECKS[rule.params["check"]](rule, DraftContext(launch, own, weights is not None, judge))
        if drafter is None:
            if rule.params["check"] in LAUNCH_ONLY:  # what the launch names in its place
                empty = Checkpoint(str(launch.named_draft or ""), {}, {})
                return CHECKS[rule.params["check"]](rule, DraftContext(launch, empty, False, judge))
            return None  # no drafter checkpoint here
        return CHECKS[rule.params["check"]](rule, DraftContext(launch, cast(Checkpoint, drafter), judge=judge))

    def validate(self, rule: Rule) -> str | None:
        problem = super().validate(rule)
        if problem is None and rule.params["check"] not in CHECKS:
            return f"params.check must be one of {', '.join(CHECKS)}"
        return problem


class DraftIsTargetClass(Kind):
    """A draft the engine builds from the target's own class, where the target was built (own_draft.py): its layers
    take the target's names, and the first that registers its name is refused."""

    name = "draft_is_target_class"
    # load: the functions that build the draft (the first in the release); build: the builder they call; target_load:
    # where the model runner builds the target; registry: the mapping the layers register their names in
    required = {"load": list, "build": str, "target_load": list, "registry": str}
    siteless = True

    def judge_launch(self, rule: Rule, judge: Judge) -> Finding | None:
        return judge_own_draft(rule, judge)
