"""A small Hugging Face Hub on 127.0.0.1 for the tests: it answers the resolve requests ``huggingface_hub`` makes
(HEAD for a file's metadata, GET for its bytes, with ``Range`` when asked) from files in memory, and refuses
the way the Hub does (``X-Error-Code`` GatedRepo, RepoNotFound, RevisionNotFound, EntryNotFound), so the
online path runs with HF_ENDPOINT pointed here and no other address contacted.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<file>.+)$")


@dataclass
class Repo:
    files: dict[str, bytes]
    revisions: tuple[str, ...] = ("main",)
    commit: str = "0" * 40
    gated: bool = False


@dataclass
class FakeHub:
    repos: dict[str, Repo]
    ranges: bool = True  # False: Range headers are ignored, whole files come back (200)
    requests: list[str] = field(default_factory=list)

    def start(self) -> FakeHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self):
                self._answer(body=False)

            def do_GET(self):
                self._answer(body=True)

            def log_message(self, *args):
                pass

            def _answer(self, body: bool) -> None:
                hub.requests.append(f"{self.command} {self.path}" + (f" {self.headers['Range']}"
                                                                      if "Range" in self.headers else ""))
                found = _RESOLVE.match(self.path.split("?")[0])
                repo = hub.repos.get(found["repo"]) if found else None
                if repo is None:
                    return self._refuse(401, "RepoNotFound", "Repository not found")
                if repo.gated:
                    return self._refuse(403, "GatedRepo", "Access to this model is restricted")
                if found["revision"] not in (*repo.revisions, repo.commit):
                    return self._refuse(404, "RevisionNotFound", f"Invalid rev id: {found['revision']}")
                data = repo.files.get(found["file"])
                if data is None:
                    return self._refuse(404, "EntryNotFound", "Entry not found")
                start, end = 0, len(data)
                wanted = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
                if wanted and hub.ranges:
                    start, end = int(wanted[1]), min(len(data), int(wanted[2]) + 1 if wanted[2] else len(data))
                self.send_response(206 if wanted and hub.ranges else 200)
                self.send_header("X-Repo-Commit", repo.commit)
                self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
                self.send_header("Content-Length", str(end - start))
                if wanted and hub.ranges:
                    self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
                self.end_headers()
                if body:
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client read what it needed
                        self.wfile.write(data[start:end])

            def _refuse(self, status: int, code: str, message: str) -> None:
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", message)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
