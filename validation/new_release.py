"""The day-one drill for a release no test covers yet: what of specaudit's own data no longer meets the release's code,
what changed in its speculative decoding, and how the scan judges validation/methods.py's launches on it before any
change to specaudit, each beside the newest release the tests cover.

    python validation/new_release.py vllm==0.34.0                              # against vllm 0.33.0
    python validation/new_release.py sglang==0.5.23 --against sglang==0.5.17

The old release is `--against`, by default the newest release of the engine that validation/methods.py covers (its
RELEASES), other than the new one. Both are read through specaudit's own code, never imported, and nothing below is a
list of expected changes: every line of the report is a difference between what that code reads in the two trees.

- Path entries: every entry of every role in rules/paths/<engine>.yaml, and the runner section's decision, its
  validators and its defaults file, looked up as the tracer looks an entry up (trace.Tracer.find); those found in the
  old release and not in the new, and the roles left with no entry at all. The same for the functions and classes
  rules/methods/<engine>.yaml names (the method's resolvers, its fields class).
- Rules: those of rules/<engine>/ whose `files:` globs match no file of the new release where they matched some of the
  old (as the index matches them), and the code rules whose shape has sites in the old release and none in the new
  (analysis.index.sites).
- Methods: the release's own list of speculative methods, as methods/resolve.py reads it for every scan.
- Classes and raise sites of the speculative-decoding packages: the packages of the modules the path and methods
  files name whose name says so (spec_decode, speculative...), read from the index's ModuleInfo and syntax trees;
  raises are compared by file, function, exception and message template, never by line; a class that only changed
  module, or a raise whose exception and message only changed function or file, is listed as moved.
- Config fields: the speculative config class's (the methods file's `fields`), or where it names none (SGLang), the
  speculative_* fields of the classes the argument gates read the arguments' defaults from.
- Verdicts: every launch of validation/methods.py (its launches_of and hold) scanned on both releases, side by side;
  where the scan itself crashes, the crash is that launch's outcome.

The report is printed and written to validation/new-release/<engine>-<version>.md. Exit 0 with a report; 2, with one
line, on bad input (an unknown release, no network to fetch it).

Once the release's work is done (its tests pass, the report's rules resolve or are known gone), `--verified` records it
in rules/verified.yaml as the release the engine's rules were verified on, with the code rules that have sites in it:
on a newer release, those whose code is not found are UNKNOWN in every scan until the drill is run on it.

    python validation/new_release.py vllm==0.34.0 --verified
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import os
import re
import sys
import time
import traceback
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parent))

import methods  # noqa: E402  (validation/methods.py: the launches, and how each is scanned and held)
import yaml  # noqa: E402
from packaging.version import InvalidVersion, Version  # noqa: E402

import specaudit  # noqa: E402
from specaudit.core.errors import SpecauditError  # noqa: E402
from specaudit.launch.request import Launch  # noqa: E402
from specaudit.launch.target import load_preset  # noqa: E402
from specaudit.methods.resolve import resolve  # noqa: E402
from specaudit.play.libraries.environ import declared_default  # noqa: E402
from specaudit.scan.audit import Analysis, analyze  # noqa: E402
from specaudit.scan.facts import ClassInfo, ReleaseModules, SyntaxProblem, raised_exception  # noqa: E402
from specaudit.scan.gates import KINDS  # noqa: E402
from specaudit.scan.index import TreeIndex  # noqa: E402
from specaudit.scan.trace import PathSpec, Tracer, load_path_spec  # noqa: E402
from specaudit.tree.locate import EngineTree, locate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "validation" / "new-release"


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # bad usage is bad input: one line, exit 2, as everywhere else
        raise SpecauditError(message)


@dataclass(frozen=True)
class Release:
    tree: EngineTree
    analysis: Analysis
    tracer: Tracer  # looks entries up as the scan's tracer does

    @property
    def index(self) -> TreeIndex:
        return self.analysis.index

    @property
    def label(self) -> str:
        return self.tree.label


def shown(text: str) -> str:
    """Paths under the home directory as a user writes them (~/.cache/...), as specaudit's own reports do."""
    home = str(Path.home()).rstrip("/") if os.environ.get("HOME", "").strip("/") else ""
    return text.replace(home + "/", "~/") if home else text


# ---------------------------------------------------------------------------------------------------------------------
# The releases


def covered(engine: str) -> list[str]:
    """The releases of the engine validation/methods.py covers, newest first."""
    return sorted((r for r in methods.RELEASES if r.partition("==")[0] == engine),
                  key=lambda r: Version(r.partition("==")[2]), reverse=True)


