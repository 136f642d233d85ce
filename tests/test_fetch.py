"""Fetching a release by HTTP range requests: only the members the scan reads, checked against RECORD, with the
whole-wheel pip download as the fallback. A package index on 127.0.0.1 serves wheels these tests build."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from specaudit.core.errors import SpecauditError
from specaudit.tree import fetch, locate

WHEEL = "vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
# Files of the same release that pip would not pick: another platform, a less preferred platform tag, a yanked
# and a Requires-Python-excluded wheel whose tags would otherwise win, and the sdist. Each is served as bytes that
# are no zip: picking one fails the test.
DECOYS = {
    "vllm-{version}-cp38-abi3-manylinux_2_28_aarch64.whl": {},
    "vllm-{version}-cp38-abi3-manylinux_2_17_x86_64.whl": {},
    "vllm-{version}-cp312-cp312-manylinux_2_28_x86_64.whl": {"yanked": True},
    "vllm-{version}-cp312-cp312-manylinux_2_31_x86_64.whl": {"requires-python": ">=3.13"},
    "vllm-{version}.tar.gz": {},
}


def build_wheel(path: Path, version: str, tamper: str | None = None) -> Path:
    """A wheel laid out like an engine's: sources before, between and after large native libraries, metadata last,
    RECORD with real hashes. ``tamper`` names a member whose content differs from what RECORD lists."""
    noise = random.Random(version)
    dist_info = f"vllm-{version}.dist-info"
    files = {
        "vllm/__init__.py": b"__version__ = '%s'\n" % version.encode(),
        "vllm/config/speculative.py": b"class SpeculativeConfig:\n    method: str = 'eagle3'\n" * 200,
        "vllm/_C.abi3.so": noise.randbytes(3 << 20),
        "vllm/v1/spec_decode/eagle.py": b"class EagleProposer:\n    pass\n" * 100,
        "vllm/_moe_C.abi3.so": noise.randbytes(1 << 20),
        "vllm/py.typed": b"",
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n\n".encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp38-abi3-manylinux_2_28_x86_64\n",
        f"{dist_info}/licenses/LICENSE": b"Apache-2.0\n",
    }
    rows = [f"{name},sha256={_digest(data)},{len(data)}" for name, data in files.items()]
    files[f"{dist_info}/RECORD"] = ("\n".join(rows) + f"\n{dist_info}/RECORD,,\n").encode()
    if tamper:
        files[tamper] += b"# not what RECORD says\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


class Index:
    """A package index on 127.0.0.1: PEP 691 JSON pages (or PEP 503 HTML ones), and files that honour Range or
    ignore it. Counts the file bytes it sends and notes each file request's Range header."""

    def __init__(self, files: dict[str, tuple[bytes, dict]], *, ranges: bool = True, html: bool = False,
                 held: dict[str, threading.Event] | None = None) -> None:
        self.files, self.ranges, self.html = files, ranges, html
        self.held = held or {}  # file name -> an event its requests wait for
        self.sent = 0
        self.asked: list[tuple[str, str | None]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"

    def page(self, project: str) -> tuple[bytes, str]:
        listed = [(name, meta) for name, (_, meta) in self.files.items() if name.startswith(f"{project}-")]
        if self.html:
            anchors = "".join(
                f'<a href="../../files/{name}#sha256=0"'
                + (f' data-requires-python="{meta["requires-python"].replace(">", "&gt;")}"'
                   if "requires-python" in meta else "")
                + (' data-yanked=""' if meta.get("yanked") else "") + f">{name}</a><br>"
                for name, meta in listed)
            return f"<!DOCTYPE html><html><body>{anchors}</body></html>".encode(), "text/html"
        files = [{"filename": name, "url": f"../../files/{name}", "hashes": {}, **meta} for name, meta in listed]
        return json.dumps({"meta": {"api-version": "1.0"}, "name": project, "files": files}).encode(), \
            "application/vnd.pypi.simple.v1+json"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = self.path.strip("/").split("/")
                if parts[0] == "simple" and len(parts) == 2:
                    body, content_type = index.page(parts[1])
                    return self._send(200, body, {"Content-Type": content_type})
                if parts[0] == "files" and parts[1] in index.files:
                    if parts[1] in index.held:
                        index.held[parts[1]].wait(timeout=30)
                    data = index.files[parts[1]][0]
                    asked = self.headers.get("Range")
                    index.asked.append((parts[1], asked))
                    found = re.fullmatch(r"bytes=(\d*)-(\d*)", asked or "")
                    if not (found and index.ranges):
                        return self._send(200, data, {}, counted=True)
                    first, last = found.groups()
                    start = int(first) if first else max(len(data) - int(last), 0)
                    end = min(int(last), len(data) - 1) if first else len(data) - 1
                    return self._send(206, data[start:end + 1], {"Content-Range": f"bytes {start}-{end}/{len(data)}"},
                                      counted=True)
                self._send(404, b"", {})

            def _send(self, status: int, body: bytes, headers: dict[str, str], counted: bool = False) -> None:
                self.send_response(status)
                for key, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(key, value)
                self.end_headers()
                try:
                    self.wfile.write(body)
                    index.sent += len(body) if counted else 0
                except (BrokenPipeError, ConnectionResetError):
                    pass  # a client that asked for a range and got the whole file hangs up

            def log_message(self, *args) -> None:
                pass

        return Handler

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(tmp_path: Path, versions: tuple[str, ...] = ("0.99.1",), **options) -> tuple[Index, dict[str, Path]]:
    """An index with the wheel of each version and the decoys beside it; the wheels' paths by version."""
    files, wheels = {}, {}
    tamper = options.pop("tamper", None)
    for version in versions:
        wheels[version] = build_wheel(tmp_path / "wheels" / WHEEL.format(version=version), version, tamper)
        files[wheels[version].name] = (wheels[version].read_bytes(), {"requires-python": ">=3.8"})
        files.update({name.format(version=version): (b"not this wheel", meta) for name, meta in DECOYS.items()})
    return Index(files, **options), wheels


class WholeWheel:
    """Stands in for ``pip download`` of the whole wheel: notes each call, and hands over ``source`` (a test that
    expects no download leaves it None, and a download fails the test)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.source: Path | None = None

    def __call__(self, dist: str, version: str, dest: Path, quiet: bool = False) -> Path:
        self.calls.append((dist, version))
        assert self.source is not None, "the whole wheel was downloaded"
        return Path(shutil.copy(self.source, dest))


@pytest.fixture
def env(tmp_path, monkeypatch) -> WholeWheel:
    """This test's own cache (trees included: conftest keeps them in the user cache), pip configured by the
    environment alone (no config file), no proxy for 127.0.0.1, and the whole-wheel download replaced by a
    WholeWheel."""

    def cache_dir(*parts: str) -> Path:
        path = tmp_path.joinpath("cache", *parts)
        path.mkdir(parents=True, exist_ok=True)
        return path

    monkeypatch.setattr(locate, "cache_dir", cache_dir)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for name in ("PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "PIP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    whole_wheel = WholeWheel()
    monkeypatch.setattr(locate, "_download_wheel", whole_wheel)
    return whole_wheel


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else None for p in root.rglob("*")}


@pytest.mark.parametrize("html, layout, max_requests", [(False, "plain", 3), (True, "zip64", 3),
                                                        (False, "small tail", 6)])
def test_a_release_is_read_by_ranges_and_is_the_whole_wheels_tree(tmp_path, env, monkeypatch, html, layout,
                                                                   max_requests):
    if layout == "zip64":  # zipfile writes zip64 records past this size: every offset and end record here
        monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 1 << 10)
    if layout == "small tail":  # the end record alone: the central directory and every member come by requests
        monkeypatch.setattr(fetch, "TAIL_BYTES", 100)
    index, wheels = serve(tmp_path, html=html)
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    try:
        tree = locate.locate("vllm==0.99.1")
    finally:
        index.close()
    assert tree.version == "0.99.1" and not env.calls
    wheel = wheels["0.99.1"]
    assert index.sent < wheel.stat().st_size / 5
    assert all(name == wheel.name and asked for name, asked in index.asked) and len(index.asked) <= max_requests
    assert snapshot(tree.root) == snapshot(locate.locate(str(wheel)).root)
    assert not (tree.root / "vllm/_C.abi3.so").exists()


@pytest.mark.parametrize("why", ["the server ignores Range", "the index is a file:// URL"])
def test_the_whole_wheel_is_downloaded_when_ranges_cannot_be_read(tmp_path, env, monkeypatch, why):
    index, wheels = serve(tmp_path, ranges=why != "the server ignores Range")
    monkeypatch.setenv("PIP_INDEX_URL", index.url if "Range" in why else (tmp_path / "simple").as_uri())
    env.source = wheels["0.99.1"]
    try:
        tree = locate.locate("vllm==0.99.1")
    finally:
        index.close()
    assert env.calls == [("vllm", "0.99.1")]
    assert snapshot(tree.root) == snapshot(locate.locate(str(wheels["0.99.1"])).root)


def test_a_member_that_does_not_match_the_record_is_refused_and_nothing_is_cached(tmp_path, env, monkeypatch):
    index, _ = serve(tmp_path, tamper="vllm/config/speculative.py")
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    try:
        with pytest.raises(SpecauditError) as refused:
            locate.locate("vllm==0.99.1")
    finally:
        index.close()
    assert str(refused.value) == (f"{WHEEL.format(version='0.99.1')}: vllm/config/speculative.py does not match "
                                  "the wheel's RECORD (sha256)")
    assert list((tmp_path / "cache/trees").iterdir()) == [] and not env.calls


def test_several_releases_are_fetched_together_in_the_order_named(tmp_path, env, monkeypatch):
    index, wheels = serve(tmp_path, versions=("0.99.1", "0.99.2"))
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    try:
        trees = locate.fetch_releases(["vllm==0.99.2", "vllm==0.99.1", "vllm==0.99.2"], workers=2)
    finally:
        index.close()
    assert [tree.version for tree in trees] == ["0.99.2", "0.99.1", "0.99.2"]
    tails = sorted(name for name, asked in index.asked if asked.startswith("bytes=-"))
    assert tails == sorted(wheel.name for wheel in wheels.values())  # each wheel read once
    assert not env.calls


def test_each_release_is_given_as_it_lands_while_the_later_ones_are_still_fetched(tmp_path, env, monkeypatch):
    released = threading.Event()
    index, wheels = serve(tmp_path, versions=("0.99.1", "0.99.2"))
    index.held = {wheels["0.99.2"].name: released}
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    try:
        arriving = locate.fetched_releases(["vllm==0.99.1", "vllm==0.99.2"], workers=2)
        first = next(arriving)
        assert first.version == "0.99.1" and not (tmp_path / "cache/trees/vllm-0.99.2").exists()
        released.set()
        assert [tree.version for tree in arriving] == ["0.99.2"]
    finally:
        released.set()
        index.close()


def test_a_failed_fetch_is_raised_in_its_turn_and_a_bad_requirement_before_any_fetch(tmp_path, env, monkeypatch):
    index, _ = serve(tmp_path, versions=("0.99.1", "0.99.3"), tamper="vllm/config/speculative.py")
    good, _ = serve(tmp_path / "good", versions=("0.99.2",))
    good.close()
    index.files.update(good.files)
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    try:
        with pytest.raises(SpecauditError, match="not a release"):
            locate.fetched_releases(["vllm==0.99.2", "vllm"])
        assert index.asked == []
        arriving = locate.fetched_releases(["vllm==0.99.2", "vllm==0.99.1", "vllm==0.99.3"], workers=1)
        assert next(arriving).version == "0.99.2"
        with pytest.raises(SpecauditError, match="0.99.1.*does not match the wheel's RECORD"):
            next(arriving)
    finally:
        index.close()
    assert sorted(p.name for p in (tmp_path / "cache/trees").iterdir()) == ["vllm-0.99.2"]


def test_the_releases_in_a_range_are_the_index_versions_with_a_wheel_pip_would_pick(tmp_path, env, monkeypatch):
    index, _ = serve(tmp_path, versions=("0.99.1", "0.99.2", "0.100.0rc1"))
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    try:
        assert fetch.release_versions("vllm", ">=0.99.2", locate.WHEEL_PLATFORMS) == ["0.99.2"]
        assert fetch.release_versions("vllm", ">=0.99", locate.WHEEL_PLATFORMS, prereleases=True) == [
            "0.99.1", "0.99.2", "0.100.0rc1"]
        with pytest.raises(SpecauditError, match="not a version range"):
            fetch.release_versions("vllm", "0.99 to 1.0", locate.WHEEL_PLATFORMS)
    finally:
        index.close()


# -- the real index ------------------------------------------------------------------------------------------------

@pytest.mark.network
@pytest.mark.parametrize("release, wheel", [
    ("vllm==0.33.0", "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"),
    ("vllm==0.20.1", "vllm-0.20.1-1-cp38-abi3-manylinux_2_35_x86_64.whl"),  # a build number
    ("vllm==0.10.0", "vllm-0.10.0-cp38-abi3-manylinux1_x86_64.whl"),
    ("sglang==0.5.23", "sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl"),  # beside cp311 and cp313 wheels
])
def test_the_wheel_is_the_one_pip_download_picks(release, wheel):
    config = fetch.pip_index_config()
    dist, version = release.split("==")
    found = fetch.find_wheel(fetch._Http(config), config.index_urls, dist, version, locate.WHEEL_PLATFORMS)
    assert found.filename == wheel


@pytest.mark.network
def test_a_real_release_by_ranges_is_the_tree_pip_download_gives(tmp_path):
    ranged, whole = tmp_path / "ranges", tmp_path / "pip"
    result = fetch.fetch_by_ranges("sglang", "0.5.8", ranged, locate.WHEEL_PLATFORMS)
    locate.download_release("sglang", "0.5.8", whole)
    assert result.wheel == "sglang-0.5.8-py3-none-any.whl"  # pure Python: its ranges cover nearly all of it
    assert snapshot(ranged) == snapshot(whole)


@pytest.mark.network
def test_the_real_index_lists_the_releases_of_a_range():
    assert fetch.release_versions("vllm", ">=0.17,<0.19", locate.WHEEL_PLATFORMS) == ["0.17.0", "0.17.1", "0.18.0",
                                                                                      "0.18.1"]


def test_ten_cold_scans_of_one_release_into_one_empty_cache_agree(tmp_path):
    # cache.staged_tree removed the tree another scan was reading: 13 of 14 such races crashed.
    index, _ = serve(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HOME": str(tmp_path),
           "SPECAUDIT_CACHE": str(tmp_path / "cache"), "PIP_INDEX_URL": index.url, "PIP_CONFIG_FILE": os.devnull,
           "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    try:
        scans = [subprocess.Popen([sys.executable, "-m", "specaudit.cli", "scan", "vllm==0.99.1", "--target", "llama3",
                                   "--format", "json", "--out", str(tmp_path / f"out{i}")],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(10)]
        results = [(scan.wait(timeout=600), scan.stderr.read()) for scan in scans]
    finally:
        index.close()
    assert all("Traceback" not in stderr for _, stderr in results), results
    assert len({code for code, _ in results}) == 1, results
    reports = [json.loads(next((tmp_path / f"out{i}").glob("*.json")).read_text()) for i in range(10)]
    assert len({(r["verdict"], json.dumps(r["findings"], sort_keys=True)) for r in reports}) == 1
