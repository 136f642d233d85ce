"""A release's ``.py`` files and metadata read out of its wheel on the package index
with HTTP range requests (the zip's central directory, then only the members the scan reads), never the whole
wheel: for vLLM 0.33.0, 13 MB of a 336 MB wheel.

The wheel is the one ``pip download --python-version 3.12 --platform ...`` would pick, found through the index
pip is configured with. Anything this path cannot do (an index that is not HTTP(S), a server that ignores Range,
a zip it does not read) raises :class:`RangeUnavailable`, and the caller downloads the whole wheel with pip
instead. Every member is checked against the wheel's RECORD before the tree is renamed into place.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import http.client
import json
import posixpath
import re
import ssl
import struct
import sys
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..core.cache import staged_tree
from ..core.errors import SpecauditError

if TYPE_CHECKING:
    from rich.progress import Progress

PYTHON = (3, 12)  # the interpreter the wheel is picked for, as `pip download --python-version 3.12`
DEFAULT_INDEX = "https://pypi.org/simple"
# The first request reads this much of the wheel's end: the end-of-central-directory record with any comment
# (at most 64 KiB), and for most wheels the whole central directory and the metadata members after it.
TAIL_BYTES = 256 * 1024
# Neighbouring spans of wanted members closer than this are read as one: a request costs a round trip, which
# buys far more than 64 KiB of transfer.
GAP_BYTES = 64 * 1024
SIMPLE_ACCEPT = ("application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.1, "
                 "text/html;q=0.01")


class RangeUnavailable(Exception):
    """This release cannot be read by ranges here (the message says why); download the whole wheel instead."""


@dataclass(frozen=True)
class IndexConfig:
    """What ``pip download`` would use to reach the package index."""

    index_urls: tuple[str, ...]  # the index, then the extra indexes, in pip's order
    cert: str | None  # CA bundle that replaces the system's
    client_cert: str | None
    proxy: str | None  # None: urllib's own, from HTTPS_PROXY and the like
    timeout: float


@dataclass(frozen=True)
class WheelLink:
    """A file of the release as an index page lists it."""

    filename: str
    url: str  # absolute, without the #sha256= fragment
    yanked: bool
    requires_python: str | None


@dataclass(frozen=True)
class Member:
    """A zip member as the central directory describes it."""

    name: str
    offset: int  # of its local header
    compressed: int
    method: int  # 0 stored, 8 deflate


@dataclass(frozen=True)
class Span:
    """One range request: ``[start, end)`` of the wheel, holding ``members`` whole."""

    start: int
    end: int
    members: tuple[Member, ...]


@dataclass(frozen=True)
class RangeFetch:
    """What reading a release by ranges cost."""

    wheel: str  # the wheel's file name
    url: str
    wheel_bytes: int  # the wheel's size: what a whole download transfers
    transferred: int  # body bytes read, index page included
    requests: int
    members: int  # members written


def scanned_member(name: str) -> bool:
    """Whether the scan reads this wheel member: Python sources and the ``.dist-info`` metadata."""
    return name.endswith(".py") or ".dist-info/" in name


@contextmanager
def shown(progress: Progress | None = None) -> Iterator[Progress]:
    """``progress`` when a caller shares one display among several fetches, else a display of its own for the
    block; either way drawn only when stderr is a terminal. Its tasks carry a ``unit`` field ("bytes", "files")."""
    if progress is not None:
        yield progress
        return
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn  # here: costly to import

    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
               TextColumn("{task.completed:,.0f}/{task.total:,.0f} {task.fields[unit]}"))
    with Progress(*columns, transient=True, disable=not sys.stderr.isatty()) as own:
        yield own


def fetch_by_ranges(dist: str, version: str, dest: Path, platforms: Sequence[str],
                    progress: Progress | None = None) -> RangeFetch:
    """Fill ``dest`` with the ``.py`` files and metadata of the wheel of ``dist==version`` that pip would pick for
    CPython 3.12 on one of ``platforms``, read by range requests, as ``staged_tree`` commits trees.

    Raises RangeUnavailable when this path cannot serve the release (no HTTP(S) index has the wheel, the server
    ignores Range, a network or zip-format problem); SpecauditError when a member does not match the wheel's
    RECORD or does not decompress. Either way ``dest`` is untouched."""
    config = pip_index_config()
    http = _Http(config)
    link = find_wheel(http, config.index_urls, dist, version, tuple(platforms))
    wheel = _RemoteZip(http, link.url)
    members = [m for m in wheel.members if scanned_member(m.name)]
    record = _record_member(members)
    # The span holding RECORD is read first: every member is checked against it before it is written.
    spans = sorted(_spans(members, wheel.ends), key=lambda span: record not in span.members)
    with shown(progress) as display, staged_tree(dest, link.filename) as staging:
        moved = display.add_task(f"fetching {link.filename}", total=sum(s.end - s.start for s in spans),
                                 unit="bytes")
        written = display.add_task(f"writing {link.filename}", total=len(members), unit="files")
        hashes: dict[str, str] = {}
        for span in spans:
            blob = wheel.read(span.start, span.end, lambda n: display.advance(moved, n))
            if record in span.members:
                hashes = _parse_record(_inflate(link.filename, record, blob, span.start))
            for member in span.members:
                data = _inflate(link.filename, member, blob, span.start)
                _verify(link.filename, member, data, hashes, record.name)
                _write(staging, member.name, data)
                display.advance(written)
        display.remove_task(moved)
        display.remove_task(written)
    return RangeFetch(link.filename, link.url, wheel.size, http.transferred, http.requests, len(members))


# -- pip's configuration and the index ------------------------------------------------------------------------------

def pip_index_config() -> IndexConfig:
    """pip's own reading of its configuration files and ``PIP_*`` variables (``pip config list``), with pip's
    precedence: the ``global`` section, then ``download``, then the environment. Raises RangeUnavailable when pip's
    configuration cannot be read here, or says not to use an index."""
    try:
        from pip._internal.configuration import Configuration  # here: pip's internals, read only on a fetch

        configuration = Configuration(isolated=False)
        configuration.load()
        items = dict(configuration.items())
    except Exception as exc:  # pip missing, its internals moved, or a config file that does not parse: pip knows
        raise RangeUnavailable(f"pip's configuration cannot be read here ({exc})") from None
    aliases = {"default-timeout": "timeout", "pypi-url": "index-url"}
    settings: dict[str, str] = {}
    for section in ("global", "download", ":env:"):
        for key, value in items.items():
            head, _, name = key.partition(".")
            if head == section and value:
                settings[aliases.get(name, name)] = value
    if settings.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        raise RangeUnavailable("pip is configured with no-index")
    try:
        timeout = float(settings.get("timeout", 15))
    except ValueError:
        raise RangeUnavailable(f"pip's timeout {settings['timeout']!r} is not a number") from None
    return IndexConfig(
        index_urls=(settings.get("index-url", DEFAULT_INDEX), *settings.get("extra-index-url", "").split()),
        cert=settings.get("cert"), client_cert=settings.get("client-cert"), proxy=settings.get("proxy"),
        timeout=timeout,
    )


def find_wheel(http: _Http, index_urls: Sequence[str], dist: str, version: str,
               platforms: tuple[str, ...]) -> WheelLink:
    """The wheel pip would pick from the HTTP(S) indexes among ``index_urls``: others (``file://``, a URL with
    credentials, which pip reads with its keyring) are skipped. Raises RangeUnavailable when none lists one."""
    links = [link for index in index_urls if _readable(index) for link in _index_page(http, index, dist)]
    best = _best_wheel(links, dist, version, platforms)
    if best is None:
        raise RangeUnavailable(f"no HTTP(S) index lists a wheel of {dist}=={version} for this platform")
    return best


def release_versions(dist: str, specifiers: str, platforms: Sequence[str], prereleases: bool = False) -> list[str]:
    """The releases of ``dist`` within ``specifiers`` (``>=0.10,<0.34``) that have a wheel pip would pick on one of
    ``platforms``, oldest first, from the HTTP(S) indexes pip is configured with; pre-releases only when asked.
    Raises SpecauditError when the specifiers do not parse or no index can be read."""
    try:
        wanted = SpecifierSet(specifiers)
    except InvalidSpecifier:
        raise SpecauditError(f"--releases {specifiers!r}: not a version range (write it like '>=0.10,<0.34')") from None
    try:
        config = pip_index_config()
        http = _Http(config)
        links = [link for index in config.index_urls if _readable(index) for link in _index_page(http, index, dist)]
    except RangeUnavailable as exc:
        raise SpecauditError(f"{dist}: cannot list its releases ({exc})") from None
    ranks = _tag_ranks(tuple(platforms))
    found = set()
    for link in links:
        try:
            name, version, _, tags = parse_wheel_filename(link.filename)
        except InvalidWheelFilename:
            continue
        if name == canonicalize_name(dist) and not link.yanked and any(tag in ranks for tag in tags) \
                and _supports_python(link.requires_python) and wanted.contains(version, prereleases=prereleases):
            found.add(version)
    return [str(v) for v in sorted(found)]


def _readable(index: str) -> bool:
    parts = urlsplit(index)
    return parts.scheme in ("http", "https") and not parts.username


def _index_page(http: _Http, index: str, dist: str) -> list[WheelLink]:
    """The files of ``dist`` on one index: the PEP 691 JSON page, else the PEP 503 HTML page; none on a 404."""
    page = http.get(f"{index.rstrip('/')}/{canonicalize_name(dist)}/", {"Accept": SIMPLE_ACCEPT})
    if page is None:
        return []
    body, content_type, url = page
    if content_type.startswith("application/vnd.pypi.simple.v1+json"):
        try:
            files = json.loads(body)["files"]
            return [WheelLink(f["filename"], _absolute(url, f["url"]), bool(f.get("yanked")),
                              f.get("requires-python")) for f in files]
        except (ValueError, KeyError, TypeError) as exc:
            raise RangeUnavailable(f"{url}: not a PEP 691 page ({exc})") from None
    parser = _Anchors(url)
    parser.feed(body.decode("utf-8", errors="replace"))
    return parser.links


class _Anchors(HTMLParser):
    """The links of a PEP 503 page, relative to its URL or its ``<base href>``."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.base = url
        self.links: list[WheelLink] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        href = found.get("href")
        if tag == "base" and href:
            self.base = urljoin(self.base, href)
        elif tag == "a" and href:
            url = _absolute(self.base, href)
            self.links.append(WheelLink(unquote(posixpath.basename(urlsplit(url).path)), url,
                                        "data-yanked" in found, found.get("data-requires-python")))


