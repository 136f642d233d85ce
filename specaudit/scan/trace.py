"""Trace the EAGLE-3 path through the engine's own code.

From the entry points that ``rules/paths/<engine>.yaml`` declares by role (with fallbacks across releases),
the tracer follows calls through the engine: methods on ``self`` (through the MRO), methods of the objects the
path file names (``self.drafter``), and any function of the tree that receives the target model, its config or
the engine's model config, to a bounded depth. On the way it records **obligations**, everything that can stop
a launch for a given target:

- every ``raise`` and ``assert``, with the conditions on the way to it (enclosing ifs, early returns);
- every method called and attribute read on the target model;
- every attribute read from the target's config;
- every tuple unpacked from the target's output (``hidden_states, aux = model_output``).

Expressions that denote the target (``self.get_model()``, a ``target_model`` parameter, ``self.model_config
.hf_text_config``...) are rewritten to placeholders (``__target__``, ``__text_config__``...), launch facts to
their values, and the small functions a condition calls are kept with it, so a condition can be judged later
(decide.py) without the engine's code. The trace does not depend on the target: it is cached by file content.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from ..core.data import read_yaml, rules_dir
from ..core.errors import SpecauditError
from ..core.types import PHASES
from ..launch.request import DEFAULT_METHOD
from ..methods.catalog import applies
from ..play.libraries.environ import declared_default, truthy
from .facts import (
    TRY_NODES,
    ClassInfo,
    ModuleInfo,
    SyntaxProblem,
    absolute_module,
    copy_tree,
    dotted_name,
    message_template,
    raised_exception,
)
from .gates import HOLE
from .index import TreeIndex
from .resolve import External, Resolved, Resolver
from .runner import RunnerChoice, runner_choice, undeclared

# What an expression denotes, when it is a part of the target; each has a placeholder name in conditions.
TARGET, MODEL_CONFIG, CONFIG, TEXT_CONFIG, OUTPUT = "target", "model_config", "config", "text_config", "output"
DENOTATIONS = (TARGET, MODEL_CONFIG, CONFIG, TEXT_CONFIG, OUTPUT)
METHOD = "method"  # the launch's speculative method
OPTIONS = "options"  # the engine arguments the launch command sets (a dict), for facts that depend on them
SPECULATIVE = "speculative"  # the launch's speculative config as given (a dict): a field it leaves out is unset
SPECULATIVE_CONFIG = "speculative_config"  # the engine's speculative config object, its fields as resolved
DRAFT_CONFIG = "draft_config"  # the drafter's config.json (a dict; empty where the launch has none here)
# What a role's seeds may name: a part of the target, or the speculative config (``self`` in its own methods).
SEEDS = (*DENOTATIONS, SPECULATIVE_CONFIG)


def placeholder(denotation: str) -> str:
    return f"__{denotation}__"


# -- the path file --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Role:
    """A stage of the EAGLE-3 path: where it starts (first entry found wins), and what denotes the target there."""

    name: str
    phase: str
    entries: tuple[str, ...]  # "module:Class.method" or "module:function", tried in order
    seeds: dict[str, tuple[str, ...]]  # denotation -> expressions (dotted, `()` for calls) that denote it
    # expression -> the "module:Class" candidates it is an instance of, each with the methods it is for ("*": any)
    objects: dict[str, tuple[tuple[str, tuple[str, ...]], ...]]
    methods: tuple[str, ...] = ("*",)  # the methods whose launches meet this role ("*": every method)
    runner: str | None = None  # the model runner this role belongs to, when the engine has several
    required: bool = True
    # A stage every launch runs (loading the model): only what it does because of speculative decoding,
    # under a condition on the method, is on the EAGLE-3 path.
    speculative_only: bool = False


@dataclass(frozen=True)
class Landmark:
    """A point of the path that no raise marks but where a check of the drafter bites (a rule's ``at:``): the
    first call, in the role, of a function with one of these names (the last part of the called name)."""

    name: str
    roles: tuple[str, ...]  # the first of them the path meets it in (a runner's each)
    calls: tuple[str, ...]


@dataclass(frozen=True)
class TargetParts:
    """How the parts of a multimodal target are built, for conditions that read them."""

    builders: tuple[str, ...] = ()  # functions that build the class the registry maps `architectures=[...]` to
    language_model: tuple[str, ...] = ()  # target methods that return the part a builder built


@dataclass(frozen=True)
class FactCase:
    """What an expression is for a launch, in the modules ``within`` names (all: empty), in a release that defines
    one of the functions ``where`` names (any release: empty): the release's own reading of a flag, where it has it."""

    value: str  # an expression over placeholders
    within: tuple[str, ...] = ()  # module names (or their packages) whose conditions it holds in
    where: tuple[str, ...] = ()  # "module:Qual.name": the release defines one of them


@dataclass(frozen=True)
class PathSpec:
    engine: str
    roles: tuple[Role, ...]
    derive: dict[str, str]  # "denotation.attr" or "denotation.call()" -> denotation
    method: tuple[str, ...]  # expressions that hold the launch's speculative method
    facts: dict[str, tuple[FactCase, ...]]  # expression -> what it is for a launch: the first case that holds
    depth: int
    runner: RunnerChoice | None
    model_config: dict[str, str]  # attribute of the engine's model config -> expression over the target
    external_members: dict[str, tuple[str, ...]]  # a base class outside the tree -> the attributes it gives
    source: str
    target_parts: TargetParts = TargetParts()
    landmarks: tuple[Landmark, ...] = ()
    # expressions that denote the engine's speculative config object: its fields are the launch's, as resolved
    speculative_config: tuple[str, ...] = ()


def load_path_spec(engine: str) -> PathSpec:
    path = rules_dir() / "paths" / f"{engine}.yaml"
    try:
        data = read_yaml(path)
    except (OSError, yaml.YAMLError) as exc:
        raise SpecauditError(f"{path}: cannot read the EAGLE-3 path ({exc})") from None
    try:
        roles = tuple(_role(r, path) for r in data["roles"])
        runner = data.get("runner")
        return PathSpec(
            engine=engine,
            roles=roles,
            derive={str(k): str(v) for k, v in (data.get("derive") or {}).items()},
            method=tuple(data.get("method") or ()),
            speculative_config=tuple(data.get("speculative_config") or ()),
            facts={str(k): _fact_cases(v) for k, v in (data.get("facts") or {}).items()},
            depth=int(data.get("depth", 4)),
            runner=runner_choice(runner),
            model_config={str(k): str(v) for k, v in (data.get("model_config") or {}).items()},
            external_members={str(k): tuple(v) for k, v in (data.get("external_members") or {}).items()},
            source=str(path),
            target_parts=TargetParts(**{k: tuple(v) for k, v in (data.get("target_parts") or {}).items()}),
            landmarks=tuple(Landmark(str(name), tuple(_as_list(v["role"])), tuple(v["calls"]))
                            for name, v in (data.get("landmarks") or {}).items()),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SpecauditError(f"{path}: malformed path file ({type(exc).__name__}: {exc})") from None


def _candidate(data: Any) -> tuple[str, tuple[str, ...]]:
    """An object's candidate class: "module:Class" (for every method) or {class: ..., methods: [...]}, the class the
    engine builds for those methods only (GPUModelRunner's drafter: an EagleProposer, a DraftModelProposer...)."""
    if isinstance(data, dict):
        return str(data["class"]), tuple(str(m).lower() for m in _as_list(data["methods"]))
    return str(data), ("*",)


def for_method(role: Role, method: str) -> Role:
    """The role as a launch of ``method`` meets it: its objects' candidates for that method only."""
    objects = {k: tuple(c for c in v if applies(c[1], method)) for k, v in role.objects.items()}
    return replace(role, objects=objects)


def _fact_cases(value: Any) -> tuple[FactCase, ...]:
    """A fact as the path file writes it: an expression, or cases ``{value, in, where}`` tried in order."""
    if isinstance(value, str):
        return (FactCase(value),)
    cases = tuple(FactCase(str(case["value"]), tuple(_as_list(case.get("in") or [])),
                           tuple(_as_list(case.get("where") or []))) for case in _as_list(value))
    if not cases:
        raise ValueError("a fact needs a value")
    return cases


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _role(data: dict, path) -> Role:
    if data["phase"] not in PHASES:
        raise SpecauditError(f"{path}: role {data['role']!r}: phase {data['phase']!r} is not one of {', '.join(PHASES)}")
    seeds = {k: tuple(v) for k, v in (data.get("seeds") or {}).items()}
    unknown = set(seeds) - set(SEEDS)
    if unknown:
        raise SpecauditError(f"{path}: role {data['role']!r}: unknown seed kind {sorted(unknown)} "
                             f"(known: {', '.join(SEEDS)})")
    return Role(name=str(data["role"]), phase=str(data["phase"]), entries=tuple(data["entries"]), seeds=seeds,
                objects={k: tuple(_candidate(c) for c in v) for k, v in (data.get("objects") or {}).items()},
                methods=tuple(str(m).lower() for m in _as_list(data["methods"])), runner=data.get("runner"),
                required=bool(data.get("required", True)),
                speculative_only=bool(data.get("speculative_only", False)))


# -- the result ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    """A condition on the way to an obligation, rewritten over placeholders; ``holds``: the path needs it true."""

    source: str  # what decide.py evaluates
    written: str  # as the engine wrote it
    holds: bool
    module: str  # where its other names resolve
    # Passed a check to get here (after an assert, or an `if ...: raise`): the check is an obligation of its own.
    checked: bool = False


@dataclass(frozen=True)
class Obligation:
    kind: str  # raise | assert | call | attribute | config | unpack
    role: str
    phase: str
    module: str
    file: str
    line: int
    end_line: int
    code: str  # the statement, as written
    function: str  # where it is: module:Qual.name
    via: tuple[str, ...]  # the calls that lead to it from the entry point
    guards: tuple[Condition, ...]  # for an assert, the last one is its own test, negated
    exception: str | None
    message: str | None  # with {expression} where the engine formats a value in
    member: str | None = None  # the method or attribute (call, attribute, config); the arity (unpack)
    receiver: str | None = None  # the denotation the member is read from
    step: int = 0  # order along the path
    # Each {expression} of the message that reads what the launch fixes, rewritten as a condition is (decide fills
    # it in: "greater than zero (-3)", where the template says {self.num_speculative_tokens}).
    holes: tuple[tuple[str, str], ...] = ()


def reads_target(source: str) -> bool:
    return any(placeholder(d) in source for d in DENOTATIONS)


@dataclass(frozen=True)
class Summary:
    """A small function a condition calls, kept whole so the condition can be evaluated: its parameters and
    body, with ``self`` bound to nothing."""

    qualname: str
    module: str
    params: tuple[str, ...]
    source: str  # the function's statements, as re-parsable source


@dataclass(frozen=True)
class EntryPoint:
    role: str
    phase: str
    runner: str | None
    required: bool
    function: str | None  # the entry found; None when none of the declared ones is in the tree
    file: str | None
    line: int | None
    tried: tuple[str, ...]
    problem: str  # why it was not found (empty when found)


@dataclass(frozen=True)
class TracedPath:
    engine: str
    runner: str | None  # the model runner a default launch uses
    runner_reason: str
    entries: tuple[EntryPoint, ...]
    obligations: tuple[Obligation, ...]
    functions: dict[str, Summary]  # placeholder name -> summary
    traced: tuple[str, ...]  # every function followed
    unparsed: tuple[str, ...]  # files on the path that could not be parsed: "file: why"
    model_config: dict[str, str]  # what the engine's model config answers, over the target's placeholders
    external_members: dict[str, tuple[str, ...]]  # what base classes outside the tree give the target
    target_parts: TargetParts = TargetParts()
    landmarks: dict[str, int] = field(default_factory=dict)  # landmark name -> its step, where the path met it
    landmark_phases: dict[str, str] = field(default_factory=dict)  # landmark name -> the phase of the role it is in


# -- tracing ------------------------------------------------------------------------------------------


@dataclass
class _Function:
    qualname: str  # module:Qual.name
    module: ModuleInfo
    node: ast.FunctionDef | ast.AsyncFunctionDef
    owner: ClassInfo | None  # the class it is defined in


Bindings = tuple[dict[str, str], dict[str, ast.expr]]  # a frame's denoted names and literals, at one point


@dataclass
class _Frame:
    """What a traced function knows: the role, the class `self` is, and what local names denote."""

    role: Role
    self_class: ClassInfo | None
    denoted: dict[str, str]  # local name -> denotation
    literals: dict[str, ast.expr]  # local name -> a literal bound to it (inlined into conditions)
    via: tuple[str, ...]
    depth: int
    # Names an import inside the function binds (`from pkg.mod import f`, `mod = importlib.import_module("pkg.mod")`)
    # -> the absolute dotted name they stand for. They hold whatever branch bound them, as Python's names do.
    imports: dict[str, str] = field(default_factory=dict)

    def bindings(self) -> Bindings:
        return dict(self.denoted), dict(self.literals)

    def restore(self, bindings: Bindings) -> None:
        self.denoted, self.literals = dict(bindings[0]), dict(bindings[1])


def _agreed(one: Bindings, other: Bindings) -> Bindings:
    def common(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in a.items() if k in b and (b[k] is v or ast.dump(b[k]) == ast.dump(v)
                                                          if isinstance(v, ast.AST) else b[k] == v)}

    return common(one[0], other[0]), common(one[1], other[1])


def _merged(test: Condition, body: Bindings, orelse: Bindings) -> Bindings:
    """What names denote after an if whose two branches go on: what both agree on, and a name that either
    binds to a part of the target as the choice the engine makes (``x if test else y``), kept as a literal."""
    denoted, literals = _agreed(body, orelse)
    for name in {*body[0], *body[1], *orelse[0], *orelse[1]} - {*denoted, *literals}:
        if not name.isidentifier():
            continue  # self.model: an attribute keeps only what both branches agree on
        sides = [ast.Name(placeholder(bound[0][name]), ast.Load()) if name in bound[0] else bound[1].get(name)
                 for bound in (body, orelse)]
        chosen, other = sides
        if chosen is not None and other is not None and any(reads_target(ast.unparse(side)) for side in (chosen, other)):
            literals[name] = ast.IfExp(ast.parse(test.source, mode="eval").body, chosen, other)
    return denoted, literals


class Tracer:
    def __init__(self, index: TreeIndex, resolver: Resolver, spec: PathSpec):
        self.index = index
        self.resolver = resolver
        self.spec = spec
        self._read_files: set[str] = set()
        self._functions: dict[tuple[str, str], ast.FunctionDef | ast.AsyncFunctionDef | None] = {}
        self._lines: dict[str, list[str]] = {}
        self.obligations: list[Obligation] = []
        self.functions: dict[str, Summary] = {}
        self._function_names: dict[str, str] = {}  # qualname -> placeholder
        self.traced: list[str] = []
        self._seen: set[tuple] = set()
        self.unparsed: dict[str, str] = {}
        self._entry_roles: dict[str, Role] = {}
        # The cases of each fact that hold in this release: (the modules they hold in, the expression).
        self._facts = {_normal(k): [(case.within, ast.parse(case.value, mode="eval").body) for case in cases
                                    if not case.where or any(not isinstance(self.find(w), str) for w in case.where)]
                       for k, cases in spec.facts.items()}
        self._method = {_normal(k) for k in spec.method}
        self._speculative_config = {_normal(k) for k in spec.speculative_config}
        # The kinds of expression those name (a dotted name, a call, ...), and a dotted name (a local literal kept by
        # its text): a rewrite writes out only expressions of these kinds, not each node of a condition again.
        self.named_kinds = {type(ast.parse(text, mode="eval").body)
                            for text in (*self._facts, *self._method, *self._speculative_config)} | {ast.Attribute}
        self._step = 0
        self.landmarks: dict[str, int] = {}
        self.landmark_phases: dict[str, str] = {}

    # ---- reading the tree ----

    def _module_ast(self, module: ModuleInfo) -> ast.Module | None:
        return self._read(module, self.index.syntax)

    def _function_node(self, module: ModuleInfo, qual: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """A module's function or method (``Class.method``) by its qualified name. The nodes found are kept, not the
        module's syntax tree (the index keeps the trees read most recently): a trace asks for the same functions
        many times over, across some forty files."""
        key = (module.path, qual)
        if key not in self._functions:
            self._functions[key] = self._read(module, lambda relpath: self.index.function(relpath, qual))
        return self._functions[key]

    def _read(self, module: ModuleInfo, read: Callable[[str], Any]) -> Any:
        """What ``read`` gives of the module's file; None (its problem noted) where the file has no syntax tree."""
        if module.path not in self._read_files:  # what the trace makes of it depends on its content, parsed or not
            self._read_files.add(module.path)
            self.index.note_read(module.path)
        if module.path in self.unparsed:
            return None
        try:
            return read(module.path)
        except SyntaxProblem as exc:
            self.unparsed[module.path] = str(exc)
        except OSError as exc:
            self.unparsed[module.path] = f"unreadable: {exc.strerror}"
        return None

    def find(self, spec: str) -> _Function | str:
        """``module:Class.method`` or ``module:function``; the problem as text when it is not in the tree."""
        module_name, _, qual = spec.partition(":")
        module = self.index.module(module_name)
        if module is None:
            why = "could not be parsed" if self.index.has_module(module_name) else "is not in this tree"
            return f"{module_name} {why}"
        if "." in qual:
            class_name, method = qual.split(".", 1)
            cls = module.classes.get(class_name)
            if cls is None:
                return f"{module_name} defines no class {class_name}"
            found = self.method(cls, method)
            return found or f"{class_name} has no method {method}"
        node = self._function_node(module, qual)
        if node is None:
            return f"{module_name} defines no function {qual}"
        return _Function(f"{module_name}:{qual}", module, node, None)

    def method(self, cls: ClassInfo, name: str) -> _Function | None:
        """The method ``name`` as ``cls`` resolves it: the first class of its MRO that defines it."""
        for base in self.resolver.hierarchy(cls).linear:
            if isinstance(base, ClassInfo) and name in base.bound:
                module = self.index.module(base.module)
                node = self._function_node(module, f"{base.name}.{name}") if module else None
                if module is not None and node is not None:
                    return _Function(f"{base.module}:{base.name}.{name}", module, node, base)
                return None  # bound to something that is not a plain method (an assignment)
        return None

    def fact(self, expression: str, module: str) -> ast.expr | None:
        """What an expression written in ``module`` is for a launch, where the path file says."""
        for within, value in self._facts.get(expression, ()):
            if not within or any(module == m or module.startswith(m + ".") for m in within):
                return value
        return None

    def resolve_absolute(self, dotted: str) -> Resolved:
        """An absolute dotted name (``pkg.mod.f``, ``pkg.mod.Class``): the longest prefix that is a module of the tree,
        and the rest looked up from it as that module binds it."""
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            module_name = ".".join(parts[:cut])
            if self.index.has_module(module_name):
                module = self.resolver.resolve_module(module_name)
                rest = ".".join(parts[cut:])
                if isinstance(module, ModuleInfo) and rest:
                    return self.resolver.resolve(module, rest)
                return module
        return self.resolver.resolve_module(dotted)  # outside the tree: External; else why not

    def instance_class(self, spec: str) -> ClassInfo | None:
        module_name, _, name = spec.partition(":")
        found = self.resolver.find_class(module_name, name)
        return found if isinstance(found, ClassInfo) else None

    # ---- the walk ----

    def run(self) -> TracedPath:
        entries: list[EntryPoint] = []
        found_entries: list[tuple[Role, _Function]] = []
        runner, runner_reason = self._runner()
        for role in self.spec.roles:
            problems = []
            for candidate in role.entries:
                found = self.find(candidate)
                if isinstance(found, _Function):
                    found_entries.append((role, found))
                    self._entry_roles[found.qualname] = role
                    entries.append(EntryPoint(role.name, role.phase, role.runner, role.required, found.qualname,
                                              found.module.path, found.node.lineno, role.entries, ""))
                    break
                problems.append(f"{candidate}: {found}")
            else:
                entries.append(EntryPoint(role.name, role.phase, role.runner, role.required, None, None, None,
                                          role.entries, "; ".join(problems)))
        for role, function in found_entries:
            if not runs(role.runner, runner):
                continue
            for start in [function, *self._validators(function)]:
                self._trace(start, _Frame(role, function.owner, {}, {}, (), 0), ())
        return TracedPath(self.spec.engine, runner, runner_reason, tuple(entries), tuple(self.obligations),
                          dict(self.functions), tuple(self.traced),
                          tuple(f"{k}: {v}" for k, v in sorted(self.unparsed.items())), dict(self.spec.model_config),
                          dict(self.spec.external_members), self.spec.target_parts,
                          dict(self.landmarks), dict(self.landmark_phases))

    def _validators(self, function: _Function) -> list[_Function]:
        """Constructing a pydantic config runs its ``model_validator`` methods after ``__post_init__``."""
        if function.owner is None or function.node.name not in ("__init__", "__post_init__"):
            return []
        found = []
        for name in sorted(function.owner.bound):
            method = self.method(function.owner, name)
            if method and any((dotted_name(d.func if isinstance(d, ast.Call) else d) or "").endswith("model_validator")
                              for d in method.node.decorator_list):
                found.append(method)
        return found

    def lines(self, module: ModuleInfo) -> list[str]:
        if module.path not in self._lines:
            self._lines[module.path] = self.index.source(module.path).decode("utf-8", "replace").splitlines()
        return self._lines[module.path]

    def _runner(self) -> tuple[str | None, str]:
        """The runner whose roles are traced: the one decided for the launch (runner.py), else by the variable's
        default, and both where that is unset."""
        choice = self.spec.runner
        if choice is None:
            return None, "this engine has one model runner"
        if choice.decided is not None:
            return choice.decided
        module = self.index.module(choice.defaults_file)
        declared, default = declared_default(self._module_ast(module) if module else None, choice.variable)
        if not declared:
            return undeclared(replace(choice, present=runners_in(self.index, self.spec)))
        if default is None:
            return BOTH_RUNNERS, (f"{choice.variable} is unset by default ({choice.defaults_file}): the engine picks "
                                  f"the runner per model and configuration, so both runners' paths are traced")
        runner = choice.when_set if truthy(default) else choice.otherwise
        return runner, f"{choice.variable} defaults to {default!r} ({choice.defaults_file}): {runner}"

    def _trace(self, function: _Function, frame: _Frame, guards: tuple[Condition, ...]) -> None:
        key = (function.qualname, tuple(sorted(frame.denoted.items())), tuple(g.source for g in guards)[-3:])
        if key in self._seen or frame.depth > self.spec.depth:
            return
        self._seen.add(key)
        if function.qualname in self._entry_roles and self._entry_roles[function.qualname] is not frame.role:
            frame = _Frame(self._entry_roles[function.qualname], frame.self_class, frame.denoted, {}, frame.via,
                           frame.depth)
        self.traced.append(function.qualname)
        _Walk(self, function, frame).block(function.node.body, guards)

    def record(self, obligation: Obligation) -> None:
        self._step += 1
        self.obligations.append(_with_step(obligation, self._step))

    def meet(self, role: Role, call: ast.Call) -> None:
        """A call that may be a landmark: its step is the next one, so that what comes before or after it on
        the path stays so."""
        name = (dotted_name(call.func) or "").rpartition(".")[2]
        for landmark in self.spec.landmarks:
            if role.name in landmark.roles and name in landmark.calls and landmark.name not in self.landmarks:
                self._step += 1
                self.landmarks[landmark.name] = self._step
                self.landmark_phases[landmark.name] = role.phase

    def summarize(self, function: _Function) -> str | None:
        """The placeholder name for a function a condition calls, keeping its summary; None when it is too
        large or not simple enough to evaluate (its result is then unknown)."""
        if function.qualname in self._function_names:
            return self._function_names[function.qualname]
        body = [s for s in function.node.body if not is_docstring(s)]
        if len(body) > 12 or not all(_summarizable(s) for s in body):
            return None
        params = [a.arg for a in function.node.args.posonlyargs + function.node.args.args]
        if function.owner is not None and params and params[0] in ("self", "cls"):
            params = params[1:]
        name = f"__f{len(self._function_names)}__"
        self._function_names[function.qualname] = name
        self.functions[name] = Summary(function.qualname, function.module.name, tuple(params),
                                       "\n".join(ast.unparse(s) for s in body))
        return name


def _with_step(obligation: Obligation, step: int) -> Obligation:
    return replace(obligation, step=step)


class _Walk:
    """One function's statements, in order, with the conditions that hold on the way."""

    def __init__(self, tracer: Tracer, function: _Function, frame: _Frame):
        self.t = tracer
        self.function = function
        self.frame = frame
        self.module = function.module
        self.lines = tracer.lines(function.module)
        params = function.node.args.posonlyargs + function.node.args.args + function.node.args.kwonlyargs
        self.params = [a.arg for a in params]

    # ---- statements ----

    def block(self, body: list[ast.stmt], guards: tuple[Condition, ...], catching: bool = False) -> None:
        for stmt in body:
            after = self.statement(stmt, guards, catching)
            if after is None:
                return
            guards = after

    def statement(self, stmt: ast.stmt, guards: tuple[Condition, ...], catching: bool) -> tuple[Condition, ...] | None:
        """Walk one statement; the guards that hold after it (None: the block never goes on)."""
        if isinstance(stmt, ast.If):
            self.expression(stmt.test, guards, catching)
            test = self.condition(stmt.test, True)
            before = self.frame.bindings()
            self.block(stmt.body, guards + (test,), catching)
            after_body = self.frame.bindings()
            self.frame.restore(before)
            self.block(stmt.orelse, guards + (_negate(test),), catching)
            body_ends, else_ends = _terminates(stmt.body), bool(stmt.orelse) and _terminates(stmt.orelse)
            # What a name denotes after the if: what both branches that go on agree on.
            if else_ends and not body_ends:
                self.frame.restore(after_body)
            elif not body_ends:
                self.frame.restore(_merged(test, after_body, self.frame.bindings()))
            if body_ends and else_ends:
                return None
            recorded = self._records(guards + (test,))
            if body_ends and _raises(stmt.body) and not (reads_target(test.source) and recorded):
                # Past a check of the launch's own state, or one that is no obligation (a launch-only stage's
                # check that does not depend on speculative decoding): a launch that failed it failed elsewhere.
                return guards
            if body_ends:  # an early return or raise: what follows needs the test false; a raise recorded as an
                # obligation decides itself whether it holds (checked)
                return guards + (replace(_negate(test), checked=_raises(stmt.body)),)
            if else_ends:
                return guards + (test,)
            return guards
        if isinstance(stmt, ast.Raise):
            if stmt.exc is not None:
                self.expression(stmt.exc, guards, catching)
                exception, message = raised_exception(stmt.exc)
                self._record("raise", stmt, guards, exception, message)
            return None
        if isinstance(stmt, ast.Assert):
            self.expression(stmt.test, guards, catching)
            test = self.condition(stmt.test, False)
            self._record("assert", stmt, guards + (test,), "AssertionError",
                         message_template(stmt.msg) if stmt.msg is not None else None)
            # Past an assert that does not read the target, or that is no obligation, a launch that failed it has
            # failed for another reason: what follows is judged as reached.
            recorded = self._records(guards + (test,))
            return guards + (replace(_negate(test), checked=True),) if reads_target(test.source) and recorded else guards
        if isinstance(stmt, (ast.Return, ast.Continue, ast.Break)):
            if isinstance(stmt, ast.Return) and stmt.value is not None:
                self.expression(stmt.value, guards, catching)
            return None
        if isinstance(stmt, TRY_NODES):
            catches = any(_catches_attribute_error(h) for h in stmt.handlers)
            self.block(stmt.body, guards, catching or catches)
            self.block(stmt.orelse, guards, catching)
            self.block(stmt.finalbody, guards, catching)
            return guards
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.expression(item.context_expr, guards, catching)
            self.block(stmt.body, guards, catching)
            return guards
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            self.expression(stmt.iter if not isinstance(stmt, ast.While) else stmt.test, guards, catching)
            saved = dict(self.frame.denoted)
            self.block(stmt.body, guards, catching)
            self.frame.denoted.update(saved)
            self.block(stmt.orelse, guards, catching)
            return guards
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            if stmt.value is not None:
                self.expression(stmt.value, guards, catching)
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    self.bind(target, stmt.value, stmt, guards)
            return guards
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return guards  # nested definitions run only when called
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):  # an import inside a function binds names only there
            for name, dotted in _imported(stmt, self.package).items():
                self._forget(name)
                self.frame.imports[name] = dotted
            return guards
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                self.expression(child, guards, catching)
        return guards

    @property
    def package(self) -> str:
        """The package a relative import of this module is resolved against."""
        return self.module.name if self.module.is_package else self.module.name.rpartition(".")[0]

    def _forget(self, name: str) -> None:
        self.frame.denoted.pop(name, None)
        self.frame.literals.pop(name, None)
        self.frame.imports.pop(name, None)

    def bind(self, target: ast.expr, value: ast.expr, stmt: ast.stmt, guards: tuple[Condition, ...]) -> None:
        denoted = self.denote(value)
        if isinstance(target, ast.Name):
            self._forget(target.id)
            module = self.imported_module(value)
            if module is not None:  # mod = importlib.import_module("pkg.mod"): mod is that module
                self.frame.imports[target.id] = module
            elif denoted:
                self.frame.denoted[target.id] = denoted
            elif _is_literal(value):
                self.frame.literals[target.id] = value
            else:
                # A test kept in a name (`uses_mtp = self.method == "mtp" and ...`), or a value read from the
                # target (`inner = getattr(model, "model", None)`), is that expression where the name is used.
                rewritten = _Rewrite(self).expression(copy_tree(value))
                if any(isinstance(n, ast.Name) and n.id.startswith("__") for n in ast.walk(rewritten)):
                    self.frame.literals[target.id] = rewritten
        elif isinstance(target, (ast.Tuple, ast.List)):
            if denoted == OUTPUT and not any(isinstance(e, ast.Starred) for e in target.elts):
                self._record("unpack", stmt, guards, "ValueError", None, member=str(len(target.elts)),
                             receiver=OUTPUT)
            for element in target.elts:
                if isinstance(element, ast.Name):
                    self._forget(element.id)
        elif isinstance(target, ast.Attribute):
            dotted = dotted_name(target)
            if dotted and dotted.startswith("self."):
                self.frame.literals.pop(dotted, None)
                if denoted:
                    self.frame.denoted[dotted] = denoted  # self.model = <the loaded target>
                else:
                    # A launch value kept on the object (`self.k = vllm_config.speculative_config.num_speculative_
                    # tokens`) is that value where the function reads it back; an object built there (a call) is not.
                    rewritten = _Rewrite(self).expression(copy_tree(value))
                    nodes = list(ast.walk(rewritten))
                    if any(isinstance(n, ast.Name) and n.id.startswith("__") for n in nodes) \
                            and not any(isinstance(n, ast.Call) for n in nodes):
                        self.frame.literals[dotted] = rewritten

    # ---- expressions: what they read from the target, and the calls to follow ----

    def expression(self, node: ast.expr, guards: tuple[Condition, ...], catching: bool) -> None:
        guarded = _guarded_reads(node)
        for sub in _walk_in_order(node):
            if isinstance(sub, ast.Attribute) and not catching and id(sub) not in guarded \
                    and not any(isinstance(c, ast.Call) and c.func is sub and self.denote(c) for c in ast.walk(node)):
                receiver = self.denote(sub.value)
                if receiver in (TARGET, CONFIG, TEXT_CONFIG) and not self._derived(sub):
                    kind = "config" if receiver != TARGET else ("call" if _is_called(sub, node) else "attribute")
                    self._record(kind, sub, guards, "AttributeError", None, member=sub.attr, receiver=receiver)
            if isinstance(sub, ast.Call) and dotted_name(sub.func) == "getattr" and len(sub.args) == 2 and not catching \
                    and isinstance(sub.args[1], ast.Constant) and isinstance(sub.args[1].value, str):
                receiver = self.denote(sub.args[0])  # getattr(x, "name") without a default reads like x.name
                if receiver in (TARGET, CONFIG, TEXT_CONFIG):
                    kind = "config" if receiver != TARGET else "attribute"
                    self._record(kind, sub, guards, "AttributeError", None, member=sub.args[1].value,
                                 receiver=receiver)
            if isinstance(sub, ast.Call):
                self.call(sub, guards)

    def _derived(self, node: ast.Attribute) -> bool:
        """An attribute that the path file derives a denotation from (``model_config.hf_config``) is not a read
        to check on its own: what is read from it is."""
        return self.denote(node) is not None

    def call(self, call: ast.Call, guards: tuple[Condition, ...]) -> None:
        self.t.meet(self.frame.role, call)
        callee, self_class = self.callee(call.func)
        if callee is None:
            return
        arguments = self.arguments(callee, call)
        on_self = isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) \
            and call.func.value.id == "self"
        objects = self_class is not None and not on_self
        if not (on_self or objects or arguments):
            return  # the target does not flow into it
        denoted = dict(arguments)
        literals = self.literal_arguments(callee, call)
        if on_self:  # the same object: what `self.x` denotes stays true
            denoted.update({k: v for k, v in self.frame.denoted.items() if k.startswith("self.")})
        frame = _Frame(self.frame.role, self_class, denoted, literals,
                       self.frame.via + (f"{self.function.qualname} (line {call.lineno})",), self.frame.depth + 1)
        self.t._trace(callee, frame, guards)

    def callee(self, func: ast.expr) -> tuple[_Function | None, ClassInfo | None]:
        """The function of the tree a call reaches, and the class `self` is in it."""
        if isinstance(func, ast.Attribute):
            owner = dotted_name(func.value)
            if owner == "self" and self.frame.self_class is not None:
                return self.t.method(self.frame.self_class, func.attr), self.frame.self_class
            for candidate, _ in self.frame.role.objects.get(owner or "", ()):
                cls = self.t.instance_class(candidate)
                found = self.t.method(cls, func.attr) if cls else None
                if found:
                    return found, cls
        absolute = self.absolute(func)
        dotted = dotted_name(func)
        if absolute is None and (dotted is None or dotted.startswith("self.")):
            return None, None
        # A name an import inside the function bound resolves from its module, as a module-level import's does.
        resolved = self.t.resolve_absolute(absolute) if absolute is not None \
            else self.t.resolver.resolve(self.module, dotted or "")
        if isinstance(resolved, External):
            module_name, _, name = resolved.qualname.rpartition(".")
            module = self.t.index.module(module_name) if self.t.index.has_module(module_name) else None
            node = self.t._function_node(module, name) if module else None
            if module is not None and node is not None:
                return _Function(f"{module_name}:{name}", module, node, None), None
        return None, None

    def absolute(self, node: ast.expr) -> str | None:
        """The absolute dotted name an expression stands for when an import inside the function bound its head
        (``f``, ``mod.f``), or it is a module imported by a literal name (``importlib.import_module("pkg.mod").f``);
        None otherwise (a module-level name is the resolver's)."""
        if isinstance(node, ast.Name):
            return self.frame.imports.get(node.id)
        if isinstance(node, ast.Attribute):
            head = self.absolute(node.value)
            return f"{head}.{node.attr}" if head else None
        return self.imported_module(node)

    def imported_module(self, node: ast.expr) -> str | None:
        """The module ``importlib.import_module("<literal>"[, package])`` imports, when the call is one."""
        if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant) \
                or not isinstance(node.args[0].value, str):
            return None
        func = self.absolute(node.func) or dotted_name(node.func)
        if func is None:
            return None
        if func != "importlib.import_module":
            resolved = self.t.resolver.resolve(self.module, func) if self.absolute(node.func) is None else None
            if not (isinstance(resolved, External) and resolved.qualname == "importlib.import_module"):
                return None
        name = node.args[0].value
        level = len(name) - len(name.lstrip("."))
        if level:
            package = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "package"), None)
            if not (isinstance(package, ast.Constant) and isinstance(package.value, str)):
                return None  # relative to a package the call computes: not known
            return absolute_module(name[level:] or None, level, package.value)
        return name

    def arguments(self, callee: _Function, call: ast.Call) -> dict[str, str]:
        """The callee's parameters that receive a part of the target."""
        params = [a.arg for a in callee.node.args.posonlyargs + callee.node.args.args]
        if callee.owner is not None and params and params[0] in ("self", "cls"):
            params = params[1:]
        bound: dict[str, str] = {}
        for param, arg in zip(params, call.args):
            denoted = self.denote(arg)
            if denoted:
                bound[param] = denoted
        for keyword in call.keywords:
            if keyword.arg is None:
                continue  # **kwargs: no parameter named
            denoted = self.denote(keyword.value)
            if denoted:
                bound[keyword.arg] = denoted
        return bound

    def literal_arguments(self, callee: _Function, call: ast.Call) -> dict[str, ast.expr]:
        """The callee's parameters that receive a literal (a list a gate tests against), or an expression over what
        the launch fixes (``set_eagle3_aux_hidden_state_layers(model, spec, self.use_pp)``: the pipeline size's test),
        inlined where the callee's conditions read them, as a local name's are."""
        params = [a.arg for a in callee.node.args.posonlyargs + callee.node.args.args]
        if callee.owner is not None and params and params[0] in ("self", "cls"):
            params = params[1:]
        pairs = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
        found = {}
        for param, arg in pairs:
            value = self.frame.literals.get(arg.id) if isinstance(arg, ast.Name) else arg if _is_literal(arg) else None
            if value is None and not isinstance(arg, ast.Starred) and not self.denote(arg):
                # Only what the launch alone fixes: a part of the target passed on (`model_config.vocab_size`) is
                # decided where the path file models it, and a parameter is not where it is read.
                rewritten = _Rewrite(self).expression(copy_tree(arg))
                if any(isinstance(n, ast.Name) and n.id.startswith("__") for n in ast.walk(rewritten)) \
                        and not reads_target(ast.unparse(rewritten)):
                    value = rewritten
            if value is not None:
                found[param] = value
        return found

    def denote(self, node: ast.expr) -> str | None:
        """Which part of the target an expression is, if any. Each receiver is denoted once: a chain of n method calls
        (``x.replace(..).replace(..)``) takes n steps, not 2**n."""
        if isinstance(node, ast.Name):
            return self.frame.denoted.get(node.id) or self._seed(node.id)
        named = self._named(node)
        if named:
            return named
        if isinstance(node, ast.Attribute):
            base = self.denote(node.value)
            return self.t.spec.derive.get(f"{base}.{node.attr}") if base else None
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                base = self.denote(node.func.value)
                if base:
                    return self.t.spec.derive.get(f"{base}.{node.func.attr}()")
                base = self._named(node.func)  # what denote(node.func) gives where its receiver denotes nothing
            else:
                base = self.denote(node.func)
            if base:
                return self.t.spec.derive.get(f"{base}()")
        return None

    def _named(self, node: ast.expr) -> str | None:
        """The denotation of an expression by its dotted text (``self.model``, ``self.get_model()``), if it has one."""
        text = _dotted_call(node)
        if text is None:
            return None
        return self.frame.denoted.get(text) or self._seed(text)

    def _seed(self, text: str) -> str | None:
        for denotation, expressions in self.frame.role.seeds.items():
            if text in expressions:
                return denotation
        return None

    # ---- conditions ----

    def condition(self, test: ast.expr, holds: bool) -> Condition:
        rewritten = _Rewrite(self).visit(copy_tree(test))
        return Condition(ast.unparse(rewritten), ast.unparse(test), holds, self.module.name)

    def _records(self, guards: tuple[Condition, ...]) -> bool:
        """Whether a raise or read under these guards is an obligation: in a launch-only stage, only what
        speculative decoding adds (a guard on the method) is."""
        return not self.frame.role.speculative_only or any(placeholder(METHOD) in g.source for g in guards)

    def _record(self, kind: str, node: ast.stmt | ast.expr, guards: tuple[Condition, ...], exception: str | None,
                message: str | None, member: str | None = None, receiver: str | None = None) -> None:
        if not self._records(guards):
            return
        end_line = node.end_lineno or node.lineno  # a parsed node has both
        statement_lines = self.lines[node.lineno - 1: end_line]
        code = _excerpt(statement_lines, node.col_offset)
        self.t.record(Obligation(kind, self.frame.role.name, self.frame.role.phase, self.module.name,
                                 self.module.path, node.lineno, end_line, code, self.function.qualname,
                                 self.frame.via, guards, exception, message, member, receiver,
                                 holes=self._holes(message)))

    def _holes(self, message: str | None) -> tuple[tuple[str, str], ...]:
        found = []
        for hole in dict.fromkeys(hole for hole, _ in HOLE.findall(message or "")):
            try:
                expression = ast.parse(hole.strip(), mode="eval").body
            except SyntaxError:
                continue
            rewritten = ast.unparse(_Rewrite(self).expression(expression))
            if "__" in rewritten and rewritten != hole:
                found.append((hole, rewritten))
        return tuple(found)


