"""The model runner a launch takes, decided as the release decides it, from its source (never imported).

vLLM picks Model Runner V1 (``vllm/v1/worker/gpu_model_runner.py``) or V2 (``vllm/v1/worker/gpu/``) per launch in
``VllmConfig.use_v2_model_runner`` (``vllm/config/vllm.py``): the variable, then the method, the model's kind, the
default-V2 architectures and MoE-ness, Triton on the platform, the features V2 does not support. The player of engine
code (play.player) plays that property's body over the launch, forking on every condition not known and following
the methods of its class that it calls; what each engine expression is for a launch is declared in the path file's
``runner:`` section (``reads``), and this module answers the player's reads of the launch's objects with it
(``_Launch``). Where the release has no such property, the variable's default decides (``defaults_file``), as before.

The result names the runner and why (the conditions that decided, with their lines, and what the engine logs when it
falls back), or both runners and what was not known. The tracer (trace.py) then follows only that runner's roles.
"""

from __future__ import annotations

import ast
import functools
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..methods.resolve import key_digest
from ..play.libraries.environ import declared_default, truthy
from ..play.player import WARNINGS, Branch, LiteralScope, Outcome, Player, Scope, WithoutClasses
from ..play.values import UNKNOWN, EngineObject, Raised, Unknown

BOTH = "v1 and v2"  # what trace.BOTH_RUNNERS names: both runners' roles are traced

# A launch's value for an engine expression that names the target class (``__target__``), from the caller: (known,
# value) or (False, what was not understood).
TargetReader = Callable[[str], tuple[bool, Any]]
# What a module declares of an environment variable: (declared, default) (play.libraries.environ.declared_default).
Declared = Callable[[str], tuple[bool, Any]]


@dataclass(frozen=True)
class RunnerChoice:
    """How the engine picks its model runner (the path file's ``runner:`` section, rules/README.md)."""

    variable: str  # the environment variable that forces a runner
    defaults_file: str  # the module that declares its default
    when_set: str  # the runner used when the variable is truthy (releases without ``decision``)
    otherwise: str
    decision: str = ""  # module:Class.attribute of the release's own choice (a property or method returning a bool)
    when_true: str = ""  # the runner it names by True
    when_false: str = ""
    reads: tuple[tuple[str, str], ...] = ()  # engine expression -> expression over the launch
    assumed: tuple[tuple[str, str], ...] = ()  # engine expression -> the value taken, said in the reason
    platforms: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()  # platform -> names it fixes
    decided: tuple[str, str] | None = None  # the runner and why, for one launch (set by ``for_launch``)
    # runner -> the method of the decision's class that checks the launch against that runner once it is taken
    # (vLLM's VllmConfig._validate_v1_model_runner): a raise on every way through it refuses the launch
    validate: tuple[tuple[str, str], ...] = ()
    # The runners the release has (trace.runners_in: those whose every-method roles it has the entries of), where
    # read; a release that declares no variable to choose by runs the one it has.
    present: frozenset[str] | None = None


def runner_choice(data: dict[str, Any] | None) -> RunnerChoice | None:
    """The ``runner:`` section of a path file."""
    if not data:
        return None
    known = {"variable", "defaults_file", "when_set", "otherwise", "decision", "when_true", "when_false"}
    plain: dict[str, Any] = {k: str(v) for k, v in data.items() if k in known}
    return RunnerChoice(
        **plain,
        reads=tuple((str(k), str(v)) for k, v in (data.get("reads") or {}).items()),
        assumed=tuple((str(k), str(v)) for k, v in (data.get("assumed") or {}).items()),
        platforms=tuple((str(p), tuple((str(k), v) for k, v in (names or {}).items()))
                        for p, names in (data.get("platforms") or {}).items()),
        validate=tuple((str(k), str(v)) for k, v in (data.get("validate") or {}).items()),
    )


@dataclass(frozen=True)
class RunnerDecision:
    runner: str  # v1, v2, or BOTH
    reason: str
    undecided: tuple[str, ...] = ()  # what could not be known, where both are traced
    logged: tuple[str, ...] = ()  # what the engine logs on the way (its fallback warnings)
    trail: tuple[str, ...] = ()  # every condition met on the way, with its value and line


@dataclass(frozen=True)
class LaunchFacts:
    """What the runner choice reads of a launch."""

    method: str | None
    options: dict[str, Any] = field(default_factory=dict)  # the launch command's options, by dashed name
    speculative: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)  # the target's config.json
    text_config: dict[str, Any] = field(default_factory=dict)
    draft_config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # the launch's environment, where known
    platform: str = "cuda"
    target: TargetReader | None = None


