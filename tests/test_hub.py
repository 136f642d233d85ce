"""Models named by Hugging Face Hub id: found in a Hub cache laid out as huggingface_hub documents it, or fetched
(config.json only) from a Hub on 127.0.0.1 (tests/hub_server.py) that refuses the way the real one does.
The scans run on the real vLLM 0.17.0 tree.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import safetensors_bytes, vllm_tree
from helpers import ROOT, assert_one_line_error
from hub_server import FakeHub, Repo

COMMIT = "3c1d2b0e7f5a4c6d8e9f0a1b2c3d4e5f6a7b8c9d"
LLAMA = (ROOT / "specaudit/launch/presets/llama3.json").read_bytes()  # Llama-3.1-8B-Instruct's whole config.json


def write_cache(cache: Path, repo: str, files: dict[str, bytes], refs: dict[str, str]) -> Path:
    """A repository in the Hub cache's layout: blobs named by their hash, refs naming a commit, and the commit's
    snapshot linking each file to its blob."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / COMMIT
    (folder / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (folder / "refs").mkdir()
    for name, data in files.items():
        blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
    for ref, commit in refs.items():
        (folder / "refs" / ref).write_text(commit)
    return snapshot


def scan_model(model: str, env: dict[str, str], *more: str) -> subprocess.CompletedProcess:
    tree = vllm_tree("0.17.0")
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home()),
            "HF_HUB_DISABLE_TELEMETRY": "1", "COLUMNS": "1000", **env}  # one report line, not wrapped
    return subprocess.run([sys.executable, "-m", "specaudit.cli", "scan", "--path", str(tree.root), "--model", model,
                           *more], capture_output=True, text=True, env=base, timeout=600)


def test_a_cache_in_the_documented_layout_is_what_huggingface_hub_reads(tmp_path):
    write_cache(tmp_path, "meta-llama/Llama-3.1-8B-Instruct", {"config.json": LLAMA}, {"main": COMMIT, "v1": COMMIT})
    from huggingface_hub import scan_cache_dir

    found = scan_cache_dir(tmp_path)
    assert not found.warnings
    (repo,) = found.repos
    assert repo.repo_id == "meta-llama/Llama-3.1-8B-Instruct" and repo.repo_type == "model"
    (revision,) = repo.revisions
    assert revision.commit_hash == COMMIT and set(revision.refs) == {"main", "v1"}


@pytest.mark.parametrize("revision", [None, "main", "v1", COMMIT])
def test_an_id_resolves_in_the_cache_offline_at_each_kind_of_revision(tmp_path, revision):
    snapshot = write_cache(tmp_path, "meta-llama/Llama-3.1-8B-Instruct", {"config.json": LLAMA},
                           {"main": COMMIT, "v1": COMMIT})
    proc = scan_model("meta-llama/Llama-3.1-8B-Instruct", {"HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"},
                      *(("--revision", revision) if revision else ()))
    assert proc.returncode == 0, proc.stderr
    assert "READY" in proc.stdout
    written = "meta-llama/Llama-3.1-8B-Instruct" + (f"@{revision}" if revision else "")
    assert written in proc.stdout and "from the Hub cache" in proc.stdout
    assert str(snapshot / "config.json") in proc.stdout


