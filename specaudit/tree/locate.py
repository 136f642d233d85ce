"""Find the engine tree to audit, without importing the engine.

A tree is named by one of: nothing (the engine installed in this interpreter), a directory
(site-packages, a source checkout, or the package directory itself), a wheel file, or a requirement
``vllm==X`` whose wheel's ``.py`` files and metadata are fetched from the package index into the user cache:
read out of the wheel by HTTP range requests (fetch.py), else extracted from the whole wheel pip downloads.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.cache import cache_dir, inside, staged_tree
from ..core.engines import ENGINES, EngineProfile, engine_for_distribution, normalize_dist
from ..core.errors import SpecauditError

if TYPE_CHECKING:
    from rich.progress import Progress

# Engine wheels are built for one of these manylinux baselines, which moved between releases
# (vLLM 0.21.0: 2_24; 0.20.x: 2_35; 0.22 on: 2_28).
WHEEL_PLATFORMS = tuple(f"manylinux_2_{glibc}_x86_64" for glibc in (39, 38, 36, 35, 34, 31, 28, 27, 24, 17)) + (
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
REQUIREMENT = re.compile(r"^(?P<dist>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.+!_-]+)$")


@dataclass(frozen=True)
class EngineTree:
    engine: EngineProfile
    version: str
    root: Path  # the directory that holds the package directory
    origin: str  # how the tree was found, for the report
    # The top-level modules of the environment the engine runs in, where it was listed there (a smoke node's);
    # None: read beside the tree, where it is installed (installed_beside).
    modules: frozenset[str] | None = None

    @property
    def package_dir(self) -> Path:
        return self.root / self.engine.package

    @property
    def label(self) -> str:
        return f"{self.engine.name} {self.version}"


def installed_beside(tree: EngineTree, module: str) -> bool | None:
    """Whether the environment ``tree`` is installed in can import the top-level ``module`` (a package directory, a
    module file or an extension beside the engine's): None where the tree is no environment (a release fetched or
    unpacked on its own has nothing installed beside it)."""
    if tree.modules is not None:
        return module in tree.modules
    if tree.root.name not in ("site-packages", "dist-packages") and not tree.origin.startswith("installed in"):
        return None
    return (tree.root / module / "__init__.py").is_file() or (tree.root / f"{module}.py").is_file() \
        or any(tree.root.glob(f"{module}.*.so")) or any(tree.root.glob(f"{module}.*.pyd"))


def locate(spec: str | None = None, engine: str | None = None) -> EngineTree:
    """Resolve what the user named into an engine tree on disk."""
    if spec is None:
        return locate_installed(engine or "vllm")
    match = REQUIREMENT.match(spec)
    if match and not Path(spec).exists():
        return locate_release(match["dist"], normalized_version(match["version"], spec))
    path = Path(spec).expanduser()
    if path.is_file() and path.suffix == ".whl":
        return locate_wheel(path)
    if path.is_dir():
        return locate_directory(path, engine)
    if path.exists():
        raise SpecauditError(f"{spec}: not a directory, a wheel, or a requirement like vllm==0.17.0")
    raise SpecauditError(f"{spec}: no such file or directory (to fetch a release, write vllm==X)")


def locate_installed(engine: str) -> EngineTree:
    profile = _profile(engine)
    # find_spec on a top-level name locates the package without executing its __init__.
    spec = importlib.util.find_spec(profile.package)
    if spec is None or not spec.submodule_search_locations:
        raise SpecauditError(
            f"{profile.package} is not installed in {sys.executable}; name a tree: a directory, a wheel, or {profile.package}==X"
        )
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    tree = _tree_from_root(package_dir.parent, profile, origin=f"installed in {sys.executable}")
    if tree.version == "unknown":
        # An editable install keeps its metadata elsewhere; ask the interpreter's metadata.
        from importlib import metadata  # here: costly to import, and only this fallback needs it

        for dist in profile.distributions:
            try:
                version = metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
            return EngineTree(profile, version, tree.root, tree.origin)
    return tree


def locate_directory(path: Path, engine: str | None) -> EngineTree:
    path = path.resolve()
    profiles = [_profile(engine)] if engine else list(ENGINES.values())
    for profile in profiles:
        if (path / profile.package / "__init__.py").is_file():
            return _tree_from_root(path, profile, origin=str(path))
        if path.name == profile.package and (path / "__init__.py").is_file():
            return _tree_from_root(path.parent, profile, origin=str(path))
    names = " or ".join(p.package for p in profiles)
    raise SpecauditError(f"{path}: not an engine tree (no {names}/__init__.py in it)")


def locate_wheel(wheel: Path) -> EngineTree:
    dist = wheel.name.split("-")[0]
    profile = engine_for_distribution(dist)
    if profile is None:
        raise SpecauditError(f"{wheel.name}: not a wheel of a supported engine ({', '.join(ENGINES)})")
    stat = wheel.stat()
    dest = cache_dir("trees") / f"{wheel.stem}-{stat.st_size}-{int(stat.st_mtime)}"
    if not (dest / ".complete").exists():
        _extract_python_files(wheel, dest)
    return _tree_from_root(dest, profile, origin=str(wheel.resolve()))


def locate_release(dist: str, version: str, progress: Progress | None = None) -> EngineTree:
    """The release's tree in the user cache, fetched unless a complete one is there; ``progress`` is a display
    shared with other fetches (fetch.shown), else the fetch draws its own."""
    profile = engine_for_distribution(dist)
    if profile is None:
        raise SpecauditError(f"{dist}: not a supported engine ({', '.join(ENGINES)})")
    dest = _cached_release(cache_dir("trees"), normalize_dist(dist), version)
    if not (dest / ".complete").exists():
        fetch_release(dist, version, dest, progress)
    return _tree_from_root(dest, profile, origin=f"{dist}=={version} from the package index")


def _cached_release(trees: Path, dist: str, version: str) -> Path:
    """Where the release is cached: ``vllm==0.17`` is the tree ``vllm==0.17.0`` fetched (PEP 440 equal), not a
    second copy of it."""
    from packaging.version import InvalidVersion, Version

    exact = trees / f"{dist}-{version}"
    if (exact / ".complete").exists():
        return exact
    wanted = Version(version)
    for candidate in sorted(trees.glob(f"{dist}-*")):
        try:
            equal = Version(candidate.name[len(dist) + 1:]) == wanted
        except InvalidVersion:
            continue  # a wheel's own directory (name-version-tags-size-mtime)
        if equal and (candidate / ".complete").exists():
            return candidate
    return exact


def locate_all(specs: Sequence[str], engine: str | None = None, release_range: str | None = None,
               prereleases: bool = False) -> Iterator[EngineTree]:
    """The trees named (``vllm==X``, a wheel, a directory), and every release of ``engine`` in ``release_range``
    that has a wheel on the package index. The wheels and directories are located at once (a bad one is said
    before any fetch); the releases are fetched several at a time and yielded as they land, in the order named,
    so that a caller can work on the first while the others are fetched."""
    from .fetch import release_versions  # here: ~50 ms of import, for a fetch only

    named = [spec for spec in specs if REQUIREMENT.match(spec) and not Path(spec).exists()]
    if release_range:
        dist = _profile(engine or "").distributions[0]
        versions = release_versions(dist, release_range, WHEEL_PLATFORMS, prereleases=prereleases)
        if not versions:
            raise SpecauditError(f"no release of {dist} in {release_range} has a wheel on the package index")
        named += [f"{dist}=={v}" for v in versions]
    local = [locate(spec, engine) for spec in specs if spec not in named]
    return itertools.chain(local, fetched_releases(named))


def fetch_releases(requirements: Sequence[str], workers: int = 4) -> list[EngineTree]:
    """The trees of several releases (``vllm==X`` each), in the order given: fetched_releases, waited for."""
    return list(fetched_releases(requirements, workers))


def fetched_releases(requirements: Sequence[str], workers: int = 4) -> Iterator[EngineTree]:
    """The trees of several releases (``vllm==X`` each), yielded in the order given as each lands, at most
    ``workers`` fetched at a time under one progress display; a release named twice is fetched once. A
    requirement that is not a release is refused here, before any fetch. When a fetch fails, its error is raised
    in its turn, once the fetches under way have ended; those not begun are dropped."""
    releases: dict[tuple[str, str], tuple[str, str]] = {}  # (normalized dist, version) -> (dist as named, version)
    keys = []
    for requirement in requirements:
        match = REQUIREMENT.match(requirement)
        if match is None:
            raise SpecauditError(f"{requirement}: not a release (write it like vllm==0.17.0)")
        version = normalized_version(match["version"], requirement)
        keys.append((normalize_dist(match["dist"]), version))
        releases.setdefault(keys[-1], (match["dist"], version))
    return _fetching(keys, releases, workers)


def _fetching(keys: list[tuple[str, str]], releases: dict[tuple[str, str], tuple[str, str]],
              workers: int) -> Iterator[EngineTree]:
    from concurrent.futures import ThreadPoolExecutor

    from .fetch import shown  # here: HTTP and packaging cost ~50 ms of import; only a fetch needs them

    if not keys:
        return
    with shown() as progress:
        pool = ThreadPoolExecutor(max_workers=workers)
        try:
            fetches = {key: pool.submit(locate_release, *release, progress) for key, release in releases.items()}
            for key in keys:
                yield fetches[key].result()
        finally:
            pool.shutdown(cancel_futures=True)


def fetch_release(dist: str, version: str, dest: Path, progress: Progress | None = None) -> None:
    """The release's ``.py`` files and metadata into ``dest``: by range requests, else (an index or server that
    cannot serve them so) out of the whole wheel pip downloads."""
    from .fetch import RangeUnavailable, fetch_by_ranges  # here: ~50 ms of import, for a fetch only

    try:
        fetch_by_ranges(dist, version, dest, WHEEL_PLATFORMS, progress)
    except RangeUnavailable:
        download_release(dist, version, dest, progress)


def download_release(dist: str, version: str, dest: Path, progress: Progress | None = None) -> None:
    """The whole wheel by ``pip download``, its ``.py`` files and metadata extracted into ``dest``. pip draws its
    own bar on a terminal, unless the fetch shares a display with others."""
    with tempfile.TemporaryDirectory(prefix="specaudit-wheel-") as tmp:
        wheel = _download_wheel(dist, version, Path(tmp), quiet=progress is not None)
        _extract_python_files(wheel, dest, progress)


def _download_wheel(dist: str, version: str, dest: Path, quiet: bool = False) -> Path:
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
        "--python-version", "3.12", "--disable-pip-version-check", "--dest", str(dest),
    ]
    for platform in WHEEL_PLATFORMS:
        command += ["--platform", platform]
    command.append(f"{dist}=={version}")
    interactive = sys.stderr.isatty() and not quiet
    if interactive:
        print(f"downloading {dist}=={version} (wheel only, no dependencies)...", file=sys.stderr)
    # pip draws its download progress bar on its stdout, shown when we are on a terminal.
    proc = subprocess.run(command, stdout=None if interactive else subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    if proc.returncode != 0:
        raise SpecauditError(_pip_failure(dist, version, proc.stderr))
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise SpecauditError(f"{dist}=={version}: the package index has no wheel for it")
    return wheels[0]


def _pip_failure(dist: str, version: str, stderr: str) -> str:
    if re.search(r"NewConnectionError|Max retries|Could not fetch URL|Temporary failure|Network is unreachable", stderr):
        return f"{dist}=={version}: cannot reach the package index (no network?)"
    known = re.search(r"\(from versions: ([^)]*)\)", stderr)
    if known and known[1] == "none":
        # pip lists no release at all for an engine that has many: the index did not answer.
        return f"{dist}=={version}: the package index lists no release of {dist} (no network, or no such package?)"
    if known or "No matching distribution" in stderr:
        versions = known[1].split(", ") if known else []
        tail = f"; releases with such wheels end with {', '.join(versions[-6:])}" if versions else ""
        return (f"{dist}=={version}: the package index has no Linux x86_64 wheel of it (no such release, or "
                f"a platform tag specaudit does not ask for: download the wheel and name its file){tail}")
    last = [line for line in stderr.strip().splitlines() if line.strip()]
    return f"{dist}=={version}: pip download failed: {last[-1] if last else 'no output'}"


def _extract_python_files(wheel: Path, dest: Path, progress: Progress | None = None) -> None:
    """Extract the ``.py`` files and metadata into ``dest``, atomically: a half extraction is never seen."""
    from .fetch import scanned_member, shown  # here: ~50 ms of import, paid only by an extraction

    with staged_tree(dest, wheel.name) as staging:
        try:
            archive = zipfile.ZipFile(wheel)
        except zipfile.BadZipFile:
            raise SpecauditError(f"{wheel.name}: not a valid wheel (bad zip file)") from None
        with archive, shown(progress) as display:
            members = [m for m in archive.infolist() if scanned_member(m.filename)]
            task = display.add_task(f"extracting {wheel.name}", total=len(members), unit="files")
            for member in members:
                try:
                    _extract_bounded(archive, member, staging, wheel.name)
                except (zipfile.BadZipFile, zlib.error) as exc:  # a member failing its CRC, or not inflating
                    raise SpecauditError(f"{wheel.name}: {member.filename} is damaged ({exc})") from None
                display.advance(task)
            display.remove_task(task)


def _extract_bounded(archive: zipfile.ZipFile, member: zipfile.ZipInfo, staging: Path, wheel: str) -> None:
    """One member into ``staging``, where its name says, inflated no further than fetch.MAX_MEMBER_BYTES whatever
    its header claims (a zip bomb's does not tell the truth)."""
    from .fetch import MAX_MEMBER_BYTES

    target = inside(staging, staging / member.filename)
    target.parent.mkdir(parents=True, exist_ok=True)
    with archive.open(member) as source, open(target, "wb") as out:
        copied = 0
        while chunk := source.read(1 << 20):
            copied += len(chunk)
            if copied > MAX_MEMBER_BYTES:
                raise SpecauditError(f"{wheel}: {member.filename} inflates past {MAX_MEMBER_BYTES // 1_000_000} MB, "
                                     f"more than any engine module (a zip bomb?)")
            out.write(chunk)


def _tree_from_root(root: Path, profile: EngineProfile, origin: str) -> EngineTree:
    return EngineTree(profile, _version_from_metadata(root, profile), root, origin)


def _version_from_metadata(root: Path, profile: EngineProfile) -> str:
    """The version from the ``.dist-info`` next to the package, else from a source checkout's _version.py; as PEP 440
    normalizes it (``v0.17.0`` and ``0.17.00`` are 0.17.0), since cache entries and patch state are named by it.
    Two ``.dist-info`` of the engine that disagree are told apart by ``_version.py``, else refused."""
    wanted = {normalize_dist(d) for d in profile.distributions}
    found: dict[str, Path] = {}
    for metadata in sorted(root.glob("*.dist-info/METADATA")):
        name = version = None
        with metadata.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Name:"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("Version:"):
                    version = line.split(":", 1)[1].strip()
                elif not line.strip():
                    break
        if name and version and normalize_dist(name) in wanted:
            found.setdefault(normalized_version(version, metadata), metadata)
    source = _source_version(root, profile)
    if len(found) > 1:
        if source in found:
            return source
        raise SpecauditError(f"{root}: {len(found)} .dist-info directories name {profile.name} "
                             f"{' and '.join(sorted(found))}: remove the stale one")
    return next(iter(found), None) or source or "unknown"


def _source_version(root: Path, profile: EngineProfile) -> str | None:
    version_file = root / profile.package / "_version.py"
    if version_file.is_file():
        # setuptools-scm writes `__version__ = version = '0.17.0'`
        found = re.search(r"""^(?:__version__|version)\s*(?::[^=\n]*)?=\s*(?:\w+\s*=\s*)*['"]([^'"]+)['"]""",
                          version_file.read_text(errors="replace"), re.M)
        if found:
            return normalized_version(found[1], version_file)
    return None


def normalized_version(text: str, where: Path | str) -> str:
    """A version as PEP 440 writes it; anything else is refused (a version names files specaudit writes)."""
    from packaging.version import InvalidVersion, Version

    try:
        return str(Version(text))
    except InvalidVersion:
        raise SpecauditError(f"{where}: version {text[:80]!r} is not a PEP 440 version") from None


def _profile(engine: str) -> EngineProfile:
    try:
        return ENGINES[engine]
    except KeyError:
        raise SpecauditError(f"unknown engine {engine!r} (known: {', '.join(ENGINES)})") from None