class Source:
    """The release's modules, as the index gives them: (syntax tree, relative path) by module name; and what a module
    declares of the environment's variables (None: no such module), which the index keeps without its syntax tree
    (facts.ReleaseModules.environment), else read from the tree here."""

    def __init__(self, module_tree: Callable[[str], tuple[ast.Module, str] | None],
                 environment: Callable[[str], Declared | None] | None = None,
                 memo: Callable[[str, Callable[[], Any]], Any] | None = None):
        self.module_tree = module_tree
        self.environment = environment or self._environment
        # Where results derived from the modules are kept while the files they read are unchanged (index.TreeIndex.
        # memo): the decision and the refusal, so that a warm scan neither parses nor plays the decision's module
        # (vLLM's config/vllm.py, 160 KB: ~0.05 s). None: played each time.
        self.memo = memo

    def _environment(self, name: str) -> Declared | None:
        found = self.module_tree(name)
        return functools.partial(declared_default, found[0]) if found else None


@dataclass(frozen=True)
class Ref(EngineObject):
    """An engine object the launch has (a config, the ``envs`` module), known by its dotted path."""

    path: str


_PRESENT = "__present__"
# What the engine logs on the way that the reason quotes: its fallback warnings, and what it says at info level where
# it overrides the variable (0.33: "Watermarking requires Model Runner V2 and overrides VLLM_USE_V2_MODEL_RUNNER=0.").
_LOGGED = WARNINGS | {"info", "info_once"}


@functools.lru_cache(maxsize=512)
def _expression(source: str) -> ast.expr:
    return ast.parse(source, mode="eval").body