def _absolute(page: str, href: str) -> str:
    return urlunsplit(urlsplit(urljoin(page, href))._replace(fragment=""))


def _best_wheel(links: Sequence[WheelLink], dist: str, version: str,
                platforms: tuple[str, ...]) -> WheelLink | None:
    """pip's choice among the files of one pinned release: not yanked first, then the highest version (a local
    version matches ``==X`` too), then the most preferred tag, then the highest build number."""
    try:
        pinned = Specifier(f"=={version}")
    except InvalidSpecifier:
        return None
    ranks = _tag_ranks(platforms)
    best, best_key = None, None
    for link in links:
        try:
            name, found, build, tags = parse_wheel_filename(link.filename)
        except InvalidWheelFilename:
            continue  # an sdist, or a file that is not a wheel
        fitting = [ranks[tag] for tag in tags if tag in ranks]
        if (name != canonicalize_name(dist) or not fitting or not pinned.contains(found, prereleases=True)
                or not _supports_python(link.requires_python)):
            continue
        key = (not link.yanked, found, -min(fitting), build)
        if best_key is None or key > best_key:
            best, best_key = link, key
    return best


@cache
def _tag_ranks(platforms: tuple[str, ...]) -> dict[Tag, int]:
    """pip's supported tags for ``--python-version 3.12 --platform ...``, most preferred first (rank 0)."""
    tags = [*cpython_tags(PYTHON, platforms=platforms),
            *compatible_tags(PYTHON, f"cp{PYTHON[0]}{PYTHON[1]}", platforms)]
    ranks: dict[Tag, int] = {}
    for rank, tag in enumerate(tags):
        ranks.setdefault(tag, rank)
    return ranks