def default_against(tree: EngineTree) -> str:
    """The newest covered release of the tree's engine, other than the tree's own release."""
    others = [r for r in covered(tree.engine.name) if Version(r.partition("==")[2]) != Version(tree.version)]
    if not others:
        raise SpecauditError(f"validation/methods.py covers no other {tree.engine.name} release: name one with --against")
    return others[0]


def load(tree: EngineTree) -> Release:
    analysis = analyze(tree)
    return Release(tree, analysis, Tracer(analysis.index, analysis.resolver, load_path_spec(tree.engine.name)))


# ---------------------------------------------------------------------------------------------------------------------
# Path entries and the methods file's references


@dataclass(frozen=True)
class Entry:
    where: str  # the role, or the section of the file, that names it
    entry: str  # as the file writes it
    old: str  # "" where it resolves there, else why not
    new: str
    fallback: str = ""  # for a role's entry: the entry the role resolves by in the new release, if any


def resolves(release: Release, entry: str) -> str:
    """'' where the tracer finds ``module:Class.method`` or ``module:function`` in the release, else why not."""
    found = release.tracer.find(entry)
    return found if isinstance(found, str) else ""


def module_resolves(release: Release, name: str) -> str:
    if release.index.module(name) is not None:
        return ""
    return f"{name} {'could not be parsed' if release.index.has_module(name) else 'is not in this tree'}"


def class_resolves(release: Release, spec: str) -> str:
    module_name, _, class_name = spec.partition(":")
    module = release.index.module(module_name)
    if module is None:
        return module_resolves(release, module_name)
    return "" if class_name in module.classes else f"{module_name} defines no class {class_name}"


def path_entries(old: Release, new: Release, spec: PathSpec) -> list[Entry]:
    """Every role's entries, each looked up in both releases; with the entry the role now resolves by."""
    found = []
    for role in spec.roles:
        in_new = {e: resolves(new, e) for e in role.entries}
        fallback = next((e for e, problem in in_new.items() if not problem), "")
        found += [Entry(role.name, e, resolves(old, e), in_new[e], fallback) for e in role.entries]
    return found


def runner_entries(old: Release, new: Release, spec: PathSpec) -> list[Entry]:
    """The runner section's decision and validators (methods of the decision's class), its defaults file, and the
    variable that file must declare."""
    runner = spec.runner
    if runner is None:
        return []
    found = []
    if runner.decision:
        owner = runner.decision.rpartition(".")[0]  # module:Class
        checks = [("decision", runner.decision)] + [(f"validate ({r})", f"{owner}.{name}") for r, name in runner.validate]
        found += [Entry(f"runner: {what}", e, resolves(old, e), resolves(new, e)) for what, e in checks]
    if runner.defaults_file:
        found.append(Entry("runner: defaults_file", runner.defaults_file, module_resolves(old, runner.defaults_file),
                           module_resolves(new, runner.defaults_file)))
        if runner.variable:
            found.append(Entry("runner: variable", f"{runner.variable} in {runner.defaults_file}",
                               declares(old, runner.defaults_file, runner.variable),
                               declares(new, runner.defaults_file, runner.variable)))
    return found


def declares(release: Release, module_name: str, variable: str) -> str:
    """Whether the defaults file reads the variable from the environment, as the runner choice reads its default
    there (play.libraries.environ.declared_default)."""
    module = release.index.module(module_name)
    if module is None:
        return module_resolves(release, module_name)
    declared, _ = declared_default(release.index.syntax(module.path), variable)
    return "" if declared else f"{module.path} does not read {variable} from the environment"


def methods_file_entries(old: Release, new: Release) -> list[Entry]:
    """The functions and classes rules/methods/<engine>.yaml names: the resolvers, the draft rewrite, the keys'
    builder, the plugin API (alternatives: the first the release defines is read), and the fields class."""
    spec = new.analysis.engine_methods
    functions = [("resolver", f) for r in spec.resolvers for f in r.functions]
    functions += [("draft_config", f) for f in (spec.draft_config.functions if spec.draft_config else ())]
    functions += [("keys_from", f) for f in spec.keys_from] + [("plugins", f) for f in spec.plugins]
    found = [Entry(f"methods: {what}", f, resolves(old, f), resolves(new, f)) for what, f in functions]
    classes = [("fields", c) for c in spec.fields] + [(f"classes ({k})", c) for k, v in spec.classes.items() for c in v]
    return found + [Entry(f"methods: {what}", c, class_resolves(old, c), class_resolves(new, c)) for what, c in classes]


def lost(entries: Iterable[Entry]) -> list[Entry]:
    """The entries the old release resolves and the new one does not."""
    return [e for e in entries if not e.old and e.new]