class _Launch(WithoutClasses):
    """The decision's module as the player sees it for one launch (play.player's Scope and Objects): its constants
    and the methods of the decision's class, and the launch's objects, each read by its dotted path (``reads``,
    ``assumed``, the platform's names, ``envs.<NAME>``). It keeps what the ways read, for the reason."""

    def __init__(self, choice: RunnerChoice, source: Source, facts: LaunchFacts):
        self.choice, self.facts = choice, facts
        self.reads, self.assumed = dict(choice.reads), dict(choice.assumed)
        self.platform = dict(dict(choice.platforms).get(facts.platform, ()))
        self.used_assumptions: set[str] = set()
        self.looked: dict[str, Any] = {}  # what the launch gave each read, in the order first read
        self.unknown: list[str] = []  # what was read that the path file does not say
        self.called: dict[str, None] = {}  # the methods of the class followed, in the order first called
        module_name, _, qual = choice.decision.partition(":")
        self.class_name, _, self.decision = qual.partition(".")
        found = source.module_tree(module_name)
        tree = found[0] if found else None
        self.file = found[1] if found else ""
        self.methods: dict[str, ast.FunctionDef] = {}
        self.constants: dict[str, ast.expr] = {}
        self.envs_aliases: set[str] = set()
        for stmt in tree.body if tree is not None else ():
            if isinstance(stmt, ast.ClassDef) and stmt.name == self.class_name:
                self.methods = {f.name: f for f in stmt.body if isinstance(f, ast.FunctionDef)}
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                self.constants[stmt.targets[0].id] = stmt.value
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
                self.constants[stmt.target.id] = stmt.value
            elif isinstance(stmt, ast.Import):  # `import vllm.envs as envs`: envs.<NAME> reads the variables
                self.envs_aliases |= {a.asname or a.name for a in stmt.names if a.name == choice.defaults_file}
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and \
                    choice.defaults_file.rpartition(".") == (stmt.module, ".", stmt.names[0].name):
                self.envs_aliases.add(stmt.names[0].asname or stmt.names[0].name)
        self.envs: Declared | None = source.environment(choice.defaults_file) if tree is not None else None

    def play(self, name: str) -> list[Outcome]:
        """Every way through the class's method ``name`` on the launch (ValueError: more than the player follows)."""
        player = Player("__return__", {"self": Ref("self")}, self, returns=True, forks_every=True, objects=self,
                        logs=_LOGGED)
        return player.run(self.methods[name], None)

    # -- play.player.Scope: the decision's module

    @property
    def where(self) -> str:
        return self.file

    def literals(self, name: str) -> set[str] | None:
        return None

    def value(self, name: str) -> Any:
        name = name.rpartition(":")[2]  # imported in the function (`from importlib.metadata import entry_points`)
        if name in self.envs_aliases:
            return Ref("envs")
        if name in self.platform:
            return self.platform[name]
        if name in self.reads or name in self.assumed:
            return self._lookup(name)
        if name in self.constants:
            return self._constant(name)
        return Ref(name) if self._object(name) else Unknown(name)

    def function(self, name: str) -> tuple[ast.FunctionDef, Scope] | None:
        own = name.removeprefix("self.")
        if own == name or own not in self.methods or own == self.decision:
            return None
        self.called.setdefault(own)
        return self.methods[own], self

    def instance(self, name: str, named: dict[str, Any]) -> Any:
        return UNKNOWN

    # -- play.player.Objects: what the launch has

    def has(self, owner: EngineObject, name: str) -> bool:
        path = f"{_path(owner)}.{name}"
        return path in self.reads or path in self.assumed or self._object(path)

    def attribute(self, owner: EngineObject, name: str) -> Any:
        return self._lookup(f"{_path(owner)}.{name}")

    def call(self, owner: EngineObject, args: list[Any], named: dict[str, Any]) -> Any:
        given = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in named.items()]
        return self._lookup(f"{_path(owner)}({', '.join(given)})")

    # -- the launch's values

    def _object(self, path: str) -> bool:
        """Whether the path file reads something of ``path`` (an attribute, a call): an object the launch has."""
        return any(k.startswith((path + ".", path + "(")) for k in (*self.reads, *self.assumed, *self.platform))

    def _constant(self, name: str) -> Any:
        value = Player("", {}, LiteralScope()).evaluate(self.constants[name], {})
        return Unknown(name) if isinstance(value, Unknown) else value

    def _lookup(self, path: str) -> Any:
        if path.startswith("envs.") and path not in self.reads:
            variable = path[len("envs."):]
            if variable in self.facts.env:
                return truthy(self.facts.env[variable])
            declared, default = self.envs(variable) if self.envs else (False, None)
            if not declared:
                return Unknown(f"{variable} (not declared in {self.choice.defaults_file})")
            return None if default is None else truthy(default)
        if path in self.platform:
            return self.platform[path]
        if path in self.reads:
            self.looked[path] = value = self._evaluate(path, self.reads[path])
            return value
        if path in self.assumed:
            self.used_assumptions.add(path)
            return self._evaluate(path, self.assumed[path])
        if self._object(path):
            return Ref(path)
        self.unknown.append(path)
        return Unknown(path)

    def _evaluate(self, path: str, expression: str) -> Any:
        f = self.facts
        if "__target__" in expression:
            if f.target is None:
                return Unknown(f"{path} (the target class)")
            known, value = f.target(expression)
            return value if known else Unknown(f"{path} ({value})")
        scope = {"__method__": f.method, "__options__": f.options, "__speculative__": f.speculative,
                 "__config__": f.config, "__text_config__": f.text_config, "__draft_config__": f.draft_config,
                 "__platform__": f.platform, "__present__": _PRESENT}
        try:
            value = Player("", {}, LiteralScope(scope)).evaluate(_expression(expression), {})
        except Raised as raised:  # a launch value of another type than the path file expects: not known
            return Unknown(f"{path} ({raised.error})")
        except SyntaxError as exc:
            return Unknown(f"{path} (the path file's expression does not parse: {exc.msg})")
        if isinstance(value, Unknown):
            return Unknown(f"{path} ({value.why or expression})")
        return Ref(path) if value == _PRESENT else value

    # -- what a way says

    def trail(self, outcome: Outcome, name: str) -> list[str]:
        """Every condition the way through method ``name`` met, with its value and line, and how it ended."""
        ending = self._ending(outcome, name)
        return [_said(b) for b in outcome.branches] + ([ending] if ending else [])

    def decisive(self, outcome: Outcome, name: str) -> list[str]:
        """What decided a way through: the conditions that held (the branch it took) and how it ended."""
        ending = self._ending(outcome, name)
        return [_said(b) for b in outcome.branches if b.taken and b.unknown is None] + ([ending] if ending else [])

    def ended(self, outcome: Outcome, name: str) -> tuple[str, Any]:
        """('raise', the raise's exception as written) or ('return', the value returned)."""
        if outcome.raises is None:
            return "return", outcome.method
        statement = self.statement(outcome, name)
        return "raise", ast.unparse(statement.exc) if isinstance(statement, ast.Raise) and statement.exc \
            else outcome.error or "raise"

    def _ending(self, outcome: Outcome, name: str) -> str | None:
        statement = self.statement(outcome, name)
        if outcome.raises is not None:
            file, line = (outcome.site[0], outcome.site[1]) if outcome.site else (self.file, _raised_line(outcome))
            return f"raises at {file}:{line}: {self.ended(outcome, name)[1]}"
        if isinstance(statement, ast.Return):
            returned = ast.unparse(statement.value) if statement.value else "None"
            return f"returns `{returned}` ({self.file}:{statement.lineno})"
        return None  # it falls off its end

    def statement(self, outcome: Outcome, name: str) -> ast.Raise | ast.Return | None:
        """The method's return or raise at the line the way ends at (none where it falls off its end)."""
        line = _raised_line(outcome) if outcome.raises is not None else outcome.steps[-1].line if outcome.steps else 0
        return next((n for n in ast.walk(self.methods[name]) if isinstance(n, (ast.Raise, ast.Return))
                     and n.lineno == line), None)