def test_offline_with_nothing_cached_or_an_unknown_revision_is_one_line(tmp_path):
    write_cache(tmp_path, "meta-llama/Llama-3.1-8B-Instruct", {"config.json": LLAMA}, {"main": COMMIT})
    env = {"HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    assert_one_line_error(scan_model("org/absent", env), "not in the Hub cache")
    assert_one_line_error(scan_model("meta-llama/Llama-3.1-8B-Instruct", env, "--revision", "v9"),
                          "meta-llama/Llama-3.1-8B-Instruct@v9: not in the Hub cache")


@pytest.fixture
def hub():
    server = FakeHub({
        "org/llama": Repo({"config.json": LLAMA}, revisions=("main", "v1"), commit=COMMIT),
        "org/gated": Repo({"config.json": LLAMA}, gated=True),
        "org/no-config": Repo({"README.md": b"weights elsewhere"}),
    }).start()
    yield server
    server.stop()


def test_online_only_config_json_is_fetched_into_the_cache(tmp_path, hub):
    proc = scan_model("org/llama", {"HF_HUB_CACHE": str(tmp_path), "HF_ENDPOINT": hub.endpoint}, "--revision", "v1")
    assert proc.returncode == 0, proc.stderr
    assert "org/llama@v1" in proc.stdout and hub.endpoint in proc.stdout
    assert {r.rsplit("/", 1)[1] for r in hub.requests} == {"config.json"}
    assert (tmp_path / "models--org--llama" / "snapshots" / COMMIT / "config.json").is_file()
    again = scan_model("org/llama", {"HF_HUB_CACHE": str(tmp_path), "HF_ENDPOINT": hub.endpoint,
                                     "HF_HUB_OFFLINE": "1"}, "--revision", "v1")
    assert again.returncode == 0 and "from the Hub cache" in again.stdout


@pytest.mark.parametrize("model, revision, why", [
    ("org/gated", None, "a gated repository this token has no access to"),  # 403, GatedRepo
    ("org/missing", None, "no such model repository on the Hub"),  # 401, RepoNotFound: what the Hub says
    ("org/llama", "v9", "org/llama@v9: the repository has no revision 'v9'"),  # 404, RevisionNotFound
    ("org/no-config", None, "the repository has no config.json at this revision"),  # 404, EntryNotFound
])
def test_each_refusal_of_the_hub_is_its_own_line_and_exit_2(tmp_path, hub, model, revision, why):
    proc = scan_model(model, {"HF_HUB_CACHE": str(tmp_path), "HF_ENDPOINT": hub.endpoint},
                      *(("--revision", revision) if revision else ()))
    assert_one_line_error(proc, why)


def test_a_revision_of_a_directory_is_ignored_as_the_engines_ignore_it_and_one_without_a_model_is_bad_input(tmp_path):
    (tmp_path / "config.json").write_bytes(LLAMA)
    assert scan_model(str(tmp_path), {}, "--revision", "main").returncode == 0
    proc = subprocess.run([sys.executable, "-m", "specaudit.cli", "scan", "--path", str(vllm_tree("0.17.0").root),
                           "--revision", "main"], capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home())})
    assert_one_line_error(proc, "--revision is the revision of --model")


# -- a drafter named by Hub id: its safetensors headers read by ranges, never its weights ---------------------------

# The tiny Llama target and the drafter of validation/crash_logs.py's drafter-aux-layers case: the drafter names
# aux layer 20 of an 8-layer target (vLLM's drafter checks: rules/vllm/drafter-aux-layer-ids.yaml).
TINY_TARGET = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
               "intermediate_size": 256, "num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2,
               "head_dim": 32, "vocab_size": 512, "max_position_embeddings": 512, "tie_word_embeddings": False}
DRAFTER = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 128,
           "target_hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 1, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": 512, "vocab_size": 512,
           "draft_vocab_size": 128, "eagle_aux_hidden_state_layer_ids": [1, 4, 20]}
# With a 4 MB lm_head the weights dwarf the header: a read of the whole file would show in the bytes served.
WEIGHTS = safetensors_bytes({"fc.weight": ("F32", [128, 384], 4), "lm_head.weight": ("F32", [8192, 128], 4),
                             "d2t": ("I64", [128], 8), "t2d": ("BOOL", [512], 1)})