# ---------------------------------------------------------------------------------------------------------------------
# Rules


@dataclass(frozen=True)
class RuleChange:
    rule: str
    kind: str
    files_old: int  # files its globs match
    files_new: int
    sites_old: int | None  # None: a rule with no sites in the code (a drafter check)
    sites_new: int | None

    @property
    def no_longer(self) -> str:
        """Why the rule no longer resolves in the new release ('' where it still does)."""
        if self.files_old and not self.files_new:
            return "its files match nothing"
        if self.sites_old and not self.sites_new:
            return "its shape is found nowhere"
        return ""


def matched_files(index: TreeIndex, globs: Iterable[str]) -> int:
    """How many of the tree's files the globs match, as build_index sends a rule to its files."""
    pattern = re.compile("|".join(fnmatch.translate(g) for g in globs))
    return sum(bool(pattern.match(relpath)) for relpath in index.files.values())


def rule_changes(old: Release, new: Release) -> list[RuleChange]:
    """Every rule that no longer resolves, or whose shape's sites changed in number. (How many files a rule's
    globs match changes with every release: only none is news.)"""
    changes = []
    for rule in new.analysis.rules:
        siteless = KINDS[rule.kind].siteless
        change = RuleChange(rule.id, rule.kind, matched_files(old.index, rule.files), matched_files(new.index, rule.files),
                            None if siteless else len(old.index.sites.get(rule.id, ())),
                            None if siteless else len(new.index.sites.get(rule.id, ())))
        if change.no_longer or change.sites_old != change.sites_new:
            changes.append(change)
    return changes


# ---------------------------------------------------------------------------------------------------------------------
# Methods, classes, fields and raise sites of the speculative-decoding packages


def release_methods(release: Release) -> tuple[tuple[str, ...], str]:
    """The release's own list of methods and where it is declared, as every scan reads it (methods/resolve.py)."""
    launch = Launch(load_preset(methods.PRESETS[0]), engine=release.tree.engine.name)
    found = resolve(launch, ReleaseModules(release.index), release.analysis.engine_methods)
    return tuple(sorted(found.release_methods)), found.listed_at


def named_modules(spec: PathSpec, release: Release) -> set[str]:
    """The modules the path file and the methods file name."""
    engine = release.analysis.engine_methods
    named = [e for role in spec.roles for e in role.entries] + [spec.runner.decision if spec.runner else ""]
    named += list(engine.listed_in) + [f for r in engine.resolvers for f in r.functions] + list(engine.fields)
    return {n.partition(":")[0] for n in named if n}


def package_prefixes(spec: PathSpec, release: Release) -> set[str]:
    """The speculative-decoding packages, as path prefixes: of each module the path and methods files name, its first
    package (or the module itself) whose name says speculative decoding (``spec_decode``, ``speculative``...):
    ``vllm/v1/spec_decode/``, and ``vllm/config/speculative`` for that module and its siblings speculative_*.py."""
    prefixes = set()
    for name in named_modules(spec, release):
        parts = name.split(".")
        at = next((i for i, part in enumerate(parts) if part.startswith("spec")), None)
        if at is None:
            continue
        dotted = ".".join(parts[:at + 1])
        relpath = release.index.files.get(dotted)
        if relpath is None or relpath.endswith("/__init__.py"):
            prefixes.add(dotted.replace(".", "/") + "/")
        else:
            prefixes.add(relpath.removesuffix(".py"))
    return prefixes


def scoped(release: Release, prefixes: set[str]) -> dict[str, str]:
    """The release's modules under those prefixes: name -> relpath."""
    return {name: rel for name, rel in sorted(release.index.files.items()) if rel.startswith(tuple(prefixes))}


def classes_of(release: Release, modules: dict[str, str]) -> dict[str, str]:
    """Each class the modules define at their top level, read from the index's ModuleInfo: 'module:Class' -> file."""
    found = {}
    for name, relpath in modules.items():
        info = release.index.module(name)
        for class_name in (info.classes if info else ()):
            found[f"{name}:{class_name}"] = relpath
    return found


@dataclass(frozen=True)
class RaiseSite:
    file: str
    function: str  # Class.method, function, or <module>
    raised: str  # "Exception: message template", or the raise as written where its message is not a literal


def raise_sites(release: Release, modules: dict[str, str]) -> tuple[set[RaiseSite], list[str]]:
    """The raise statements of the modules, by file, enclosing function and message template; and the files that could
    not be read. A raise is read by the tracer's own raised_exception (its type, its message with {expr} where values go in),
    so that a site here is what a path's obligation would record."""
    sites: set[RaiseSite] = set()
    unreadable = []
    for relpath in modules.values():
        try:
            tree = release.index.syntax(relpath)
        except (SyntaxProblem, OSError) as exc:
            unreadable.append(f"{relpath}: {exc}")
            continue
        sites |= {RaiseSite(relpath, function, raised) for function, raised in _raises(tree, ())}
    return sites, unreadable