def _path(owner: EngineObject) -> str:
    assert isinstance(owner, Ref)  # the only engine objects handed to the player here
    return owner.path


def _raised_line(outcome: Outcome) -> int:
    return int((outcome.raises or "0").partition(":")[0])


def _said(branch: Branch) -> str:
    if branch.unknown is None:
        return f"`{branch.test}` is {branch.taken} ({branch.where}:{branch.line})"
    return f"if `{branch.test}` ({branch.where}:{branch.line}) taken {branch.taken}: {branch.unknown.why} is not known"


def decide(choice: RunnerChoice, source: Source, facts: LaunchFacts) -> RunnerDecision:
    """The runner the launch takes: by the release's own choice where it has one, else by the variable's default."""
    decision: RunnerDecision = _kept(source, "runner", choice, facts, lambda: _decide(choice, source, facts))
    return decision


def _kept(source: Source, kind: str, choice: RunnerChoice, facts: LaunchFacts, compute: Callable[[], Any],
          *more: Any) -> Any:
    """``compute()``, kept by ``source.memo`` under a digest of the choice and of what it reads of the launch (the
    target reader's answers are the tree's and the target's config's, which the key and the memo's files cover), as its
    pickle: each scan gets its own copy."""
    if source.memo is None:
        return compute()
    read = (choice, facts.method, facts.options, facts.speculative, facts.config, facts.text_config,
            facts.draft_config, facts.env, facts.platform, facts.target is None, *more)
    key = key_digest(read)  # the same in every process: `present` is a frozenset
    return pickle.loads(source.memo(f"{kind}:{key}", lambda: pickle.dumps(compute(), protocol=pickle.HIGHEST_PROTOCOL)))


def _decide(choice: RunnerChoice, source: Source, facts: LaunchFacts) -> RunnerDecision:
    launch = _Launch(choice, source, facts)
    name = launch.decision
    if not choice.decision or name not in launch.methods:
        return _by_variable(choice, launch.envs, facts)
    where = f"{choice.decision.split(':')[1]} ({launch.file}:{launch.methods[name].lineno})"
    try:
        ways = launch.play(name)
    except (ValueError, RecursionError) as exc:
        return RunnerDecision(BOTH, f"{where} is not decided for this launch ({exc}): both runners' paths are traced")
    ends = [launch.ended(o, name) for o in ways]
    assumed = sorted(launch.used_assumptions)
    note = (f"; assumed: {', '.join(f'{a} = {launch.assumed[a]}' for a in assumed)}" if assumed else "")
    if len({(kind, repr(value)) for kind, value in ends}) == 1 and ends[0][0] == "return" \
            and isinstance(ends[0][1], bool):
        runner = choice.when_true if ends[0][1] else choice.when_false
        said = [w.partition(": ")[2] for w in ways[0].warnings]
        decisive = launch.decisive(ways[0], name)
        called = []
        for method in launch.called:  # a method of the class a deciding condition calls, where it went one way
            if f"self.{method}()" in " ".join(decisive):
                its = launch.play(method)
                if len({tuple(launch.trail(o, method)) for o in its}) == 1:
                    called.append(f"{method}(): " + "; ".join(launch.decisive(its[0], method)))
        if len(decisive) == 1:
            decisive = ["no condition before it holds", *decisive]
        shown = " ".join(decisive + called)
        values = [f"{p.removeprefix('self.')} = {v!r}"
                  for p, v in launch.looked.items()
                  if not isinstance(v, Ref) and p.rsplit(".", 1)[-1].removesuffix("()") in shown]
        text = (f"{where}: " + "; ".join(decisive + called) + (f" (with {', '.join(values)})" if values else "")
                + (f"; the engine logs \"{said[-1]}\"" if said else "") + note + f": {runner}")
        return RunnerDecision(runner, text, (), tuple(said), tuple(launch.trail(ways[0], name)))
    unknown = sorted({_said(b) for o in ways for b in o.branches if b.unknown is not None})
    values = sorted({f"{kind} {value!r}" for kind, value in ends})
    text = (f"{where} is not decided for this launch ({', '.join(values)}: "
            + "; ".join(unknown or [f"reads {', '.join(sorted(set(launch.unknown)))}"]) + ")" + note
            + ": both runners' paths are traced")
    return RunnerDecision(BOTH, text, tuple(unknown or sorted(set(launch.unknown))))