def _supports_python(requires_python: str | None) -> bool:
    if not requires_python:
        return True
    try:
        return SpecifierSet(requires_python).contains(Version(".".join(map(str, PYTHON))), prereleases=True)
    except InvalidSpecifier:
        return True  # as pip: a malformed Requires-Python does not exclude the file


# -- HTTP ----------------------------------------------------------------------------------------------------------

class _Http:
    """urllib with pip's CA bundle, client certificate, proxy and timeout; counts requests and body bytes read.
    Every network failure surfaces as RangeUnavailable."""

    def __init__(self, config: IndexConfig) -> None:
        handlers: list[urllib.request.BaseHandler] = [
            urllib.request.HTTPSHandler(context=_tls_context(config.cert, config.client_cert))]
        if config.proxy:
            handlers.append(urllib.request.ProxyHandler({"http": config.proxy, "https": config.proxy}))
        self._opener = urllib.request.build_opener(*handlers)  # without a ProxyHandler: HTTPS_PROXY and the like
        self._timeout = config.timeout
        self.requests = 0
        self.transferred = 0

    def get(self, url: str, headers: dict[str, str]) -> tuple[bytes, str, str] | None:
        """(body, content type, final URL after redirects), or None on a 404."""
        try:
            with self._open(url, headers) as response:
                return self._body(url, response), response.headers.get_content_type(), response.geturl()
        except _NotFound:
            return None

    def range(self, url: str, spec: str, advance: Callable[[int], None] | None = None) -> tuple[bytes, int, int]:
        """The bytes of ``Range: bytes=<spec>`` (``a-b``, or ``-n`` for the last n), their offset, and the file's
        size. Raises RangeUnavailable when the server does not answer 206 with the range asked for."""
        with self._open(url, {"Range": f"bytes={spec}", "Accept-Encoding": "identity"}) as response:
            if response.status != 206:
                # Closed unread: a server that ignores Range is sending the whole wheel.
                raise RangeUnavailable(f"{url}: the server answers a range request with {response.status}")
            found = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", response.headers.get("Content-Range", "").strip())
            if found is None:
                raise RangeUnavailable(f"{url}: a 206 answer without a usable Content-Range")
            first, last, size = map(int, found.groups())
            start, _, end = spec.partition("-")
            asked = (int(start), min(int(end), size - 1)) if start else (max(size - int(end), 0), size - 1)
            if (first, last) != asked:
                raise RangeUnavailable(f"{url}: asked for bytes {spec}, got {first}-{last}")
            body = self._body(url, response, advance)
        if len(body) != last - first + 1:
            raise RangeUnavailable(f"{url}: {len(body)} bytes for the range {first}-{last}")
        return body, first, size

    def _open(self, url: str, headers: dict[str, str]) -> http.client.HTTPResponse:
        self.requests += 1
        with _network(url):
            return self._opener.open(urllib.request.Request(url, headers=headers), timeout=self._timeout)

    def _body(self, url: str, response: http.client.HTTPResponse,
              advance: Callable[[int], None] | None = None) -> bytes:
        chunks = []
        with _network(url):
            while chunk := response.read(256 * 1024):
                chunks.append(chunk)
                self.transferred += len(chunk)
                if advance:
                    advance(len(chunk))
        return b"".join(chunks)


