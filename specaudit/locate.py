"""Stage 1: find the engine tree to audit, without importing the engine.

A tree is named by one of: nothing (the engine installed in this interpreter), a directory
(site-packages, a source checkout, or the package directory itself), a wheel file, or a requirement
``vllm==X`` that is downloaded from the package index (the wheel only, no dependencies) into the user
cache, keeping only its ``.py`` files and its metadata.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .cache import cache_dir
from .engines import ENGINES, EngineProfile, engine_for_distribution, normalize_dist
from .errors import SpecauditError

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

    @property
    def package_dir(self) -> Path:
        return self.root / self.engine.package

    @property
    def label(self) -> str:
        return f"{self.engine.name} {self.version}"


def locate(spec: str | None = None, engine: str | None = None) -> EngineTree:
    """Resolve what the user named into an engine tree on disk."""
    if spec is None:
        return locate_installed(engine or "vllm")
    match = REQUIREMENT.match(spec)
    if match and not Path(spec).exists():
        return locate_release(match["dist"], match["version"])
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


def locate_release(dist: str, version: str) -> EngineTree:
    profile = engine_for_distribution(dist)
    if profile is None:
        raise SpecauditError(f"{dist}: not a supported engine ({', '.join(ENGINES)})")
    dest = cache_dir("trees") / f"{normalize_dist(dist)}-{version}"
    if not (dest / ".complete").exists():
        with tempfile.TemporaryDirectory(prefix="specaudit-wheel-") as tmp:
            wheel = _download_wheel(dist, version, Path(tmp))
            _extract_python_files(wheel, dest)
    return _tree_from_root(dest, profile, origin=f"{dist}=={version} from the package index")


def _download_wheel(dist: str, version: str, dest: Path) -> Path:
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
        "--python-version", "3.12", "--disable-pip-version-check", "--dest", str(dest),
    ]
    for platform in WHEEL_PLATFORMS:
        command += ["--platform", platform]
    command.append(f"{dist}=={version}")
    interactive = sys.stderr.isatty()
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


def _extract_python_files(wheel: Path, dest: Path) -> None:
    """Extract the ``.py`` files and metadata into ``dest``, atomically: a half extraction is never seen."""
    from rich.progress import Progress

    staging = Path(tempfile.mkdtemp(prefix=".extract-", dir=dest.parent))
    try:
        try:
            archive = zipfile.ZipFile(wheel)
        except zipfile.BadZipFile:
            raise SpecauditError(f"{wheel.name}: not a valid wheel (bad zip file)") from None
        with archive:
            members = [
                m for m in archive.infolist()
                if m.filename.endswith(".py") or ".dist-info/" in m.filename
            ]
            with Progress(transient=True, disable=not sys.stderr.isatty()) as progress:
                task = progress.add_task(f"extracting {wheel.name}", total=len(members))
                for member in members:
                    archive.extract(member, staging)
                    progress.advance(task)
        (staging / ".complete").write_text(wheel.name + "\n")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(staging, dest)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _tree_from_root(root: Path, profile: EngineProfile, origin: str) -> EngineTree:
    return EngineTree(profile, _version_from_metadata(root, profile), root, origin)


def _version_from_metadata(root: Path, profile: EngineProfile) -> str:
    """The version from the ``.dist-info`` next to the package, else from a source checkout's _version.py."""
    wanted = {normalize_dist(d) for d in profile.distributions}
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
            return version
    version_file = root / profile.package / "_version.py"
    if version_file.is_file():
        found = re.search(r"""^(?:__version__|version)\s*(?::[^=]*)?=\s*['"]([^'"]+)['"]""",
                          version_file.read_text(errors="replace"), re.M)
        if found:
            return found[1]
    return "unknown"


def _profile(engine: str) -> EngineProfile:
    try:
        return ENGINES[engine]
    except KeyError:
        raise SpecauditError(f"unknown engine {engine!r} (known: {', '.join(ENGINES)})") from None
