"""The atlas built from release trees into the user cache, on first use, and merged across releases.

Each release's templates are kept in ``<cache>/atlas/<engine>-<version>-<key>.v<FORMAT>.json.gz``, where the key is a digest
of the tree's content (each file's path and the digest of its bytes): a tree that changes is another atlas. A
file whose bytes another release already had is not parsed again (most files do not change from one release to the
next); the rest are parsed in a process pool. ``trees.json`` maps a tree's file listing (paths, sizes, mtimes) to
its key, so that a tree is not read whole to find its atlas. The merge of the releases asked for is cached too,
keyed by theirs.
"""

from __future__ import annotations

import gc
import gzip
import hashlib
import json
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..core.cache import cache_dir, inside, slug, write_atomic
from ..core.engines import ENGINES
from ..scan.facts import MAX_FILE_BYTES
from ..tree.locate import EngineTree, locate_directory
from .atlas import Atlas, Row, index_of, release_order, row_of
from .callers import call_of, call_row, caller_row, link_callers, signature_of, signature_row
from .knobs import knob_of
from .templates import file_facts

FORMAT = 9  # the cache files' format: another one is built again, not read (5: asserts without a message; 6: the
# conditions on the way to each template and what reaches them; 7: each raising function's callers, callers.py; 8: the
# callers' callees resolved through each module's imports; 9: messages read by the player, a constant as its text)
SUFFIX = f".v{FORMAT}.json.gz"  # in the name, so that a file of another format is never taken for this one's


def load_atlas(trees: Iterable[EngineTree], note: Callable[[str], None] | None = None) -> Atlas:
    """The atlas of ``trees``, each release's built where it is not yet (said through ``note``)."""
    built = sorted((release_file(tree, note) for tree in trees), key=lambda p: p.name)
    key = hashlib.blake2b("\n".join(p.name for p in built).encode(), digest_size=12).hexdigest()
    merged = cache_dir("atlas") / f"merged-{key}{SUFFIX}"
    data = _read(merged)
    if data is None:
        data = _merge([_read(path) or {} for path in built])
        _write(merged, data)
        for old in merged.parent.glob("merged-*.json.gz"):  # another format's too
            if old != merged:
                old.unlink(missing_ok=True)
    return Atlas(data)


@dataclass(frozen=True)
class BuiltRelease:
    """One release's part of the atlas, as ``specaudit atlas`` reports it."""

    label: str  # "vllm 0.33.0"
    templates: int
    seconds: float  # to build it (or to find it built)
    bytes: int  # its cache file's size
    built: bool  # False: it was in the cache already


def refresh(trees: Iterable[EngineTree], rebuild: bool = False) -> tuple[list[BuiltRelease], Atlas]:
    """Each tree's part of the atlas, built where it is not (every one, with ``rebuild``), and their merge."""
    done, paths = [], []
    for tree in trees:
        start = time.monotonic()
        old = _known_file(tree)
        if rebuild and old is not None:
            old.unlink(missing_ok=True)
        path = release_file(tree)
        data = _read(path) or {}
        templates = sum(len(facts[1]) for facts in data.get("files", {}).values())
        done.append(BuiltRelease(tree.label, templates, time.monotonic() - start, path.stat().st_size,
                                 rebuild or old is None))
        paths.append(tree)
    return done, load_atlas(paths)


def cached_release_trees() -> list[EngineTree]:
    """The releases fetched into the tree cache (``vllm-0.33.0``, not a wheel's own directory)."""
    trees = []
    for path in sorted(cache_dir("trees").iterdir()):
        dist, _, version = path.name.partition("-")
        if dist in {d for p in ENGINES.values() for d in p.distributions} and release_order(version)[0] == 0 \
                and (path / ".complete").exists():
            trees.append(locate_directory(path, None))
    return trees


def release_file(tree: EngineTree, note: Callable[[str], None] | None = None) -> Path:
    """The cache file of the tree's templates, built when it is not there."""
    directory = cache_dir("atlas")
    known = _known_file(tree)
    if known is not None:
        return known
    # a file past the index's bound is no engine module: not read, parsed as empty
    sources = {rel: (tree.root / rel).read_bytes() if size <= MAX_FILE_BYTES else b""
               for rel, size, _ in _python_files(tree.root, tree.engine.package)}
    trees_index = directory / "trees.json"
    digests = {rel: hashlib.blake2b(data, digest_size=16).hexdigest() for rel, data in sources.items()}
    key = hashlib.blake2b("\n".join(f"{r} {d}" for r, d in digests.items()).encode(), digest_size=12).hexdigest()
    path = inside(directory, directory / f"{slug(tree.engine.name)}-{slug(tree.version)}-{key}{SUFFIX}")
    if _read(path) is None:
        if note:
            note(f"building the message atlas of {tree.label} ({len(sources)} files, once)")
        _write(path, _build(tree, sources, digests, directory))
    index = _read_json(trees_index) or {}
    index[str(tree.root)] = [_listing(tree), path.name]
    write_atomic(trees_index, json.dumps(index, indent=0).encode())
    return path


