"""Helpers the test modules share (fixtures live in conftest.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def specaudit(*args: str, cwd: Path | None = None, env_cache: Path | None = None) -> subprocess.CompletedProcess:
    """The CLI in a subprocess, with a bare environment: what a user's shell gives it."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home())}
    if env_cache:
        env["SPECAUDIT_CACHE"] = str(env_cache)
    return subprocess.run([sys.executable, "-m", "specaudit.cli", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=env, timeout=600)


def assert_one_line_error(proc, fragment):
    """Bad input: exit code 2 and one line on stderr, no traceback."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specaudit: error:"), proc.stderr
    assert fragment in lines[0]


CHROMIUM = "/usr/bin/chromium"


def open_in_chromium(page: Path, tmp: Path) -> tuple[str, bytes, list[bytes]]:
    """A report opened in real headless Chromium (Debian's), as a person opens it: the rendered DOM, a screenshot
    (PNG), and the request lines the page sent. Every request goes to a proxy on 127.0.0.1 that counts and
    answers nothing, so a page that reaches for the network is seen doing it, and never reaches anything."""
    import socket
    import threading

    proxy = socket.socket()
    proxy.bind(("127.0.0.1", 0))
    proxy.listen()
    proxy.settimeout(0.2)
    tried, stop = [], threading.Event()

    def count() -> None:
        while not stop.is_set():
            try:
                connection, _ = proxy.accept()
            except OSError:
                continue
            tried.append(_request_line(connection))
            connection.close()

    counter = threading.Thread(target=count, daemon=True)
    counter.start()
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
             f"--user-data-dir={tmp / 'chromium-profile'}", f"--proxy-server=http://127.0.0.1:{proxy.getsockname()[1]}",
             "--proxy-bypass-list=<-loopback>", "--window-size=1200,900"]
    try:
        dom = subprocess.run([*flags, "--dump-dom", page.resolve().as_uri()], capture_output=True, text=True,
                             timeout=120, check=True).stdout
        shot = tmp / f"{page.stem}.png"
        subprocess.run([*flags, f"--screenshot={shot}", page.resolve().as_uri()], capture_output=True, timeout=120,
                       check=True)
    finally:
        stop.set()
        counter.join()
        proxy.close()
    # Chromium's own services (its clock, updater, sign-in) call out whatever the page does: not the page's.
    own = re.compile(rb"^\S+ (?:https?://)?[a-z0-9.-]*\.(?:google\.com|googleapis\.com|gstatic\.com)[:/]")
    return dom, shot.read_bytes(), [t for t in tried if t and not own.match(t)]


def _request_line(connection) -> bytes:
    """The first line of what a client sent through the proxy, read whole (TCP may hand it over in pieces)."""
    connection.settimeout(5)
    data = b""
    try:
        while b"\r\n" not in data and len(data) < 4096:
            chunk = connection.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return data.split(b"\r\n")[0]


def png_pixels(data: bytes) -> list[tuple[int, int, int]]:
    """The RGB pixels of an 8-bit, non-interlaced PNG (RGB or RGBA), as Chromium writes its screenshots."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, pos = {}, 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunks[kind] = chunks.get(kind, b"") + data[pos + 8:pos + 8 + length]
        pos += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
    channels = 3 if color == 2 else 4
    raw, stride = zlib.decompress(chunks[b"IDAT"]), width * channels
    previous, pixels = bytearray(stride), []
    for row in range(height):
        kind, line = raw[row * (stride + 1)], bytearray(raw[row * (stride + 1) + 1:(row + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        pixels += [tuple(line[i:i + 3]) for i in range(0, stride, channels)]
        previous = line
    return pixels


def has_colour(pixels: list[tuple[int, int, int]], rgb: tuple[int, int, int], at_least: int = 200) -> bool:
    """Whether the picture shows this colour (within a small tolerance) on at least that many pixels."""
    return sum(all(abs(a - b) <= 8 for a, b in zip(p, rgb)) for p in pixels) >= at_least
