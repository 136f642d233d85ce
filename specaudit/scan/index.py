"""Index the tree. One pass over each file extracts the facts later stages need, once.

Per module: its classes (bases, decorators, class-level members), its imports (aliases, relative
imports, star imports, ``__all__``), module-level aliases (``X = pkg.Y``) and module-level literals.
The pass uses :mod:`ast` (fast); libcst is kept for the gate rules, which need concrete syntax.
Facts are cached by file content, so a second scan of the same tree parses nothing; and shared by every tree's
cache, so a release indexed after another parses only the files that changed between them.
"""

from __future__ import annotations

import ast
import contextlib
import fnmatch
import functools
import gc
import hashlib
import os
import pickle
import re
import signal
import stat
import sys
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.cache import cache_dir
from ..tree.locate import EngineTree
from .facts import MAX_FILE_BYTES, ModuleInfo, SyntaxProblem, definitions, module_info, parse

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor


# ---------------------------------------------------------------------------------------------------
# The tree index: which files are indexed, the cache, the process pool.

# The memoized results a tree's cache keeps, by kind (the first part of the name; "": any other), the most recently
# used: traced paths (~0.13 MB each on vLLM 0.33.0; a targeted scan reads the default method's and its runner's) and
# landscapes (~0.27 MB) dominate the cache, which kept every one ever computed (6 MB for a tree scanned for every
# method, against 2.5 MB for one launch); resolutions and the like are a few KB, and the speculative config's members
# a launch's gates read (methods/resolve.py) a few dozen bytes each, about a dozen a launch.
MEMO_KEPT = {"trace": 4, "landscape": 2, "member": 64, "": 16}


# The syntax trees a scan keeps, by the size of their sources. A tree of Python's ast takes ~25 times its source in
# memory (vLLM 0.33.0's gpu_model_runner.py: 311 KB, 7.6 MiB), and keeping every tree parsed was most of a cold scan's
# peak (vLLM 0.33.0: 116 files, 55 of the 74 MiB allocated), though most are parsed only to index them. The stages
# that read code mostly read a file right after indexing it (38 of the 43 files a vLLM 0.33.0 trace reads); past the
# bound the trees read least recently go, and a function of a file whose tree went is parsed again alone (function).
# Cold, vLLM 0.33.0 and SGLang 0.5.23 parse as many files again under 500 KB as under 1 MB (6 and 4), for a peak RSS of
# 75 and 74 MiB against 85 and 90; under 300 KB, vLLM parses 8 again.
SYNTAX_KEPT_BYTES = 500_000
# ... but a file parsed a third time is read over and over, and its tree is kept among the others of its kind: the player
# reads SGLang 0.5.17's server_args.py (413 KB) for each argument it plays, and parsed it 238 times in a drafter's scan
# under the bound alone. A cold targeted scan parses no file three times (vLLM 0.33.0, SGLang 0.5.23).
OFTEN_PARSED = 3
OFTEN_PARSED_KEPT_BYTES = 2_000_000


@dataclass
class _Syntax:
    tree: ast.Module
    size: int  # of its source
    definitions: dict[str, ast.AST] | None = None


class _RecentTrees:
    """Syntax trees by file, the most recently read kept while their sources come to ``bound`` bytes (one at least)."""

    def __init__(self, bound: int):
        self.bound = bound
        self._kept: OrderedDict[str, _Syntax] = OrderedDict()
        self._bytes = 0

    def get(self, relpath: str) -> _Syntax | None:
        found = self._kept.get(relpath)
        if found is not None:
            self._kept.move_to_end(relpath)
        return found

    def keep(self, relpath: str, syntax: _Syntax) -> _Syntax:
        old = self._kept.pop(relpath, None)
        self._bytes += syntax.size - (old.size if old else 0)
        self._kept[relpath] = syntax
        while self._bytes > self.bound and len(self._kept) > 1:
            _, dropped = self._kept.popitem(last=False)
            self._bytes -= dropped.size
        return syntax