def release_facts(tree: EngineTree) -> dict:
    """The tree's part of the atlas as its cache file holds it (built where it is not): ``files`` (package path ->
    [digest, templates, flag fields, functions, calls, imports]) and ``callers``."""
    return _read(release_file(tree)) or {}


def _known_file(tree: EngineTree) -> Path | None:
    """The tree's atlas file, where ``trees.json`` has it for the tree's file listing as it is now."""
    directory = cache_dir("atlas")
    known = (_read_json(directory / "trees.json") or {}).get(str(tree.root))
    if not known or known[0] != _listing(tree) or not known[1].endswith(SUFFIX):
        return None
    return directory / known[1] if (directory / known[1]).is_file() else None


def _listing(tree: EngineTree) -> str:
    """What tells whether the tree is as it was when its atlas was built. A release fetched into the tree cache is
    published whole, once (core.cache.staged_tree: filled, marked ``.complete``, renamed into place): its marker's
    own stat stands for its files, so that finding its atlas costs one stat, not a walk of thousands of files (25
    releases: 1.1 s of each explain). Any other tree (a directory, an installed engine) is listed file by file."""
    marker = tree.root / ".complete"
    if tree.root.resolve().parent == cache_dir("trees").resolve():
        try:
            st = marker.stat()
        except OSError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode):
            stats: object = ("complete", st.st_ino, st.st_size, st.st_mtime_ns)
            return hashlib.blake2b(repr(stats).encode(), digest_size=12).hexdigest()
    stats = _python_files(tree.root, tree.engine.package)
    return hashlib.blake2b(repr(stats).encode(), digest_size=12).hexdigest()


def _build(tree: EngineTree, sources: dict[str, bytes], digests: dict[str, str], directory: Path) -> dict:
    reused = _parsed_before(directory, set(digests.values()))
    todo = [rel for rel in sources if digests[rel] not in reused]
    workers = min(os.cpu_count() or 1, 4) if len(todo) > 64 else 1
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            parsed = list(pool.map(_parse, [sources[rel] for rel in todo], chunksize=32))
    else:
        parsed = [_parse(sources[rel]) for rel in todo]
    reused.update({digests[rel]: result for rel, result in zip(todo, parsed)})
    files = {rel: [digests[rel], *reused[digests[rel]]] for rel in sources}
    return {"format": FORMAT, "engine": tree.engine.name, "version": tree.version, "files": files,
            "callers": _callers(files)}


def release_of(engine: str, version: str, sources: dict[str, bytes]) -> dict:
    """One release's part of the atlas made from its files' sources here, as ``_build`` makes it from a tree's."""
    files = {rel: [hashlib.blake2b(data, digest_size=16).hexdigest(), *_parse(data)] for rel, data in sources.items()}
    return {"format": FORMAT, "engine": engine, "version": version, "files": files, "callers": _callers(files)}


def merged_of(releases: list[dict]) -> Atlas:
    """The atlas of releases made by ``release_of``, merged as ``load_atlas`` merges the cached ones."""
    return Atlas(_merge(releases))


def _callers(files: dict[str, list]) -> list[list]:
    """[file, function, its callers' rows] for each function of the release that makes a template (callers.py)."""
    defs = {rel: {name: signature_of(row) for name, row in facts[3].items()} for rel, facts in files.items()}
    calls = {rel: [call_of(row) for row in facts[4]] for rel, facts in files.items()}
    imports = {rel: facts[5] for rel, facts in files.items()}
    wanted = dict.fromkeys((rel, row[2]) for rel, facts in files.items() for row in facts[1])
    linked = link_callers(defs, calls, wanted, imports)
    return [[rel, function, [caller_row(c) for c in found]] for (rel, function), found in linked.items()]


# templates, fields, defs, calls, imports
Parsed = tuple[list[Row], dict[str, list[str]], dict[str, list], list[list], dict[str, str]]


def _parse(source: bytes) -> Parsed:
    gc.disable()  # ast builds millions of objects and frees none of them here: the collector only costs time
    try:
        facts = file_facts(source)
    finally:
        gc.enable()
    return ([row_of(t) for t in facts.templates], facts.fields,
            {name: signature_row(s) for name, s in facts.defs.items()}, [call_row(c) for c in facts.calls],
            facts.imports)


def _parsed_before(directory: Path, wanted: set[str]) -> dict[str, Parsed]:
    """What the releases built before found in the files whose bytes this one shares with them."""
    found: dict[str, Parsed] = {}
    for path in directory.glob(f"*-*{SUFFIX}"):
        if path.name.startswith("merged-"):
            continue
        for digest, *facts in ((_read(path) or {}).get("files") or {}).values():
            if digest in wanted:
                found[digest] = tuple(facts)  # type: ignore[assignment]
    return found