def _raises(node: ast.AST, scope: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """(enclosing function, what is raised) for each raise under ``node``, nested functions and classes named."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield from _raises(child, (*scope, child.name))
            continue
        if isinstance(child, ast.Raise) and child.exc is not None:  # a bare `raise` re-raises: no site of its own
            exception, message = raised_exception(child.exc)
            text = f"{exception}: {message}" if message is not None else ast.unparse(child.exc)
            yield ".".join(scope) or "<module>", " ".join(text.split())
        yield from _raises(child, scope)


def config_fields(release: Release) -> dict[str, tuple[str, object]]:
    """The speculative config's fields: name -> (the class declaring it, its literal default or ...). The methods
    file's `fields` class; where it names none (SGLang), the speculative_* fields of the classes in the files the
    argument gates read the arguments' defaults from (rules/<engine>/*.yaml `defaults_files`)."""
    index = release.index
    for spec in release.analysis.engine_methods.fields:
        module_name, _, class_name = spec.partition(":")
        module = index.module(module_name)
        if module is not None and class_name in module.classes:
            return _fields(index, module.classes[class_name], lambda name: True)
    globs = {g for rule in release.analysis.rules for g in rule.params.get("defaults_files") or ()}
    if not globs:
        return {}
    pattern = re.compile("|".join(fnmatch.translate(g) for g in globs))
    found: dict[str, tuple[str, object]] = {}
    for name, relpath in sorted(index.files.items()):
        module = index.module(name) if pattern.match(relpath) else None
        for cls in (module.classes.values() if module else ()):
            found.update(_fields(index, cls, lambda field: field.startswith("speculative_")))
    return found


def _fields(index: TreeIndex, cls: ClassInfo, wanted) -> dict[str, tuple[str, object]]:
    """The class's fields: the names its body assigns or annotates (the index's ClassInfo), but its methods and
    nested classes, and private names (no launch sets them)."""
    defined = _defined_in(index, cls)
    return {name: (f"{cls.module}:{cls.name}", cls.defaults.get(name, ...))
            for name in sorted((cls.bound | cls.annotated) - defined) if not name.startswith("_") and wanted(name)}


def _defined_in(index: TreeIndex, cls: ClassInfo) -> set[str]:
    """The functions and classes a class's body defines (ClassInfo's `bound` holds them with the assignments)."""
    module = index.module(cls.module)
    try:
        tree = index.syntax(module.path) if module else None
    except (SyntaxProblem, OSError):
        tree = None
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.name
                 and n.lineno == cls.line), None) if tree else None
    return {s.name for s in ast.walk(node) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and s is not node} if node else set()


# ---------------------------------------------------------------------------------------------------------------------
# Verdicts


@dataclass(frozen=True)
class Outcome:
    verdict: str  # READY, BLOCKED, ..., or "crash"
    first: str  # the first gate that blocks or is unknown (methods.py's reading), or the crash
    method: str  # what the engine runs, as the scan resolved it


def outcome(analysis: Analysis, definition: tuple, preset: str) -> Outcome:
    """One launch of methods.py scanned on a release; a crash of the scan is recorded as the launch's outcome."""
    try:
        held = methods.hold(analysis, definition, preset)
    except Exception as exc:  # the drill goes on: a crash is a finding about specaudit, not the end of it
        return Outcome("crash", crash_line(exc), "?")
    runs = held.result.method.method if held.result.method else None
    return Outcome(str(held.result.verdict), held.first + _without_error(held), runs or "?")


def _without_error(held: methods.Held) -> str:
    """What the first gate is, where methods.py's line has no engine error to say it (a path entry not found, a method
    that cannot be told): its title and why."""
    stop = next((f for f in held.result.findings if f.status in ("blocks", "unknown")), None)
    if stop is None or stop.error:
        return ""
    text = " ".join(f"{stop.title}: {stop.why or ''}".split())
    return f" ({text if len(text) <= 150 else text[:147] + '...'})"


def crash_line(exc: BaseException) -> str:
    """The exception and the innermost frame of specaudit's own code it came from."""
    package = Path(specaudit.__file__).resolve().parent
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve().is_relative_to(package)]
    where = ""
    if frames:
        frame = frames[-1]
        where = f" at {Path(frame.filename).resolve().relative_to(package.parent).as_posix()}:{frame.lineno} ({frame.name})"
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message[:160]}{where}"


