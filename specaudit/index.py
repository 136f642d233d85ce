"""Stage 2: index the tree. One pass over each file extracts the facts later stages need, once.

Per module: its classes (bases, decorators, class-level members), its imports (aliases, relative
imports, star imports, ``__all__``), module-level aliases (``X = pkg.Y``) and module-level literals.
The pass uses :mod:`ast` (fast); libcst is kept for the gate rules, which need concrete syntax.
Facts are cached by file content, so a second scan of the same tree parses nothing.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import gc
import hashlib
import os
import pickle
import re
import signal
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cache import cache_dir
from .locate import EngineTree

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor


@dataclass(frozen=True)
class LiteralRef:
    """A module-level literal that refers to another name, e.g. the ``**_TEXT_MODELS`` in a merged dict."""

    name: str


@dataclass(frozen=True)
class Merge:
    """A dict or list literal built from parts: literal pieces and ``**name`` / ``*name`` spreads."""

    kind: str  # "dict" or "list"
    parts: tuple[Any, ...]


@dataclass(frozen=True)
class ClassInfo:
    module: str
    name: str
    line: int
    bases: tuple[str | None, ...]  # dotted names; None where the base is not a name (a call, ...)
    base_sources: tuple[str, ...]  # each base as written, for messages
    decorators: tuple[str, ...]
    bound: frozenset[str]  # names given a value in the class body: methods, assignments
    annotated: frozenset[str]  # names only annotated in the class body (no value)
    defaults: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)  # literal class attributes

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(frozen=True)
class Factory:
    """A function that builds a class and returns it: ``def as_seq_cls_model(cls): class M(cls, ...): ...;
    return M``. ``made`` is that class as written, its bases naming the parameters."""

    params: tuple[str, ...]
    made: ClassInfo
    returns_argument: bool  # some branch returns a parameter unchanged (`if is_pooling_model(cls): return cls`)
    imports: dict[str, Import] = field(default_factory=dict)  # imports inside the function


@dataclass(frozen=True)
class Import:
    module: str  # absolute module name
    name: str | None  # None: the binding is the module itself


@dataclass
class ModuleInfo:
    name: str
    path: str  # relative to the tree root
    is_package: bool
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    imports: dict[str, Import] = field(default_factory=dict)
    star_imports: list[str] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)  # X = some.dotted.name
    name_lists: dict[str, tuple[str, ...]] = field(default_factory=dict)  # X = [A, pkg.B] (SGLang's EntryClass)
    literals: dict[str, Any] = field(default_factory=dict)
    literal_lines: dict[str, int] = field(default_factory=dict)  # line of each literal, alias and name list
    functions: set[str] = field(default_factory=set)
    factories: dict[str, Factory] = field(default_factory=dict)
    factory_calls: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # X = f(A, B): (f, (A, B))
    computed: dict[str, int] = field(default_factory=dict)  # names bound to a value computed at import: line
    declared_imports: dict[str, Import] = field(default_factory=dict)  # TYPE_CHECKING imports of a __getattr__ module
    all_names: tuple[str, ...] | None = None  # __all__, when it is a literal
    platform_branches: list[tuple[int, str]] = field(default_factory=list)  # platform dispatches: (line, branch)


class SyntaxProblem(Exception):
    pass


def module_name_for(relpath: str) -> str:
    parts = relpath[:-3].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def parse(source: bytes, relpath: str) -> ast.Module:
    try:
        return ast.parse(source, filename=relpath)
    except (SyntaxError, ValueError) as exc:  # ValueError: null bytes
        line = getattr(exc, "lineno", None)
        raise SyntaxProblem(f"{type(exc).__name__} at line {line}: {getattr(exc, 'msg', exc)}") from None


def module_info(tree: ast.Module, relpath: str, platform: str = "cuda") -> ModuleInfo:
    name = module_name_for(relpath)
    info = ModuleInfo(name=name, path=relpath, is_package=relpath.endswith("__init__.py"))
    package = name if info.is_package else name.rpartition(".")[0]
    for stmt in flatten(tree.body, platform, info.platform_branches):
        _index_statement(stmt, info, package, platform)
    if "__getattr__" in info.functions:
        # A module __getattr__ (PEP 562) picks classes at run time, often per platform; the imports it
        # declares to type checkers say which ones it means.
        declared = ModuleInfo(name=info.name, path=relpath, is_package=info.is_package)
        for stmt in tree.body:
            if isinstance(stmt, ast.If) and dotted_name(stmt.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                for inner in flatten(stmt.body, platform):
                    _index_statement(inner, declared, package, platform)
        info.declared_imports = declared.imports
    return info


# What each platform a user can name answers true to, in a test like `current_platform.is_rocm()` or SGLang's
# `_is_hip`: `is_cuda_alike` holds on ROCm too.
PLATFORMS = {
    "cuda": {"cuda", "cuda_alike", "nvidia"},
    "rocm": {"rocm", "hip", "cuda_alike", "amd"},
    "xpu": {"xpu"},
    "cpu": {"cpu"},
    "tpu": {"tpu"},
    "npu": {"npu"},
    "hpu": {"hpu"},
}
_PLATFORM_NAMES = set().union(*PLATFORMS.values())


def platform_tested(test: ast.expr) -> set[str] | None:
    """The platforms a dispatch test names (``current_platform.is_rocm()``, ``is_hip()``, ``_is_cuda``, joined
    with ``or``); None when the test is anything else."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        parts = [platform_tested(v) for v in test.values]
        return set().union(*parts) if all(p is not None for p in parts) else None
    node = test.func if isinstance(test, ast.Call) and not test.args else test
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    tested = name.lstrip("_").removeprefix("is_")
    return {tested} if name.lstrip("_").startswith("is_") and tested in _PLATFORM_NAMES else None


