#!/usr/bin/env python3
"""Run the cells of the GPU differential grid (cells.py) on the device and keep their logs.

    PYTHONPATH=<engine site> python3 grid.py vllm|sglang MODELS OUT_DIR BUDGET_S [CELL ...]

Cells are launched in waves (vLLM: WAVE at a time, each with --kv-cache-memory-bytes 1 GiB, which skips vLLM's
memory profiling that concurrent launches would disturb; SGLang: the first cell alone, since it builds flashinfer's
norm kernels on first use, then the rest together, each with its KV pool capped by --max-total-tokens), each in its
own process group, stdout and stderr merged into OUT_DIR/<cell>.log (its first line the command, its last
'# exit status: N'). A cell that comes up (/health 200) gets 2 greedy completions (temperature 0, 32 tokens) and,
for SGLang, one native /generate (its meta_info carries the request's spec_* acceptance), then /metrics, nvidia-smi
while it serves (OUT_DIR/<cell>.nvidia-smi.txt), and SIGTERM. OUT_DIR/<cell>.json: what the driver saw.
Cells not started before the budget runs out are listed in OUT_DIR/summary.json under "not_run".
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cells import SGLANG_CELLS, VLLM_CELLS, sglang_command, vllm_command  # noqa: E402

ENGINE, MODELS, OUT, BUDGET = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
ONLY = sys.argv[5:]
T0 = time.time()
WAVE = int(os.environ.get("WAVE", "13"))
CELL_LIMIT = float(os.environ.get("CELL_LIMIT", "240"))  # seconds a cell may take to come up or exit
# transformers 5.12.1 + tokenizers 0.22.2 (stage1b.sh): the image's transformers 5.17 no longer has
# PixtralRotaryEmbedding, which vLLM 0.26.0's pixtral.py (imported by llava.py) imports
OVERLAY = os.environ.get("TF_OVERLAY", "/root/tf")


def http(url: str, body: dict | None = None, timeout: float = 30.0) -> tuple[int, str]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError as e:
        return 0, str(e)


def smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv"],
                              capture_output=True, text=True, timeout=20).stdout + \
            subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"nvidia-smi: {e}"


class Run:
    def __init__(self, cell: dict, port: int):
        self.cell, self.port, self.t0 = cell, port, time.time()
        make = vllm_command if ENGINE == "vllm" else sglang_command
        self.cmd = make(cell, MODELS, port, sys.executable)
        self.log = open(os.path.join(OUT, f"{cell['name']}.log"), "w")  # noqa: SIM115 (closed in stop())
        self.log.write("# " + " ".join(self.cmd) + "\n")
        self.log.flush()
        env = dict(os.environ)
        if cell["target"] == "llava" and os.path.isdir(OVERLAY):  # vLLM 0.26.0's pixtral.py needs transformers 5.12
            env["PYTHONPATH"] = OVERLAY + os.pathsep + env.get("PYTHONPATH", "")
            self.log.write(f"# PYTHONPATH={env['PYTHONPATH']}\n")
            self.log.flush()
        self.p = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True, cwd=MODELS, env=env)
        self.res: dict = {"cell": cell["name"], "engine": ENGINE, "command": self.cmd, "started": self.t0 - T0}
        self.done = False

    def exercise(self) -> None:
        r, base, model = self.res, f"http://127.0.0.1:{self.port}", f"{MODELS}/{self.cell['target_dir']}"
        r["health_s"] = round(time.time() - self.t0, 1)
        r["metrics_before"] = http(f"{base}/metrics")[1]
        outs = []
        for prompt in ["Hello world", "The quick brown fox jumps over"]:
            body = {"model": model, "prompt": prompt, "max_tokens": 32, "temperature": 0, "ignore_eos": True}
            if ENGINE == "vllm":
                body["return_token_ids"] = True
            st, text = http(f"{base}/v1/completions", body, timeout=90)
            outs.append({"status": st, "body": text[:3000]})
        r["completions"] = outs
        if ENGINE == "sglang":
            st, text = http(f"{base}/generate", {"text": "The quick brown fox", "sampling_params": {
                "max_new_tokens": 32, "temperature": 0, "ignore_eos": True}}, timeout=90)
            r["generate"] = {"status": st, "body": text[:4000]}
            st, text = http(f"{base}/server_info", timeout=20)
            r["server_info"] = {"status": st, "body": text[:6000]}
        st, met = http(f"{base}/metrics")
        with open(os.path.join(OUT, f"{self.cell['name']}.metrics.txt"), "w") as f:
            f.write(met)
        with open(os.path.join(OUT, f"{self.cell['name']}.nvidia-smi.txt"), "w") as f:
            f.write(smi())

    def poll(self) -> bool:
        """True once the cell is finished (exited, or came up and was exercised)."""
        if self.done:
            return True
        if self.p.poll() is not None:
            self.res.update(up=False, rc=self.p.returncode, exit_s=round(time.time() - self.t0, 1))
            self.done = True
        elif http(f"http://127.0.0.1:{self.port}/health", timeout=2)[0] == 200:
            self.res["up"] = True
            self.exercise()
            self.done = True
        elif time.time() - self.t0 > CELL_LIMIT or time.time() - T0 > BUDGET:
            self.res.update(up=None, timeout=True)
            self.done = True
        return self.done

    def stop(self) -> None:
        if self.p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait(10)
        self.res["rc_final"] = self.p.returncode
        self.res["wall_s"] = round(time.time() - self.t0, 1)
        self.log.write(f"# exit status: {self.p.returncode}\n")
        self.log.close()
        with open(os.path.join(OUT, f"{self.cell['name']}.json"), "w") as f:
            json.dump(self.res, f, indent=1)
        print(self.cell["name"], json.dumps({k: v for k, v in self.res.items()
                                             if k in ("up", "rc", "health_s", "exit_s", "timeout", "wall_s")}),
              flush=True)


def wave(cells: list[dict], port0: int) -> None:
    runs = []
    for i, cell in enumerate(cells):
        runs.append(Run(cell, port0 + i))
        time.sleep(1.5)
    while not all([r.poll() for r in runs]):
        time.sleep(1)
        for r in runs:
            if r.done and r.p.poll() is None and "rc_final" not in r.res:
                r.stop()
    for r in runs:
        if "rc_final" not in r.res:
            r.stop()


def main() -> int:
    os.makedirs(OUT, exist_ok=True)
    cells = [c for c in (VLLM_CELLS if ENGINE == "vllm" else SGLANG_CELLS) if not ONLY or c["name"] in ONLY]
    summary: dict = {"engine": ENGINE, "cells": [c["name"] for c in cells], "not_run": []}
    waves = [cells[:1], cells[1:]] if ENGINE == "sglang" else [cells[i:i + WAVE] for i in range(0, len(cells), WAVE)]
    port = 18500 if ENGINE == "vllm" else 30000
    for cells_of_wave in waves:
        if not cells_of_wave:
            continue
        if time.time() - T0 > BUDGET - 90:
            summary["not_run"] += [c["name"] for c in cells_of_wave]
            continue
        wave(cells_of_wave, port)
        port += 50
    summary["wall_s"] = round(time.time() - T0, 1)
    with open(os.path.join(OUT, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("summary", json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