def verdicts(old: Release, new: Release) -> list[tuple[tuple, str, Outcome, Outcome]]:
    """methods.py's launches of the engine, each on both releases: (definition, preset, old, new)."""
    launches = methods.launches_of(f"{new.tree.engine.name}=={new.tree.version}")
    return [(d, p, outcome(old.analysis, d, p), outcome(new.analysis, d, p)) for d in launches for p in methods.PRESETS]


# ---------------------------------------------------------------------------------------------------------------------
# The report


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def _bullets(items: Iterable[str], none: str = "none") -> list[str]:
    items = list(items)
    return [f"- {i}" for i in items] or [f"- {none}"]


def _added_removed(old: set[str], new: set[str]) -> tuple[list[str], list[str]]:
    return sorted(new - old), sorted(old - new)


def _moved(removed: Iterable, added: Iterable, key) -> list[tuple]:
    """Pairs (removed, added) of one key that is unique on both sides: the same thing in another file."""
    gone, come = Counter(key(r) for r in removed), Counter(key(a) for a in added)
    by_key = {key(a): a for a in added if come[key(a)] == 1}
    return [(r, by_key[key(r)]) for r in removed if gone[key(r)] == 1 and key(r) in by_key]


def entries_section(old: Release, new: Release, spec: PathSpec) -> tuple[list[str], dict[str, int]]:
    roles = path_entries(old, new, spec)
    runner = runner_entries(old, new, spec)
    methods_file = methods_file_entries(old, new)
    gone = lost(roles + runner + methods_file)
    # A role whose every entry fails is not traced at all: a required one makes every launch of its methods UNKNOWN.
    empty = [r for r in spec.roles if any(not e.old for e in roles if e.where == r.name)
             and all(e.new for e in roles if e.where == r.name)]
    engine = new.tree.engine.name
    counted = [f"{len(lost(roles))} of the {len(roles)} role entries of `rules/paths/{engine}.yaml`"]
    counted += [f"{len(lost(runner))} of the {len(runner)} references of its runner section"] if runner else []
    counted += [f"{len(lost(methods_file))} of the {len(methods_file)} of `rules/methods/{engine}.yaml`"]
    lines = ["## Path entries no longer resolving", "",
             f"{', '.join(counted[:-1])} and {counted[-1]} resolve in {old.label} and not in {new.label} (looked up as "
             "the tracer looks up an entry).", ""]
    if gone:
        lines += ["| where | entry | in " + new.label + " | the role resolves by |", "|---|---|---|---|"]
        left_empty = {r.name for r in empty}
        lines += [f"| {e.where} | `{e.entry}` | {_cell(e.new)} | "
                  f"{f'`{e.fallback}`' if e.fallback else '**nothing**' if e.where in left_empty else '-'} |" for e in gone]
        lines.append("")
    lines += [f"Roles left with no entry in {new.label}: {len(empty)}."] + \
        _bullets(f"{r.name} ({', '.join(r.methods)}; {'required' if r.required else 'optional'}"
                 f"{', runner ' + r.runner if r.runner else ''})" for r in empty)
    now = [e for e in roles + runner + methods_file if e.old and not e.new]
    if now:
        lines += ["", f"Entries that resolve in {new.label} and not in {old.label}:"] + \
            _bullets(f"{e.where}: `{e.entry}`" for e in now)
    return lines + [""], {"entries": len(gone), "roles": len(empty), "entries_total": len(roles + runner + methods_file)}


def rules_section(old: Release, new: Release) -> tuple[list[str], int]:
    changes = rule_changes(old, new)
    gone = [c for c in changes if c.no_longer]

    def sites(n: int | None) -> str:
        return "-" if n is None else str(n)

    lines = ["## Rules no longer resolving", "",
             f"{len(gone)} of the {len(new.analysis.rules)} rules of `rules/{new.tree.engine.name}/` no longer resolve in "
             f"{new.label}: their `files:` globs match nothing, or their shape's sites are found in {old.label} and not "
             "here. Those, and every code rule whose sites changed in number:", ""]
    if changes:
        lines += [f"| rule | kind | files {old.label} | files {new.label} | sites {old.label} | sites {new.label} "
                  "| no longer resolves |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {c.rule} | {c.kind} | {c.files_old} | {c.files_new} | {sites(c.sites_old)} | {sites(c.sites_new)} "
                  f"| {('**' + c.no_longer + '**') if c.no_longer else '-'} |" for c in changes]
    else:
        lines.append("- none")
    return lines + [""], len(gone)