@dataclass
class TreeIndex:
    tree: EngineTree
    files: dict[str, str]  # module name -> path relative to the tree root
    modules: dict[str, ModuleInfo]
    skipped: dict[str, str]  # relpath -> why it could not be indexed
    digests: dict[str, str]  # relpath -> content digest of indexed files
    sites: dict[str, list]  # rule id -> the Sites of that rule's shape in the tree (see match.py)
    _store: _CacheStore
    _pool: WorkerPool | None = None  # only while build_index runs
    # The shared facts' entries (path, contents) the build made, written once it is done: see _write_shared.
    _unwritten: list[tuple[str, bytes]] = field(default_factory=list)
    _keeps_indexed_trees: bool = True  # see facts_only
    # Files read from here instead of the disk: the edited sources a patch is checked on before writing.
    overlay: dict[str, bytes] = field(default_factory=dict)
    platform: str = "cuda"  # the branch of platform dispatches that is followed (see flatten)
    # The files parsed in this process, and how many times each (a warm scan parses none).
    parsed: Counter[str] = field(default_factory=Counter)
    # The syntax trees read most recently, for the stages that read code (trace.py, the player), and those of the files
    # parsed again and again: see SYNTAX_KEPT_BYTES.
    _trees: _RecentTrees = field(default_factory=lambda: _RecentTrees(SYNTAX_KEPT_BYTES))
    _often: _RecentTrees = field(default_factory=lambda: _RecentTrees(OFTEN_PARSED_KEPT_BYTES))
    # relpath -> qualified name -> (first line, last line, column) of each function of the files read for their
    # definitions: where to parse one again, once its file's tree is no longer kept.
    _outlines: dict[str, dict[str, tuple[int, int, int]]] = field(default_factory=dict)
    # relpath -> (size, mtime) as the listing found them: each file of the tree is stat'ed once a build.
    stats: dict[str, tuple[int, int]] = field(default_factory=dict)
    _now: dict[str, str] = field(default_factory=dict)  # relpath -> content digest, as this build found it
    _accepted: set[str] = field(default_factory=set)  # the files indexed (or found unparsable) in this process

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
        """A file's syntax tree; SyntaxProblem or OSError when it has none."""
        return self._syntax(relpath).tree

    def definitions(self, relpath: str) -> dict[str, ast.AST]:
        """A file's functions and classes by qualified name (facts.definitions), made once for its syntax tree."""
        kept = self._syntax(relpath)
        if kept.definitions is None:
            kept.definitions = definitions(kept.tree, self.platform)
            self._outlines[relpath] = {qual: (min([node.lineno] + [d.lineno for d in node.decorator_list]),
                                              node.end_lineno or node.lineno, node.col_offset)
                                       for qual, node in kept.definitions.items() if isinstance(node, FUNCTIONS)}
        return kept.definitions

    def function(self, relpath: str, qual: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """A file's function or method (``Class.method``) by its qualified name. Where the file's syntax tree is no
        longer kept, the function alone is parsed again, from its lines: a fraction of the file."""
        kept = self._often.get(relpath) or self._trees.get(relpath)
        outline = self._outlines.get(relpath) if kept is None else None
        if outline is not None:
            where = outline.get(qual)
            found = _parse_function(self.source(relpath), *where) if where else None
            if found is not None or where is None:
                return found
        node = self.definitions(relpath).get(qual)
        return node if isinstance(node, FUNCTIONS) else None

    def _syntax(self, relpath: str) -> _Syntax:
        kept = self._often.get(relpath) or self._trees.get(relpath)
        if kept is None:
            source = self.source(relpath)
            return self._keep(relpath, parse(source, relpath), len(source))
        return kept

    def _keep(self, relpath: str, tree: ast.Module, size: int, kept: bool = True) -> _Syntax:
        """A tree parsed here, kept (``kept``) among the most recent; that of a file parsed OFTEN_PARSED times, among
        those."""
        self.parsed[relpath] += 1
        syntax = _Syntax(tree, size)
        if not kept:
            return syntax
        return (self._often if self.parsed[relpath] >= OFTEN_PARSED else self._trees).keep(relpath, syntax)

    def derived(self, relpath: str, kind: str, compute: Callable[[ast.Module], Any]) -> Any:
        """What ``compute`` makes of one file's syntax tree, kept by the file's content digest as ``sha256`` is
        (``kind`` names the computation; the cache's salt covers its code): a warm scan neither parses nor walks the
        file for it. SyntaxProblem or OSError when the file has no syntax tree."""
        known = self._store.extras.setdefault("derived", {})
        key = (kind, self._digest(relpath))
        if key not in known:
            known[key] = compute(self.syntax(relpath))
            self._store.dirty = True
        return known[key]

    def kept(self, relpath: str, kind: str, compute: Callable[[], Any]) -> Any:
        """What ``compute`` reads of one file (``kind`` names it; the cache's salt covers its code), kept by the
        file's content in the facts shared by every tree, one file an entry, read only when asked: unlike ``derived``
        it does not weigh on the tree's cache, which every scan loads whole. The class statements a scan reads (the
        target's MRO: scan.resolve) come from there warm, where their files were parsed (vLLM 0.33.0's Kimi-K2.5:
        kimi_k25.py, deepseek_v2.py and interfaces.py, ~0.06 s)."""
        if relpath in self.overlay:
            return compute()  # an edited source is no file of any tree
        try:
            digest = self._digest(relpath)
        except OSError:
            return compute()  # what reading it meets, compute meets too
        found = self._store.shared.get(kind, relpath, digest)
        if isinstance(found, tuple) and len(found) == 1:
            return found[0]
        value = compute()
        _SharedFacts.unbounded += self._store.shared.put((value,), kind, relpath, digest)
        return value

    def source(self, relpath: str) -> bytes:
        if relpath in self.overlay:
            return self.overlay[relpath]
        return (self.tree.root / relpath).read_bytes()

    def sha256(self, relpath: str) -> str:
        """A file's SHA-256 (what a wheel's RECORD lists), kept by its content digest: a warm scan hashes nothing."""
        digest = self._digest(relpath)
        known = self._store.extras.setdefault("sha256", {})
        if digest not in known:
            known[digest] = hashlib.sha256(self.source(relpath)).hexdigest()
            self._store.dirty = True
        return known[digest]

    def _digest(self, relpath: str) -> str:
        if relpath in self.overlay:
            return hashlib.blake2b(self.overlay[relpath], digest_size=16).hexdigest()
        # Once per file a build: a warm scan checks each memoized result's inputs (~500 files, ~20 results).
        found = self._now.get(relpath)
        if found is None:
            found = self._now[relpath] = self._store.digest(self.tree.root, relpath, self.stats.get(relpath))
        return found

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
            cached = self._store.facts(relpath, digest)
            cached_sites = self._store.found_sites(relpath, digest, _rules_key(file_rules)) if file_rules else {}
            if cached is not None and cached_sites is not None:
                self._accept(relpath, cached, cached_sites)
            else:
                todo.append((relpath, digest, file_rules))
        # Largest first: the big engine files then overlap with the many small model files.
        todo.sort(key=lambda job: -self.stats.get(job[0], (0, 0))[0])
        # What an overlay holds is no file of any tree: it is not shared.
        jobs = [_Job(str(self.tree.root), relpath, digest, file_rules, _rules_key(file_rules) if file_rules else None,
                     self.overlay.get(relpath), self.platform, None if relpath in self.overlay else self._store.shared)
                for relpath, digest, file_rules in todo]
        for job, (result, sites, syntax, entries) in zip(jobs, _parse_many(jobs, self._pool, meanwhile)):
            if syntax is not None:
                self._keep(job.relpath, syntax, len(job.overlaid) if job.overlaid is not None
                           else self.stats.get(job.relpath, (0, 0))[0], kept=self._keeps_indexed_trees)
            self._store.keep(job.relpath, job.digest, result, job.rules_key, sites)
            if self._pool is not None:
                self._unwritten += entries
            else:
                _SharedFacts.unbounded += write_entries(entries)
            self._accept(job.relpath, result, sites)

    @contextlib.contextmanager
    def facts_only(self) -> Iterator[None]:
        """The files indexed on demand within keep no syntax tree, for a stage that reads the facts of many classes
        and the code of few: the landscape (35 base modules of vLLM 0.33.0's model classes, none read again, 2.8 MiB
        of a cold scan's peak memory). A file read within (``syntax``) is kept as anywhere."""
        keeps, self._keeps_indexed_trees = self._keeps_indexed_trees, False
        try:
            yield
        finally:
            self._keeps_indexed_trees = keeps

    def _write_shared(self, pool: WorkerPool) -> None:
        """Write the shared entries the build made. The pool's workers write them, where it has some, while this
        process goes on with the scan: written as each file was parsed, they took 7 to 10% of a cold build's parsing
        CPU time (a file created and renamed an entry: vLLM 0.33.0, SGLang 0.5.23), on cores the build needs, where
        the scan's judging, which follows, leaves all but one core idle. The process waits for them at its exit, and
        a later build in it, before it reads the shared facts."""
        entries, self._unwritten = self._unwritten, []
        _SharedFacts.unbounded += sum(len(blob) for _, blob in entries)
        try:
            if pool.started:
                for worker in range(pool.workers):
                    pool.leave(write_entries, entries[worker::pool.workers])
                return
        except RuntimeError:  # BrokenProcessPool: a worker died once its parse was done; they are written here
            pass
        write_entries(entries)

    def _accept(self, relpath: str, result: ModuleInfo | str, sites: dict[str, list]) -> None:
        self._accepted.add(relpath)
        if isinstance(result, str):
            self.skipped[relpath] = result
        else:
            self.modules[result.name] = result
        for rule_id, found in sites.items():
            self.sites.setdefault(rule_id, []).extend(found)

    def memo(self, name: str, compute: Callable[[], Any]) -> Any:
        """A result derived from the indexed files, reused while none of the files it read has changed.

        Its inputs are every module indexed by the time it is computed, so on-demand indexing done
        by ``compute`` itself is covered; a file added to or removed from the tree is a new key. The cache keeps the
        results used most recently, a bounded number of each kind (MEMO_KEPT, by the name's first part).
        """
        key = f"memo:{name}:{self.listing}"
        extras = self._store.extras
        entry = extras.get(key)
        if entry is not None:
            inputs, value = entry
            # Most results of a scan read the same files: those already checked are compared at once.
            if inputs.items() <= self._now.items() or all(self._digest(rel) == digest
                                                          for rel, digest in inputs.items()):
                self.digests.update(inputs)  # what the result was computed from is part of this scan's reading
                # ... and the modules computing it indexed are indexed here too (from the cache), as computing it would
                # have: what the report lists of the modules indexed (their platform dispatches) is the same warm.
                unindexed = [rel for rel in inputs.keys() - self._accepted if rel.endswith(".py")]
                if unindexed:
                    self._index_paths(sorted(unindexed))
                extras[key] = extras.pop(key)  # the most recently used (kept in that order when the cache is saved)
                return value
        value = compute()
        # One entry per name: the same result for another file list is stale. Results of other names (the paths of
        # other methods and runners) stay; evicting them made every warm scan trace its two paths again.
        extras = {k: v for k, v in self._store.extras.items() if k.rpartition(":")[0] != f"memo:{name}"}
        extras[key] = (dict(self.digests), value)
        kind = name.partition(":")[0]
        same = [k for k in extras if k.startswith("memo:") and k[5:].partition(":")[0] == kind]
        for stale in same[:max(0, len(same) - MEMO_KEPT.get(kind, MEMO_KEPT[""]))]:  # the least recently used
            del extras[stale]
        self._store.extras = extras
        self._store.dirty = True
        return value

    def save(self) -> None:
        if not self.overlay:  # what an overlay changed is not the tree's
            self._store.save()


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _parse_function(source: bytes, first: int, last: int, column: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function whose statement spans lines ``first`` to ``last`` of ``source`` at ``column``, parsed alone, at
    the lines and columns it has in the file: blank lines before it, and an ``if 1:`` to hold an indented one. None
    where that does not give it (the caller parses the file)."""
    if column and first < 2:
        return None
    lines = source.splitlines(keepends=True)[first - 1:last]
    head = b"\n" * (first - 1) if not column else b"\n" * (first - 2) + b"if 1:\n"
    try:
        body = ast.parse(head + b"".join(lines)).body
    except (SyntaxError, ValueError):
        return None
    node = body[0].body[0] if column and body and isinstance(body[0], ast.If) and body[0].body else \
        body[0] if body else None
    return node if isinstance(node, FUNCTIONS) and node.col_offset == column and node.end_lineno == last else None


class _Job(NamedTuple):
    """A file to index, as a pool's worker gets it."""

    root: str
    relpath: str
    digest: str
    rules: tuple  # the rules whose sites to find in it
    rules_key: str | None
    overlaid: bytes | None  # its contents, where an overlay replaces the file's
    platform: str
    shared: _SharedFacts | None  # where what it gives is written for every tree (None: an overlay's)


def _parse_one(job: _Job, keep: bool = False) -> tuple[ModuleInfo | str, dict[str, list], ast.Module | None,
                                                      list[tuple[str, bytes]]]:
    """Index one file: its facts (or why it has none), the rules' sites in it, its syntax tree where ``keep`` (in
    this process: pickling it back from a worker would cost more than parsing again), and its entries of the shared
    facts, to write (packed where it was parsed, beside the others' work)."""
    info, sites, tree = _indexed(job.root, job.relpath, job.rules, job.overlaid, job.platform)
    entries = []
    if job.shared is not None:
        entries.append(job.shared.entry(info, "module", job.relpath, job.digest))
        if job.rules_key is not None:
            entries.append(job.shared.entry(sites, "sites", job.relpath, job.digest, job.rules_key))
    return info, sites, tree if keep else None, [entry for entry in entries if entry is not None]


def _indexed(root: str, relpath: str, rules: tuple, overlaid: bytes | None,
             platform: str) -> tuple[ModuleInfo | str, dict[str, list], ast.Module | None]:
    try:
        size = len(overlaid) if overlaid is not None else Path(root, relpath).stat().st_size
        if size > MAX_FILE_BYTES:
            return f"{size / 1e6:.0f} MB, larger than any engine module: not read", {}, None
        source = overlaid if overlaid is not None else Path(root, relpath).read_bytes()
        tree = parse(source, relpath)
        info = module_info(tree, relpath, platform)
    except SyntaxProblem as exc:
        return str(exc), {}, None
    except OSError as exc:
        return f"unreadable: {exc.strerror}", {}, None
    except (RecursionError, MemoryError):  # `2**2**...**2` thousands deep exhausts ast.parse either way
        return "nested too deeply to read", {}, None
    sites: dict[str, list] = {}
    if rules:
        from .match import find_sites  # libcst: loaded only where a gate file is (re)indexed

        sites = find_sites(tree, source.decode("utf-8", errors="replace"), info, relpath, rules)
    return info, sites, tree


def _parse_many(jobs: list[_Job], pool: WorkerPool | None, meanwhile: Callable[[], None] | None) -> list:
    if pool is None or pool.workers < 2 or len(jobs) < 16:
        results = [_parse_one(job, keep=True) for job in jobs]
        if meanwhile:
            meanwhile()
        return results
    executor = pool.executor()
    # The gate files in one task, first: finding their sites loads libcst (~0.35 s of imports), which one worker then
    # loads, not each. The other files one a task, the largest first, spread over the workers.
    gated = [n for n, job in enumerate(jobs) if job.rules]
    batch = executor.submit(_parse_all, [jobs[n] for n in gated]) if gated else None
    others = [n for n, job in enumerate(jobs) if not job.rules]
    pending = executor.map(_parse_one, [jobs[n] for n in others])
    if meanwhile:
        meanwhile()
    done = dict(zip(others, pending)) | dict(zip(gated, batch.result() if batch is not None else ()))
    return [done[n] for n in range(len(jobs))]


def _parse_all(jobs: list[_Job]) -> list:
    return [_parse_one(job) for job in jobs]


class WorkerPool:
    """A process pool started only when there is work to share out (a warm scan never starts one), whose workers
    leave Ctrl-C to this process: on an interruption or a failure here they are stopped, not waited for."""

    def __init__(self, workers: int, initializer: Callable[[], None] | None = None):
        self.workers = workers
        self._initializer = initializer or _worker_init
        self._executor: ProcessPoolExecutor | None = None
        self._left = False  # whether work is left to it that the pool's end does not wait for

    @property
    def started(self) -> bool:
        return self._executor is not None

    def leave(self, work: Callable[..., Any], *args: Any) -> None:
        """Give a started pool work that its end does not wait for: it is done while this process goes on, and
        waited for at this process's exit, or by the next build (finish_left_work)."""
        assert self._executor is not None
        _LEFT.append(self._executor.submit(work, *args))
        self._left = True

    def executor(self) -> ProcessPoolExecutor:
        if self._executor is None:
            from concurrent.futures import ProcessPoolExecutor  # here: a warm scan starts no pool

            # The workers are forked with the stopping signals blocked and unblock them once their own handlers are
            # set: a Ctrl-C, or the SIGTERM that stops the pool, between the fork and the initializer would run the
            # CLI's handler (or Python's KeyboardInterrupt) inside the child's fork hooks, printed as "Exception
            # ignored" on the terminal the two share.
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
            try:
                self._executor = ProcessPoolExecutor(max_workers=self.workers,
                                                     initializer=functools.partial(_initialized, self._initializer))
                self._executor.submit(int)  # forks every worker now (fork starts them all at the first task)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return self._executor

    def start(self) -> None:
        """Start the workers now. A forked worker is a copy of this process: started before this process starts
        other threads, it holds no lock one of them held mid-work."""
        self.executor().submit(int).result()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, kind: type | None, *exc: object) -> None:
        if self._executor is None:
            return
        if kind is None:
            self._executor.shutdown(wait=not self._left)
            return
        # Interrupted (Ctrl-C) or failed: the workers are stopped, not waited for; one blocked on a full pipe
        # would never finish.
        processes = list(getattr(self._executor, "_processes", {}).values())
        _unreported(getattr(self._executor, "_executor_manager_thread", None))
        for process in processes:
            process.terminate()
        self._executor.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.join(timeout=1)


_LEFT: list[Future] = []  # the work left to pools (WorkerPool.leave)


def finish_left_work() -> None:
    """Wait for the work left to pools (by its futures: shutting an ended pool down again does not wait)."""
    while _LEFT:
        with contextlib.suppress(Exception):  # what a cache entry not written costs is a parse next time
            _LEFT.pop().result()


def _unreported(thread: threading.Thread | None) -> None:
    """The pool's manager thread, which reads the workers' results, may fail on a worker stopped mid-message: that
    failure is the stop itself, not news, and is not printed as "Exception in thread"."""
    if thread is None:
        return
    report = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.thread is not thread:
            report(args)

    threading.excepthook = hook


_STOPPING = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _initialized(initializer: Callable[[], None]) -> None:
    initializer()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING)


