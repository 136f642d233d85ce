"""Loopback "nodes" for the fleet tests and bench: each a real sshd on 127.0.0.1 (loopback_sshd.py) whose sessions
get the node's own HOME, PATH and PYTHONPATH (sshd's SetEnv), so that each node has its own engine tree, its own
checkpoints under ~/models, its own specaudit patch state under ~/.cache/specaudit, its own python3 and its own
GPUs (an nvidia-smi on its PATH answering the probe's two queries as the real one prints them).

Nothing listens anywhere but loopback; the engine trees are small hand-written vLLM packages with a wheel's RECORD,
or hard-linked copies of a real release the cache holds.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from loopback_sshd import LoopbackSSHD, start_sshd

PYTHON = os.path.realpath(sys.executable)  # the interpreter itself: a pyenv shim would look for its root in HOME

TINY_ENGINE = {
    "vllm/__init__.py": "__version__ = '{version}'\n",
    "vllm/config/__init__.py": "",
    "vllm/config/speculative.py": "class SpeculativeConfig:\n    method = None\n",
    "vllm/model_executor/__init__.py": "",
    "vllm/model_executor/models/__init__.py": "",
    "vllm/model_executor/models/llama.py": "class LlamaForCausalLM:\n    pass\n",
}
TARGET_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128, "vocab_size": 256,
                 "max_position_embeddings": 512}
DRAFTER_CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 64,
                  "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128,
                  "vocab_size": 256, "draft_vocab_size": 256, "max_position_embeddings": 512}


@dataclass
class LoopbackNode:
    name: str
    directory: Path
    sshd: LoopbackSSHD

    @property
    def home(self) -> Path:
        return self.directory / "home"

    @property
    def site(self) -> Path:
        return self.directory / "site"


def write_engine(site: Path, version: str, files: dict[str, str] | None = None, requires: tuple[str, ...] = ()) -> Path:
    """A vLLM package with its dist-info (METADATA, with ``requires`` as its Requires-Dist lines, and a RECORD with each
    file's sha256, as a wheel installs it)."""
    record = []
    for relpath, source in (files or TINY_ENGINE).items():
        path = site / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        data = source.replace("{version}", version).encode()
        path.write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{relpath},sha256={digest},{len(data)}")
    info = site / f"vllm-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    write_metadata(info, "vllm", version, requires)
    (info / "RECORD").write_text("\n".join(record + [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]) + "\n")
    return site


def write_metadata(info: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    info.mkdir(parents=True, exist_ok=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", *[f"Requires-Dist: {r}" for r in requires]]
    (info / "METADATA").write_text("\n".join(lines) + "\n\n")


def write_distribution(site: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    """A library installed beside the engine, as importlib.metadata finds it: its dist-info alone (nothing imports it)."""
    write_metadata(site / f"{name.replace('-', '_')}-{version}.dist-info", name, version, requires)


def link_engine(site: Path, tree: Path) -> Path:
    """A real release's tree (``vllm/`` and its dist-info) as hard links: a node of the same engine, in no time."""
    site.mkdir(parents=True, exist_ok=True)
    for entry in tree.iterdir():
        if entry.is_dir():
            shutil.copytree(entry, site / entry.name, copy_function=os.link)
    return site


def write_checkpoint(folder: Path, config: dict, tensors: dict[str, tuple[str, list[int], int]]) -> Path:
    from conftest import safetensors_bytes

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.safetensors").write_bytes(safetensors_bytes(tensors))
    return folder


def write_models(home: Path, drafter: bool = True) -> None:
    write_checkpoint(home / "models/target", TARGET_CONFIG, {"model.embed_tokens.weight": ("F32", [256, 64], 4)})
    if drafter:
        write_checkpoint(home / "models/drafter", DRAFTER_CONFIG, {"fc.weight": ("F32", [64, 192], 4),
                                                                   "d2t": ("I64", [256], 8)})


def fake_nvidia_smi(bin_dir: Path, gpus: int) -> None:
    rows = "\\n".join(f"{i}, GPU-{i:04d}, NVIDIA H200, 0, 143771, 143771" for i in range(gpus))
    script = bin_dir / "nvidia-smi"
    script.write_text("#!/bin/sh\ncase \"$1\" in\n"
                      f"  --query-gpu=*) printf '{rows}\\n' ;;\n  --query-compute-apps=*) ;;\nesac\n")
    script.chmod(0o755)


def start_node(directory: Path, name: str, gpus: int | None = None) -> LoopbackNode:
    """A node's home, its bin (python3, and nvidia-smi listing ``gpus`` H200s unless None) and its sshd."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (directory / "home").mkdir(exist_ok=True)
    (directory / "site").mkdir(exist_ok=True)
    if not (bin_dir / "python3").exists():
        (bin_dir / "python3").symlink_to(PYTHON)
    if gpus is not None:
        fake_nvidia_smi(bin_dir, gpus)
    env = {"HOME": str(directory / "home"), "PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(directory / "site"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    return LoopbackNode(name, directory, start_sshd(directory / "sshd", alias=name, environment=env))


def ssh_config(nodes: list[LoopbackNode], path: Path) -> Path:
    """One ssh config naming every node by its alias, as a user's ~/.ssh/config would."""
    path.write_text("".join(node.sshd.config.read_text() for node in nodes))
    return path


def launch_command(*extra: str, drafter: str = "~/models/drafter") -> list[str]:
    spec = {"method": "eagle3", "model": drafter, "num_speculative_tokens": 3}
    return ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "~/models/target",
            "--speculative-config", json.dumps(spec), *extra]