def methods_section(old: Release, new: Release) -> tuple[list[str], tuple[int, int]]:
    (old_methods, old_at), (new_methods, new_at) = release_methods(old), release_methods(new)
    added, removed = _added_removed(set(old_methods), set(new_methods))
    lines = ["## Speculative methods", "",
             f"The release's own list, as every scan reads it: {old.label} `{old_at}` ({len(old_methods)}), "
             f"{new.label} `{new_at}` ({len(new_methods)}).", "",
             f"Added ({len(added)}): " + (", ".join(f"`{m}`" for m in added) or "none") + ".",
             f"Removed ({len(removed)}): " + (", ".join(f"`{m}`" for m in removed) or "none") + ".", ""]
    # A new name the release's own resolving code turns into a method that is modelled (0.34.0's
    # `nemotron3_5_transcribe_mtp`, one of MTPModelTypes: mtp) is judged as that method.
    runs = {m: resolved_method(new, m) for m in added if m not in new.analysis.methods}
    unmodeled = sorted(m for m, run in runs.items() if run not in new.analysis.methods)
    if unmodeled:
        lines += [f"New methods no file of `rules/methods/{new.tree.engine.name}/` models (their launches are UNKNOWN): "
                  + ", ".join(f"`{m}`" for m in unmodeled) + ".", ""]
    turned = {m: run for m, run in sorted(runs.items()) if m not in unmodeled}
    if turned:
        lines += ["New methods the release runs as a modelled one: "
                  + ", ".join(f"`{m}` (as `{run}`)" for m, run in turned.items()) + ".", ""]
    return lines, (len(added), len(removed))


def resolved_method(release: Release, method: str) -> str | None:
    """The method the release's own resolving code runs for a launch that names ``method`` (methods/resolve.py)."""
    launch = Launch(load_preset(methods.PRESETS[0]), method, engine=release.tree.engine.name,
                    speculative={"method": method})
    return resolve(launch, ReleaseModules(release.index), release.analysis.engine_methods).method


def classes_section(old: Release, new: Release, old_modules: dict[str, str], new_modules: dict[str, str]
                    ) -> tuple[list[str], tuple[int, int, int]]:
    old_classes, new_classes = classes_of(old, old_modules), classes_of(new, new_modules)
    added, removed = _added_removed(set(old_classes), set(new_classes))
    moved = _moved(removed, added, lambda q: q.partition(":")[2])
    paired = {q for pair in moved for q in pair}
    added, removed = [q for q in added if q not in paired], [q for q in removed if q not in paired]

    def by_file(qualnames: list[str], files: dict[str, str]) -> list[str]:
        grouped: dict[str, list[str]] = {}
        for q in qualnames:
            grouped.setdefault(files[q], []).append(q.partition(":")[2])
        return [f"`{f}`: {', '.join(names)}" for f, names in sorted(grouped.items())]

    lines = ["## Classes of the speculative-decoding packages", "",
             f"{len(old_classes)} classes in {len(old_modules)} modules of {old.label}, {len(new_classes)} in "
             f"{len(new_modules)} of {new.label}.", "",
             f"### Removed ({len(removed)})", "", *_bullets(by_file(removed, old_classes)), "",
             f"### Added ({len(added)})", "", *_bullets(by_file(added, new_classes)), "",
             f"### Moved to another module ({len(moved)})", "",
             *_bullets(f"{r.partition(':')[2]}: `{old_classes[r]}` -> `{new_classes[a]}`" for r, a in moved), ""]
    return lines, (len(added), len(removed), len(moved))


def fields_section(old: Release, new: Release) -> tuple[list[str], tuple[int, int]]:
    old_fields, new_fields = config_fields(old), config_fields(new)
    added, removed = _added_removed(set(old_fields), set(new_fields))
    # A default the index could not read as a literal is ``...``: only two literals are compared.
    changed = [f for f in sorted(set(old_fields) & set(new_fields))
               if ... not in (old_fields[f][1], new_fields[f][1]) and old_fields[f][1] != new_fields[f][1]]
    declared = sorted({c for c, _ in new_fields.values()}) or ["none found"]
    lines = ["## Speculative config fields", "",
             f"{len(old_fields)} fields in {old.label}, {len(new_fields)} in {new.label} (declared in "
             + ", ".join(f"`{c}`" for c in declared) + ").", "",
             f"Added ({len(added)}): " + (", ".join(f"`{f}`" for f in added) or "none") + ".",
             f"Removed ({len(removed)}): " + (", ".join(f"`{f}`" for f in removed) or "none") + ".", ""]
    if changed:
        lines += ["Literal defaults that changed:"] + \
            _bullets(f"`{f}`: {old_fields[f][1]!r} -> {new_fields[f][1]!r}" for f in changed) + [""]
    return lines, (len(added), len(removed))