def flatten(body: Iterable[ast.stmt], platform: str = "cuda",
             followed: list[tuple[int, str]] | None = None) -> Iterable[ast.stmt]:
    """Statements of a block, descending into if/try/with, where module-level names are often bound.

    A platform dispatch (`if current_platform.is_rocm(): ... elif ...: ... else: ...`) follows the one branch
    that runs on ``platform``, noted in ``followed`` as (line, branch). Other ifs yield every branch."""
    for stmt in body:
        if isinstance(stmt, ast.If) and platform_tested(stmt.test) is not None:
            branch, label = _platform_branch(stmt, platform)
            if followed is not None:
                followed.append((stmt.lineno, label))
            yield from flatten(branch, platform, followed)
        elif isinstance(stmt, ast.If):
            # A name bound in several branches keeps its first binding: the else branch goes first, as
            # it is the default branch of a dispatch the test of which is not a platform's.
            yield from flatten(stmt.orelse, platform, followed)
            # `if TYPE_CHECKING:` never runs: its names would shadow the ones the engine really binds.
            if dotted_name(stmt.test) not in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                yield from flatten(stmt.body, platform, followed)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            yield from flatten(stmt.body, platform, followed)
            for handler in stmt.handlers:
                yield from flatten(handler.body, platform, followed)
            yield from flatten(stmt.orelse, platform, followed)
            yield from flatten(stmt.finalbody, platform, followed)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            yield from flatten(stmt.body, platform, followed)
        else:
            yield stmt


def _platform_branch(stmt: ast.If, platform: str) -> tuple[list[ast.stmt], str]:
    """The branch of an if/elif chain on platforms that runs on ``platform``, and how to name it."""
    node: ast.If = stmt
    while True:
        if platform_tested(node.test) & PLATFORMS[platform]:
            return node.body, f"`{ast.unparse(node.test)}`"
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If) and platform_tested(node.orelse[0].test):
            node = node.orelse[0]
            continue
        return node.orelse, "the else branch" if node.orelse else "no branch"