def _merge(releases: list[dict]) -> dict:
    releases = [r for r in releases if r]
    releases.sort(key=lambda r: (r["engine"], release_order(r["version"])))
    merged: dict[str, Row] = {}  # identity -> [engine, file, row, releases, lines]
    fields: dict[str, dict[str, set[str]]] = {}
    callers: dict[str, dict[str, list]] = {}  # "engine\tfile\tfunction" -> a caller's identity -> its row
    for release in releases:
        engine, version = release["engine"], release["version"]
        for rel, function, rows in release.get("callers", ()):
            kept = callers.setdefault(f"{engine}\t{rel}\t{function}", {})
            for row in rows:  # the newest release's row of a caller that makes the same call in each
                kept[json.dumps(_without_lines(row))] = row
        for rel, (_, rows, found, *_) in release["files"].items():
            for cls, names in found.items():
                fields.setdefault(engine, {}).setdefault(cls, set()).update(names)
            for row in rows:
                identity = json.dumps([engine, rel, row[:3], row[4:7]])  # not its way: one message, one entry
                entry = merged.setdefault(identity, [engine, rel, row, [], []])
                entry[2] = row  # the newest release's line
                entry[3].append(version)
                entry[4].append(row[3])
    rows = list(merged.values())
    wanted = {f"{engine}\t{file}\t{row[2]}" for engine, file, row, _, _ in rows}
    flags = {e: {c: frozenset(n) for c, n in cs.items()} for e, cs in fields.items()}
    linked = {key: found for key, kept in callers.items() if key in wanted
              for found in [[r for r in kept.values() if _names_a_knob(r, flags.get(key.partition("\t")[0], {}))]]
              if found}
    return {"format": FORMAT, "entries": rows, "index": index_of(rows),
            # read only when a located raise's own conditions name no knob (Atlas.callers): each function's callers
            # a string, so that loading the atlas parses none of them and a lookup only the one it needs
            "callers": {key: json.dumps(found[-MAX_MERGED_CALLERS:], separators=(",", ":"))
                        for key, found in linked.items()},
            "releases": {e: [r["version"] for r in releases if r["engine"] == e] for e in {r["engine"] for r in releases}},
            "fields": {e: {c: sorted(n) for c, n in cs.items()} for e, cs in fields.items()}}


MAX_MERGED_CALLERS = 8  # distinct callers kept for a function over all the releases, the newest releases' last


_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_GETATTR = re.compile(r"""getattr\(\s*([A-Za-z_][\w.]*)\s*,\s*['"](\w+)['"]""")
_ENV_READ = re.compile(r"""os\.(?:getenv|environ\.get)\(\s*['"]\w+['"]""")


def _names_a_knob(row: list, fields: dict[str, frozenset[str]]) -> bool:
    """Whether a caller's row (or a row of its callers) reads a knob (knobs.knob_of) in the conditions it calls
    under, the arguments it hands on or what reaches them: a caller that reads none gives no fix, and is not kept."""
    file, function, _, way, reaching, bindings, _, up = row
    texts = [c for c, _ in way] + [v for _, v in reaching] + [a for _, a in bindings]
    for text in texts:
        if _ENV_READ.search(text):
            return True
        text = _GETATTR.sub(lambda m: f"{m[1]}.{m[2]}", text)
        if any(knob_of(name, function, fields) for name in _DOTTED.findall(text)):
            return True
    return any(_names_a_knob(u, fields) for u in up)


def _without_lines(row: list) -> list:
    """A caller's row without its line numbers (and its callers'), which move from release to release."""
    return [row[0], row[1], *row[3:7], [_without_lines(u) for u in row[7]]]


def _python_files(root: Path, package: str) -> list[tuple[str, int, int]]:
    """The package's ``.py`` files under ``root``: (path from ``root``, size, mtime), sorted by path; a directory
    entry's own stat (scandir's), so that a listing of a release costs no path lookups of its own."""
    found: list[tuple[str, int, int]] = []
    todo = [package]
    while todo:
        rel = todo.pop()
        try:
            entries = list(os.scandir(root / rel))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        todo.append(os.path.join(rel, entry.name))
                    continue
                st = entry.stat() if entry.name.endswith(".py") else None
            except OSError:  # a dangling link
                continue
            if st is not None and stat.S_ISREG(st.st_mode):  # not a FIFO or device a hostile tree names .py
                found.append((os.path.join(rel, entry.name), st.st_size, st.st_mtime_ns))
    return sorted(found)


def _read(path: Path) -> dict | None:
    """A cache file's contents, or None where it is missing, damaged or of another format."""
    gc.disable()  # the collector would walk the atlas's half million lists as they are made: twice the time
    try:
        data = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, EOFError, ValueError):
        return None
    finally:
        gc.enable()
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write(path: Path, data: dict) -> None:
    try:
        write_atomic(path, gzip.compress(json.dumps(data, separators=(",", ":")).encode(), compresslevel=6))
    except OSError as exc:  # the atlas stands without its cache: the next explain builds it again
        print(f"specaudit: warning: the message atlas was not saved ({exc.strerror})", file=sys.stderr)
