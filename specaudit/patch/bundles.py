"""Patch bundles (``patches/<engine>/<bundle>/bundle.yaml``) that open gates, applied safely and
reversibly.

A bundle names an engine, a version range, a target and its changes (codemods.py). Planning runs each
change's codemod on an in-memory copy of the files after checking its precondition (the gate it opens is
there for the bundle's targets), then checks the postcondition by scanning the edited copy (the gate no
longer blocks) and compiling it. Nothing touches the tree before that.

The patch state lives in a shadow git repository outside the engine tree (``~/.cache/specaudit/patches``),
keyed by the tree's location and release: the pristine and applied copies of every file a bundle changed,
a commit per apply and revert. Writing is journaled: until the new state is saved, the journal names what
each file must be restored to and the state from before, so an exception or Ctrl-C restores at once, and a
kill at any step is rolled back by the next run, before anything else. A lock keeps two runs apart.
"""

from __future__ import annotations

import difflib
import fcntl
import hashlib
import io
import json
import os
import signal
import tokenize
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ..core.cache import inside, write_atomic
from ..core.data import OBJECT, Field, Kind, check_fields, data_dir
from ..core.errors import SpecauditError
from ..core.types import ExitCode, Status
from ..launch.target import Target, load_preset
from ..tree.locate import EngineTree
from ..tree.provenance import read_state_json, record_hashes, shadow_dir, state_problem
from .codemods import CODEMODS, Change, PatchContext

if TYPE_CHECKING:
    from ..scan.audit import Analysis

# Versions a bundle range is probed with to find overlaps between bundles of one target.
_PROBE_VERSIONS = [Version(f"0.{minor}.{patch}") for minor in range(80) for patch in range(6)]


# The journal's fields, as transaction() writes them: each file to the copy it is restored from, each file's hashes
# (of that copy, and of what the run wrote), and the state from before.
_JOURNAL_FIELDS = {
    "restore": Field(Kind("a mapping of file to the copy it is restored from",
                          lambda v: isinstance(v, dict) and all(isinstance(kind, str) for kind in v.values()))),
    "hashes": Field(Kind("a mapping of file to its copy's and written sha256",
                         lambda v: isinstance(v, dict) and all(isinstance(e, dict) and all(
                             isinstance(e.get(key, ""), str) for key in ("copy", "written")) for e in v.values()))),
    "state": Field(OBJECT),
}


class PatchRefused(SpecauditError):
    """The tree is not as the bundle expects (drift): refused unless --force."""

    exit_code = ExitCode.DRIFT


class OutOfRange(SpecauditError):
    exit_code = ExitCode.OUT_OF_RANGE


class Locked(SpecauditError):
    exit_code = ExitCode.LOCKED


@dataclass(frozen=True)
class Bundle:
    id: str
    engine: str
    versions: SpecifierSet
    target: str
    method: str  # the speculative method whose gates it opens; its presets are rescanned as launches of it
    presets: tuple[str, ...]
    description: str
    origin: str
    forwarded: str
    upstream: str
    changes: tuple[Change, ...]
    path: Path
    config: dict[str, Any] | None = None  # a synthesized bundle's target config: the launch its rescan judges

    def targets(self) -> dict[str, Target]:
        """The targets whose launches the postcondition and the rescan judge: the presets, and the config."""
        found = {preset: load_preset(preset) for preset in self.presets}
        if self.config is not None:
            found[self.target] = Target(self.target, f"{self.path / 'bundle.yaml'}", self.config)
        return found


def load_bundles(engine: str, directory: Path | None = None) -> list[Bundle]:
    directory = directory or data_dir("patches") / engine
    bundles = [_bundle_from(path) for path in sorted(directory.glob("*/bundle.yaml"))]
    for i, a in enumerate(bundles):
        for b in bundles[i + 1:]:
            if a.target == b.target and any(v in a.versions and v in b.versions for v in _PROBE_VERSIONS):
                raise SpecauditError(f"bundles {a.id} and {b.id} overlap for target {a.target}")
    return bundles


