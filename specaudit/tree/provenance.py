"""Where a report comes from: specaudit's version, the command, the time, the release's origin, and what the tree
holds besides the wheel: bundles specaudit applied, files edited by hand (a smoke's or explain's report: its scan's).
The patch stage writes the state that this stage only reads, so both find it here."""

from __future__ import annotations

import base64
import datetime
import hashlib
import shlex
import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import __version__
from ..core.cache import cache_dir, inside, slug
from ..core.data import parse_json
from ..core.errors import SpecauditError
from ..results.scan import Provenance, ScanResult
from .locate import EngineTree


def shadow_dir(tree: EngineTree, create: bool = True) -> Path:
    """The directory of a tree's patch state: pristine copies, the journal, and state.json. Keyed by the identity of
    the tree's package directory (device and inode), so that a bind mount or a second path to the same tree finds
    the same state; state kept under the tree's path by earlier specaudit releases is still found."""
    package = tree.root / tree.engine.package
    try:
        st = package.stat()
        key = hashlib.sha1(f"{st.st_dev}:{st.st_ino}".encode()).hexdigest()[:12]
    except OSError:  # no package directory: the tree is named by its path
        key = hashlib.sha1(str(tree.root.resolve()).encode()).hexdigest()[:12]
    patches = cache_dir("patches", create=create)
    name = slug(f"{tree.engine.name}-{tree.version}-{key}")
    legacy = slug(f"{tree.engine.name}-{tree.version}-{hashlib.sha1(str(tree.root.resolve()).encode()).hexdigest()[:12]}")
    if not (patches / name).exists() and (patches / legacy).is_dir():
        name = legacy
    return inside(patches, cache_dir("patches", name, create=create))


def record_hashes(tree: EngineTree) -> dict[str, str]:
    """The wheel's RECORD: relpath -> sha256 hex, for the files the wheel installed."""
    return {rel: _hex(digest) for rel, digest in _record_digests(tree).items()}


def _record_digests(tree: EngineTree) -> dict[str, str]:
    """The wheel's RECORD as it writes it: relpath -> sha256 in urlsafe base64 (decoded only where compared)."""
    digests = {}
    for record in tree.root.glob("*.dist-info/RECORD"):
        for line in record.read_text(errors="replace").splitlines():
            parts = line.rsplit(",", 2)
            if len(parts) == 3 and parts[1].startswith("sha256="):
                digests[parts[0]] = parts[1][7:]
    return digests


def _hex(digest: str) -> str:
    return base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()


def read_state_json(path: Path) -> dict[str, Any]:
    """A JSON file of the patch state (state.json, the journal), with the remedy when it cannot be read."""
    try:
        data = parse_json(path.read_bytes(), str(path))
    except (OSError, SpecauditError) as exc:
        raise SpecauditError(f"{path}: unreadable patch state ({exc.strerror if isinstance(exc, OSError) else exc}); "
                             f"move the directory {path.parent} aside to start over (it holds the pristine copies)") from None
    if not isinstance(data, dict):
        raise SpecauditError(f"{path}: unreadable patch state (not a JSON object)")
    return data


def state_problem(state: Any) -> str:
    """What is wrong with a patch state's shape ("" when nothing is), as ``specaudit patch`` writes it: ``bundles``,
    each with the ``changes`` it made and its ``files``; ``files``, each with the ``pristine`` hash and, while a bundle
    holds it, the ``applied`` hash and the ``bundle``. Every reader of a state (patch, a scan's provenance, a fleet's
    node) checks it here before reading it, so that no state, however written, is read past what it holds."""
    if not isinstance(state, dict) or not isinstance(state.get("bundles"), dict) or not isinstance(state.get("files"),
                                                                                                  dict):
        return "no bundles and files"
    for bundle, entry in state["bundles"].items():
        if not isinstance(entry, dict) or not all(isinstance(entry.get(key), list) and
                                                  all(isinstance(v, str) for v in entry[key])
                                                  for key in ("changes", "files")):
            return f"bundle {str(bundle)[:80]!r} without its lists of changes and files"
    for rel, entry in state["files"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("pristine"), str) or \
                not all(isinstance(entry.get(key, ""), str) for key in ("applied", "bundle")):
            return f"file {str(rel)[:80]!r} without its hashes"
    return ""


def applied_bundles(tree: EngineTree) -> tuple[str, ...]:
    """The bundles the patch state says are applied to the tree. Read only: no recovery, no lock, and no directory
    made for a tree that was never patched (every scan asks)."""
    state_file = shadow_dir(tree, create=False) / "state.json"
    bundles = read_state_json(state_file).get("bundles") if state_file.exists() else None
    return tuple(sorted(bundles)) if isinstance(bundles, dict) else ()


def modified_files(tree: EngineTree, relpaths: Iterable[str],
                   sha256: Callable[[str], str] | None = None) -> tuple[str, ...]:
    """Those of the files that differ from the wheel's RECORD (a tree with no RECORD, a checkout: none known);
    ``sha256``: a file's digest as the caller knows it (the index keeps it by content), else read here."""
    recorded = _record_digests(tree)
    digest = sha256 or (lambda rel: hashlib.sha256((tree.root / rel).read_bytes()).hexdigest())
    return tuple(rel for rel in sorted(relpaths) if rel in recorded and (tree.root / rel).is_file()
                 and digest(rel) != _hex(recorded[rel]))


def invocation(source: str = "") -> Provenance:
    """The part of a provenance that every report has: specaudit's version, the command line and the time. ``source``:
    where the engine release it read came from ("": it read none)."""
    program = Path(sys.argv[0]).name
    # `python -m specaudit.cli` and the console script are both the user's `specaudit`.
    program = "specaudit" if program in ("cli.py", "__main__.py") else program
    command = shlex.join([program, *sys.argv[1:]])
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return Provenance(__version__, command, now, source)


def provenance(tree: EngineTree, read: Iterable[str], in_memory: Iterable[str] = (),
               sha256: Callable[[str], str] | None = None) -> Provenance:
    """The provenance of a report on ``tree``, whose scan read the files ``read`` from disk and ``in_memory`` with
    edits planned, not applied."""
    return replace(invocation(tree.origin), bundles=applied_bundles(tree), modified=modified_files(tree, read, sha256),
                   in_memory=tuple(sorted(in_memory)), patching=(shadow_dir(tree, create=False) / "journal.json").exists())


def launch_provenance(scan: ScanResult | None) -> Provenance:
    """The provenance of a report on a launch or its log, held against ``scan`` of its release: the scan's (this
    command made it, and it says what the release had in it), else this command's alone."""
    return scan.provenance if scan is not None and scan.provenance is not None else invocation()
