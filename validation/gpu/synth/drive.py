#!/usr/bin/env python3
"""The synthesized-bundle cells on the device (issue 42; device.sh beside this file runs it): every cell of an engine
launched side by side, each in its own process group and port, on the engine site its cell names (the pristine
install, or a copy with one synthesized bundle's files in place, made by device.sh), greedy prompts answered, the
drafts counted (vLLM: /metrics' spec_decode counters; SGLang: /generate's meta_info), then SIGTERM to the group.

    python3 drive.py vllm|sglang MODELS OUT BUDGET_S      -> OUT/results.json, OUT/<cell>.log
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

PROMPTS = ["Hello", "The quick brown fox", "1 2 3", "x"]
MAX_TOKENS = 24
NUM_SPEC = 3
SITES = {"vllm": "/root/site", "sglang": "/root/sgl"}
COMMON_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "DO_NOT_TRACK": "1",
              "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
ENGINE_ENV = {"vllm": {"VLLM_USE_FLASHINFER_SAMPLER": "0", "VLLM_NO_USAGE_STATS": "1"},
              "sglang": {"SGLANG_IS_FLASHINFER_AVAILABLE": "false", "FLASHINFER_CUDA_ARCH_LIST": "9.0a"}}

# (name, target, site: "pristine" or the bundle's copy, with the agreeing drafter?, what the cell is built to show)
CELLS = {
    "vllm": [
        ("gpt2-patched", "target-gpt2", "/root/vp-gpt2", True, "served, every draft accepted"),
        ("gpt2-baseline", "target-gpt2", "pristine", False, "served"),
        ("gpt2-unpatched-drafter", "target-gpt2", "pristine", True, "start-up crash (no SupportsEagle3)"),
        ("gemma-patched", "target-gemma", "/root/vp-gemma", True, "served, every draft accepted"),
        ("gemma-baseline", "target-gemma", "pristine", False, "served"),
        ("gemma-unpatched-drafter", "target-gemma", "pristine", True, "start-up crash (no SupportsEagle3)"),
    ],
    "sglang": [
        ("gpt2-patched", "target-gpt2", "/root/sp-gpt2", True, "served, every draft accepted"),
        ("gpt2-baseline", "target-gpt2", "pristine", False, "served"),
        ("gpt2-unpatched-drafter", "target-gpt2", "pristine", True, "start-up crash (no get_embed_and_head)"),
    ],
}


def command(engine: str, models: str, target: str, drafter: bool, port: int) -> list[str]:
    if engine == "vllm":
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", f"{models}/{target}",
               "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16", "--max-model-len", "512",
               "--enforce-eager", "--gpu-memory-utilization", "0.05", "--kv-cache-memory-bytes", str(1 << 30)]
        if drafter:
            cmd += ["--speculative-config", json.dumps({"method": "eagle3", "model": f"{models}/drafter-agree",
                                                        "num_speculative_tokens": NUM_SPEC})]
        return cmd
    cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", f"{models}/{target}", "--dtype", "bfloat16",
           "--attention-backend", "triton", "--sampling-backend", "pytorch", "--context-length", "512",
           "--mem-fraction-static", "0.85", "--max-total-tokens", "8192", "--max-running-requests", "8",
           "--enable-metrics", "--disable-cuda-graph", "--host", "127.0.0.1", "--port", str(port)]
    if drafter:
        cmd += ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", f"{models}/drafter-agree",
                "--speculative-num-steps", str(NUM_SPEC), "--speculative-eagle-topk", "1",
                "--speculative-num-draft-tokens", str(NUM_SPEC + 1)]
    return cmd


def call(url: str, body: dict | None = None, timeout: float = 120) -> str:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read().decode()


def query(engine: str, port: int, model: str) -> dict:
    base = f"http://127.0.0.1:{port}"
    texts, metas = [], []
    for prompt in PROMPTS:
        if engine == "vllm":
            out = json.loads(call(f"{base}/v1/completions", {"model": model, "prompt": prompt, "max_tokens": MAX_TOKENS,
                                                              "temperature": 0, "ignore_eos": True}))
            texts.append(out["choices"][0]["text"])
        else:
            out = json.loads(call(f"{base}/generate", {"text": prompt, "sampling_params": {
                "max_new_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True}}))
            texts.append(out["text"])
            metas.append({k: v for k, v in out.get("meta_info", {}).items()
                          if k.startswith("spec_") or k in ("completion_tokens", "prompt_tokens")})
    row: dict = {"texts": texts}
    if engine == "vllm":
        metrics = call(f"{base}/metrics")
        row["spec_decode"] = {name: sum(float(v) for v in re.findall(
            rf"^vllm:spec_decode_{name}_total(?:{{[^}}]*}})? (\S+)$", metrics, re.M))
            for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens")}
    else:
        row["meta_info"] = metas
    return row


def main() -> int:
    engine, models, out, budget = sys.argv[1], sys.argv[2], Path(sys.argv[3]), float(sys.argv[4])
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    running = {}
    for i, (name, target, site, drafter, want) in enumerate(CELLS[engine]):
        port = 31000 + i
        env = dict(os.environ, **COMMON_ENV, **ENGINE_ENV[engine],
                   PYTHONPATH=SITES[engine] if site == "pristine" else site)
        cmd = command(engine, models, target, drafter, port)
        log = (out / f"{engine}-{name}.log").open("w")
        log.write(f"# PYTHONPATH={env['PYTHONPATH']}\n# {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        running[name] = dict(proc=proc, port=port, target=f"{models}/{target}", log=log, started=time.time(),
                             row={"cell": f"{engine}-{name}", "target": target, "site": site, "drafter": drafter,
                                  "want": want, "command": cmd})
    pending = set(running)
    while pending and time.time() - t0 < budget:
        for name in sorted(pending):
            r = running[name]
            row = r["row"]
            if r["proc"].poll() is not None:
                row.update(outcome="exited", exit_code=r["proc"].returncode, seconds=round(time.time() - r["started"]))
                pending.discard(name)
                continue
            try:
                call(f"http://127.0.0.1:{r['port']}/health", timeout=2)
            except OSError:
                continue
            row.update(up_after_s=round(time.time() - r["started"]))
            try:
                row.update(outcome="served", **query(engine, r["port"], r["target"]))
            except Exception as exc:  # a server that answers /health and fails a request: its error, kept
                row.update(outcome="request failed", error=repr(exc)[:500])
            pending.discard(name)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(r["proc"].pid, signal.SIGTERM)
            print(json.dumps({k: v for k, v in row.items() if k != "command"}), flush=True)
        time.sleep(1)
    for name in pending:
        running[name]["row"].update(outcome="timed out", seconds=round(time.time() - running[name]["started"]))
    for r in running.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(r["proc"].pid, signal.SIGTERM)
    for r in running.values():
        try:
            r["proc"].wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(r["proc"].pid, signal.SIGKILL)
        r["log"].close()
        log = Path(r["log"].name).read_text(errors="replace")
        errors = [ln for ln in log.splitlines() if re.search(r"(Error|Exception)\b", ln)]
        r["row"]["last_error"] = errors[-1][-400:] if errors else None
    rows = [r["row"] for r in running.values()]
    (out / "results.json").write_text(json.dumps({"engine": engine, "seconds": round(time.time() - t0),
                                                  "cells": rows}, indent=2) + "\n")
    print(json.dumps({"engine": engine, "seconds": round(time.time() - t0)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