@pytest.mark.parametrize("ranges", [True, False], ids=["ranges", "a server that ignores ranges"])
def test_a_hub_drafter_is_checked_from_its_headers_alone(tmp_path, ranges):
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "config.json").write_text(json.dumps(TINY_TARGET))
    hub = FakeHub({"org/drafter": Repo({"config.json": json.dumps(DRAFTER).encode(), "model.safetensors": WEIGHTS},
                                       commit=COMMIT)}, ranges=ranges).start()
    try:
        proc = scan_model(str(tmp_path / "target"), {"HF_HUB_CACHE": str(tmp_path / "cache"),
                                                     "HF_ENDPOINT": hub.endpoint}, "--draft", "org/drafter")
    finally:
        hub.stop()
    assert proc.returncode == 1, proc.stderr
    assert "vllm-eagle3-drafter-aux-layer-ids" in proc.stdout
    weights = [r for r in hub.requests if r.split()[1].endswith("/model.safetensors")]
    assert weights and all("bytes=" in r for r in weights)  # every read of the weights file asks for a range
    assert not (tmp_path / "cache" / "models--org--drafter" / "snapshots" / COMMIT / "model.safetensors").exists()


def test_offline_a_hub_drafter_without_cached_weights_is_one_line(tmp_path):
    write_cache(tmp_path, "org/drafter", {"config.json": json.dumps(DRAFTER).encode()}, {"main": COMMIT})
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "config.json").write_text(json.dumps(TINY_TARGET))
    proc = scan_model(str(tmp_path / "target"), {"HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"},
                      "--draft", "org/drafter")
    assert_one_line_error(proc, "org/drafter: its safetensors are not in the Hub cache")


def test_a_hub_drafter_with_cached_weights_is_read_from_the_cache(tmp_path):
    write_cache(tmp_path, "org/drafter", {"config.json": json.dumps(DRAFTER).encode(), "model.safetensors": WEIGHTS},
                {"main": COMMIT})
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "config.json").write_text(json.dumps(TINY_TARGET))
    proc = scan_model(str(tmp_path / "target"), {"HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"},
                      "--draft", "org/drafter")
    assert proc.returncode == 1 and "vllm-eagle3-drafter-aux-layer-ids" in proc.stdout, proc.stderr


def test_a_launch_command_names_the_model_and_its_revisions_as_the_engines_read_them(tmp_path):
    from specaudit.launch.command import parse_launch_command

    write_cache(tmp_path, "meta-llama/Llama-3.1-8B-Instruct", {"config.json": LLAMA}, {"main": COMMIT, "v1": COMMIT})
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home()), "COLUMNS": "1000",
           "HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "specaudit.cli", "scan", "--path", str(vllm_tree("0.17.0").root), "--",
                           "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--revision", "v1"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and "meta-llama/Llama-3.1-8B-Instruct@v1" in proc.stdout, proc.stderr
    # SGLang's drafter revision: --speculative-draft-model-revision (server_args; managers/tp_worker.py reads it).
    sglang = parse_launch_command(["python3", "-m", "sglang.launch_server", "--model-path", "org/target",
                                   "--revision", "v1", "--speculative-algorithm", "EAGLE3",
                                   "--speculative-draft-model-path", "org/drafter",
                                   "--speculative-draft-model-revision", "r2"])
    assert (sglang.model, sglang.options["revision"], sglang.speculative["revision"]) == ("org/target", "v1", "r2")


def test_a_preset_is_named_by_its_hub_id_and_its_drift_from_the_cache_is_noted(tmp_path):
    drifted = {**json.loads(LLAMA), "vocab_size": 128257}
    write_cache(tmp_path, "meta-llama/Llama-3.1-8B-Instruct", {"config.json": json.dumps(drifted).encode()},
                {"main": COMMIT})
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home()), "COLUMNS": "1000",
           "HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "specaudit.cli", "scan", "--path", str(vllm_tree("0.17.0").root),
                           "--target", "meta-llama/Llama-3.1-8B-Instruct"], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "target llama3 (preset llama3)" in proc.stdout
    assert "note: the Hub cache's config.json of meta-llama/Llama-3.1-8B-Instruct" in proc.stdout
    assert "differs from the bundled preset in vocab_size" in proc.stdout
    same = {**env, "HF_HUB_CACHE": str(tmp_path / "elsewhere")}
    quiet = subprocess.run([sys.executable, "-m", "specaudit.cli", "scan", "--path", str(vllm_tree("0.17.0").root),
                            "--target", "llama3"], capture_output=True, text=True, env=same, timeout=600)
    assert quiet.returncode == 0 and "note:" not in quiet.stdout