class _Rewrite(ast.NodeTransformer):
    """A condition as decide.py reads it: parts of the target as placeholders, launch facts as their values,
    local literals inlined, and the functions it calls as summaries."""

    def __init__(self, walk: _Walk):
        self.walk = walk

    def expression(self, node: ast.expr) -> ast.expr:
        rewritten = self.visit(node)
        assert isinstance(rewritten, ast.expr)  # visit() rewrites an expression into an expression
        return rewritten

    def visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.expr):
            text = ast.unparse(node) if type(node) in self.walk.t.named_kinds else None
            if text in self.walk.t._method:
                return ast.Name(placeholder(METHOD), ast.Load())
            fact = self.walk.t.fact(text, self.walk.module.name) if text is not None else None
            if fact is not None:
                return copy_tree(fact)
            if text in self.walk.t._speculative_config:
                return ast.Name(placeholder(SPECULATIVE_CONFIG), ast.Load())
            denoted = self.walk.denote(node)
            if denoted:
                return ast.Name(placeholder(denoted), ast.Load())
            if isinstance(node, ast.Name) and node.id in self.walk.frame.literals:
                return copy_tree(self.walk.frame.literals[node.id])
            if isinstance(node, ast.Attribute) and text in self.walk.frame.literals:
                return copy_tree(self.walk.frame.literals[text])
            absolute = self.walk.absolute(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if absolute is not None:  # what an import inside the function bound: its absolute name
                return _dotted_node(absolute)
            if isinstance(node, ast.Call):
                callee, _ = self.walk.callee(node.func)
                name = self.walk.t.summarize(callee) if callee else None
                if name:
                    node.func = ast.Name(name, ast.Load())
                    node.args = [self.expression(a) for a in node.args]
                    for keyword in node.keywords:
                        self.generic_visit(keyword)  # its value, rewritten in place
                    return node
        return self.generic_visit(node)


# -- small readers ------------------------------------------------------------------------------------


def _imported(stmt: ast.Import | ast.ImportFrom, package: str) -> dict[str, str]:
    """The names an import statement binds -> the absolute dotted name each stands for."""
    if isinstance(stmt, ast.Import):  # `import a.b` binds a; `import a.b as c` binds c to a.b
        return {alias.asname or alias.name.split(".")[0]: alias.name if alias.asname else alias.name.split(".")[0]
                for alias in stmt.names}
    source = absolute_module(stmt.module, stmt.level, package)
    return {alias.asname or alias.name: f"{source}.{alias.name}" for alias in stmt.names if alias.name != "*"}


def _normal(expression: str) -> str:
    return ast.unparse(ast.parse(expression, mode="eval").body)


def is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _summarizable(stmt: ast.stmt) -> bool:
    """Statements decide.py can run: assignments to names, returns, raises, ifs and for loops of those, pass, and
    log calls (which change nothing a condition reads)."""
    if isinstance(stmt, (ast.Return, ast.Pass, ast.Raise)):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return (dotted_name(stmt.value.func) or "").split(".")[0] in ("logger", "logging", "warnings")
    if isinstance(stmt, ast.Assign):
        return all(isinstance(t, ast.Name) for t in stmt.targets)
    if isinstance(stmt, ast.If):
        return all(_summarizable(s) for s in stmt.body + stmt.orelse)
    if isinstance(stmt, ast.For):  # over a literal: a registry list, say
        return isinstance(stmt.target, ast.Name) and all(_summarizable(s) for s in stmt.body + stmt.orelse)
    return False


def _terminates(body: list[ast.stmt]) -> bool:
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
        return True
    if isinstance(last, ast.If):
        return _terminates(last.body) and bool(last.orelse) and _terminates(last.orelse)
    return False


def _raises(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Raise)


def _negate(condition: Condition) -> Condition:
    return replace(condition, holds=not condition.holds)


def _catches_attribute_error(handler: ast.ExceptHandler) -> bool:
    """Whether the handler swallows an AttributeError; one that may re-raise it (`if not ...: raise`) does not,
    and what the try reads stays an obligation."""
    if any(isinstance(node, ast.Raise) and node.exc is None for node in ast.walk(handler)):
        return False
    if handler.type is None:
        return True
    names = [handler.type] if not isinstance(handler.type, ast.Tuple) else handler.type.elts
    return any((dotted_name(n) or "").rsplit(".", 1)[-1] in ("AttributeError", "Exception", "BaseException")
               for n in names)


def _guarded_reads(node: ast.expr) -> set[int]:
    """Attribute nodes whose absence the expression itself tolerates: the operands after a ``hasattr`` test
    of the same name in an ``and``."""
    guarded: set[int] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.BoolOp) and isinstance(sub.op, ast.And):
            tested: set[str] = set()
            for value in sub.values:
                for inner in ast.walk(value):
                    if isinstance(inner, ast.Attribute) and inner.attr in tested:
                        guarded.add(id(inner))
                for inner in ast.walk(value):
                    if isinstance(inner, ast.Call) and dotted_name(inner.func) == "hasattr" and len(inner.args) == 2 \
                            and isinstance(inner.args[1], ast.Constant):
                        tested.add(str(inner.args[1].value))
        if isinstance(sub, ast.IfExp):
            for inner in ast.walk(sub.test):
                if isinstance(inner, ast.Call) and dotted_name(inner.func) == "hasattr":
                    guarded.update(id(n) for n in ast.walk(sub.body) if isinstance(n, ast.Attribute))
    return guarded