def _worker_init() -> None:
    gc.disable()  # see scan.audit: syntax trees make no cycles worth a collector's passes
    ignore_interrupts()
    _end_with_parent()


def _end_with_parent() -> None:
    """A worker with work left to it (WorkerPool.leave) outlives the pool's end: where this process ends at once
    (Ctrl-C: the CLI leaves by os._exit), the worker ends with it, as Linux can be told, not later on the pipe's end
    with a traceback on the terminal. Linux tells it when the thread that started the pool ends: the scan's builds
    run in the main thread (a left write cut short is a file parsed again). Elsewhere it ends on finding the pool's
    pipe closed."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def ignore_interrupts() -> None:
    """A pool worker's signals: Ctrl-C is the main process's to handle (it stops the pool), and the SIGTERM it stops a
    worker with ends the worker, as by default, not through the handler a forked worker inherits from the CLI."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for terminating in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(terminating, signal.SIG_DFL)


_parse_workers = min(os.cpu_count() or 1, 8)


def share_parsing(processes: int) -> None:
    """Parse in a pool of this process's share of the cores (none: in this process, where the share is one): for
    a process that is one of ``processes`` working side by side (matrix workers), where a pool as large as the
    machine would contend for the others' cores."""
    global _parse_workers
    _parse_workers = max(1, min(os.cpu_count() or 1, 8) // processes)


def _rules_key(rules: tuple) -> str:
    from .ruleset import rules_digest

    return rules_digest(list(rules))


_CACHE_MAGIC = b"specaudit-index\x001\n"  # format name and version; a checksum of the pickle follows
_OLD_CACHE_START = b"\x80\x05\x95"  # how the bare pickle that earlier versions wrote begins (protocol 5, a frame)


class _CacheStore:
    """One file per tree: file stat -> content digest, and (path, content digest) -> indexed facts and sites.
    What it lacks is looked up in the facts shared by every tree (_SharedFacts) before it is parsed.

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
        self.shared = _SharedFacts(salt, platform)
        self.dirty = False
        try:
            blob = self.path.read_bytes()
        except OSError:
            return  # no cache yet
        data = _unpack(blob)
        data = data if isinstance(data, dict) else None
        if data is None and blob.startswith(_OLD_CACHE_START):
            self.dirty = True  # a cache of a specaudit before the checksummed format: replaced without a word
        elif data is None:
            print(f"specaudit: warning: the index cache {self.path} is unreadable (damaged, or written by another "
                  "version); it is rebuilt", file=sys.stderr)
            self.dirty = True
        elif data.get("salt") == salt:
            self.stats, self.modules, self.sites, self.extras = (data["stats"], data["modules"], data["sites"],
                                                                 data["extras"])

    def digest(self, root: Path, relpath: str, listed: tuple[int, int] | None = None) -> str:
        """A file's content digest, kept by its size and mtime (``listed``: as the tree's listing stat'ed them)."""
        path = os.path.join(root, relpath)
        if listed is None:
            st = os.stat(path)
            listed = (st.st_size, st.st_mtime_ns)
        known = self.stats.get(relpath)
        if known and known[0] == listed[0] and known[1] == listed[1]:
            return known[2]
        if listed[0] > MAX_FILE_BYTES:  # never read whole: _parse_one says it was too large to be a module
            digest = f"size:{listed[0]}"
        else:
            with open(path, "rb") as fh:
                digest = hashlib.blake2b(fh.read(), digest_size=16).hexdigest()
        self.stats[relpath] = (*listed, digest)
        self.dirty = True
        return digest

    def facts(self, relpath: str, digest: str) -> ModuleInfo | str | None:
        """The file's facts (or why it has none), from this tree's cache or the shared one; None: never indexed."""
        key = (relpath, digest)
        if key not in self.modules:
            found = self.shared.get("module", relpath, digest)
            if found is None:
                return None
            self.modules[key] = found
            self.dirty = True
        return self.modules[key]

    def found_sites(self, relpath: str, digest: str, rules: str) -> dict[str, list] | None:
        """The sites of the rules (by their key) found in the file, from either cache; None: never looked for."""
        key = (relpath, digest, rules)
        if key not in self.sites:
            found = self.shared.get("sites", relpath, digest, rules)
            if found is None:
                return None
            self.sites[key] = found
            self.dirty = True
        return self.sites[key]

    def keep(self, relpath: str, digest: str, facts: ModuleInfo | str, rules: str | None,
             sites: dict[str, list]) -> None:
        """What parsing the file gave, in this tree's cache (the parse wrote the shared facts: _parse_one)."""
        self.modules[(relpath, digest)] = facts
        if rules is not None:
            self.sites[(relpath, digest, rules)] = sites
        self.dirty = True

    def save(self) -> None:
        self.shared.bound()
        if not self.dirty:
            return
        self._forget_the_gone()
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        try:
            tmp.write_bytes(_packed({"salt": self.salt, "stats": self.stats, "modules": self.modules,
                                     "sites": self.sites, "extras": self.extras}))
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
        # What later stages keep by a file's content digest, for contents the tree still has.
        contents = set(live.values())
        if "derived" in self.extras:
            self.extras["derived"] = {key: v for key, v in self.extras["derived"].items() if key[1] in contents}
        if "sha256" in self.extras:
            self.extras["sha256"] = {key: v for key, v in self.extras["sha256"].items() if key in contents}


def _unpack(blob: bytes, magic: bytes = _CACHE_MAGIC) -> Any:
    """The cache's contents, or None when the header, the checksum or the pickle does not hold."""
    head, checksum, payload = blob[:len(magic)], blob[len(magic):len(magic) + 16], blob[len(magic) + 16:]
    if head != magic or hashlib.blake2b(payload, digest_size=16).digest() != checksum:
        return None
    try:
        return pickle.loads(payload)
    except Exception:  # noqa: BLE001 - written by this code and checksummed: only another version's classes fail
        return None


def _packed(value: Any, magic: bytes = _CACHE_MAGIC) -> bytes:
    """``value`` as a cache file holds it: the format's header, the pickle's checksum, the pickle."""
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return magic + hashlib.blake2b(payload, digest_size=16).digest() + payload


_FACTS_MAGIC = b"specaudit-facts\x001\n"
# The shared facts' bound, in bytes of entries. The 39 vLLM releases from 0.10 to 0.33 come to ~20 MB (5,500 entries):
# this holds hundreds of releases; past it, the entries used least recently go.
SHARED_FACTS_BYTES = 256 * 2**20


class _SharedFacts:
    """Facts and sites of files by their content, shared by every tree's cache, so that a tree indexed for the
    first time parses only the files no tree indexed before it (consecutive releases share most of their files).

    One file an entry, named by a digest of its key (the code's salt, the platform, the file's path and content
    digest, for sites the rules' key), written whole under a temporary name and renamed, so that processes
    indexing side by side share it safely. Each holds a header and the checksum of its pickle, as the tree
    caches do: a damaged entry is dropped with a warning and the file parsed again. Reading an entry marks it
    used; the store is kept under SHARED_FACTS_BYTES by dropping the entries used least recently."""

    unbounded = 0  # bytes this process wrote since it last bounded the store
    bounded = False  # whether this process has bounded it once

    def __init__(self, salt: str, platform: str):
        self.dir = cache_dir("index", "facts")
        self.salt, self.platform = salt, platform
        self.warned = False

    def get(self, *key: str) -> Any:
        """The entry's value; None when there is none (or a damaged one, dropped)."""
        path = self._path(key)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # used now: the store is bounded by dropping the entries used least recently
        value = _unpack(blob, _FACTS_MAGIC)
        if value is None:
            self._drop_damaged(path)
        return value

    def put(self, value: Any, *key: str) -> int:
        """The entry written, and its size, which the caller adds to ``unbounded``: 0 where it cannot be written (the
        file is parsed again next time)."""
        entry = self.entry(value, *key)
        return write_entries([entry]) if entry is not None else 0

    def entry(self, value: Any, *key: str) -> tuple[str, bytes] | None:
        """The entry's path and contents, to write (write_entries); None for a value that cannot be pickled."""
        try:
            return str(self._path(key)), _packed(value, _FACTS_MAGIC)
        except (RecursionError, pickle.PicklingError):
            return None

    def bound(self) -> None:
        """Drop the entries used least recently while the store holds more than SHARED_FACTS_BYTES: checked once
        a process has written to it, then again after every tenth of the bound it writes."""
        if not _SharedFacts.unbounded or (_SharedFacts.bounded and _SharedFacts.unbounded < SHARED_FACTS_BYTES / 10):
            return
        _SharedFacts.unbounded, _SharedFacts.bounded = 0, True
        entries = []
        with os.scandir(self.dir) as shards:
            for shard in shards:
                if shard.is_dir():
                    entries += _entries(shard.path)
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= SHARED_FACTS_BYTES * 0.8:
                break
            with contextlib.suppress(OSError):
                os.unlink(path)
            total -= size

    def _path(self, key: tuple[str, ...]) -> Path:
        name = hashlib.blake2b(repr((self.salt, self.platform, *key)).encode(), digest_size=20).hexdigest()
        return self.dir / name[:2] / name[2:]

    def _drop_damaged(self, path: Path) -> None:
        if not self.warned:
            print(f"specaudit: warning: the shared index entry {path} is unreadable (damaged); it is dropped and its "
                  "file indexed again", file=sys.stderr)
            self.warned = True
        with contextlib.suppress(OSError):
            path.unlink()


def write_entries(entries: list[tuple[str, bytes]]) -> int:
    """Write entries of the shared facts, each whole under a temporary name and renamed: the bytes written. One not
    written is parsed again next time."""
    written = 0
    for path, blob in entries:
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(os.path.dirname(path))
            with open(tmp, "wb") as fh:
                fh.write(blob)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            continue
        written += len(blob)
    return written


def _entries(directory: str) -> list[tuple[float, int, str]]:
    """(last used, size, path) of each file in ``directory``."""
    found = []
    with os.scandir(directory) as files:
        for entry in files:
            try:
                st = entry.stat()
            except OSError:
                continue  # dropped by another process meanwhile
            found.append((st.st_mtime, st.st_size, entry.path))
    return found


def _code_salt() -> str:
    """Cached facts are only valid for the code that extracted them."""
    here = Path(__file__).parent
    digest = hashlib.blake2b(digest_size=8)
    # The memoized results (the traced paths, the landscape) are computed by the tracer and the player too.
    for name in ("facts.py", "../core/types.py", "gates.py", "index.py", "match.py", "resolve.py", "registry.py", "audit.py",
                 "trace.py", "decide.py", "landscape.py", "runner.py", "../launch/target.py",
                 # ... and the methods' resolutions by the methods stage (methods/resolve.py on play/).
                 *sorted(str(p.relative_to(here)) for folder in ("../play", "../methods")
                         for p in (here / folder).rglob("*.py"))):
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
    finish_left_work()  # the shared facts an earlier build still writes, this one may read
    files, unreadable, stats = _python_files(tree)
    store = _CacheStore(tree.root, _code_salt(), platform)
    index = TreeIndex(tree=tree, files=files, modules={}, skipped=dict(unreadable), digests={}, sites={}, _store=store,
                      overlay=dict(overlay or {}), platform=platform, stats=stats)
    rules = list(rules)
    for rule in rules:
        index.sites[rule.id] = []
    patterns = [(rule, re.compile("|".join(fnmatch.translate(g) for g in rule.files))) for rule in rules]
    # Most files are in no rule's globs: one pattern of them all passes those over at one match each.
    any_rule = re.compile("|".join(f"(?:{pattern.pattern})" for _, pattern in patterns))
    by_path: dict[str, tuple] = {}
    for relpath in sorted(files.values()):
        matching = tuple(rule for rule, pattern in patterns if pattern.match(relpath)) if any_rule.match(relpath) \
            else ()
        if matching:
            by_path[relpath] = matching
    prefix = tree.engine.models_package + "."
    wanted = [rel for name, rel in files.items() if name.startswith(prefix) or name == tree.engine.models_package]
    wanted += [files[name] for name in eager_modules if name in files]
    wanted = sorted(set(wanted + list(by_path)))
    bases: dict[str, frozenset[bytes]] = {}

    def read_bases() -> None:
        indexed = set(wanted)
        bases.update(_base_identifiers(tree, [rel for rel in files.values() if rel not in indexed], stats, store))
        if alongside is not None:
            alongside(index)

    with WorkerPool(_parse_workers) as pool:
        index._pool = pool
        index._index_paths(wanted, by_path, meanwhile=read_bases)
        model_classes = {c.encode() for m in index.modules.values() for c in m.classes}
        subclassing = sorted(rel for rel, names in bases.items() if names & model_classes)
        index._index_paths(subclassing)
        _index_base_modules(index)
        index._pool = None
        index._write_shared(pool)
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


def _python_files(tree: EngineTree) -> tuple[dict[str, str], dict[str, str], dict[str, tuple[int, int]]]:
    """The tree's modules (name -> relpath), the .py entries that cannot be read (relpath -> why), and each module
    file's size and mtime: the one stat of it that a build makes. Walked as ``os.walk`` walks (top down, a folder's
    files before its folders, symlinked folders not entered), each folder's relpath and dotted name made once."""
    files: dict[str, str] = {}
    unreadable: dict[str, str] = {}
    stats: dict[str, tuple[int, int]] = {}
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0  # access(2) lets root read every file: a system call less

    def walk(directory: str, relative: str, dotted: str) -> None:
        folders = []
        with os.scandir(directory) as entries:
            for entry in entries:
                name = entry.name
                try:
                    is_folder = entry.is_dir()
                except OSError:  # a looping symlink: os.walk takes it for a file too
                    is_folder = False
                if is_folder:
                    if name != "__pycache__" and not name.startswith(".") and not entry.is_symlink():
                        folders.append(entry)
                elif name.endswith(".py"):
                    relpath = relative + name
                    try:
                        st = entry.stat()
                    except OSError:
                        st = None
                    if st is None or not stat.S_ISREG(st.st_mode):
                        unreadable[relpath] = "a dangling or looping symlink, or not a file"
                    elif not as_root and not os.access(entry.path, os.R_OK):
                        unreadable[relpath] = "unreadable: permission denied"
                    else:
                        files[dotted[:-1] if name == "__init__.py" else dotted + name[:-3]] = relpath
                        stats[relpath] = (st.st_size, st.st_mtime_ns)
        for folder in folders:
            walk(folder.path, f"{relative}{folder.name}/", f"{dotted}{folder.name}.")

    package = tree.package_dir.relative_to(tree.root).as_posix()
    walk(str(tree.package_dir), f"{package}/", f"{package.replace('/', '.')}.")
    return files, unreadable, stats


def _base_identifiers(tree: EngineTree, relpaths: list[str], stats: dict[str, tuple[int, int]],
                      store: _CacheStore) -> dict[str, frozenset[bytes]]:
    """For files not indexed, the identifiers their class statements' bases name (a regex over raw bytes,
    far cheaper than parsing), to find the classes outside the models package that subclass a model
    class. Only files that import from the models package can; a substring test finds them first.
    Cached by the files' stat fingerprint."""
    fingerprint = hashlib.blake2b(digest_size=16)
    root = str(tree.root)
    for rel in sorted(relpaths):
        size, mtime = stats[rel]
        fingerprint.update(f"{rel}:{size}:{mtime};".encode())
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