@cache
def _tls_context(cert: str | None, client_cert: str | None) -> ssl.SSLContext:
    """One context for every fetch of a process: loading the CA bundle costs ~50 ms of CPU, each time."""
    try:
        context = ssl.create_default_context(cafile=cert)
        if client_cert:
            context.load_cert_chain(client_cert)
    except OSError as exc:  # a configured certificate file missing or unreadable: pip says it better
        raise RangeUnavailable(f"pip's certificates: {exc}") from None
    return context


class _NotFound(RangeUnavailable):
    """A 404: an index page that is not there means no files on that index."""


@contextmanager
def _network(url: str) -> Iterator[None]:
    try:
        yield
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise _NotFound(f"{url}: not found") from None
        raise RangeUnavailable(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (OSError, http.client.HTTPException) as exc:  # URLError, TLS, timeouts, a dropped connection
        raise RangeUnavailable(f"{url}: {exc}") from None


# -- the zip, read by ranges ---------------------------------------------------------------------------------------

_EOCD = struct.Struct("<4s4H2LH")  # end of central directory
_EOCD64_LOCATOR = struct.Struct("<4sLQL")
_EOCD64 = struct.Struct("<4sQ2H2L4Q")
_CENTRAL = struct.Struct("<4s6H3L5H2L")  # a central directory entry
_LOCAL = struct.Struct("<4s5H3L2H")  # a local file header


class _RemoteZip:
    """A zip file on an HTTP server, read by ranges: ``members`` in file order, and for each member's offset in
    ``ends`` where the next member (or the central directory) begins, so its local header, data and data
    descriptor lie within. The first request reads the last ``TAIL_BYTES``; what lies there is never asked for
    again. Raises RangeUnavailable on any structure it does not read, on an encrypted member the scan reads, or
    one compressed otherwise than stored or deflated."""

    def __init__(self, http: _Http, url: str) -> None:
        self._http, self._url = http, url
        self._tail, self._tail_start, self.size = http.range(url, f"-{TAIL_BYTES}")
        directory_offset, directory_size, entries = self._locate_directory()
        self.members = self._read_directory(directory_offset, directory_size, entries)
        offsets = sorted({member.offset for member in self.members} | {directory_offset})
        self.ends = dict(zip(offsets, offsets[1:]))

    def read(self, start: int, end: int, advance: Callable[[int], None] | None = None) -> bytes:
        """Bytes ``[start, end)``: what precedes the tail by one range request, the rest from the tail."""
        head = b""
        if start < self._tail_start:
            head, _, _ = self._http.range(self._url, f"{start}-{min(end, self._tail_start) - 1}", advance)
        held = self._tail[max(start - self._tail_start, 0):max(end - self._tail_start, 0)]
        if advance and held:
            advance(len(held))
        return head + held

    def _read_directory(self, directory_offset: int, directory_size: int, entries: int) -> list[Member]:
        directory = self.read(directory_offset, directory_offset + directory_size)
        found, at = [], 0
        for _ in range(entries):
            fields = _unpack(_CENTRAL, directory, at, b"PK\x01\x02")
            flags, method, compressed, size = fields[3], fields[4], fields[8], fields[9]
            name_length, extra_length, comment_length, offset = fields[10], fields[11], fields[12], fields[16]
            start = at + _CENTRAL.size
            try:
                name = directory[start:start + name_length].decode("utf-8" if flags & 0x800 else "cp437")
            except UnicodeDecodeError:
                raise RangeUnavailable(f"{self._url}: a member name that is not UTF-8") from None
            extra = directory[start + name_length:start + name_length + extra_length]
            compressed, offset = _zip64_fields(extra, size, compressed, offset)
            if scanned_member(name) and (flags & 0x1 or method not in (0, 8)):
                raise RangeUnavailable(f"{self._url}: {name} is encrypted or compressed with method {method}")
            found.append(Member(name, offset, compressed, method))
            at = start + name_length + extra_length + comment_length
        return sorted(found, key=lambda member: member.offset)

    def _locate_directory(self) -> tuple[int, int, int]:
        """(offset, size, entry count) of the central directory, from the (zip64) end records in the tail."""
        at = _end_record(self._tail)
        if at < 0:
            raise RangeUnavailable(f"{self._url}: no end of central directory (not a zip?)")
        _, disk, _, _, entries, size, offset, _ = _unpack(_EOCD, self._tail, at)
        if disk:
            raise RangeUnavailable(f"{self._url}: a multi-disk zip")
        if entries != 0xFFFF and 0xFFFFFFFF not in (size, offset):
            return offset, size, entries
        locator = _unpack(_EOCD64_LOCATOR, self._tail, at - _EOCD64_LOCATOR.size, b"PK\x06\x07")
        record = _unpack(_EOCD64, self._tail, locator[2] - self._tail_start, b"PK\x06\x06")
        return record[9], record[8], record[7]


def _end_record(tail: bytes) -> int:
    """Where the end-of-central-directory record starts in ``tail``, -1 if nowhere: the last signature whose
    record, with its comment, ends the file (a match after it lies inside the comment)."""
    at = tail.rfind(b"PK\x05\x06")
    while at >= 0:
        if at + _EOCD.size <= len(tail) and at + _EOCD.size + _EOCD.unpack_from(tail, at)[7] == len(tail):
            return at
        at = tail.rfind(b"PK\x05\x06", 0, at)
    return -1


def _unpack(layout: struct.Struct, data: bytes, at: int, signature: bytes | None = None) -> tuple:
    """The fields of ``layout`` at ``data[at:]``; RangeUnavailable when they are not there or not signed so."""
    if at < 0 or at + layout.size > len(data):
        raise RangeUnavailable("a zip record lies outside the bytes read")
    fields = layout.unpack_from(data, at)
    if signature is not None and fields[0] != signature:
        raise RangeUnavailable(f"a zip record without its signature {signature!r}")
    return fields


def _zip64_fields(extra: bytes, size: int, compressed: int, offset: int) -> tuple[int, int]:
    """(compressed size, local header offset), from the zip64 extra field where the 32-bit ones are saturated.
    Its values come in order (size, compressed size, offset), each only where the 32-bit field is 0xFFFFFFFF."""
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<2H", extra, at)
        if kind == 0x0001:
            values = iter(struct.unpack_from(f"<{min(length, len(extra) - at - 4) // 8}Q", extra, at + 4))
            if size == 0xFFFFFFFF:
                next(values, None)
            compressed = next(values, compressed) if compressed == 0xFFFFFFFF else compressed
            offset = next(values, offset) if offset == 0xFFFFFFFF else offset
            break
        at += 4 + length
    return compressed, offset


def _spans(members: Sequence[Member], ends: dict[int, int]) -> list[Span]:
    """The wanted members grouped into few range requests: each member's extent runs to the next member, and
    extents closer than ``GAP_BYTES`` are merged."""
    spans: list[Span] = []
    for member in members:
        end = ends[member.offset]
        if spans and member.offset - spans[-1].end <= GAP_BYTES:
            last = spans[-1]
            spans[-1] = Span(last.start, end, (*last.members, member))
        else:
            spans.append(Span(member.offset, end, (member,)))
    return spans


def _record_member(members: Sequence[Member]) -> Member:
    records = [m for m in members if re.fullmatch(r"[^/]+\.dist-info/RECORD", m.name)]
    if len(records) != 1:
        raise RangeUnavailable(f"the wheel has {len(records)} .dist-info/RECORD files")
    return records[0]


def _inflate(wheel: str, member: Member, blob: bytes, blob_start: int) -> bytes:
    """The member's content, from its local header at its offset within ``blob``."""
    at = member.offset - blob_start
    fields = _unpack(_LOCAL, blob, at, b"PK\x03\x04")
    start = at + _LOCAL.size + fields[9] + fields[10]  # past the name and extra field the local header has
    data = blob[start:start + member.compressed]
    if len(data) != member.compressed:
        raise RangeUnavailable(f"{member.name} runs past the next member")
    if member.method == 0:
        return data
    try:
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        out = inflater.decompress(data, MAX_MEMBER_BYTES + 1)  # a bomb inflates no further than this
        if len(out) > MAX_MEMBER_BYTES or inflater.unconsumed_tail:
            raise SpecauditError(f"{wheel}: {member.name} inflates past {MAX_MEMBER_BYTES // 1_000_000} MB, more than "
                                 f"any engine module (a zip bomb?)")
        return out + inflater.flush()
    except zlib.error:
        raise SpecauditError(f"{wheel}: {member.name} does not decompress (a corrupt wheel)") from None


# No member of an engine wheel that specaudit reads (modules, metadata, RECORD) comes near this once inflated.
MAX_MEMBER_BYTES = 64_000_000


def _parse_record(data: bytes) -> dict[str, str]:
    """RECORD's rows: path -> ``algorithm=urlsafe-base64 digest`` (empty for RECORD and its signatures)."""
    return {row[0]: row[1] for row in csv.reader(data.decode("utf-8").splitlines()) if len(row) >= 2}


def _verify(wheel: str, member: Member, data: bytes, hashes: dict[str, str], record: str) -> None:
    """Raises SpecauditError unless ``data`` is what the wheel's RECORD lists for the member. RECORD itself, its
    signatures and directory entries carry no hash."""
    if member.name.endswith("/") or member.name in (record, f"{record}.jws", f"{record[:-6]}RECORD.p7s"):
        return
    expected = hashes.get(member.name)
    if not expected:
        raise SpecauditError(f"{wheel}: {member.name} has no hash in the wheel's RECORD")
    algorithm, _, digest = expected.partition("=")
    try:
        actual = hashlib.new(algorithm, data).digest()
    except ValueError:
        raise SpecauditError(f"{wheel}: {member.name} is hashed with {algorithm!r} in RECORD, unknown here") from None
    if base64.urlsafe_b64encode(actual).rstrip(b"=").decode() != digest:
        raise SpecauditError(f"{wheel}: {member.name} does not match the wheel's RECORD ({algorithm})")


def _write(staging: Path, name: str, data: bytes) -> None:
    """The member under ``staging``, its path made safe as zipfile makes it (no root, no ``..``)."""
    parts = [part for part in name.split("/") if part not in ("", ".", "..")]
    if not parts:
        return
    target = staging.joinpath(*parts)
    if name.endswith("/"):
        target.mkdir(parents=True, exist_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