def _walk_in_order(node: ast.AST) -> Iterator[ast.AST]:
    """Sub-expressions in the order Python evaluates them (receivers before their attributes)."""
    yield from reversed(list(_postorder(node)))


def _postorder(node: ast.AST) -> Iterator[ast.AST]:
    yield node
    children = list(ast.iter_child_nodes(node))
    for child in reversed(children):
        if not isinstance(child, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
            yield from _postorder(child)


def _is_called(attribute: ast.Attribute, root: ast.expr) -> bool:
    return any(isinstance(n, ast.Call) and n.func is attribute for n in ast.walk(root))


def _dotted_call(node: ast.AST) -> str | None:
    """``self.get_model()`` for a call without arguments on a dotted name; the dotted name otherwise."""
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        head = _dotted_call(node.func)
        return f"{head}()" if head else None
    if isinstance(node, ast.Attribute):
        head = _dotted_call(node.value)
        return f"{head}.{node.attr}" if head else None
    if isinstance(node, ast.Name):
        return node.id
    return None


def _dotted_node(dotted: str) -> ast.expr:
    head, *rest = dotted.split(".")
    node: ast.expr = ast.Name(head, ast.Load())
    for part in rest:
        node = ast.Attribute(node, part, ast.Load())
    return node


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _excerpt(lines: list[str], column: int, limit: int = 16) -> str:
    if len(lines) > limit:
        lines = lines[:limit] + [" " * column + "..."]
    return "\n".join(x[column:] if x[:column].isspace() else x.lstrip() for x in lines)


BOTH_RUNNERS = "v1 and v2"


def runners_in(index: TreeIndex, spec: PathSpec) -> frozenset[str]:
    """The model runners the release has: those with a role every method meets (``methods: "*"``) whose entry the
    tree defines (its module, and the class the entry names)."""
    def defined(entry: str) -> bool:
        module_name, _, qual = entry.partition(":")
        module = index.module(module_name)
        return module is not None and ("." not in qual or qual.partition(".")[0] in module.classes)

    return frozenset(r.runner for r in spec.roles if r.runner and "*" in r.methods and any(map(defined, r.entries)))


def runs(role_runner: str | None, runner: str | None) -> bool:
    """Whether a role of a given runner is on the path of a launch that uses ``runner``."""
    return role_runner is None or runner is None or runner in (role_runner, BOTH_RUNNERS)


def trace(index: TreeIndex, resolver: Resolver, spec: PathSpec | None = None,
          method: str = DEFAULT_METHOD) -> TracedPath:
    """A method's path in the engine, traced from the entry points of the path file's roles that name the method;
    cached by file content."""
    spec = spec or load_path_spec(index.tree.engine.name)
    spec = replace(spec, roles=tuple(for_method(r, method) for r in spec.roles if applies(r.methods, method)))
    return index.memo(f"trace:{spec.source}:{_spec_digest(spec)}", lambda: Tracer(index, resolver, spec).run())


def _spec_digest(spec: PathSpec) -> str:
    import hashlib

    return hashlib.blake2b(repr(spec).encode(), digest_size=8).hexdigest()