@dataclass(frozen=True)
class RunnerRefusal:
    """Where the runner a launch takes refuses it: the release's own check of the launch against that runner."""

    file: str
    line: int
    code: str  # the raise statement
    error: str  # what it prints, its values filled where known
    check: str  # Class.method that raises, with its line
    certain: bool  # every way through the check raises (else: some way does, on what is not known)
    reason: str  # the conditions that led there


def refusal(choice: RunnerChoice, source: Source, facts: LaunchFacts, runner: str) -> RunnerRefusal | None:
    """The release's check of the launch against the runner it takes (``validate``), played over the launch as the
    decision is: a raise where every way through it raises (``certain``), or where some way does; None otherwise."""
    if not dict(choice.validate).get(runner):
        return None
    found: RunnerRefusal | None = _kept(source, "runner-refusal", choice, facts,
                                        lambda: _refusal(choice, source, facts, runner), runner)
    return found


def _refusal(choice: RunnerChoice, source: Source, facts: LaunchFacts, runner: str) -> RunnerRefusal | None:
    name = dict(choice.validate).get(runner)
    launch = _Launch(choice, source, facts)
    if not name or name not in launch.methods:
        return None
    try:
        ways = launch.play(name)
    except (ValueError, RecursionError):
        return None
    raised = [o for o in ways if o.raises is not None]
    if not raised:
        return None
    # The way that took no condition it could not know as holding says what the launch itself meets.
    outcome = min(raised, key=lambda o: sum(b.taken and b.unknown is not None for b in o.branches))
    method = launch.methods[name]
    direct = {n.func.attr for n in ast.walk(method) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"}
    called = [f"{other}(): " + "; ".join(launch.decisive(its[0], other))
              for other in launch.called if other in direct for its in [launch.play(other)] if its]
    reason = "; ".join(launch.decisive(outcome, name)[:-1] + called)  # the raise itself is the finding's code
    if outcome.site is not None:  # the raise of a method it calls
        file, line, code = outcome.site
    else:
        statement = launch.statement(outcome, name)
        file, line = launch.file, _raised_line(outcome)
        code = ast.unparse(statement) if isinstance(statement, ast.Raise) else str(outcome.raises).partition(": ")[2]
    return RunnerRefusal(file, line, code, outcome.error or code,
                         f"{choice.decision.split(':')[1].split('.')[0]}.{name} ({launch.file}:{method.lineno})",
                         len(raised) == len(ways), reason)


def _by_variable(choice: RunnerChoice, envs: Declared | None, facts: LaunchFacts) -> RunnerDecision:
    if choice.variable in facts.env:
        runner = choice.when_set if truthy(facts.env[choice.variable]) else choice.otherwise
        return RunnerDecision(runner, f"{choice.variable}={facts.env[choice.variable]} in the launch: {runner}")
    declared, default = envs(choice.variable) if envs else (False, None)
    if not declared:
        return RunnerDecision(*undeclared(choice))
    if default is None:
        return RunnerDecision(BOTH, f"{choice.variable} is unset by default ({choice.defaults_file}) and this release "
                                    "has no choice of its own to read: both runners' paths are traced")
    runner = choice.when_set if truthy(default) else choice.otherwise
    return RunnerDecision(runner, f"{choice.variable} defaults to {default!r} ({choice.defaults_file}): {runner}")


def undeclared(choice: RunnerChoice) -> tuple[str, str]:
    """The runner of a release that declares neither a choice nor the variable: the one runner it has (vLLM 0.34.0
    deleted Model Runner V1 and both selectors); both traced where it has both, or neither."""
    lacking = f"this release declares neither {choice.decision.rpartition(':')[2] or 'a choice'} nor " \
              f"{choice.variable} ({choice.defaults_file})"
    present = sorted(choice.present or ())
    if len(present) == 1:
        return present[0], f"{lacking}, and {present[0].upper()} is the only model runner it has: {present[0]}"
    has = "has both runners" if present else "has neither runner's entry points"
    return BOTH, f"{lacking}, and it {has}: both runners' paths are traced"


def for_launch(spec: Any, decision: RunnerDecision) -> Any:
    """The path spec (trace.PathSpec) with the runner decided for one launch: its tracer follows that runner only."""
    if spec.runner is None:
        return spec
    return replace(spec, runner=replace(spec.runner, decided=(decision.runner, decision.reason)))
