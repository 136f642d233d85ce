"""Soundness, round 3 (issue 28): held-out launches that no other test covers, on real release trees.

- A drafter config with ``eagle_config.use_aux_hidden_state: false``: the release reads it (vLLM 0.14 on, in the V1
  proposer's ``_get_eagle3_use_aux_hidden_state_from_config``; Model Runner V2's ``requires_aux_hidden_states`` in
  0.33) and the runner then skips the target's EAGLE-3 interface and builds no fc. A release that does not read it
  (0.9.2) still asks the target for aux hidden states.
- EAGLE drafters shipped as ``pytorch_model.bin``: their tensors read from torch.save's zip without unpickling it
  (tests/fixtures/bin_drafter, written once by torch 2.13.0 with make.py there).
- A 2048-position drafter on vLLM 0.33.0, which raises the draft's positions to the target's itself.

Analyses are cached per release at module level (conftest's trees); every scan here judges one launch.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_drafter import DRAFT, TARGET, draft_tensors, write_checkpoint

from specaudit.launch.checkpoint import read_checkpoint
from specaudit.launch.request import Launch
from specaudit.launch.target import Target, load_model
from specaudit.scan.audit import analyze, audit

from conftest import vllm_tree

FIXTURES = Path(__file__).parent / "fixtures" / "bin_drafter"
_analyses: dict[str, object] = {}


def _scan(version: str, launch: Launch):
    if version not in _analyses:
        _analyses[version] = analyze(vllm_tree(version))
    return audit(_analyses[version], launch)  # type: ignore[arg-type]


def _blocking(result) -> list[str]:
    return [f"{f.rule_id} {f.location}" for f in result.findings if f.status in ("blocks", "unknown")]


# -- use_aux_hidden_state: false --------------------------------------------------------------------------------------

# Qwen2MoeForCausalLM lacks SupportsEagle3 in these releases (qwen2_moe.py: `class Qwen2MoeForCausalLM(nn.Module,
# SupportsPP, SupportsLoRA)`) and "qwen" passes the allowlist: only the aux-state gates stop it.
QWEN2_MOE = {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": 64,
             "num_hidden_layers": 8, "vocab_size": 1000, "max_position_embeddings": 4096,
             "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
             "shared_expert_intermediate_size": 64}
# The key as the release reads it: `getattr(self.draft_model_config.hf_config, "eagle_config", None)` then
# `eagle_config.get("use_aux_hidden_state", True)` (vllm/v1/spec_decode/eagle.py 0.17.0, whose docstring names
# nvidia/gpt-oss-120b-Eagle3-v2 as such a head; vllm PR #27688). Such a head has no fc.
NO_AUX = {**DRAFT, "eagle_config": {"use_aux_hidden_state": False}}


def _no_fc():
    return {k: v for k, v in draft_tensors().items() if not k.startswith("fc.")}


@pytest.mark.parametrize("version,verdict", [
    ("0.17.0", "READY"),   # V1 reads the flag: no interface check, no aux unpack, no fc
    ("0.33.0", "READY"),   # V1 (llm_base_proposer.py) and V2 (eagle3_utils.requires_aux_hidden_states) read it
    ("0.9.2", "BLOCKED"),  # no reader of the flag: the runner asks every EAGLE-3 target for aux hidden states
])
def test_a_head_without_aux_states_needs_no_eagle3_target(tmp_path, version, verdict):
    target = write_checkpoint(tmp_path / "target", QWEN2_MOE, None)
    draft = write_checkpoint(tmp_path / "draft", NO_AUX, _no_fc())
    launch = Launch(load_model(str(target)), draft=str(draft), drafter=read_checkpoint(str(draft)))
    result = _scan(version, launch)
    assert result.verdict == verdict, _blocking(result)
    if verdict == "READY":
        fc = next(f for f in result.findings if f.rule_id.endswith("drafter-fc-input-width"))
        assert fc.status == "passes" and "use_aux_hidden_state" in fc.why


def test_the_same_target_with_an_aux_head_stays_blocked(tmp_path):
    target = write_checkpoint(tmp_path / "target", QWEN2_MOE, None)
    draft = write_checkpoint(tmp_path / "draft", DRAFT, draft_tensors())
    result = _scan("0.17.0", Launch(load_model(str(target)), draft=str(draft), drafter=read_checkpoint(str(draft))))
    assert result.verdict == "BLOCKED" and any("eagle3-interface" in b for b in _blocking(result)), _blocking(result)


# -- pytorch_model.bin drafters ----------------------------------------------------------------------------------------


def _bin_drafter(tmp_path: Path, name: str, config: dict | None = None) -> Path:
    draft = tmp_path / name
    shutil.copytree(FIXTURES / name, draft)
    return write_checkpoint(draft, config or DRAFT, None)


@pytest.mark.parametrize("name", ["eagle3", "sharded"])
def test_a_bin_drafter_is_read_and_judged_like_safetensors(tmp_path, name):
    drafter = read_checkpoint(str(_bin_drafter(tmp_path, name)))
    assert drafter.tensors["fc.weight"].shape == (32, 192) and drafter.tensors["lm_head.weight"].dtype == "BF16"
    assert drafter.integers(drafter.tensors["d2t"])[:3] == [0, 4, 8]  # read by offset from the stored zip member
    target = write_checkpoint(tmp_path / "target", TARGET, None)
    result = _scan("0.14.0", Launch(load_model(str(target)), draft=str(tmp_path / name), drafter=drafter))
    assert result.verdict == "READY", _blocking(result)


def test_a_bin_drafter_that_is_wrong_blocks_with_its_numbers(tmp_path):
    # The same tensors, with a config that says the head was trained for a 48-wide target: fc is 192 wide.
    drafter_dir = _bin_drafter(tmp_path, "eagle3", {**DRAFT, "target_hidden_size": 48})
    target = write_checkpoint(tmp_path / "target", TARGET, None)
    result = _scan("0.14.0", Launch(load_model(str(target)), draft=str(drafter_dir),
                                    drafter=read_checkpoint(str(drafter_dir))))
    fc = next(f for f in result.findings if f.rule_id.endswith("drafter-fc-input-width"))
    assert result.verdict == "BLOCKED" and fc.status == "blocks" and "144" in fc.why and "192" in fc.why


def test_a_legacy_bin_says_what_was_not_checked_and_goes_on(tmp_path):
    drafter_dir = _bin_drafter(tmp_path, "legacy")
    drafter = read_checkpoint(str(drafter_dir))
    assert not drafter.tensors and "legacy" in next(iter(drafter.unread.values()))
    target = write_checkpoint(tmp_path / "target", TARGET, None)
    result = _scan("0.14.0", Launch(load_model(str(target)), draft=str(drafter_dir), drafter=drafter))
    fc = next(f for f in result.findings if f.rule_id.endswith("drafter-fc-input-width"))
    assert result.verdict == "UNKNOWN" and fc.status == "unknown" and "pytorch_model.bin" in fc.why


def test_a_pickle_that_calls_anything_else_is_never_run(tmp_path):
    """A .bin whose pickle would call os.system on load: its opcodes are walked, the call is an opaque value."""
    import pickle
    import zipfile

    class Evil:
        def __reduce__(self):
            return (shutil.rmtree, (str(tmp_path / "victim"),))

    (tmp_path / "victim").mkdir()
    payload = pickle.dumps({"fc.weight": Evil(), "x": 1}, protocol=2)
    with zipfile.ZipFile(tmp_path / "pytorch_model.bin", "w") as archive:
        archive.writestr("archive/data.pkl", payload)
    from specaudit.launch.checkpoint import read_torch_bin

    assert read_torch_bin(tmp_path / "pytorch_model.bin") == {}
    assert (tmp_path / "victim").is_dir()


# -- the drafter's max positions on a release that raises them ---------------------------------------------------------


def test_a_short_drafter_on_0330_is_not_blocked_by_its_positions(tmp_path):
    """yuhuili/EAGLE3-LLaMA3.1-Instruct-8B ships max_position_embeddings 2048 (the docstring of vLLM 0.33.0's
    SpeculativeConfig._maybe_override_draft_max_position_embeddings names it): 0.33.0 raises it to the target's."""
    target = write_checkpoint(tmp_path / "target", {**TARGET, "max_position_embeddings": 8192}, None)
    draft = write_checkpoint(tmp_path / "draft", {**DRAFT, "max_position_embeddings": 2048}, draft_tensors())
    result = _scan("0.33.0", Launch(load_model(str(target)), draft=str(draft), drafter=read_checkpoint(str(draft))))
    positions = [f for f in result.findings if f.rule_id.endswith("drafter-max-positions")]
    assert not any(f.status == "blocks" for f in positions), _blocking(result)
    assert result.verdict != "BLOCKED", _blocking(result)


_ = Target  # the target type the launches build (load_model)