def _index_statement(stmt: ast.stmt, info: ModuleInfo, package: str, platform: str) -> None:
    if isinstance(stmt, ast.ClassDef):
        info.classes.setdefault(stmt.name, _class_info(stmt, info.name, platform))
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        info.functions.add(stmt.name)
        factory = _factory(stmt, info.name, package, platform)
        if factory is not None:
            info.factories[stmt.name] = factory
    elif isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname:
                info.imports.setdefault(alias.asname, Import(alias.name, None))
            else:
                top = alias.name.split(".")[0]
                info.imports.setdefault(top, Import(top, None))
    elif isinstance(stmt, ast.ImportFrom):
        source = absolute_module(stmt.module, stmt.level, package)
        for alias in stmt.names:
            if alias.name == "*":
                info.star_imports.append(source)
            else:
                info.imports.setdefault(alias.asname or alias.name, Import(source, alias.name))
    elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if stmt.value is None or len(targets) != 1 or not isinstance(targets[0], ast.Name):
            return
        target = targets[0].id
        dotted = dotted_name(stmt.value)
        if dotted is not None:
            info.aliases[target] = dotted
            info.literal_lines[target] = stmt.lineno
            return
        if isinstance(stmt.value, (ast.List, ast.Tuple)) and stmt.value.elts:
            names = [dotted_name(e) for e in stmt.value.elts]
            if all(names):
                info.name_lists[target] = tuple(names)
                info.literal_lines[target] = stmt.lineno
                return
        call = factory_call(stmt.value)
        if call is not None:
            info.factory_calls.setdefault(target, call)
            info.literal_lines[target] = stmt.lineno
            return
        value = literal_value(stmt.value)
        if value is not _NOT_LITERAL:
            info.literals[target] = value
            info.literal_lines[target] = stmt.lineno
            if target == "__all__" and isinstance(value, (list, tuple)):
                info.all_names = tuple(v for v in value if isinstance(v, str))
        else:
            info.computed.setdefault(target, stmt.lineno)


def absolute_module(module: str | None, level: int, package: str) -> str:
    if level == 0:
        return module or ""
    parts = package.split(".") if package else []
    base = parts[: len(parts) - (level - 1)] if level > 1 else parts
    return ".".join(base + ([module] if module else []))


def _factory(function: ast.FunctionDef | ast.AsyncFunctionDef, module: str, package: str,
             platform: str) -> Factory | None:
    made = {stmt.name: stmt for stmt in flatten(function.body, platform) if isinstance(stmt, ast.ClassDef)}
    if not made:
        return None
    params = tuple(a.arg for a in function.args.posonlyargs + function.args.args)
    # Every return of the function itself (not of the methods it defines) gives the class it made or a parameter;
    # a function that may return anything else is no factory, and what it returns stays unknown.
    returned = [r.value.id if isinstance(r.value, ast.Name) else None for r in _own_returns(function)]
    if any(name not in made and name not in params for name in returned):
        return None
    classes = [made[name] for name in returned if name in made]
    if len({c.name for c in classes}) != 1:
        return None
    info = _class_info(classes[0], module, platform)
    info = replace(info, name=f"{function.name}.<locals>.{info.name}")
    local = ModuleInfo(name=module, path="", is_package=False)
    for stmt in ast.walk(function):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            _index_statement(stmt, local, package, platform)
    return Factory(params, info, any(name in params for name in returned), local.imports)


def _own_returns(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterable[ast.Return]:
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return):
            yield node
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))


def factory_call(node: ast.AST) -> tuple[str, tuple[str, ...]] | None:
    """``f(A, B)`` with names only, the shape of a class built by a factory; None for any other value."""
    if not isinstance(node, ast.Call) or node.keywords:
        return None
    func = dotted_name(node.func)
    args = tuple(dotted_name(a) for a in node.args)
    if func is None or not args or not all(args):
        return None
    return func, args  # type: ignore[return-value]


def _class_info(node: ast.ClassDef, module: str, platform: str) -> ClassInfo:
    bound: set[str] = set()
    annotated: set[str] = set()
    defaults: dict[str, Any] = {}
    for stmt in flatten(node.body, platform):
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = literal_value(stmt.value)
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and not isinstance(value, Merge) \
                    and value is not _NOT_LITERAL:
                defaults[targets[0].id] = value
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        bound.add(name.id)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            (bound if stmt.value is not None else annotated).add(stmt.target.id)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            bound.add(stmt.target.id)
    bases = []
    for base in node.bases:
        # Generic[T] and Protocol[T] name their class through the subscript.
        bases.append(dotted_name(base.value if isinstance(base, ast.Subscript) else base))
    decorators = tuple(
        d for d in (dotted_name(dec.func if isinstance(dec, ast.Call) else dec) for dec in node.decorator_list) if d
    )
    return ClassInfo(
        module=module,
        name=node.name,
        line=node.lineno,
        bases=tuple(bases),
        base_sources=tuple(ast.unparse(b) for b in node.bases),
        decorators=decorators,
        bound=frozenset(bound),
        annotated=frozenset(annotated - bound),
        defaults=defaults,
    )