def _bundle_from(path: Path) -> Bundle:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        versions = SpecifierSet(data["versions"])
        changes = tuple(Change(c["id"], c["opens"], c["codemod"], dict(c.get("args") or {}), path.parent)
                        for c in data["changes"])
        bundle = Bundle(data["id"], data["engine"], versions, data["target"], str(data["method"]).lower(),
                        tuple(data["presets"]),
                        " ".join(data["description"].split()), data["origin"], data["forwarded"],
                        " ".join(data["upstream"].split()), changes, path.parent, data.get("config"))
    except (yaml.YAMLError, KeyError, TypeError, InvalidSpecifier) as exc:
        raise SpecauditError(f"{path}: not a valid bundle ({type(exc).__name__}: {exc})") from None
    unknown = [c.codemod for c in bundle.changes if c.codemod not in CODEMODS]
    if unknown:
        raise SpecauditError(f"{path}: unknown codemod {unknown[0]} (known: {', '.join(CODEMODS)})")
    return bundle


def load_bundle(directory: Path) -> Bundle:
    """A bundle directory of its own (a synthesized one, written out for review)."""
    if not (directory / "bundle.yaml").is_file():
        raise SpecauditError(f"{directory}: no bundle.yaml there")
    return _bundle_from(directory / "bundle.yaml")


def select_bundle(bundles: list[Bundle], target: str, version: str) -> Bundle:
    wanted = target.replace("-", "_")
    for_target = [b for b in bundles if b.target == wanted]
    if not for_target:
        known = sorted({b.target for b in bundles})
        raise SpecauditError(f"no patch bundle for target {target!r} (known targets: {', '.join(known)})")
    try:
        parsed = Version(version)
    except InvalidVersion:
        raise OutOfRange(f"cannot read the engine's version {version!r} to pick a bundle") from None
    for bundle in for_target:
        if bundle.versions.contains(parsed, prereleases=True):
            return bundle
    ranges = "; ".join(f"{b.id}: {b.versions}" for b in for_target)
    raise OutOfRange(f"no bundle for {target} covers release {version} (bundles: {ranges})")


# -- planning ---------------------------------------------------------------------------------------------


@dataclass
class Plan:
    bundle: Bundle
    tree: EngineTree
    edits: dict[str, tuple[bytes, bytes]]  # relpath -> (current, patched)
    applied: list[str]  # change ids that apply
    skipped: list[tuple[str, str]]  # change id -> why not (its precondition does not hold)
    patched: Analysis = field(repr=False)  # the tree with the edits analysed: what the postcondition judged

    def diff(self) -> str:
        out: list[str] = []
        for relpath, (old, new) in sorted(self.edits.items()):
            out += difflib.unified_diff(_text(old).splitlines(keepends=True), _text(new).splitlines(keepends=True),
                                        f"a/{relpath}", f"b/{relpath}")
        return "".join(out)


def plan(tree: EngineTree, bundle: Bundle, analysis: Analysis | None = None) -> Plan:
    """What the bundle would change in the tree, checked before and after, in memory. ``analysis``: the tree's,
    where the caller has it already; the edited tree is analysed on its platform."""
    from ..launch.request import Launch
    from ..scan.audit import analyze, audit

    analysis = analysis or analyze(tree)
    launches = {name: Launch(target, method=bundle.method) for name, target in bundle.targets().items()}
    judges = {preset: analysis.judge(launch) for preset, launch in launches.items()}
    context = PatchContext(analysis.index, judges, analysis.index.sites, analysis.protocols)
    applied, skipped = [], []
    for change in bundle.changes:
        reason = CODEMODS[change.codemod](change, context)
        (skipped.append((change.id, reason)) if reason else applied.append(change.id))
    edits = {rel: (analysis.index.source(rel), context.encoded(rel)) for rel in context.sources
             if context.encoded(rel) != analysis.index.source(rel)}
    for relpath, (_, new) in edits.items():
        try:
            compile(new, relpath, "exec")
        except SyntaxError as exc:
            raise SpecauditError(f"bundle {bundle.id} would leave {relpath} uncompilable: {exc}") from None
    opened = {c.opens for c in bundle.changes if c.id in applied}
    patched = analyze(tree, overlay={rel: new for rel, (_, new) in edits.items()}, platform=analysis.platform)
    for preset, launch in launches.items():
        after = audit(patched, launch)
        still = [f for f in after.findings if f.rule_id in opened and f.status == Status.BLOCKS]
        if still:
            raise SpecauditError(f"bundle {bundle.id}: after its changes, {still[0].title} still blocks {preset} "
                                 f"({still[0].location}: {still[0].why})")
    return Plan(bundle, tree, edits, applied, skipped, patched)