def raises_section(old: Release, new: Release, old_modules: dict[str, str], new_modules: dict[str, str]
                   ) -> tuple[list[str], tuple[int, int, int]]:
    (old_sites, old_bad), (new_sites, new_bad) = raise_sites(old, old_modules), raise_sites(new, new_modules)
    added, removed = sorted(new_sites - old_sites, key=_order), sorted(old_sites - new_sites, key=_order)
    # The same exception and message, once on each side, in another file or function: the check moved.
    moved = _moved(removed, added, lambda s: s.raised)
    paired = {s for pair in moved for s in pair}
    added, removed = [s for s in added if s not in paired], [s for s in removed if s not in paired]

    def by_file(sites: list[RaiseSite]) -> list[str]:
        lines, last = [], None
        for s in sites:
            if s.file != last:
                lines += ["", f"`{s.file}`", ""]
                last = s.file
            lines.append(f"- {s.function}: {_short(s.raised)}")
        return lines or ["", "- none"]

    lines = ["## Raise sites of the speculative-decoding packages", "",
             f"{len(old_sites)} in {old.label}, {len(new_sites)} in {new.label}, compared by file, enclosing function, "
             "exception and message template (not by line).", ""]
    lines += _bullets(f"not readable: {b}" for b in old_bad + new_bad) + [""] if old_bad + new_bad else []
    lines += [f"### Removed ({len(removed)})", *by_file(removed), "", f"### Added ({len(added)})", *by_file(added), "",
              f"### Moved to another function or file ({len(moved)})", "",
              *_bullets(f"{_short(r.raised)}: `{r.file}` {r.function} -> `{a.file}` {a.function}" for r, a in moved), ""]
    return lines, (len(added), len(removed), len(moved))


def _order(site: RaiseSite) -> tuple[str, str, str]:
    return site.file, site.function, site.raised


def _short(text: str, limit: int = 160) -> str:
    return "`" + (text if len(text) <= limit else text[:limit - 3] + "...").replace("`", "'") + "`"


def verdicts_section(old: Release, new: Release) -> tuple[list[str], dict[str, int]]:
    rows = verdicts(old, new)
    old_counts, new_counts = Counter(o.verdict for *_, o, _ in rows), Counter(n.verdict for *_, n in rows)
    kinds = sorted(set(old_counts) | set(new_counts))
    changed = [r for r in rows if r[2].verdict != r[3].verdict]
    moves = Counter(f"{o.verdict} -> {n.verdict}" for _, _, o, n in changed)
    crashes = [r for r in rows if "crash" in (r[2].verdict, r[3].verdict)]
    lines = ["## Verdicts on validation/methods.py's launches", "",
             f"{len(rows)} launches (methods.py's {new.tree.engine.name} launches on its presets), scanned on both releases "
             f"by specaudit as it stands (the first run, before any work for {new.label}, is in this file's git "
             f"history). {len(changed)} change verdict; "
             f"{len(crashes)} crash the scan (on either release).", "",
             f"| verdict | {old.label} | {new.label} |", "|---|---|---|",
             *[f"| {k} | {old_counts.get(k, 0)} | {new_counts.get(k, 0)} |" for k in kinds], "",
             "Changes: " + (", ".join(f"{k}: {v}" for k, v in sorted(moves.items())) or "none") + ".", "",
             f"| family | speculative config | target | {old.label} | first gate | {new.label} | first gate |",
             "|---|---|---|---|---|---|---|"]
    for (family, speculative, _expected, *options), preset, o, n in rows:
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in (options[0] if options else {}).items())
        verdict = f"**{n.verdict}**" if n.verdict != o.verdict else n.verdict
        lines.append(f"| {family} | `{json.dumps(speculative)}`{' ' + flags if flags else ''} | {preset} "
                     f"| {o.verdict} ({o.method}) | {_cell(o.first)} | {verdict} ({n.method}) | {_cell(n.first)} |")
    summary = {"launches": len(rows), "changed": len(changed), "crashes": sum(r[3].verdict == "crash" for r in crashes)}
    return lines + [""], summary


