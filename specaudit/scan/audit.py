"""Judge a launch against the indexed tree: its method resolved, then the rules, drafter checks and traced path of
that method. The result is plain data (results/scan.py); every report format renders it and computes nothing.
"""

from __future__ import annotations

import ast
import bisect
import fnmatch
import functools
import gc
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.types import PHASES, EngineFunction, Finding, Phase, Rule, Site, Status, Verdict
from ..launch.checkpoint import Checkpoint
from ..launch.command import speculative_arguments
from ..launch.known import known_failures, launch_features
from ..launch.request import DEFAULT_METHOD, Launch
from ..launch.target import Target
from ..methods.catalog import EngineMethods, Method, applies, load_engine_methods, load_methods
from ..methods.findings import REFUSED, method_findings
from ..methods.resolve import Resolution, keys_as_read, resolve
from ..results.scan import (
    GateSite,
    KnownRisk,
    LaunchSummary,
    MethodSummary,
    PathEntry,
    PathSummary,
    RuleStatus,
    ScanResult,
    TreeSummary,
)
from ..tree.locate import EngineTree
from ..tree.provenance import provenance
from .decide import Decision, Evaluator, decide, entry_findings, obligation_title, path_findings
from .facts import ClassInfo, ReleaseModules, SyntaxProblem, raised_exception
from .gates import KINDS, Candidate
from .index import TreeIndex, build_index
from .landscape import landscape as scan_landscape
from .registry import Registry, RegistryEntry, read_registry
from .resolve import Conformance, Protocol, Resolver
from .ruleset import Verified, load_rules, load_verified
from .runner import LaunchFacts, RunnerChoice, RunnerDecision, Source, for_launch
from .runner import decide as decide_runner
from .runner import refusal as refuse_runner
from .trace import Obligation, TracedPath, load_path_spec, runners_in, runs, trace

_TOKEN_KEY = re.compile(r"(image|media|video|placeholder|img).*_(token_id|token_index)$")