# -- the shadow history and the journaled writes ----------------------------------------------------------


class Shadow:
    """The patch state of one tree, in a git repository of its own."""

    def __init__(self, tree: EngineTree, create: bool = True):
        self.tree = tree
        self.dir = shadow_dir(tree, create)
        self.state_file = self.dir / "state.json"
        self.journal = self.dir / "journal.json"

    @property
    def repo(self):
        """The history, created on the first write (a dry run or a status creates none)."""
        import git

        # A commit the last run was killed in leaves git's own locks (the index's, a ref's: refs/heads/master.lock):
        # only one specaudit holds this shadow (see lock), so every one is stale.
        if (self.dir / ".git").is_dir():
            for stale in (self.dir / ".git").rglob("*.lock"):
                stale.unlink(missing_ok=True)
        if not (self.dir / ".git").exists():
            repo = git.Repo.init(self.dir)
            with repo.config_writer() as config:
                config.set_value("user", "name", "specaudit")
                config.set_value("user", "email", "specaudit@localhost")
            return repo
        return git.Repo(self.dir)

    @property
    def state(self) -> dict[str, Any]:
        if self.state_file.exists():
            return self._checked_state(read_state_json(self.state_file), self.state_file)
        return {"tree": str(self.tree.root), "version": self.tree.version, "bundles": {}, "files": {}}

    def copy(self, kind: str, relpath: str) -> bytes:
        return inside(self.dir, self.dir / kind / _relative(relpath)).read_bytes()

    def save(self, state: dict[str, Any], copies: dict[tuple[str, str], bytes], message: str) -> None:
        for (kind, relpath), data in copies.items():
            path = inside(self.dir, self.dir / kind / _relative(relpath))
            path.parent.mkdir(parents=True, exist_ok=True)
            _replace(path, data)
        _replace(self.state_file, (json.dumps(state, indent=2, sort_keys=True) + "\n").encode())
        _crash_point()
        # Closed here, not by its finalizer: GitPython's Repo.__del__ stops git's helper processes, and an interrupt
        # that lands in a finalizer is swallowed (printed as "Exception ignored in"), not raised.
        with self.repo as repo:
            repo.git.add(A=True)
            if repo.is_dirty(index=True, untracked_files=True) or not repo.head.is_valid():
                repo.index.commit(message)

    def lock(self) -> _Lock:
        return _Lock(self.dir / "lock")

    def recover(self, force: bool = False) -> list[str]:
        """Roll back an operation that did not finish (the process was killed): every file it names back as it
        was, and the state as it was before. Runs first in every patch command. A file is restored only where the
        journal verifies: its copy is the one the journal hashed, and the file is as the run left it (before or
        after its write; else it was edited since, and only ``force`` restores it), inside the tree and reached
        through no symlink."""
        if not self.journal.exists():
            return []
        entries = read_state_json(self.journal)
        check_fields(entries, _JOURNAL_FIELDS, str(self.journal))
        self._checked_state(entries.get("state"), self.journal)
        restore, hashes = entries.get("restore"), entries.get("hashes")
        if restore is None or hashes is None:
            raise PatchRefused(f"{self.journal}: an interrupted run's journal that does not verify (no hashes of its "
                               f"files); nothing was restored. Move {self.dir} aside to start over")
        copies = {}
        for relpath, kind in restore.items():
            target = _in_tree(self.tree, relpath)
            try:
                data = self.copy(kind, relpath) if kind in ("pristine", "applied") else None
            except OSError:
                data = None
            expected = hashes.get(relpath) or {}
            if data is None:
                raise PatchRefused(f"{self.journal}: names a copy of {relpath} that is not there ({kind!r}); nothing was "
                                   f"restored. Move {self.dir} aside to start over")
            if sha256(data) != expected.get("copy"):
                raise PatchRefused(f"{self.dir / kind / relpath}: the copy an interrupted run would restore is not "
                                   f"the one its journal recorded; nothing was restored. Move {self.dir} aside")
            current = sha256(target.read_bytes()) if target.is_file() else None
            if current not in (expected.get("copy"), expected.get("written"), None) and not force:
                raise PatchRefused(f"{relpath} was edited after an interrupted specaudit run; --force restores it to "
                                   f"the copy from before that run (the edits are lost)")
            copies[relpath] = (target, data)
        for target, data in copies.values():
            _replace(target, data)
            _clear_pycache(target)
            # A write killed mid-way (SIGKILL) leaves its temporary file beside the file: cache.write_atomic's name.
            for stale in target.parent.glob(f".{target.name}.*.specaudit-tmp"):
                stale.unlink(missing_ok=True)
        self.save(entries["state"], {}, f"roll back an interrupted run: {', '.join(restore)}")
        self.journal.unlink()
        return list(restore)

    def _checked_state(self, state: Any, path: Path) -> dict[str, Any]:
        """A patch state (state.json's, or the journal's state from before) of the shape patch writes: another is bad
        input, not drift."""
        problem = state_problem(state)
        if problem:
            raise SpecauditError(f"{path}: unreadable patch state ({problem}); move the directory {self.dir} aside to "
                                 "start over (it holds the pristine copies)")
        return state

    @contextmanager
    def transaction(self, files: dict[str, bytes], restore_to: str, state: dict[str, Any]) -> Iterator[None]:
        """Write files into the tree, then let the caller save the new state. Until both are done the journal
        names each file's ``restore_to`` copy and the ``state`` before: a failure, a Ctrl-C or a kill at any point
        ends with the tree and the state as they were (here, or in the next run's ``recover``)."""
        hashes = {rel: {"copy": sha256(self.copy(restore_to, rel)), "written": sha256(data)} for rel, data in files.items()}
        _replace(self.journal, json.dumps({"restore": {rel: restore_to for rel in files}, "hashes": hashes,
                                           "state": state}).encode())
        _crash_point()
        try:
            for relpath, data in files.items():
                _replace(_in_tree(self.tree, relpath), data)
                _clear_pycache(self.tree.root / relpath)
                _crash_point()
            yield
        except BaseException:
            self.recover(force=True)  # this run's own writes: nothing else has touched them
            raise
        self.journal.unlink()
        _crash_point()