def report(old: Release, new: Release, command: str) -> tuple[str, str]:
    """The report's markdown, and the one-line summary printed last."""
    spec = load_path_spec(new.tree.engine.name)
    prefixes = package_prefixes(spec, old) | package_prefixes(spec, new)
    old_modules, new_modules = scoped(old, prefixes), scoped(new, prefixes)
    entries, e = entries_section(old, new, spec)
    rules, r = rules_section(old, new)
    found_methods, m = methods_section(old, new)
    classes, c = classes_section(old, new, old_modules, new_modules)
    fields, f = fields_section(old, new)
    raises, x = raises_section(old, new, old_modules, new_modules)
    launches, v = verdicts_section(old, new)
    head = [f"# {new.label} against {old.label}: the day-one drill", "",
            f"Made by `{command}`, from the two releases' source (`{shown(str(new.tree.root))}`, "
            f"`{shown(str(old.tree.root))}`) read through specaudit's own index, tracer and method resolution; nothing "
            "in it is a list of expected changes. The speculative-decoding packages: "
            + ", ".join(f"`{p}`" for p in sorted(prefixes)) + ".", "",
            "| | " + old.label + " -> " + new.label + " |", "|---|---|",
            f"| path entries no longer resolving | {e['entries']} of {e['entries_total']} "
            f"({e['roles']} roles left with no entry) |",
            f"| rules no longer resolving | {r} of {len(new.analysis.rules)} |",
            f"| speculative methods | +{m[0]} -{m[1]} |",
            f"| classes | +{c[0]} -{c[1]}, {c[2]} moved |",
            f"| speculative config fields | +{f[0]} -{f[1]} |",
            f"| raise sites | +{x[0]} -{x[1]}, {x[2]} moved |",
            f"| verdicts of methods.py's launches | {v['changed']} of {v['launches']} changed, "
            f"{v['crashes']} scans crash on {new.label} |", ""]
    text = "\n".join(head + entries + rules + found_methods + fields + launches + classes + raises)
    return shown(text), f"{e['entries']} entries and {r} rules no longer resolve; {v['changed']} of {v['launches']} " \
        f"verdicts changed, {v['crashes']} crashes"


VERIFIED = ROOT / "rules" / "verified.yaml"
VERIFIED_HEADER = """\
# The release of each engine that specaudit's code rules were last verified on (the newest the tests scan), and the
# rules with code of their shape in it. On a newer release, such a rule whose code is not found is UNKNOWN (the gate
# may have moved: scan/audit.py unverified_gates), until the drill has been run on it and the work it shows is done.
# Written by `python validation/new_release.py <engine>==<version> --verified`; not by hand.
"""


def record_verified(release: Release) -> str:
    """Write the release into rules/verified.yaml (the other engines' entries kept); what was written."""
    data = yaml.safe_load(VERIFIED.read_text(encoding="utf-8")) if VERIFIED.exists() else {}
    engine = release.tree.engine.name
    data[engine] = {"release": release.tree.version,
                    "with_sites": sorted(r.id for r in release.analysis.code_rules if release.index.sites.get(r.id))}
    VERIFIED.write_text(VERIFIED_HEADER + yaml.safe_dump(data, sort_keys=True, width=100), encoding="utf-8")
    return f"{engine} {release.tree.version}: {len(data[engine]['with_sites'])} code rules with sites, in " \
           f"{VERIFIED.relative_to(ROOT)}"


def main(argv: list[str] | None = None) -> int:
    parser = _OneLineParser(prog="new_release.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("release", help="the new release, e.g. vllm==0.34.0 (or anything `specaudit scan` reads)")
    parser.add_argument("--against", help="the release to hold it against (default: the newest methods.py covers)")
    parser.add_argument("--verified", action="store_true",
                        help="record the release in rules/verified.yaml as the one the rules were verified on")
    started = time.perf_counter()
    try:
        args = parser.parse_args(argv)
        new_tree = locate(args.release)
        if args.verified:
            print(record_verified(load(new_tree)))
            return 0
        against = args.against or default_against(new_tree)
        old_tree = locate(against)
        if old_tree.engine.name != new_tree.engine.name:
            raise SpecauditError(f"{against} is {old_tree.engine.name}, {args.release} is {new_tree.engine.name}")
        if Version(old_tree.version) == Version(new_tree.version):
            raise SpecauditError(f"{against} and {args.release} are the same release")
        new, old = load(new_tree), load(old_tree)
    # OSError: a fetch that could not reach the index, a cache that cannot be written.
    except (SpecauditError, InvalidVersion, OSError) as exc:
        print(f"new_release.py: {shown(str(exc))}", file=sys.stderr)
        return 2
    command = "python validation/new_release.py " + args.release + (f" --against {args.against}" if args.against else "")
    text, summary = report(old, new, command)
    OUT.mkdir(exist_ok=True)
    path = OUT / f"{new_tree.engine.name}-{new_tree.version}.md"
    path.write_text(text + "\n", encoding="utf-8")
    print(text)
    print(f"{summary}; wrote {path.relative_to(OUT.parents[1])} in {time.perf_counter() - started:.0f} s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