class LaunchJudge:
    """What the kinds and the drafter checks need to judge a launch (the judge.Judge protocol), answered from the
    resolved tree, the registry and the protocols."""

    def __init__(self, launch: Launch, resolver: Resolver, registry: Registry | None, protocols: dict[str, Protocol],
                 resolution: Resolution | None = None):
        if launch.target is None:
            raise ValueError("a launch is judged for a target; a scan with none reports the landscape only")
        self.launch = launch
        self.resolution = resolution
        self.resolver = resolver
        self.registry = registry
        self.protocols = protocols
        self._target = launch.target
        self._arguments: dict[tuple[str, ...], dict[str, Any]] = {}
        self.path: TracedPath | None = None  # the launch's traced path, once traced: what engine_functions prefers

    @property
    def method(self) -> str:
        return self.launch.method or ""  # the release's resolution of it, by the time a launch is judged

    @property
    def release(self) -> TreeIndex:
        return self.resolver.index

    @property
    def runner(self) -> str | None:
        return self.path.runner if self.path is not None else None

    @property
    def target(self) -> Target:
        return self._target

    @property
    def drafter(self) -> Checkpoint | None:
        return self.launch.drafter

    @functools.cached_property
    def _target_class(self) -> tuple[ClassInfo | None, str]:
        """The class the registry maps the target's architectures to, or None and why."""
        architectures = self.target.architectures
        entry = self.registered(architectures)
        if entry is None:
            return None, f"no architecture of {architectures} is registered, so no model class is known"
        found = self.resolver.find_class(entry.module, entry.class_name)
        if isinstance(found, ClassInfo):
            return found, ""
        return None, f"{entry.architecture} -> {entry.module}.{entry.class_name}: {found.reason}"

    def target_class(self) -> ClassInfo | None:
        return self._target_class[0]

    def target_class_problem(self) -> str:
        return self._target_class[1]

    @property
    def registry_read(self) -> bool:
        return self.registry is not None

    @property
    def part_builders(self) -> tuple[str, ...]:
        return load_path_spec(self.resolver.index.tree.engine.name).target_parts.builders

    def registered(self, architectures: Sequence[str]) -> RegistryEntry | None:
        return self.registry.lookup(list(architectures)) if self.registry else None

    def target_conformance(self, protocol: str) -> Conformance | None:
        found = self.protocols.get(protocol)
        cls = self.target_class()
        return self.resolver.conformance(cls, found) if found and cls else None

    def target_has_method(self, method: str) -> Conformance:
        cls = self.target_class()
        if cls is None:
            return Conformance(method, None, (method,), {}, self.target_class_problem())
        return self.resolver.has_members(cls, (method,), method)

    def lineage(self, module: str, class_name: str) -> list[str]:
        return [name for _, name in self.mro(module, class_name)] or [class_name]

    def mro(self, module: str, class_name: str) -> list[tuple[str, str]]:
        found = self.resolver.find_class(module, class_name)
        if not isinstance(found, ClassInfo):
            return []
        return [(c.module, c.name) for c in self.resolver.hierarchy(found).linear if isinstance(c, ClassInfo)]

    def config_class_name(self, owner: str) -> str:
        if owner != "config":
            return owner
        auto = (self.target.config.get("auto_map") or {}).get("AutoConfig")
        return auto.rsplit(".", 1)[-1] if isinstance(auto, str) else "PretrainedConfig"

    def argument_values(self, defaults_files: Sequence[str]) -> dict[str, Any]:
        """The launch's engine arguments: declared defaults, the method, then what the command sets."""
        key = tuple(defaults_files)
        if key not in self._arguments:
            self._arguments[key] = self._argument_values(defaults_files)
        return self._arguments[key]

    def _argument_values(self, defaults_files: Sequence[str]) -> dict[str, Any]:
        index = self.resolver.index
        values: dict[str, Any] = {}
        pattern = re.compile("|".join(fnmatch.translate(g) for g in defaults_files))
        for name, relpath in sorted(index.files.items()):
            module = index.module(name) if pattern.match(relpath) else None
            for cls in (module.classes.values() if module else ()):
                values.update(cls.defaults)
        draft = {"model": self.launch.draft} if self.launch.draft else {}
        values.update(speculative_arguments(index.tree.engine, {**draft, **self.launch.speculative}))
        if self.launch.engine == index.tree.engine.name:
            values.update(self.launch.options)
        # As the engine's own resolution leaves it (NEXTN is EAGLE), before the handlers read it.
        values["speculative_algorithm"] = (self.launch.method or "").upper()
        return values

    def token_attributes(self) -> list[str]:
        return sorted(k for k in self.target.config if _TOKEN_KEY.search(k))

    def engine_functions(self, names: Sequence[str], files: Sequence[str] = ()) -> list[EngineFunction]:
        """Functions of these names: those the traced path follows, or calls from a function it follows (defined in
        that function's module or imported into it); else every one in the files the globs name."""
        index, wanted = self.resolver.index, set(names)
        found: dict[tuple[str, int], EngineFunction] = {}
        for module, qual, node in self._traced_functions:
            if qual.rsplit(".", 1)[-1] in wanted:
                found.setdefault((index.files[module], node.lineno), _function(index.files[module], node, True))
            for call in ast.walk(node):
                func = call.func if isinstance(call, ast.Call) else None
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name in wanted:
                    for relpath, callee in _definitions(index, module, name):
                        found.setdefault((relpath, callee.lineno), _function(relpath, callee, True))
        if found or not files:
            return list(found.values())
        pattern = re.compile("|".join(fnmatch.translate(g) for g in files))
        for module, relpath in sorted(index.files.items()):
            if pattern.match(relpath):
                found |= {(relpath, n.lineno): _function(relpath, n, False)
                          for qual, n in _functions_of(index, module).items() if qual.rsplit(".", 1)[-1] in wanted}
        return list(found.values())

    @functools.cached_property
    def _traced_functions(self) -> list[tuple[str, str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        """The functions the traced path follows, in its order: (module, qualified name, node)."""
        index, found = self.resolver.index, []
        for qualname in dict.fromkeys(self.path.traced if self.path else ()):
            module, _, qual = qualname.partition(":")
            relpath = index.files.get(module)
            try:
                node = index.function(relpath, qual) if relpath else None
            except (SyntaxProblem, OSError):
                node = None
            if node is not None:
                found.append((module, qual, node))
        return found

    def target_method(self, name: str) -> EngineFunction | None:
        cls = self.target_class()
        if cls is None:
            return None
        for base in self.resolver.hierarchy(cls).linear:
            if isinstance(base, ClassInfo):
                node = _functions_of(self.resolver.index, base.module).get(f"{base.name}.{name}")
                if node is not None:
                    return _function(self.resolver.index.files[base.module], node, False)
        return None


def _functions_of(index: TreeIndex, module: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """A module's functions and methods by qualified name (Class.method), from its syntax tree."""
    relpath = index.files.get(module)
    try:
        defs = index.definitions(relpath) if relpath else {}
    except (SyntaxProblem, OSError):
        return {}
    return {qual: node for qual, node in defs.items() if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _definitions(index: TreeIndex, module: str, name: str) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Where a name called in a module is defined: in the module itself (a function, or a method of one of its
    classes), else in the module it is imported from."""
    own = [(index.files[module], n) for qual, n in _functions_of(index, module).items() if qual.rsplit(".", 1)[-1] == name]
    if own:
        return own
    info = index.module(module)
    imported = info.imports.get(name) if info else None
    source = imported.module if imported is not None else None
    if not isinstance(source, str) or source not in index.files:
        return []
    return [(index.files[source], n) for qual, n in _functions_of(index, source).items() if qual == name]


def _function(relpath: str, node: ast.FunctionDef | ast.AsyncFunctionDef, on_path: bool) -> EngineFunction:
    return EngineFunction(relpath, node.lineno, node.name, node, on_path)


@contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """A scan allocates millions of short-lived syntax nodes and almost no cycles: the cycle collector's passes
    over the growing heap cost a quarter of a cold scan. Reference counting still frees everything."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass
class Analysis:
    """A tree indexed, resolved and traced once, with its rules, registry and protocols: what a scan judges a launch
    against, and what patch and matrix judge several launches against without indexing again."""

    tree: EngineTree
    platform: str
    overlay: dict[str, bytes]
    rules: list[Rule]
    index: TreeIndex
    resolver: Resolver
    path: TracedPath  # the default method's path, traced while the tree was indexed
    registry: Registry | None
    protocols: dict[str, Protocol]
    seconds: float  # what building it took
    engine_methods: EngineMethods  # how the engine resolves a launch's method
    methods: dict[str, Method]  # the methods specaudit models for this engine
    verified: Verified | None = None  # the release its code rules were last verified on (rules/verified.yaml)
    _paths: dict[str, TracedPath] = field(default_factory=dict, repr=False)

    def path_for(self, method: str, launch: Launch | None = None) -> TracedPath:
        """The path of a method specaudit models: its roles of the path file, traced once; for a launch, only the
        roles of the model runner it takes (runner.py)."""
        spec = load_path_spec(self.tree.engine.name)
        if launch is not None and launch.target is not None and spec.runner is not None:
            decision = runner_decision(self, spec.runner, launch, method)
            key = f"{method}\0{decision.runner}\0{decision.reason}"
            if key not in self._paths:
                self._paths[key] = trace(self.index, self.resolver, for_launch(spec, decision), method=method)
            return self._paths[key]
        if method == DEFAULT_METHOD:
            return self.path
        if method not in self._paths:
            self._paths[method] = trace(self.index, self.resolver, method=method)
        return self._paths[method]

    @property
    def code_rules(self) -> list[Rule]:
        """The rules with sites in the code (not the drafter checks)."""
        return [r for r in self.rules if not KINDS[r.kind].siteless]

    def sites(self) -> dict[str, list[Site]]:
        """Each code rule's sites, in file order (a fresh dict: a scan filters the candidates' in it)."""
        return {rule.id: sorted(self.index.sites[rule.id], key=lambda s: (s.file, s.line)) for rule in self.code_rules}

    def judge(self, launch: Launch, resolution: Resolution | None = None) -> LaunchJudge:
        return LaunchJudge(launch, self.resolver, self.registry, self.protocols, resolution)


def runner_decision(a: Analysis, choice: RunnerChoice, launch: Launch, method: str) -> RunnerDecision:
    """The model runner the launch takes, as the release's own choice decides it (runner.py), over the launch."""
    present = runners_in(a.index, load_path_spec(a.tree.engine.name))
    return decide_runner(replace(choice, present=present), _source(a), _runner_facts(a, launch, method))


def runner_refusal(a: Analysis, choice: RunnerChoice, launch: Launch, method: str, runner: str) -> Finding | None:
    """Where the runner the launch takes refuses it (the release's own check of that runner, runner.py ``refusal``):
    a gate of the launch's configuration, met before anything loads."""
    found = refuse_runner(choice, _source(a), _runner_facts(a, launch, method), runner)
    if found is None:
        return None
    status = Status.BLOCKS if found.certain else Status.UNDECIDED
    why = (f"the launch takes Model Runner {runner.upper()}, and {found.check} refuses it: "
           f"{found.reason or 'every way through it raises'}" if found.certain else
           f"the launch takes Model Runner {runner.upper()}, and {found.check} refuses it on some ways, depending on "
           f"what is not known before launch ({found.reason})")
    return Finding("model-runner-refuses", f"Model Runner {runner.upper()} refuses the launch", Phase.SPECULATIVE_CONFIG,
                   status, found.file, found.line, found.code, found.error, why,
                   "Launch with what this runner supports, or on a platform and configuration that take the other "
                   "runner (the scan's runner line says why this one is taken).")


def _source(a: Analysis) -> Source:
    """The release's modules as the runner choice reads them."""
    code = ReleaseModules(a.index)
    return Source(code.module_tree, code.environment, code.memo)


def _runner_facts(a: Analysis, launch: Launch, method: str) -> LaunchFacts:
    judge = a.judge(launch)
    target = launch.target
    assert target is not None
    options = launch.options if launch.engine == a.tree.engine.name else {}
    evaluator = Evaluator(a.resolver, target, judge.target_class(), method, a.path, judge.target_class_problem(),
                          options, a.registry)

    def read_target(expression: str) -> tuple[bool, Any]:
        value = evaluator.eval(ast.parse(expression, mode="eval").body, {}, "")
        known = isinstance(value, (bool, int, float, str, type(None), list, tuple, dict))
        return (True, value) if known else (False, str(getattr(value, "why", value)))

    return LaunchFacts(method=method, options=dict(options), speculative=dict(launch.speculative), env=dict(launch.env),
                       config=target.config, text_config=target.text_config,
                       draft_config=launch.drafter.config if launch.drafter else {}, platform=a.platform,
                       target=read_target)


def analyze(tree: EngineTree, rules: list[Rule] | None = None, overlay: dict[str, bytes] | None = None,
            platform: str = "cuda") -> Analysis:
    """Index the tree (the files the rules and the path need), resolve it, trace the default method's path. ``overlay``
    replaces files' contents; ``platform`` picks the branch of the engine's platform dispatches that is read."""
    started = time.perf_counter()
    rules = rules if rules is not None else load_rules(tree.engine.name)
    eager = [m for m in (tree.engine.interfaces_module, tree.engine.registry_module) if m]
    traced: list[tuple[Resolver, TracedPath]] = []

    def trace_path(index: TreeIndex) -> None:  # while the pool parses the models package, which it seldom reads
        resolver = Resolver(index)
        traced.append((resolver, trace(index, resolver)))

    with _without_cycle_collection():
        index = build_index(tree, eager_modules=eager, rules=[r for r in rules if not KINDS[r.kind].siteless],
                            overlay=overlay, platform=platform, alongside=trace_path)
        resolver, path = traced[0]
        registry = read_registry(resolver)
        protocols = resolver.protocols(tree.engine.interfaces_module) if tree.engine.interfaces_module else {}
    engine = tree.engine.name
    return Analysis(tree, platform, dict(overlay or {}), rules, index, resolver, path, registry, protocols,
                    time.perf_counter() - started, load_engine_methods(engine), load_methods(engine),
                    load_verified(engine))


def scan(tree: EngineTree, launch: Launch | None, rules: list[Rule] | None = None,
         overlay: dict[str, bytes] | None = None, platform: str = "cuda") -> ScanResult:
    """Audit a tree for a launch (None: the landscape only)."""
    # One region for both stages, left once the analysis is dropped: the syntax trees and facts it holds are freed by
    # reference counting, where the collector's first pass after each stage's region traversed them all (0.05 s of a
    # warm scan).
    with _without_cycle_collection():
        return _audit(analyze(tree, rules, overlay, platform), launch)


def audit(analysis: Analysis, launch: Launch | None) -> ScanResult:
    """Judge a launch (None: the landscape only) against an analysed tree: the scan result."""
    with _without_cycle_collection():
        return _audit(analysis, launch)


def _audit(analysis: Analysis, launch: Launch | None) -> ScanResult:
    started = time.perf_counter()
    a = analysis
    sites = a.sites()
    findings: list[Finding] = []
    candidates: list[Finding] = []
    decided: dict[str, int] = {}
    summary: MethodSummary | None = None
    stop: list[Finding] = []  # the method's own gates: it is not in the release, not modeled, or not told
    method = DEFAULT_METHOD  # a landscape scan shows the default method's
    refused: Finding | None = None  # where the engine's resolving code refuses this launch: a gate like the others
    resolution: Resolution | None = None  # the engine's resolving code, played out on the launch's values
    if launch is not None and launch.target is not None:
        launch, stop, summary, resolution = _with_method(a, launch)
        method = launch.method or ""
        refused = next((f for f in stop if f.rule_id == REFUSED and method in a.methods), None)
        stop = [f for f in stop if f is not refused]
    path = a.path_for(method, launch) if not stop else None
    # A method's rules are the ones that name it; where its path is not modeled, only the rules of every method.
    rules = [r for r in a.rules if applies(r.methods, method) and (path is not None or "*" in r.methods)]
    gate_rules = [r for r in rules if not KINDS[r.kind].siteless and r.kind != "candidate"]
    if launch is not None and launch.target is not None:
        judge = a.judge(launch, resolution)
        judge.path = path
        for rule in gate_rules:
            findings += [KINDS[rule.kind].judge(rule, site, judge) for site in sites[rule.id]]
        findings += unverified_gates(a, gate_rules, sites)
        for rule in rules:
            if KINDS[rule.kind].siteless:
                finding = KINDS[rule.kind].judge_launch(rule, judge)
                # Placed where the path meets its landmark; with none, after the rest of its phase.
                # the phase of the role it is met in: a runner loads its draft in a phase of its own.
                step = path.landmarks.get(rule.at or "", 0) if path else 0
                phase = path.landmark_phases.get(rule.at or "") if path else None
                findings += [replace(finding, step=step, phase=Phase(phase) if phase else finding.phase)] \
                    if finding else []
        findings = _merge_repeats(findings, a.rules)
        spec = load_path_spec(a.tree.engine.name)
        if path is not None and spec.runner is not None and path.runner in (spec.runner.when_true,
                                                                              spec.runner.when_false):
            refused_runner = runner_refusal(a, spec.runner, launch, method, path.runner)
            findings += [refused_runner] if refused_runner is not None else []
        decisions = []
        if path is not None and resolution is not None:
            options = launch.options if launch.engine == a.tree.engine.name else {}
            spec = load_path_spec(a.tree.engine.name)
            fixed = dict(dict(spec.runner.platforms).get(a.platform, ())) if spec.runner is not None else {}
            evaluator = Evaluator(a.resolver, launch.target, judge.target_class(), method, path,
                                  judge.target_class_problem(), options, a.registry, launch.speculative, fixed,
                                  resolution.fields, speculative_member=resolution.member,
                                  draft_config=launch.drafter.config if launch.drafter is not None else None)
            decisions = settled(decide(path, evaluator), resolution, a.index)
        for decision in decisions:
            decided[decision.status] = decided.get(decision.status, 0) + 1
        findings = stop + (_with_path(findings, decisions, sites, path) if path is not None else _in_order(findings))
        if refused is not None:
            findings = _with_refusal(findings, refused, sites)
    # A candidate on lines a rule already claims is that rule's gate, not an unclassified one.
    claimed = {(s.file, line) for rule in gate_rules for s in sites[rule.id] for line in range(s.line, s.end_line + 1)}
    for rule in rules:
        if rule.kind == "candidate":
            sites[rule.id] = [site for site in sites[rule.id] if (site.file, site.line) not in claimed]
            candidates += [Candidate.unclassified(rule, site) for site in sites[rule.id]]

    shown = a.methods.get(method) or a.methods[DEFAULT_METHOD]  # an unmodeled method's launch: the default's
    landscape = scan_landscape(a.index, a.resolver, a.registry, a.protocols, a.path_for(shown.name), shown)
    # The files this scan read: hashing the whole tree would cost more than the scan does.
    read = provenance(a.tree, [rel for rel in a.index.digests if rel.endswith(".py") and rel not in a.overlay],
                      a.overlay, a.index.sha256)
    a.index.save()
    return ScanResult(
        tree=TreeSummary(a.tree.engine.name, a.tree.version, str(a.tree.root), a.tree.origin, a.platform,
                         _platform_branches(a.index, a.registry, launch, path)),
        launch=LaunchSummary.of(launch) if launch else None,
        verdict=_verdict(findings, launch),
        findings=findings,
        candidates=candidates,
        rules=[RuleStatus(r.id, r.title, r.kind, r.phase, len(sites[r.id])) for r in a.code_rules],
        path=_path_summary(path, decided),
        landscape=landscape,
        skipped=dict(sorted(a.index.skipped.items())),
        files_indexed=len(a.index.digests),
        seconds=round(a.seconds + time.perf_counter() - started, 3),
        gates=_gate_sites(gate_rules, sites, path),
        provenance=read,
        method=summary,
        known_failures=_known(a, launch, method) if launch is not None and launch.target is not None else [],
    )


def _known(a: Analysis, launch: Launch, method: str) -> list[KnownRisk]:
    """The known runtime failures of the launch's cell: its release, the features its command sets, its method."""
    engine = a.tree.engine.name
    options = launch.options if launch.engine == engine else {}
    return [KnownRisk(f.id, f.title, f.hint)
            for f in known_failures(engine, a.tree.version, launch_features(engine, options), method or None)]


def _with_method(a: Analysis, launch: Launch) -> tuple[Launch, list[Finding], MethodSummary, Resolution]:
    """The launch with the method the release resolves it to; the findings that stand for the whole launch when
    that method is not one to judge; what the report says of the method; and the resolution itself."""
    code = ReleaseModules(a.index, a.registry)
    launch = keys_as_read(launch, code, a.engine_methods)
    resolution = resolve(launch, code, a.engine_methods)
    stop = method_findings(resolution, a.methods, a.engine_methods)
    summary = MethodSummary(resolution.requested, resolution.method, resolution.method in a.methods, resolution.how,
                            resolution.release_methods, resolution.listed_at, _draft_text(resolution.draft_config,
                                                                                          launch),
                            resolution.warnings)
    return (replace(launch, method=resolution.method) if resolution.method else launch), stop, summary, resolution


def unverified_gates(a: Analysis, rules: Sequence[Rule], sites: dict[str, list[Site]]) -> list[Finding]:
    """The gates of a release newer than the one the rules were verified on whose code is not found: a rule with code
    of its shape there and none here may have moved, not gone, so the gate is not known (UNKNOWN, never passed)."""
    verified = a.verified
    if verified is None or not verified.unverified(a.tree.version):
        return []
    engine = a.tree.engine.name
    return [Finding(rule.id, rule.title, rule.phase, Status.UNKNOWN, rule.files[0] if rule.files else "", 0, "", None,
                    f"no code of this gate's shape in {engine} {a.tree.version}, where {engine} {verified.release}, the "
                    "newest release specaudit's rules were verified on, has it: whether the gate went or moved was not "
                    "checked", "If the gate is gone, nothing stops the launch here; if its code moved or changed shape, "
                    "the rule's files or shape need updating (rules/README.md, \"A new release\").")
            for rule in rules if not sites[rule.id] and rule.id in verified.with_sites]


def settled(decisions: list[Decision], resolution: Resolution, index: TreeIndex) -> list[Decision]:
    """The path's decisions, with the raises of the engine's resolving code that no way of this launch reaches
    passed: played out statement by statement on the launch's values, that code decides them where the path's
    reading, one condition at a time, could not (a field the code fills in before it checks it). A raise is not
    reached where its own line is not, or the line of a call on the way to it. Where that code refuses the launch,
    the refusal is the speculative config's one gate: that code runs its checks in order and stops at the first
    that fails, and what it would check after depends on how the refusal is fixed."""
    coverage = resolution.coverage
    if resolution.stops is not None:
        decisions = [d for d in decisions if d.obligation.phase != Phase.SPECULATIVE_CONFIG]

    def not_reached(o: Obligation) -> bool:
        if coverage.not_reached(o.file, o.line):
            return True
        for step in o.via:  # "module:Qual.name (line N)"
            qualname, _, line = step.rstrip(")").partition(" (line ")
            module = index.module(qualname.partition(":")[0])
            if module is not None and line.isdigit() and coverage.not_reached(module.path, int(line)):
                return True
        return False

    def unread(d: Decision) -> Decision:
        # A gate the launch's own bound facts decide, where the scan could not read one: not undecided, UNKNOWN.
        call = coverage.unread_at(d.obligation.file, d.obligation.line) \
            if d.status is Status.UNDECIDED and d.obligation.kind in ("raise", "assert") else None
        return replace(d, status=Status.UNKNOWN, unknown=call,
                       why=f"{d.why}; it turns on {call}, which this scan could not read (for an optional package: "
                           "scan the environment the engine is installed in)") if call else d

    decisions = [unread(d) for d in decisions]
    decisions = [replace(d, status=Status.PASSES, error=None, bypassed=True,
                         why="not reached: the engine's resolving code, played out on this launch's values, takes no "
                             "way to it") if d.obligation.kind in ("raise", "assert") and d.status is not Status.PASSES
                 and not_reached(d.obligation) else d for d in decisions]
    if resolution.stops is not None:
        return decisions
    return decisions + opaque_raises(resolution, index, {(d.obligation.file, d.obligation.line) for d in decisions})


def opaque_raises(resolution: Resolution, index: TreeIndex, judged: set[tuple[str, int]]) -> list[Decision]:
    """The raises and asserts of the engine's resolving code inside a statement it played but could not play out on
    this launch's values (an ``if`` on what the scan does not know, a loop, an except clause), that the traced path
    does not judge (``judged``): whether the launch meets them is not known, so each is undecided, never passed in
    silence. A way that ends in a raise is the refusal (``stops``), not these."""
    coverage = resolution.coverage
    found: dict[tuple[str, int], Decision] = {}
    for where, first, last in sorted(coverage.opaque, key=lambda s: s[2] - s[1], reverse=True):
        if not any(w == where and f <= first and last <= e for w, f, e in coverage.played):
            continue  # a function that raised while played: what it would do is the player's problem, said elsewhere
        try:
            raises, heads = index.kept(where, "raise-sites", functools.partial(_raise_sites, index, where))
        except (SyntaxProblem, OSError):
            continue
        module = next((m for m, rel in index.files.items() if rel == where), where)
        for kind, line, end, qualname, (start, stop), exception, message, code in raises:
            if not first <= line <= last or not start <= first <= stop or (where, line) in judged:
                continue
            statement = heads.get((first, last)) or index.source(where).decode("utf-8", "replace") \
                .splitlines()[first - 1].strip()  # a span that is no statement: its first line
            o = Obligation(kind, "method resolution", Phase.SPECULATIVE_CONFIG.value, module, where, line,
                           end, code, f"{module}:{qualname}", (), (), exception, message)
            error = f"{exception}: {message}" if message else exception
            # The innermost statement not played out holds it: the spans are walked widest first.
            found[(where, line)] = Decision(
                o, Status.UNDECIDED,
                f"in the engine's resolving code, under a statement the scan could not play out on this launch's "
                f"values (line {first}: `{statement}`): whether the launch meets this raise is not known",
                error.replace("{", "<").replace("}", ">") if error else None, unknown=statement)
    return list(found.values())


def _raise_sites(index: TreeIndex, relpath: str) -> tuple[list[tuple], dict[tuple[int, int], str]]:
    """A module's raises and asserts, each with the function whose own body holds it (its qualified name and span),
    its exception, message and line; and the head of each statement that holds one, by its span (what
    ``opaque_raises`` reads of a file, kept by the file's content: a warm scan does not parse it)."""
    tree, lines = index.syntax(relpath), index.source(relpath).decode("utf-8", "replace").splitlines()
    raises: list[tuple] = []
    heads: dict[tuple[int, int], str] = {}
    for function, qualname in _functions_with_names(tree):
        for node in ast.walk(function):
            if not isinstance(node, (ast.Raise, ast.Assert)) or _innermost_function(function, node) is not function:
                continue
            exception, message = (raised_exception(node.exc) if isinstance(node, ast.Raise) and node.exc
                                  else ("AssertionError", None))
            raises.append(("raise" if isinstance(node, ast.Raise) else "assert", node.lineno,
                           node.end_lineno or node.lineno, qualname,
                           (function.lineno, function.end_lineno or function.lineno), exception, message,
                           lines[node.lineno - 1].strip()))
    marked = sorted({line for _, line, *_ in raises})
    for node in ast.walk(tree):
        first, last = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        if not isinstance(first, int) or not isinstance(last, int):
            continue
        at = bisect.bisect_left(marked, first)
        head = _statement_head(node) if at < len(marked) and marked[at] <= last else None
        if head is not None:
            heads.setdefault((first, last), head)
    return raises, heads


def _statement_head(node: ast.AST) -> str | None:
    """A statement (or except clause) as its head reads: ``if <test>``, ``for <target> in <iter>``, ``except <type>``,
    cut at 120 characters."""
    if isinstance(node, (ast.If, ast.While)):
        head = f"{'if' if isinstance(node, ast.If) else 'while'} {ast.unparse(node.test)}"
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        head = f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}"
    elif isinstance(node, ast.ExceptHandler):
        head = f"except {ast.unparse(node.type)}" if node.type is not None else "except"
    elif isinstance(node, ast.stmt):
        head = ast.unparse(node).splitlines()[0]
    else:
        return None
    head = " ".join(head.split())
    return head if len(head) <= 120 else head[:117] + "..."


def _functions_with_names(tree: ast.Module) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """Every function of a module, with its qualified name (``Class.method``, ``outer.inner``)."""
    def walk(body: list[ast.stmt], prefix: str) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield stmt, prefix + stmt.name
                yield from walk(stmt.body, f"{prefix}{stmt.name}.")
            elif isinstance(stmt, ast.ClassDef):
                yield from walk(stmt.body, f"{prefix}{stmt.name}.")
            elif isinstance(stmt, (ast.If, ast.Try)):
                yield from walk(stmt.body + stmt.orelse, prefix)
    yield from walk(tree.body, "")


def _innermost_function(function: ast.AST, node: ast.AST) -> ast.AST:
    """The function among ``function`` and those nested in it whose body holds ``node``."""
    for inner in ast.walk(function):
        if inner is not function and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) \
                and any(n is node for n in ast.walk(inner)):
            return _innermost_function(inner, node)
    return function


def _draft_text(draft: dict | None, launch: Launch) -> str:
    """The draft the engine builds, where its rewrite made it another model than the checkpoint's config says."""
    source = launch.drafter.config if launch.drafter is not None else launch.target.config if launch.target else {}
    if not draft or draft.get("architectures") == source.get("architectures"):
        return ""
    n_predict = draft.get("n_predict")
    layers = f", {n_predict} MTP layer(s) (n_predict)" if isinstance(n_predict, int) else ""
    return f"{', '.join(map(str, draft.get('architectures') or []))} (model type {draft.get('model_type')}{layers})"


def _path_summary(path: TracedPath | None, decided: dict[str, int]) -> PathSummary:
    if path is None:
        return PathSummary(None, "no path: specaudit does not model the launch's method", [], 0, 0, {})
    entries = [PathEntry(e.role, e.function, e.file, e.line, e.problem) for e in path.entries
               if runs(e.runner, path.runner)]
    return PathSummary(path.runner, path.runner_reason, entries, len(set(path.traced)), len(path.obligations),
                       dict(sorted(decided.items())))


def _gate_sites(rules: list[Rule], sites: dict[str, list], path: TracedPath | None) -> list[GateSite]:
    """Every place a launch can be stopped: the rules' sites and the traced path's obligations, one per place."""
    found = {(s.file, s.line, s.end_line): GateSite(rule.id, rule.title, s.file, s.line, s.end_line)
             for rule in rules for s in sites[rule.id]}
    for o in (path.obligations if path else ()):
        found.setdefault((o.file, o.line, o.end_line), GateSite(f"path-{o.kind}", obligation_title(o), o.file, o.line,
                                                                o.end_line))
    return sorted(found.values(), key=lambda g: (g.file, g.line, g.end_line))


def _platform_branches(index: TreeIndex, registry: Registry | None, launch: Launch | None,
                       path: TracedPath | None) -> tuple[str, ...]:
    modules = {traced.partition(":")[0] for traced in path.traced} if path else set()
    if registry is not None and launch is None:
        modules |= {e.module for e in registry.entries.values()}
    elif registry is not None and launch is not None and launch.target is not None:
        entry = registry.lookup(launch.target.architectures)
        modules |= {entry.module} if entry else set()
    return tuple(f"{info.path}:{line} {branch}" for name in sorted(modules) if (info := index.modules.get(name))
                 for line, branch in info.platform_branches)


def _merge_repeats(findings: list[Finding], rules: list[Rule]) -> list[Finding]:
    """One finding per rule and outcome: an engine that calls the same method from three places has one
    gate, met first at the first place; the others are listed with it."""
    merged: dict[tuple, Finding] = {}
    kinds = {r.id: r.kind for r in rules}
    for finding in sorted(findings, key=lambda f: (f.file, f.line)):
        if not KINDS[kinds[finding.rule_id]].merge_repeats:
            merged[(finding.rule_id, finding.file, finding.line)] = finding
            continue
        key = (finding.rule_id, finding.status, finding.error)
        first = merged.get(key)
        merged[key] = replace(first, also=first.also + (finding.location,)) if first else finding
    return list(merged.values())


def _with_path(findings: list[Finding], decisions: list, sites: dict[str, list], path: TracedPath) -> list[Finding]:
    """The rules' findings, placed where the traced path meets them, and the path's own gates that no rule
    names; all in the order the launch meets them."""
    spans = {(f.rule_id, s.file, s.line): s.end_line for f in findings for s in sites.get(f.rule_id, ())}
    steps: dict[int, int] = {}
    unclaimed = []
    for decision in decisions:
        o = decision.obligation
        claimant = next((i for i, f in enumerate(findings) if f.file == o.file
                         and f.line <= o.line <= spans.get((f.rule_id, f.file, f.line), f.line)), None)
        if claimant is None or (decision.status == Status.BLOCKS
                                    and findings[claimant].status in (Status.PASSES, Status.NOT_APPLICABLE)):
            # No rule names it, or the rule lets pass what the path shows blocks: the worse answer stands.
            unclaimed.append(decision)
            continue
        steps[claimant] = min(steps.get(claimant, o.step), o.step)
        rule_finding = findings[claimant]
        if rule_finding.status == Status.BLOCKS and decision.status == Status.PASSES \
                and decision.bypassed:
            # The rule judges the gate; the path shows this launch does not reach it (a drafter without aux states
            # skips the runner's EAGLE-3 interface check): a gate not reached stops nothing.
            findings[claimant] = replace(rule_finding, status=Status.NOT_APPLICABLE,
                                         why=f"{decision.why} (on the traced path; the gate itself: {rule_finding.why})")
            continue
        if rule_finding.status == Status.UNKNOWN and decision.status in (Status.BLOCKS, Status.PASSES):
            # The rule could not read this shape; the traced path could.
            findings[claimant] = replace(rule_finding, status=decision.status, why=f"{decision.why} (decided on the "
                                         f"traced path: {rule_finding.why})", error=decision.error or rule_finding.error)
    placed = [replace(f, step=steps[i]) if i in steps else f for i, f in enumerate(findings)]
    # A rule's gate in the file of another model runner's role (V1's load_model on a launch that takes V2): the
    # launch never runs that file's code, so its gate stops nothing.
    taken = {e.file for e in path.entries if e.file and runs(e.runner, path.runner)}
    other = {e.file for e in path.entries if e.file and not runs(e.runner, path.runner)} - taken
    placed = [replace(f, status=Status.NOT_APPLICABLE, why=f"not on this launch's path: it runs Model Runner "
                      f"{path.runner}, and {f.file} is another runner's ({f.why})")
              if f.status == Status.BLOCKS and f.file in other and not f.rule_id.startswith("path-") else f
              for f in placed]
    return _in_order(placed + path_findings(unclaimed) + entry_findings(path))


def _with_refusal(findings: list[Finding], refused: Finding, sites: dict[str, list]) -> list[Finding]:
    """The raise the engine's resolving code meets on every way, among the other gates: a rule whose site holds it
    is that gate, and blocks; the traced path's own reading of that raise gives way to the played-out one."""
    spans = {(f.rule_id, s.file, s.line): s.end_line for f in findings for s in sites.get(f.rule_id, ())}
    kept, claimed = [], False
    for f in findings:
        if f.file == refused.file and f.line <= refused.line <= spans.get((f.rule_id, f.file, f.line), f.line):
            if f.rule_id.startswith("path-"):
                continue
            claimed = True
            if f.status != Status.BLOCKS:
                f = replace(f, status=Status.BLOCKS, error=f.error or refused.error,
                            why=f"{refused.why} (decided by playing out the engine's resolving code: {f.why})")
        kept.append(f)
    return kept if claimed else _in_order(kept + [refused])


def _in_order(findings: list[Finding]) -> list[Finding]:
    """In the order the launch meets them: by phase, then where the path meets them."""
    return sorted(findings, key=lambda f: (PHASES.index(f.phase), f.step or 10**9, f.file, f.line))


_UNTRACED = ("path-entry", "path-unparsed")  # decide.entry_findings: a stage of the path not traced


def _verdict(findings: list[Finding], launch: Launch | None) -> Verdict:
    # A warning (Status.WARNS: the drafter helps, less) is no part of it: a launch with warnings is as READY as without.
    if launch is None or launch.target is None:
        return Verdict.LANDSCAPE
    statuses = {f.status for f in findings}
    if Status.BLOCKS in statuses:
        return Verdict.BLOCKED
    # DEGRADED says the launch runs: not earned where a stage of its path is not in the tree, or does not parse.
    untraced = any(f.rule_id in _UNTRACED and f.status == Status.UNKNOWN for f in findings)
    if Status.DEGRADES in statuses and not untraced:  # known not to help, whatever the undecided gates turn out to be
        return Verdict.DEGRADED
    if Status.UNKNOWN in statuses:
        return Verdict.UNKNOWN
    return Verdict.READY