class _Lock:
    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> _Lock:
        self.fh = open(self.path, "w")
        try:
            fcntl.flock(self.fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.fh.close()
            raise Locked(f"another specaudit patch is running on this tree (lock {self.path})") from None
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fh, fcntl.LOCK_UN)
        self.fh.close()


# Every write of a patch goes through here (the tests interrupt it).
_replace = write_atomic


def _relative(relpath: str) -> str:
    """A path the patch state names, refused unless it is plainly relative (no root, no ``..``)."""
    parts = Path(relpath).parts
    if not parts or Path(relpath).is_absolute() or ".." in parts:
        raise PatchRefused(f"{relpath!r}: the patch state names a path outside the tree; refused")
    return relpath


def _in_tree(tree: EngineTree, relpath: str) -> Path:
    """The tree's file at ``relpath``, reached through no symlink (a planted link would send a write elsewhere)."""
    path = tree.root / _relative(relpath)
    for step in [*reversed(path.relative_to(tree.root).parents[:-1]), path.relative_to(tree.root)]:
        if (tree.root / step).is_symlink():
            raise PatchRefused(f"{tree.root / step}: a symlink inside the tree, where specaudit would write; refused")
    return inside(tree.root, path)


_steps = 0


def _crash_point() -> None:
    """A boundary between two durable writes. The kill-at-every-step test sets SPECAUDIT_TEST_KILL_AT_STEP=N
    and the process dies here, as with kill -9, at the Nth one."""
    global _steps
    _steps += 1
    if os.environ.get("SPECAUDIT_TEST_KILL_AT_STEP") == str(_steps):
        os.kill(os.getpid(), signal.SIGKILL)


def _clear_pycache(path: Path) -> None:
    """Stale bytecode of a rewritten module would be loaded instead of it when mtimes collide."""
    cache = path.parent / "__pycache__"
    if cache.is_dir():
        for pyc in cache.glob(f"{path.stem}.*.pyc"):
            pyc.unlink(missing_ok=True)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- the three operations ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    message: str
    diff: str = ""
    changed: tuple[str, ...] = ()


