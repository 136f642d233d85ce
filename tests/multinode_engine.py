"""A stand-in for ``vllm serve`` in vLLM's multiprocessing multi-node mode, run on each loopback "node" of
tests/test_multinode_smoke.py as its ``vllm`` console script. It behaves as the real launcher does where the smoke
can tell (vllm/entrypoints/cli/serve.py, v1/executor/multiproc_executor.py, 0.32.0):

- the head (``--node-rank 0``) waits at ``--master-addr:--master-port`` for the ``--nnodes - 1`` headless workers;
  once all are in, it serves the OpenAI API on ``--host:--port`` (/health, /v1/models, /v1/completions of exactly
  ``max_tokens`` tokens, and /metrics counting as vllm/v1/spec_decode/metrics.py counts, every draft token accepted);
- a worker (``--headless``) joins the head; told to crash (``~/standin.json``: ``{"crash": LOG}``), it prints the
  worker traceback of a real launch log (tests/fixtures/logs) and exits 1; told to hang, it never joins; told to exit,
  it exits with that status before joining, with no traceback;
- when a worker drops out before it is in, the head prints the wrappers that log printed after the worker's traceback
  (EngineCore's "WorkerProc initialization failed", the API server's "Engine core initialization failed") and exits 1.

The node's HOME (its sshd's SetEnv) holds ``standin.json``; nothing listens anywhere but loopback.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

PID = os.getpid()
NUM_SPECULATIVE_TOKENS = 3


def say(process: str, text: str, level: str = "INFO", where: str = "serve.py:224") -> None:
    print(f"({process} pid={PID}) {level} 12-02 05:51:01 [{where}] {text}", flush=True)


def replay(log: str, workers: bool, after: str | None = None) -> None:
    """The lines of a real log that its workers printed, or the others (after the line holding ``after``, when
    given); not the comments the capture added (``# exit status``)."""
    lines = Path(log).read_text().splitlines()
    if after is not None:
        lines = lines[next(i for i, line in enumerate(lines) if after in line) + 1:]
    for line in lines:
        if line.startswith("(Worker ") == workers and not line.startswith("# "):
            print(line, flush=True)


def main() -> int:
    if sys.argv[1:2] != ["serve"]:
        print("usage: vllm serve MODEL ...", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--node-rank", type=int, default=0)
    parser.add_argument("--master-addr", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, default=29501)
    parser.add_argument("--headless", action="store_true")
    args, _ = parser.parse_known_args(sys.argv[2:])
    told = Path(os.environ["HOME"], "standin.json")
    behaviour = json.loads(told.read_text()) if told.exists() else {}
    say("MainProcess" if args.headless else "APIServer", "vLLM API server version 0.32.0", where="api_utils.py:347")
    if args.headless:
        return worker(args, behaviour)
    return head(args, behaviour)


def worker(args: argparse.Namespace, behaviour: dict) -> int:
    say("MainProcess", f"Launching vLLM (v0.32.0) headless multiproc executor, with head node address "
                       f"{args.master_addr}:{args.master_port} for torch.distributed process group.")
    if behaviour.get("hang"):
        time.sleep(3600)
        return 0
    if "exit" in behaviour:  # fails to start, saying nothing a traceback would
        return int(behaviour["exit"])
    deadline = time.monotonic() + 60
    while True:
        try:
            link = socket.create_connection((args.master_addr, args.master_port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                return 1
            time.sleep(0.1)
    say("Worker_TP1", f"Starting to load model {args.model}...", where="cpu_model_runner.py:68")
    if behaviour.get("crash"):
        replay(behaviour["crash"], workers=True)
        link.close()
        return 1
    link.sendall(b"ready\n")
    link.settimeout(None)
    link.recv(1)  # until the head goes
    return 0


def head(args: argparse.Namespace, behaviour: dict) -> int:
    listener = socket.create_server((args.master_addr, args.master_port))
    say("EngineCore", f"Starting to load model {args.model}...", where="cpu_model_runner.py:68")
    links = []
    for _ in range(args.nnodes - 1):
        link, _ = listener.accept()
        if link.recv(6) != b"ready\n":  # the worker dropped out before it was in
            if behaviour.get("wrappers"):
                replay(behaviour["wrappers"], workers=False, after="AssertionError: Tried to load")
            return 1
        links.append(link)
    say("EngineCore", "Loading weights took 0.01 seconds", where="default_loader.py:291")
    serve(args)
    return 0


class Counters:
    """vLLM's spec-decode counters (vllm/v1/spec_decode/metrics.py), every draft token accepted."""

    def __init__(self) -> None:
        self.drafts = 0
        self.lock = threading.Lock()

    def add(self, tokens: int) -> None:
        with self.lock:
            self.drafts += -(-tokens // (NUM_SPECULATIVE_TOKENS + 1))

    def text(self) -> str:
        labels = 'engine="0",model_name="m"'
        k, d = NUM_SPECULATIVE_TOKENS, self.drafts
        return "\n".join([f"vllm:spec_decode_num_drafts_total{{{labels}}} {d}.0",
                          f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {k * d}.0",
                          f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {k * d}.0",
                          *[f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {d}.0'
                            for i in range(k)]]) + "\n"


def serve(args: argparse.Namespace) -> None:
    counters = Counters()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *_):
            pass

        def _send(self, body: object, kind: str = "application/json") -> None:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/metrics":
                self._send(counters.text(), "text/plain")
            elif self.path == "/v1/models":
                self._send({"data": [{"id": args.model}]})
            else:
                self._send({})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            tokens = body["max_tokens"]
            counters.add(tokens)
            self._send({"choices": [{"text": " x" * tokens, "finish_reason": "length", "token_ids": [7] * tokens}],
                        "usage": {"completion_tokens": tokens}})

    server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    say("APIServer", "Application startup complete.", where="on.py:62")
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
