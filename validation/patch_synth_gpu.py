#!/usr/bin/env python3
"""The synthesized-bundle round on the lent GPU (issue 42; validation/gpu/synth/README.md has the device calls).

    python validation/patch_synth_gpu.py prepare   # CPU: the bundles and the carried files
    python validation/patch_synth_gpu.py report    # the section of validation/gpu-differential.md, from the logs

prepare: `specaudit patch --target ARCH` on a copy of each fetched release tree (vLLM 0.26.0: GPT-2 and Gemma; SGLang
0.5.17: GPT-2), the bundles kept under validation/gpu/synth/bundles/ for review, the files each bundle changed
written to .gpu/synth/files/<engine>-<name>/ (ignored; carried to the device) with the sha256 of their pristine
wheel bytes (SHA256.pristine: the device refuses to patch an install whose file differs), and vLLM's _C (partA) cut
in two halves (.gpu/synth/a0, a1) so that each call stays under 64 MiB beside the working tree.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = Path.home() / ".cache/specaudit/trees"
WORK = Path("/tmp/specaudit-synth-gpu")
GPU = ROOT / ".gpu/synth"
SYNTH = ROOT / "validation/gpu/synth"
BUNDLES = {("vllm", "0.26.0", "gpt2"): "GPT2LMHeadModel", ("vllm", "0.26.0", "gemma"): "GemmaForCausalLM",
           ("sglang", "0.5.17", "gpt2"): "GPT2LMHeadModel"}
LOGS = SYNTH / "logs"
DOC = ROOT / "validation/gpu-differential.md"
HEADING = "## Synthesized EAGLE-3 bundles on the lent GPU (issue 42)"
OLD_HEADING = "## Synthesized EAGLE-3 bundles on the H200 (issue 42)"  # what the section was called before it ran


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def prepare() -> int:
    shutil.rmtree(WORK, ignore_errors=True)
    shutil.rmtree(GPU / "files", ignore_errors=True)
    shutil.rmtree(SYNTH / "bundles", ignore_errors=True)
    for (engine, version, name), arch in BUNDLES.items():
        pristine, tree = TREES / f"{engine}-{version}", WORK / f"{engine}-{name}"
        shutil.copytree(pristine, tree)
        done = subprocess.run(["specaudit", "patch", "--target", arch, "--path", str(tree), "--bundle-out",
                               str(SYNTH / "bundles")], capture_output=True, text=True, cwd=WORK)
        (WORK / f"{engine}-{name}.txt").write_text(done.stdout + done.stderr)
        print(f"{engine} {version} {arch}: exit {done.returncode}; {done.stdout.strip().splitlines()[-1:]}")
        if done.returncode:
            print(done.stdout + done.stderr)
            return 1
        files = GPU / "files" / f"{engine}-{name}"
        lines = []
        for path in sorted(tree.rglob("*.py")):
            rel = path.relative_to(tree)
            if sha(path) != sha(pristine / rel):
                (files / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, files / rel)
                lines.append(f"{sha(pristine / rel)}  {rel}")
        (files / "SHA256.pristine").write_text("\n".join(lines) + "\n")
        print("  changed:", [ln.split()[1] for ln in lines])
    c = (ROOT / ".gpu/partA/c.xz").read_bytes()
    half = len(c) // 2
    for i, part in enumerate((c[:half], c[half:])):
        (GPU / f"a{i}").mkdir(parents=True, exist_ok=True)
        (GPU / f"a{i}" / f"c.xz.{i}").write_bytes(part)
    print(json.dumps({"a0": half, "a1": len(c) - half}))
    return 0


def rows(engine: str) -> list[dict]:
    path = LOGS / engine / "results.json"
    if not path.is_file():
        with tarfile.open(LOGS / f"{engine}.tgz") as tar:
            tar.extractall(LOGS, filter="data")
    return json.loads(path.read_text())["cells"]


def _cards() -> str:
    """The GPUs the round ran on, as the device's nvidia-smi named them (an H100 may come for an H200)."""
    names = {m.group(0).strip() for f in sorted(LOGS.glob("stage-*/nvidia-smi-*.txt"))
             for m in re.finditer(r"NVIDIA H\d+[^|]*?(?=\s{2,}|\|)", f.read_text())}
    return ", ".join(sorted(names)) or "not recorded"


def report() -> int:
    out = [HEADING, "", f"Ran on: {_cards()} (the device's nvidia-smi, `validation/gpu/synth/logs/stage-*/`).", "",
           "Made by `python validation/patch_synth_gpu.py report` from the logs in `validation/gpu/synth/logs/` "
           "(the calls: `validation/gpu/synth/README.md`). The bundles are `specaudit patch --target ARCH`'s, "
           "synthesized on this machine from the fetched wheels' sources (`validation/gpu/synth/bundles/`), their "
           "files put in place in a copy of the device's install whose pristine files hash as the wheel's. Targets "
           "and drafter: `validation/patch_synth_gpu_models.py` (hidden 256, 8 layers, always \" x\"; the agreeing "
           "EAGLE-3 drafter, 3 draft tokens); bf16, eager; 4 greedy prompts of 24 tokens (ignore_eos).", "",
           "| engine | target | site | drafter | outcome | drafts accepted | greedy identical to the baseline |",
           "|---|---|---|---|---|---|---|"]
    for engine in ("vllm", "sglang"):
        try:
            cells = rows(engine)
        except (FileNotFoundError, tarfile.TarError):
            out.append(f"| {engine} | not run | | | | | |")
            continue
        base = {c["target"]: c for c in cells if not c["drafter"] and c["site"] == "pristine"}
        for c in cells:
            if c.get("spec_decode"):
                s = c["spec_decode"]
                acc = f"{s['num_accepted_tokens']:.0f} / {s['num_draft_tokens']:.0f}"
            elif c.get("meta_info"):
                m = c["meta_info"]
                acc = (f"{sum(x.get('spec_num_correct_drafts', 0) for x in m)} / "
                       f"{sum(x.get('spec_num_proposed_drafts', 0) for x in m)} (accept rate "
                       f"{', '.join(str(x.get('spec_accept_rate')) for x in m)})" if "spec_num_proposed_drafts" in m[0]
                       else "accept rate " + ", ".join(str(x.get("spec_accept_rate")) for x in m))
            else:
                acc = "-"
            same = "-"
            if c["drafter"] and c.get("texts") is not None and c["target"] in base:
                same = "yes" if c["texts"] == base[c["target"]].get("texts") else "NO"
            outcome = c["outcome"] + (f" (exit {c['exit_code']}: {c.get('last_error')})" if c["outcome"] == "exited"
                                      else "")
            site = "pristine" if c["site"] == "pristine" else "synthesized bundle"
            out.append(f"| {engine} | {c['target']} | {site} | {'agree' if c['drafter'] else 'none'} | {outcome} | "
                       f"{acc} | {same} |")
    text = DOC.read_text()
    head = text.split(HEADING)[0].split(OLD_HEADING)[0].rstrip("\n")
    DOC.write_text(head + "\n\n" + "\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit({"prepare": prepare, "report": report}[sys.argv[1]]())