def apply(tree: EngineTree, bundle: Bundle, dry_run: bool = False, force: bool = False) -> Outcome:
    shadow = Shadow(tree)
    with shadow.lock():
        recovered = shadow.recover(force)
        state = shadow.state
        applied = state["bundles"].get(bundle.id)
        if applied and all(sha256(_read(tree, rel)) == state["files"][rel]["applied"] for rel in applied["files"]):
            return Outcome(f"{bundle.id} is already applied to {tree.label}: nothing to do")
        _refuse_drift(tree, shadow, state, force, bundle)
        the_plan = plan(tree, bundle)
        if not force:
            _refuse_foreign_edits(tree, state, the_plan.edits)
        if not the_plan.edits:
            reasons = "; ".join(f"{cid}: {why}" for cid, why in the_plan.skipped)
            return Outcome(f"{bundle.id} is not needed for {tree.label}: its preconditions do not hold ({reasons}). "
                           f"Upstream: {bundle.upstream}")
        if dry_run:
            return Outcome(_plan_summary(the_plan, "would apply"), the_plan.diff(), tuple(the_plan.edits))
        _check_writable(tree, the_plan.edits)
        # What is on disk now is what a revert must bring back (a file reverted earlier may have changed since).
        pristine = {("pristine", rel): old for rel, (old, _) in the_plan.edits.items()}
        for rel, (old, _) in the_plan.edits.items():
            state["files"][rel] = {"pristine": sha256(old)}
        shadow.save(state, pristine, f"pristine copies before {bundle.id}")
        before = json.loads(json.dumps(state))
        with shadow.transaction({rel: new for rel, (_, new) in the_plan.edits.items()}, "pristine", before):
            for rel, (_, new) in the_plan.edits.items():
                state["files"][rel]["applied"] = sha256(new)
                state["files"][rel]["bundle"] = bundle.id
            state["bundles"][bundle.id] = {"changes": the_plan.applied, "files": sorted(the_plan.edits)}
            shadow.save(state, {("applied", rel): new for rel, (_, new) in the_plan.edits.items()},
                        f"apply {bundle.id}: {', '.join(the_plan.applied)}")
        note = f" (rolled back an interrupted run first: {', '.join(recovered)})" if recovered else ""
        return Outcome(_plan_summary(the_plan, "applied") + note, the_plan.diff(), tuple(the_plan.edits))


def revert(tree: EngineTree, force: bool = False) -> Outcome:
    shadow = Shadow(tree)
    with shadow.lock():
        recovered = shadow.recover(force)
        state = shadow.state
        files = [rel for rel, info in state["files"].items() if "applied" in info]
        if not files:
            return Outcome(f"no bundle is applied to {tree.label}" +
                           (f" (rolled back an interrupted run: {', '.join(recovered)})" if recovered else ""))
        for rel in files:
            pristine = shadow.copy("pristine", rel)
            if sha256(pristine) != state["files"][rel]["pristine"]:
                raise PatchRefused(f"{shadow.dir / 'pristine' / rel}: the pristine copy of {rel} is damaged (its hash is "
                                   f"not the one recorded); nothing was reverted. Reinstall the release's wheel instead")
            path = _in_tree(tree, rel)
            if path.is_dir():
                raise PatchRefused(f"{path} is a directory now, where specaudit patched a file: move it aside and "
                                   f"run --revert again")
            if not path.exists():
                continue  # deleted since: the pristine copy is put back, nothing is lost
            current = path.read_bytes()
            if sha256(current) != state["files"][rel]["applied"] and not force:
                raise PatchRefused(f"{rel} changed since specaudit patched it; --force reverts it anyway:\n"
                                   + _diff(rel, shadow.copy("applied", rel), current))
        _check_writable(tree, dict.fromkeys(files))
        bundles = sorted(state["bundles"])
        before = json.loads(json.dumps(state))
        with shadow.transaction({rel: shadow.copy("pristine", rel) for rel in files}, "applied", before):
            for rel in files:
                state["files"][rel].pop("applied", None)
                state["files"][rel].pop("bundle", None)
            state["bundles"] = {}
            shadow.save(state, {}, f"revert {', '.join(bundles)}")
        return Outcome(f"reverted {', '.join(bundles)}: {len(files)} file(s) restored byte for byte", changed=tuple(files))


@dataclass(frozen=True)
class FileStatus:
    relpath: str
    # "specaudit" (as a bundle left it), "drifted" (changed since), "foreign" (not the wheel's, not ours), "recovered"
    # (rolled back just now, from a run that was interrupted)
    state: str
    bundle: str | None
    detail: str