def dotted_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted_name(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


_NOT_LITERAL = object()


MAX_FILE_BYTES = 8_000_000  # the largest engine module is under 1 MB; a file past this is not parsed


def literal_value(node: ast.AST) -> Any:
    """A literal's value; dict/list literals with ``**name``/``*name`` spreads become :class:`Merge`."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if isinstance(node, ast.Dict):
        parts: list[Any] = []
        for key, value in zip(node.keys, node.values):
            if key is None:
                name = dotted_name(value)
                if name is not None:
                    parts.append(LiteralRef(name))
                continue  # a computed spread (a comprehension): the literal parts still say something
            k, v = literal_value(key), literal_value(value)
            if k is _NOT_LITERAL or v is _NOT_LITERAL:
                continue  # a computed entry: the rest of the dict still says something
            parts.append({k: v})
        return Merge("dict", tuple(parts))
    if isinstance(node, (ast.List, ast.Tuple)):
        parts = []
        for element in node.elts:
            if isinstance(element, ast.Starred):
                name = dotted_name(element.value)
                if name is None:
                    return _NOT_LITERAL
                parts.append(LiteralRef(name))
            else:
                value = literal_value(element)
                if value is _NOT_LITERAL:
                    return _NOT_LITERAL
                parts.append([value])
        return Merge("list", tuple(parts))
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitOr, ast.Add)):
        # {**a} | {...} and [..] + [..] merge the same way as spreads. A chain `a + b + c ...` is read as one
        # flat merge, without recursion: an engine file may chain hundreds of terms.
        op = type(node.op)
        operands: list[ast.expr] = []
        while isinstance(node, ast.BinOp) and isinstance(node.op, op):
            operands.append(node.right)
            node = node.left
        operands.append(node)
        parts = []
        for operand in reversed(operands):
            name = dotted_name(operand)
            value = LiteralRef(name) if name else literal_value(operand)
            if not isinstance(value, (list, tuple, dict, Merge, LiteralRef)):
                return _NOT_LITERAL  # a string or number sum, or a computed term
            parts.append(value)
        return Merge("dict" if op is ast.BitOr else "list", tuple(parts))
    return _NOT_LITERAL


# ---------------------------------------------------------------------------------------------------
# The tree index: which files are indexed, the cache, the process pool.


@dataclass
class TreeIndex:
    tree: EngineTree
    files: dict[str, str]  # module name -> path relative to the tree root
    modules: dict[str, ModuleInfo]
    skipped: dict[str, str]  # relpath -> why it could not be indexed
    digests: dict[str, str]  # relpath -> content digest of indexed files
    sites: dict[str, list]  # rule id -> the Sites of that rule's shape in the tree (see match.py)
    _store: _CacheStore
    _pool: _Pool | None = None  # only while build_index runs
    # Files read from here instead of the disk: the edited sources a patch is checked on before writing.
    overlay: dict[str, bytes] = field(default_factory=dict)
    platform: str = "cuda"  # the branch of platform dispatches that is followed (see flatten)
    # Syntax trees of the files parsed in this process, kept for the stages that read code (trace.py).
    parsed: dict[str, ast.Module] = field(default_factory=dict)

    def module(self, name: str) -> ModuleInfo | None:
        """A module's facts, indexing it on first use. None when the tree has no such module or it is unparsable."""
        info = self.modules.get(name)
        if info is not None:
            return info
        relpath = self.files.get(name)
        if relpath is None or relpath in self.skipped:
            return None
        self._index_paths([relpath])
        return self.modules.get(name)

    def has_module(self, name: str) -> bool:
        return name in self.files

    def note_read(self, relpath: str) -> None:
        """A later stage read this file itself: results memoized after it depend on its content too."""
        self.digests[relpath] = self._digest(relpath)

    @functools.cached_property
    def listing(self) -> str:
        """A digest of the tree's file list: a memo is for this set of files."""
        return hashlib.blake2b(repr(sorted(self.files.values())).encode(), digest_size=16).hexdigest()

    def syntax(self, relpath: str) -> ast.Module:
        """A file's syntax tree, parsed once in this process; SyntaxProblem or OSError when it has none."""
        found = self.parsed.get(relpath)
        if found is None:
            found = self.parsed[relpath] = parse(self.source(relpath), relpath)
        return found

    def source(self, relpath: str) -> bytes:
        if relpath in self.overlay:
            return self.overlay[relpath]
        return (self.tree.root / relpath).read_bytes()

    def _digest(self, relpath: str) -> str:
        if relpath in self.overlay:
            return hashlib.blake2b(self.overlay[relpath], digest_size=16).hexdigest()
        return self._store.digest(self.tree.root, relpath)

    def _index_paths(self, relpaths: Iterable[str], rules: dict[str, tuple] | None = None,
                     meanwhile: Callable[[], None] | None = None) -> None:
        """Index files (and find the given rules' sites in them): from the cache, else parsed, in the
        build's process pool when there is one; ``meanwhile`` runs here while the pool works."""
        rules = rules or {}
        todo: list[tuple[str, str, tuple]] = []
        for relpath in relpaths:
            digest = self._digest(relpath)
            self.digests[relpath] = digest
            file_rules = rules.get(relpath, ())
            cached = self._store.modules.get((relpath, digest))
            cached_sites = self._store.sites.get((relpath, digest, _rules_key(file_rules))) if file_rules else {}
            if cached is not None and cached_sites is not None:
                self._accept(relpath, cached, cached_sites)
            else:
                todo.append((relpath, digest, file_rules))
        # Largest first: the big engine files then overlap with the many small model files.
        todo.sort(key=lambda job: -(self.tree.root / job[0]).stat().st_size)
        jobs = [(str(self.tree.root), relpath, digest, file_rules, self.overlay.get(relpath), self.platform)
                for relpath, digest, file_rules in todo]
        for relpath, digest, file_rules, result, sites, syntax in _parse_many(jobs, self._pool, meanwhile):
            if syntax is not None:
                self.parsed[relpath] = syntax
            self._store.modules[(relpath, digest)] = result
            if file_rules:
                self._store.sites[(relpath, digest, _rules_key(file_rules))] = sites
            self._store.dirty = True
            self._accept(relpath, result, sites)

    def _accept(self, relpath: str, result: ModuleInfo | str, sites: dict[str, list]) -> None:
        if isinstance(result, str):
            self.skipped[relpath] = result
        else:
            self.modules[result.name] = result
        for rule_id, found in sites.items():
            self.sites.setdefault(rule_id, []).extend(found)

    def memo(self, name: str, compute: Callable[[], Any]) -> Any:
        """A result derived from the indexed files, reused while none of the files it read has changed.

        Its inputs are every module indexed by the time it is computed, so on-demand indexing done
        by ``compute`` itself is covered; a file added to or removed from the tree is a new key.
        """
        key = f"memo:{name}:{self.listing}"
        entry = self._store.extras.get(key)
        if entry is not None:
            inputs, value = entry
            if all(self._digest(rel) == digest for rel, digest in inputs.items()):
                self.digests.update(inputs)  # what the result was computed from is part of this scan's reading
                return value
        value = compute()
        family = name.split(":")[0]
        self._store.extras = {k: v for k, v in self._store.extras.items()
                              if k.split(":")[:2] != ["memo", family]}
        self._store.extras[key] = (dict(self.digests), value)
        self._store.dirty = True
        return value

    def save(self) -> None:
        if not self.overlay:  # what an overlay changed is not the tree's
            self._store.save()


def _parse_one(job: tuple, keep: bool = False) -> tuple[str, str, tuple, ModuleInfo | str, dict[str, list], Any]:
    """Index one file; ``keep``: return its syntax tree too (in this process: pickling it back from a worker
    would cost more than parsing again)."""
    root, relpath, digest, rules, overlaid, platform = job
    try:
        size = len(overlaid) if overlaid is not None else Path(root, relpath).stat().st_size
        if size > MAX_FILE_BYTES:
            return relpath, digest, rules, f"{size / 1e6:.0f} MB, larger than any engine module: not read", {}, None
        source = overlaid if overlaid is not None else Path(root, relpath).read_bytes()
        tree = parse(source, relpath)
        info = module_info(tree, relpath, platform)
    except SyntaxProblem as exc:
        return relpath, digest, rules, str(exc), {}, None
    except OSError as exc:
        return relpath, digest, rules, f"unreadable: {exc.strerror}", {}, None
    except RecursionError:
        return relpath, digest, rules, "nested too deeply to read", {}, None
    sites: dict[str, list] = {}
    if rules:
        from .match import find_sites  # libcst: loaded only where a gate file is (re)indexed

        sites = find_sites(tree, source.decode("utf-8", errors="replace"), info, relpath, rules)
    return relpath, digest, rules, info, sites, tree if keep else None


def _parse_many(jobs: list[tuple], pool: _Pool | None, meanwhile: Callable[[], None] | None) -> list:
    if pool is None or pool.workers < 2 or len(jobs) < 16:
        results = [_parse_one(job, keep=True) for job in jobs]
        if meanwhile:
            meanwhile()
        return results
    pending = pool.executor().map(_parse_one, jobs)  # one file a task: the large gate files spread over the workers
    if meanwhile:
        meanwhile()
    return list(pending)


class _Pool:
    """A process pool started only when there is parsing to share out: a warm scan never starts one."""

    def __init__(self, workers: int):
        self.workers = workers
        self._executor: ProcessPoolExecutor | None = None

    def executor(self) -> ProcessPoolExecutor:
        if self._executor is None:
            from concurrent.futures import ProcessPoolExecutor  # here: a warm scan starts no pool

            self._executor = ProcessPoolExecutor(max_workers=self.workers, initializer=_worker_init)
        return self._executor

    def __enter__(self) -> _Pool:
        return self

    def __exit__(self, kind: type | None, *exc: object) -> None:
        if self._executor is None:
            return
        if kind is None:
            self._executor.shutdown()
            return
        # Interrupted (Ctrl-C) or failed: the workers are stopped, not waited for; one blocked on a full pipe
        # would never finish.
        processes = list(getattr(self._executor, "_processes", {}).values())
        for process in processes:
            process.terminate()
        self._executor.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.join(timeout=1)


def _worker_init() -> None:
    gc.disable()  # see evaluate.scan: syntax trees make no cycles worth a collector's passes
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle: it stops the pool


def _rules_key(rules: tuple) -> str:
    from .ruleset import rules_digest

    return rules_digest(list(rules))


_CACHE_MAGIC = b"specaudit-index\x001\n"  # format name and version; a checksum of the pickle follows
_OLD_CACHE_START = b"\x80\x05\x95"  # how the bare pickle that earlier versions wrote begins (protocol 5, a frame)


class _CacheStore:
    """One file per tree: file stat -> content digest, and (path, content digest) -> indexed facts and sites.

    The pickle is written after a header and its checksum, and loaded only when both match: a truncated or
    corrupted file is discarded with a warning and rebuilt, never loaded."""

    def __init__(self, root: Path, salt: str, platform: str = "cuda"):
        # A platform dispatch binds other names on another platform: each platform has its own facts.
        key = str(root.resolve()) + ("" if platform == "cuda" else f":{platform}")
        self.path = cache_dir("index") / (hashlib.sha1(key.encode()).hexdigest() + ".pickle")
        self.root = root
        self.salt = salt
        self.stats: dict[str, tuple[int, int, str]] = {}
        self.modules: dict[tuple[str, str], ModuleInfo | str] = {}  # (relpath, digest) -> facts or why not
        self.sites: dict[tuple[str, str, str], dict[str, list]] = {}  # (relpath, digest, rules) -> rule id -> sites
        self.extras: dict[str, Any] = {}  # later stages keep their own content-keyed results here
        self.dirty = False
        try:
            blob = self.path.read_bytes()
        except OSError:
            return  # no cache yet
        data = _unpack(blob)
        if data is None and blob.startswith(_OLD_CACHE_START):
            self.dirty = True  # a cache of a specaudit before the checksummed format: replaced without a word
        elif data is None:
            print(f"specaudit: warning: the index cache {self.path} is unreadable (damaged, or written by another "
                  "version); it is rebuilt", file=sys.stderr)
            self.dirty = True
        elif data.get("salt") == salt:
            self.stats, self.modules, self.sites, self.extras = (data["stats"], data["modules"], data["sites"],
                                                                 data["extras"])

    def digest(self, root: Path, relpath: str) -> str:
        path = os.path.join(root, relpath)
        st = os.stat(path)
        known = self.stats.get(relpath)
        if known and known[0] == st.st_size and known[1] == st.st_mtime_ns:
            return known[2]
        with open(path, "rb") as fh:
            digest = hashlib.blake2b(fh.read(), digest_size=16).hexdigest()
        self.stats[relpath] = (st.st_size, st.st_mtime_ns, digest)
        self.dirty = True
        return digest

    def save(self) -> None:
        if not self.dirty:
            return
        self._forget_the_gone()
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        try:
            payload = pickle.dumps({"salt": self.salt, "stats": self.stats, "modules": self.modules,
                                    "sites": self.sites, "extras": self.extras}, protocol=pickle.HIGHEST_PROTOCOL)
            with tmp.open("wb") as fh:
                fh.write(_CACHE_MAGIC + hashlib.blake2b(payload, digest_size=16).digest() + payload)
            os.replace(tmp, self.path)
        except (OSError, RecursionError, pickle.PicklingError) as exc:
            # The scan's result stands without its cache: the next scan indexes again.
            print(f"specaudit: warning: the index cache was not saved ({type(exc).__name__}: {exc})", file=sys.stderr)
        finally:
            tmp.unlink(missing_ok=True)
        self.dirty = False


    def _forget_the_gone(self) -> None:
        """Drop what was read from files deleted since, and from the old contents of files changed since."""
        live = {rel: known[2] for rel, known in self.stats.items() if os.path.isfile(os.path.join(self.root, rel))}
        self.stats = {rel: known for rel, known in self.stats.items() if rel in live}
        self.modules = {key: info for key, info in self.modules.items() if live.get(key[0]) == key[1]}
        self.sites = {key: found for key, found in self.sites.items() if live.get(key[0]) == key[1]}


def _unpack(blob: bytes) -> dict | None:
    """The cache's contents, or None when the header, the checksum or the pickle does not hold."""
    head, checksum, payload = blob[:len(_CACHE_MAGIC)], blob[len(_CACHE_MAGIC):len(_CACHE_MAGIC) + 16], \
        blob[len(_CACHE_MAGIC) + 16:]
    if head != _CACHE_MAGIC or hashlib.blake2b(payload, digest_size=16).digest() != checksum:
        return None
    try:
        data = pickle.loads(payload)
    except Exception:  # noqa: BLE001 - written by this code and checksummed: only another version's classes fail
        return None
    return data if isinstance(data, dict) else None


def _code_salt() -> str:
    """Cached facts are only valid for the code that extracted them."""
    here = Path(__file__).parent
    digest = hashlib.blake2b(digest_size=8)
    for name in ("index.py", "match.py", "resolve.py", "registry.py", "evaluate.py", "trace.py"):
        path = here / name
        if path.exists():
            digest.update(path.read_bytes())
    return digest.hexdigest()


# A class statement and the text of its bases, for the cheap pass over the files not indexed.
_CLASS_BASES = re.compile(rb"^[ \t]*class[ \t]+\w+[ \t]*\(([^)]*)\)", re.M)
_IDENTIFIER = re.compile(rb"[A-Za-z_]\w*")


def build_index(tree: EngineTree, eager_modules: Iterable[str] = (), rules: Iterable[Any] = (),
                overlay: dict[str, bytes] | None = None, platform: str = "cuda",
                alongside: Callable[[TreeIndex], None] | None = None) -> TreeIndex:
    """Index the engine's models package, the named modules, the files the rules look in (finding their
    sites), the modules their classes' bases come from, and every module that subclasses a model class.

    ``rules`` are ruleset.Rule objects; each is sent to the files its ``files`` globs match. ``alongside``
    runs here while the pool parses the models package: work that needs only the modules it indexes on demand.
    """
    files, unreadable = _python_files(tree)
    store = _CacheStore(tree.root, _code_salt(), platform)
    index = TreeIndex(tree=tree, files=files, modules={}, skipped=dict(unreadable), digests={}, sites={}, _store=store,
                      overlay=dict(overlay or {}), platform=platform)
    rules = list(rules)
    for rule in rules:
        index.sites[rule.id] = []
    patterns = [(rule, re.compile("|".join(fnmatch.translate(g) for g in rule.files))) for rule in rules]
    by_path: dict[str, tuple] = {}
    for relpath in sorted(files.values()):
        matching = tuple(rule for rule, pattern in patterns if pattern.match(relpath))
        if matching:
            by_path[relpath] = matching
    prefix = tree.engine.models_package + "."
    wanted = [rel for name, rel in files.items() if name.startswith(prefix) or name == tree.engine.models_package]
    wanted += [files[name] for name in eager_modules if name in files]
    wanted = sorted(set(wanted + list(by_path)))
    bases: dict[str, frozenset[bytes]] = {}

    def read_bases() -> None:
        indexed = set(wanted)
        bases.update(_base_identifiers(tree, [rel for rel in files.values() if rel not in indexed], store))
        if alongside is not None:
            alongside(index)

    with _Pool(min(os.cpu_count() or 1, 8)) as pool:
        index._pool = pool
        index._index_paths(wanted, by_path, meanwhile=read_bases)
        model_classes = {c.encode() for m in index.modules.values() for c in m.classes}
        subclassing = sorted(rel for rel, names in bases.items() if names & model_classes)
        index._index_paths(subclassing)
        _index_base_modules(index)
    index._pool = None
    return index


def _index_base_modules(index: TreeIndex) -> None:
    """Index, in batches, the modules that the indexed classes' bases are imported from.

    Resolution would index them one by one on demand; doing it up front lets the pool parse them.
    """
    frontier = list(index.modules.values())
    for _ in range(8):  # a few hops of base-of-base imports; the rest stays on demand
        wanted = set()
        for module in frontier:
            for cls in module.classes.values():
                for base in cls.bases:
                    imported = module.imports.get(base.split(".")[0]) if base else None
                    if imported is None:
                        continue
                    for candidate in (imported.module, f"{imported.module}.{imported.name}"):
                        relpath = index.files.get(candidate)
                        if relpath and candidate not in index.modules and relpath not in index.skipped:
                            wanted.add(relpath)
        if not wanted:
            return
        before = set(index.modules)
        index._index_paths(sorted(wanted))
        frontier = [m for name, m in index.modules.items() if name not in before]


def _python_files(tree: EngineTree) -> tuple[dict[str, str], dict[str, str]]:
    """The tree's modules (name -> relpath), and the .py entries that cannot be read (relpath -> why)."""
    files: dict[str, str] = {}
    unreadable: dict[str, str] = {}
    root_len = len(str(tree.root)) + 1
    for dirpath, dirnames, filenames in os.walk(tree.package_dir):
        dirnames[:] = [d for d in dirnames if d != "__pycache__" and not d.startswith(".")]
        for filename in filenames:
            if filename.endswith(".py"):
                path = os.path.join(dirpath, filename)
                relpath = path[root_len:].replace(os.sep, "/")
                if not os.path.isfile(path):
                    unreadable[relpath] = "a dangling or looping symlink, or not a file"
                elif not os.access(path, os.R_OK):
                    unreadable[relpath] = "unreadable: permission denied"
                else:
                    files[module_name_for(relpath)] = relpath
    return files, unreadable


def _base_identifiers(tree: EngineTree, relpaths: list[str], store: _CacheStore) -> dict[str, frozenset[bytes]]:
    """For files not indexed, the identifiers their class statements' bases name (a regex over raw bytes,
    far cheaper than parsing), to find the classes outside the models package that subclass a model
    class. Only files that import from the models package can; a substring test finds them first.
    Cached by the files' stat fingerprint."""
    fingerprint = hashlib.blake2b(digest_size=16)
    root = str(tree.root)
    for rel in sorted(relpaths):
        st = os.stat(os.path.join(root, rel))
        fingerprint.update(f"{rel}:{st.st_size}:{st.st_mtime_ns};".encode())
    key = "bases:" + fingerprint.hexdigest()
    if key not in store.extras:
        package = tree.engine.models_package
        leaf = package.rpartition(".")[2]
        # `from vllm.model_executor.models.llama import X`, `from vllm.model_executor import models`,
        # `from .models import X`
        imports_models = (package.encode(), f"import {leaf}".encode(), f"{leaf} import".encode())
        found = {}
        for rel in relpaths:
            with open(os.path.join(root, rel), "rb") as fh:
                data = fh.read()
            if not any(needle in data for needle in imports_models):
                continue
            names = frozenset(n for bases in _CLASS_BASES.findall(data) for n in _IDENTIFIER.findall(bases))
            if names:
                found[rel] = names
        store.extras = {k: v for k, v in store.extras.items() if not k.startswith("bases:")}
        store.extras[key] = found
        store.dirty = True
    return store.extras[key]