def status(tree: EngineTree) -> tuple[dict[str, Any], list[FileStatus]]:
    shadow = Shadow(tree)
    # Under the lock: an apply under way is seen as one (Locked), never as files changed by someone else; an
    # interrupted run is rolled back first, as any patch command does.
    with shadow.lock():
        recovered = shadow.recover()
        state = shadow.state
        return state, [FileStatus(rel, "recovered", None, "rolled back from an interrupted specaudit run, as it was "
                                  "before it") for rel in recovered] + _file_states(tree, state)


def _file_states(tree: EngineTree, state: dict[str, Any]) -> list[FileStatus]:
    rows = []
    for rel, info in sorted(state["files"].items()):
        if "applied" not in info:
            continue
        path = _in_tree(tree, rel)
        if not path.is_file():
            rows.append(FileStatus(rel, "drifted", info.get("bundle"), "deleted, or no longer a file; --revert puts "
                                   "the pristine copy back"))
            continue
        current = sha256(path.read_bytes())
        if current == info["applied"]:
            rows.append(FileStatus(rel, "specaudit", info.get("bundle"), "as the bundle left it"))
        else:
            rows.append(FileStatus(rel, "drifted", info.get("bundle"), "changed since the bundle was applied"))
    ours = {row.relpath for row in rows}
    for rel, expected in sorted(record_hashes(tree).items()):
        if not rel.endswith(".py") or rel in ours or not (tree.root / rel).is_file():
            continue
        if sha256((tree.root / rel).read_bytes()) != expected:
            rows.append(FileStatus(rel, "foreign", None, "differs from the wheel's RECORD, not changed by specaudit"))
    return rows


# -- helpers ------------------------------------------------------------------------------------------------


def _read(tree: EngineTree, relpath: str) -> bytes:
    return (tree.root / relpath).read_bytes()


def _diff(relpath: str, expected: bytes, actual: bytes) -> str:
    return "".join(difflib.unified_diff(_text(expected).splitlines(keepends=True), _text(actual).splitlines(keepends=True),
                                        f"expected/{relpath}", f"found/{relpath}"))


def _text(source: bytes) -> str:
    """A file's text for a diff that is shown, in the encoding it declares (PEP 263), characters it lacks replaced."""
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(source).readline)[0]
        return source.decode(encoding, errors="replace")
    except (SyntaxError, LookupError):  # a cookie naming no codec
        return source.decode("utf-8", errors="replace")


def _refuse_drift(tree: EngineTree, shadow: Shadow, state: dict[str, Any], force: bool, bundle: Bundle) -> None:
    """A file another bundle changed, or that changed since a bundle was applied, is not ours to edit."""
    if force:
        return
    for rel, info in state["files"].items():
        if "applied" in info and info.get("bundle") != bundle.id:
            raise PatchRefused(f"{rel} carries bundle {info['bundle']}; revert it first (or --force)")
        if "applied" in info and sha256(_read(tree, rel)) != info["applied"]:
            raise PatchRefused(f"{rel} changed since bundle {info['bundle']} was applied (--force to go on):\n"
                               + _diff(rel, shadow.copy("applied", rel), _read(tree, rel)))


def _refuse_foreign_edits(tree: EngineTree, state: dict[str, Any], edits: dict[str, Any]) -> None:
    """A file the plan edits that differs from what the wheel installed was changed by someone else."""
    record = record_hashes(tree)
    for rel in edits:
        applied = "applied" in state["files"].get(rel, {})
        if rel in record and not applied and sha256(_read(tree, rel)) != record[rel]:
            raise PatchRefused(f"{rel} differs from what the wheel installed (its RECORD hash): edited by hand or "
                               "another release? (--force to patch it anyway)")


def _check_writable(tree: EngineTree, files: dict[str, Any]) -> None:
    for rel in files:
        path = tree.root / rel
        if (path.exists() and not os.access(path, os.W_OK)) or not os.access(path.parent, os.W_OK):
            raise SpecauditError(f"{path}: the tree is read-only here (run as the user who owns it)")


def _plan_summary(the_plan: Plan, verb: str) -> str:
    bundle = the_plan.bundle
    lines = [f"{bundle.id} {verb} to {the_plan.tree.label}: {', '.join(the_plan.applied)}",
             f"  {bundle.description}", f"  origin: {bundle.origin}; forwarded: {bundle.forwarded}; upstream: {bundle.upstream}"]
    lines += [f"  {rel}" for rel in sorted(the_plan.edits)]
    lines += [f"  skipped {cid}: {why}" for cid, why in the_plan.skipped]
    return "\n".join(lines)
