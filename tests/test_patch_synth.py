"""Synthesized EAGLE-3 bundles (issue 42), in libcst's CodemodTest style: a ten-line donor and target before/after,
then the real releases (vLLM 0.26.0 and 0.33.0, SGLang 0.5.17 and 0.5.23), each bundle's diff and its rescan, and
refusals.

Facts asserted here were read in the releases' own code (paths relative to the tree):
- vLLM 0.26.0 and 0.33.0 model_executor/models/llama.py: LlamaModel(nn.Module, EagleModelMixin) collects with
  self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, residual) after each layer; 0.33.0 loops
  `enumerate(islice(...), start=self.start_layer)` and packs `**self.pack_local_aux_hidden_states(...)` into the
  IntermediateTensors it sends on; 0.26.0 loops `enumerate(islice(...))` and sends none.
- vLLM gpt2.py (both): GPT2LMHeadModel holds its stack as `transformer`, GPT2Model its layers as `h` and its token
  embedding as `wte`, and its layer call returns hidden states alone; v1/spec_decode/llm_base_proposer.py reads the
  target's `model.embed_tokens` (_maybe_share_embeddings), interfaces.py's SupportsEagle3 defaults read `.model`.
- vLLM jamba.py / falcon_h1.py: JambaForCausalLM and FalconH1ForCausalLM are IsHybrid.
- SGLang 0.5.17 srt/models/llama.py: LlamaModel loops `for i in range(self.start_layer, self.end_layer)` with
  `if i in self.layers_to_capture: aux_hidden_states.append(hidden_states + residual)` before the layer;
  LlamaForCausalLM.forward unpacks `hidden_states, aux_hidden_states = hidden_states` when
  self.capture_aux_hidden_states and passes them as the logits processor's fifth argument; mixtral.py's
  MixtralModel has the same loop and no capture; gpt2.py's GPT2Model loops `range(len(self.h))`; qwen2_moe.py's
  Qwen2MoeForCausalLM has set_eagle3_layers_to_capture but no get_embed_and_head.
- SGLang 0.5.23 srt/models/llama.py: LlamaModel collects in no statement of its own: its layer call passes
  `capture_output=aux_hidden_states.capture if i in self.layers_to_capture else None` (aux_hidden_states an
  AuxHiddenStateList), and LlamaDecoderLayer.forward hands it to `self.attn_boundary.prepare(..., capture=...)`;
  mixtral.py's MixtralDecoderLayer makes the same prepare call without it, and MixtralModel ends in
  `return residual_batch.final_norm(...)`; gpt2.py is 0.5.17's (GPT2Block holds no boundary).
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodTest

from specaudit.core.types import Status
from specaudit.launch.request import Launch
from specaudit.patch.bundles import load_bundle, plan
from specaudit.patch.shape import functions, read_capture
from specaudit.patch.synthesize import ShapeRefused, synthesize, target_of_architecture
from specaudit.patch.transplant import ThreadLayerCapture, TransplantAuxCapture
from specaudit.scan.audit import audit

from conftest import engine_analysis

DONOR = '''
class DonorModel(nn.Module, Mixin):
    def forward(self, x, intermediate_tensors):
        hidden_states, residual = x, None
        aux_hidden_states = []
        for idx, layer in enumerate(islice(self.layers, self.start_layer, self.end_layer), start=self.start_layer):
            hidden_states, residual = layer(hidden_states, residual)
            self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, residual)
        hidden_states = self.norm(hidden_states)
        if aux_hidden_states:
            return hidden_states, aux_hidden_states
        return hidden_states
'''


def capture():
    node = next(s for s in cst.parse_module(DONOR).body if isinstance(s, cst.ClassDef))
    found = read_capture(functions(node)["forward"])
    assert not isinstance(found, str)
    return found


class TestTransplant(CodemodTest):
    TRANSFORM = TransplantAuxCapture

    def test_a_stack_without_residual_collects_its_hidden_states_as_the_donor_does(self) -> None:
        # The target returns `self.ln_f(...)`: that is the hidden states the donor's statements after its loop return
        # beside the aux ones (the donor norms before them), so it is held in hidden_states first.
        before = '''
class Stack(nn.Module):
    def forward(self, x, intermediate_tensors):
        hidden_states = x
        for block in islice(self.h, self.start_layer, self.end_layer):
            hidden_states = block(hidden_states)
        return self.ln_f(hidden_states)
'''
        after = '''
from mixins import Mixin

class Stack(nn.Module, Mixin):
    def forward(self, x, intermediate_tensors):
        hidden_states = x
        aux_hidden_states = []
        for idx, block in enumerate(islice(self.h, self.start_layer, self.end_layer), start=self.start_layer):
            hidden_states = block(hidden_states)
            self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, None)
        hidden_states = self.ln_f(hidden_states)
        if aux_hidden_states:
            return hidden_states, aux_hidden_states
        return hidden_states

    @property
    def layers(self):
        # EAGLE-3's code reads .layers; Stack holds it as .h
        return self.h
'''
        from libcst.codemod.visitors import ImportItem

        self.assertCodemod(before, after, class_name="Stack", capture=capture(), bases=["Mixin"], attributes=[],
                           init=[], aliases={"layers": "h"}, imports=[ImportItem("mixins", "Mixin")])


# SGLang 0.5.23's shape (llama.py's LlamaModel and LlamaDecoderLayer, cut down): the stack threads the capture into
# the layer call, and the layer hands it to its attention boundary, which captures the residual stream entering it.
THREADING_DONOR = '''
class DonorLayer(nn.Module):
    def forward(self, positions, hidden_states, forward_batch, capture_output=None):
        hidden_states = self.attn_boundary.prepare(
            hidden_states, forward_batch, capture=capture_output
        )
        hidden_states = self.self_attn(positions, hidden_states, forward_batch)
        return self.attn_boundary.finish(hidden_states, forward_batch)


class DonorModel(nn.Module):
    def forward(self, input_ids, positions, forward_batch):
        hidden_states = self.embed_tokens(input_ids)
        aux_hidden_states = AuxHiddenStateList()
        for i in range(self.start_layer, self.end_layer):
            hidden_states = self.layers[i](
                positions,
                hidden_states,
                forward_batch,
                capture_output=aux_hidden_states.capture
                if i in self.layers_to_capture
                else None,
            )
        hidden_states = residual_batch.final_norm(hidden_states, forward_batch, self.norm)
        if len(aux_hidden_states) == 0:
            return hidden_states
        return hidden_states, aux_hidden_states
'''

# The targets: a layer that goes through the same boundary (0.5.23's MixtralDecoderLayer), its stack (MixtralModel,
# whose last return norms), and a stack of layers that keep their residual stream to themselves (GPT2Model).
BOUNDARY_LAYER = '''
class Layer(nn.Module):
    def forward(self, positions, hidden_states, forward_batch):
        hidden_states = self.attn_boundary.prepare(hidden_states, forward_batch)
        hidden_states = self.self_attn(positions, hidden_states, forward_batch)
        return self.attn_boundary.finish(hidden_states, forward_batch)
'''
BOUNDARY_LAYER_TAKING = '''
class Layer(nn.Module):
    def forward(self, positions, hidden_states, forward_batch, capture_output=None):
        hidden_states = self.attn_boundary.prepare(hidden_states, forward_batch, capture=capture_output)
        hidden_states = self.self_attn(positions, hidden_states, forward_batch)
        return self.attn_boundary.finish(hidden_states, forward_batch)
'''
BOUNDARY_STACK = '''
class Stack(nn.Module):
    def forward(self, input_ids, positions, forward_batch):
        hidden_states = self.embed_tokens(input_ids)
        for i in range(self.start_layer, self.end_layer):
            hidden_states = self.layers[i](positions, hidden_states, forward_batch)
        return residual_batch.final_norm(hidden_states, forward_batch, self.norm)
'''
BOUNDARY_STACK_THREADING = '''
from aux import AuxHiddenStateList

class Stack(nn.Module):
    def forward(self, input_ids, positions, forward_batch):
        hidden_states = self.embed_tokens(input_ids)
        aux_hidden_states = AuxHiddenStateList()
        for i in range(self.start_layer, self.end_layer):
            hidden_states = self.layers[i](positions, hidden_states, forward_batch, capture_output=aux_hidden_states.capture if i in self.layers_to_capture else None)
        hidden_states = residual_batch.final_norm(hidden_states, forward_batch, self.norm)
        if len(aux_hidden_states) == 0:
            return hidden_states
        return hidden_states, aux_hidden_states
'''  # noqa: E501 (the layer call as the codemod writes it, on one line)
OWN_STREAM_STACK = '''
class Stack(nn.Module):
    def forward(self, input_ids, position_ids, forward_batch):
        hidden_states = self.wte(input_ids) + self.wpe(position_ids)
        for i in range(len(self.h)):
            layer = self.h[i]
            hidden_states = layer(hidden_states, forward_batch)
        hidden_states = self.ln_f(hidden_states)
        return hidden_states
'''
OWN_STREAM_STACK_CAPTURING = '''
from aux import AuxHiddenStateList

class Stack(nn.Module):
    def forward(self, input_ids, position_ids, forward_batch):
        hidden_states = self.wte(input_ids) + self.wpe(position_ids)
        aux_hidden_states = AuxHiddenStateList()
        for i in range(len(self.h)):
            if i in self.layers_to_capture:
                aux_hidden_states.capture(hidden_states)
            layer = self.h[i]
            hidden_states = layer(hidden_states, forward_batch)
        hidden_states = self.ln_f(hidden_states)
        if len(aux_hidden_states) == 0:
            return hidden_states
        return hidden_states, aux_hidden_states
'''


def threading_donor(source: str = THREADING_DONOR):
    """The donor's stack capture and how its layer takes what the stack threads into it, as derive.py reads them."""
    from specaudit.patch.shape import read_layer_capture

    classes = {s.name.value: s for s in cst.parse_module(source).body if isinstance(s, cst.ClassDef)}
    stack, layer = functions(classes["DonorModel"])["forward"], functions(classes["DonorLayer"])["forward"]
    found = read_capture(stack)
    assert not isinstance(found, str)
    keywords = tuple(a.keyword.value for a in found.threaded if a.keyword)
    taken = read_layer_capture(layer, keywords)
    assert not isinstance(taken, str)
    return found, taken


class TestThreadLayerCapture(CodemodTest):
    TRANSFORM = ThreadLayerCapture

    def test_a_layer_going_through_the_donors_boundary_takes_the_capture_as_the_donors_does(self) -> None:
        found, taken = threading_donor()
        assert [" ".join(cst.Module([]).code_for_node(a).split()) for a in found.threaded] == [
            "capture_output=aux_hidden_states.capture if i in self.layers_to_capture else None,"]
        assert [(s.call, s.occurrence, s.takes_entry) for s in taken.sinks] == [("self.attn_boundary.prepare", 0, True)]
        self.assertCodemod(BOUNDARY_LAYER, BOUNDARY_LAYER_TAKING, class_name="Layer", taken=taken, imports=[])

    def test_a_layer_that_takes_it_already_is_left_alone(self) -> None:
        _, taken = threading_donor()
        self.assertCodemod(BOUNDARY_LAYER_TAKING, BOUNDARY_LAYER_TAKING, class_name="Layer", taken=taken, imports=[],
                           expected_skip=True)


class TestTransplantThreaded(CodemodTest):
    TRANSFORM = TransplantAuxCapture

    def test_a_stack_of_boundary_layers_threads_the_capture_into_its_layer_call(self) -> None:
        # its last return norms: the hidden states are held before the donor's statements return them
        from libcst.codemod.visitors import ImportItem

        found, _ = threading_donor()
        self.assertCodemod(BOUNDARY_STACK, BOUNDARY_STACK_THREADING, class_name="Stack", capture=found, bases=[],
                           attributes=[], init=[], aliases={}, imports=[ImportItem("aux", "AuxHiddenStateList")])

    def test_a_stack_of_layers_keeping_their_own_stream_captures_at_each_layers_entry(self) -> None:
        # GPT-2's blocks hold no boundary: the stream entering a layer is the hidden states it is called with, captured
        # before the call under the condition and with the callable the donor's stack threads
        from libcst.codemod.visitors import ImportItem

        from specaudit.patch.shape import captured_at_entry

        found, _ = threading_donor()
        at_entry = captured_at_entry(found)
        assert not isinstance(at_entry, str) and at_entry.threaded == ()
        self.assertCodemod(OWN_STREAM_STACK, OWN_STREAM_STACK_CAPTURING, class_name="Stack", capture=at_entry,
                           bases=[], attributes=[], init=[], aliases={}, imports=[ImportItem("aux", "AuxHiddenStateList")])


# Metamorphic: the derivation matches names (the threaded keyword to the layer's parameter, the callee the layer hands
# it to, the collector's name); renamed consistently in the donor and the target, the codemods' output is the expected
# output renamed the same way.
RENAMES = {"capture_output": "grab_fn", "attn_boundary": "entry_stage", "aux_hidden_states": "kept",
           "capture": "take", "layers_to_capture": "taps", "AuxHiddenStateList": "Keeper", "i": "n"}


class _Rename(cst.CSTTransformer):
    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        return updated_node.with_changes(value=RENAMES.get(updated_node.value, updated_node.value))


def renamed(source: str) -> str:
    return cst.parse_module(source).visit(_Rename()).code


def test_threaded_capture_derivation_follows_renamed_names():
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import ImportItem

    from specaudit.patch.shape import captured_at_entry

    def run(codemod, source, **kwargs):
        return codemod(CodemodContext(), **kwargs).transform_module(cst.parse_module(source)).code

    for donor, rename in ((THREADING_DONOR, lambda s: s), (renamed(THREADING_DONOR), renamed)):
        found, taken = threading_donor(donor)
        keeper = ImportItem("aux", RENAMES["AuxHiddenStateList"] if donor != THREADING_DONOR else "AuxHiddenStateList")
        assert run(ThreadLayerCapture, rename(BOUNDARY_LAYER), class_name="Layer", taken=taken, imports=[]) == \
            rename(BOUNDARY_LAYER_TAKING)
        stack = dict(bases=[], attributes=[], init=[], aliases={}, imports=[keeper])
        assert run(TransplantAuxCapture, rename(BOUNDARY_STACK), class_name="Stack", capture=found, **stack) == \
            rename(BOUNDARY_STACK_THREADING)
        assert run(TransplantAuxCapture, rename(OWN_STREAM_STACK), class_name="Stack",
                   capture=captured_at_entry(found), **stack) == rename(OWN_STREAM_STACK_CAPTURING)
    assert "grab_fn=kept.take if n in self.taps else None" in renamed(BOUNDARY_STACK_THREADING)


def synthesized(requirement: str, arch: str, tmp_path: Path):
    analysis = engine_analysis(requirement)
    made = synthesize(analysis, target_of_architecture(arch), tmp_path)
    bundle = load_bundle(made.directory)
    the_plan = plan(analysis.tree, bundle, analysis)
    after = audit(the_plan.patched, Launch(target_of_architecture(arch), method="eagle3"))
    return made, the_plan, after


def added(diff: str) -> str:
    return "\n".join(line[1:].strip() for line in diff.splitlines() if line.startswith("+"))


VLLM_TARGETS = {
    "GPT2LMHeadModel": "gpt2.py",
    "Gemma3ForCausalLM": "gemma3.py",
    "MixtralForCausalLM": "mixtral.py",
    "Qwen2MoeForCausalLM": "qwen2_moe.py",
    "Glm4MoeForCausalLM": "glm4_moe.py",
}


@pytest.mark.parametrize("version", ["0.26.0", "0.33.0"])
@pytest.mark.parametrize("arch", list(VLLM_TARGETS))
def test_vllm_bundle_moves_llamas_capture_and_the_rescan_opens_the_gate(tmp_path, version, arch):
    made, the_plan, after = synthesized(f"vllm=={version}", arch, tmp_path)
    assert made.donor == "vllm.model_executor.models.llama.LlamaForCausalLM"
    assert list(the_plan.edits) == [f"vllm/model_executor/models/{VLLM_TARGETS[arch]}"]
    diff = added(the_plan.diff())
    print(the_plan.diff())
    assert "EagleModelMixin" in diff and "SupportsEagle3" in diff
    assert "self._maybe_add_hidden_state(" in diff and "return hidden_states, aux_hidden_states" in diff
    if version == "0.33.0":  # the donor's PP relay moves with it
        assert "**self.pack_local_aux_hidden_states(aux_hidden_states)" in diff
        assert "start=self.start_layer," in diff
    if arch == "GPT2LMHeadModel":  # no residual: the stream is the hidden states; parts reached by the contract's names
        assert "aux_hidden_states, idx + 1, hidden_states, None" in diff
        assert "return self.transformer" in diff and "return self.wte" in diff and "return self.h" in diff
    gate = [f for f in after.findings if f.status == Status.BLOCKS]
    assert gate == []
    # GPT-2 on 0.33.0: the PP-only check eagle3_utils.verify_supports_aux_hidden_states_over_pp reads
    # getattr(model, "model"), which the scan follows through the synthesized `model` property (`return
    # self.transformer`).
    assert after.verdict == "READY"
    readme = (made.directory / "README.md").read_text()
    assert "synthesized by specaudit" in readme and "LlamaForCausalLM" in readme


@pytest.mark.parametrize("arch", ["JambaForCausalLM", "FalconH1ForCausalLM"])
def test_vllm_refuses_a_hybrid_stack_naming_the_difference(tmp_path, arch):
    with pytest.raises(ShapeRefused, match=f"{arch} is IsHybrid in vllm 0.33.0: a hybrid attention/SSM stack"):
        synthesize(engine_analysis("vllm==0.33.0"), target_of_architecture(arch), tmp_path)


@pytest.mark.parametrize("arch,changes", [
    ("MixtralForCausalLM", ["aux-hidden-states", "pass-aux-hidden-states", "eagle3-target-contract"]),
    ("GPT2LMHeadModel", ["aux-hidden-states", "pass-aux-hidden-states", "eagle3-target-contract"]),
    ("Qwen2MoeForCausalLM", ["eagle3-target-contract"]),  # it captures already; only get_embed_and_head is missing
])
def test_sglang_0_5_17_bundle_and_rescan(tmp_path, arch, changes):
    made, the_plan, after = synthesized("sglang==0.5.17", arch, tmp_path)
    assert the_plan.applied == changes
    diff = added(the_plan.diff())
    print(the_plan.diff())
    assert "def get_embed_and_head(self):" in diff
    if "aux-hidden-states" in changes:
        assert "self.layers_to_capture = []" in diff and "self.capture_aux_hidden_states = False" in diff
        assert "hidden_states, aux_hidden_states = hidden_states" in diff
        assert "def set_eagle3_layers_to_capture(" in diff
    if arch == "GPT2LMHeadModel":  # no residual; and LlamaForCausalLM's capture setter reads self.pp_group, which
        # GPT-2 has not: the setter comes from Gemma3ForCausalLM, which reads none
        assert "aux_hidden_states.append(hidden_states)" in diff
        assert "set_eagle3_layers_to_capture from sglang.srt.models.gemma3_causal.Gemma3ForCausalLM" in \
            next((made.directory / "code").glob("*.py")).read_text()
    if arch == "MixtralForCausalLM":
        assert "aux_hidden_states.append(hidden_states + residual)" in diff
    assert after.verdict == "READY"


def test_a_target_the_release_supports_is_not_synthesized(tmp_path):
    from specaudit.core.errors import SpecauditError

    with pytest.raises(SpecauditError, match="is not blocked for EAGLE-3 in sglang 0.5.17"):
        synthesize(engine_analysis("sglang==0.5.17"), target_of_architecture("Gemma3ForCausalLM"), tmp_path)


def test_sglang_0_5_23_qwen2_moe_gets_get_embed_and_head(tmp_path):
    _, the_plan, after = synthesized("sglang==0.5.23", "Qwen2MoeForCausalLM", tmp_path)
    assert the_plan.applied == ["eagle3-target-contract"] and after.verdict == "READY"


@pytest.mark.parametrize("arch", ["MixtralForCausalLM", "GPT2LMHeadModel"])
def test_sglang_0_5_23_bundle_follows_the_capture_threaded_into_the_layers(tmp_path, arch):
    # 0.5.23's LlamaModel threads `capture_output=aux_hidden_states.capture if i in self.layers_to_capture else None`
    # into its layer call (llama.py:485-493), and LlamaDecoderLayer.forward(..., capture_output=None) hands it to
    # `self.attn_boundary.prepare(hidden_states, forward_batch, capture=capture_output)` (llama.py:394-404).
    # MixtralDecoderLayer.forward makes the same prepare call (mixtral.py:263): it takes the capture the same way, and
    # MixtralModel's last return (`return residual_batch.final_norm(...)`) is held in hidden_states first. GPT2Block
    # holds no boundary and GPT2Model's layer call passes and returns the hidden states alone (gpt2.py:220-222): the
    # stream entering a block is captured before the call.
    made, the_plan, after = synthesized("sglang==0.5.23", arch, tmp_path)
    assert made.donor == "sglang.srt.models.llama.LlamaForCausalLM"
    assert the_plan.applied == ["aux-hidden-states", "pass-aux-hidden-states", "eagle3-target-contract"]
    diff = added(the_plan.diff())
    print(the_plan.diff())
    assert "aux_hidden_states = AuxHiddenStateList()" in diff and "self.layers_to_capture = []" in diff
    assert "from sglang.srt.layers.aux_hidden_states import AuxHiddenStateList" in diff
    assert "if len(aux_hidden_states) == 0:" in diff and "return hidden_states, aux_hidden_states" in diff
    assert "hidden_states, aux_hidden_states = hidden_states" in diff and "def get_embed_and_head(self):" in diff
    stack_change = next(c for c in load_bundle(made.directory).changes if c.id == "aux-hidden-states")
    if arch == "MixtralForCausalLM":
        assert list(the_plan.edits) == ["sglang/srt/models/mixtral.py"]
        assert stack_change.args["layer"] == "sglang.srt.models.mixtral.MixtralDecoderLayer"  # named for review
        assert "capture_output=None," in diff
        assert "hidden_states = self.attn_boundary.prepare(hidden_states, forward_batch, capture=capture_output)" in diff
        assert ("hidden_states = self.layers[i](positions, hidden_states, forward_batch, capture_output="
                "aux_hidden_states.capture if i in self.layers_to_capture else None)") in diff
        assert "hidden_states = residual_batch.final_norm(hidden_states, forward_batch, self.norm)" in diff
    else:
        assert "if i in self.layers_to_capture:\naux_hidden_states.capture(hidden_states)" in diff
        assert "capture_output" not in diff and "return self.transformer" in diff and "layer" not in stack_change.args
    assert [f for f in after.findings if f.status == Status.BLOCKS] == [] and after.verdict == "READY"


def test_sglang_0_5_23_refuses_gemma2_naming_the_difference(tmp_path):
    # Gemma2DecoderLayer neither goes through the donor's attention boundary nor keeps the stream in its hidden states
    # alone (its layer call returns `hidden_states, residual`): no place to take the capture the way LlamaDecoderLayer
    # does, nor one entering it to capture instead.
    with pytest.raises(ShapeRefused, match=r"Gemma2Model `for \.\.\. in range\(\.\.\.\) over self\.layers` whose layer call "
                                           r"returns `hidden_states, residual`.*LlamaModel's layers capture in their own "
                                           r"call: Gemma2DecoderLayer\.forward makes no self\.attn_boundary\.prepare\(\.\.\.\) "
                                           r"call to pass capture=capture_output to, as LlamaDecoderLayer's does, and its "
                                           r"layer call returns a residual beside the hidden states"):
        synthesize(engine_analysis("sglang==0.5.23"), target_of_architecture("Gemma2ForCausalLM"), tmp_path)
    assert list(tmp_path.iterdir()) == []


def tree_hashes(root: Path) -> dict[str, str]:
    import hashlib

    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def test_status_and_revert_on_a_synthesized_bundle(tmp_path):
    # `specaudit patch --status` and `--revert` on a bundle synthesized for GPT-2, applied to a copy of the fetched
    # vLLM 0.26.0 tree: the listing names the bundle and its one file, the revert brings the pristine bytes back, and
    # the rescan is BLOCKED again at the gate it was blocked at before.
    import shutil

    from specaudit.core import cache
    from specaudit.patch.bundles import apply
    from specaudit.scan.audit import scan
    from specaudit.tree.locate import locate

    from conftest import engine_tree
    from helpers import specaudit

    state = cache.cache_dir()  # the session's patch state (conftest's _isolated_cache), where the CLI must look too

    root = tmp_path / "vllm-0.26.0"
    shutil.copytree(engine_tree("vllm==0.26.0").root, root)
    before = tree_hashes(root)
    launch = Launch(target_of_architecture("GPT2LMHeadModel"), method="eagle3")
    blocked = scan(locate(str(root)), launch)
    assert blocked.verdict == "BLOCKED"
    gates = [(f.rule_id, f.location) for f in blocked.blocking]

    made = synthesize(engine_analysis("vllm==0.26.0"), launch.target, tmp_path / "bundles")
    outcome = apply(locate(str(root)), load_bundle(made.directory))
    assert outcome.changed == ("vllm/model_executor/models/gpt2.py",)

    listing = specaudit("patch", "--status", "--path", str(root), env_cache=state)
    assert listing.returncode == 0, listing.stderr
    assert f"applied: {made.bundle_id}" in listing.stdout and "aux-hidden-states" in listing.stdout
    cells = [c.strip() for line in listing.stdout.splitlines() for c in line.split("│")[1:-1]]  # the table, wrapped
    assert "/models/gpt2.py" in cells and "specaudit" in cells and "foreign" not in cells and "drifted" not in cells

    reverted = specaudit("patch", "--revert", "--path", str(root), env_cache=state)
    assert reverted.returncode == 0, reverted.stderr
    assert f"reverted {made.bundle_id}: 1 file(s) restored byte for byte" in " ".join(reverted.stdout.split())
    assert tree_hashes(root) == before

    listing = specaudit("patch", "--status", "--path", str(root), env_cache=state)
    assert "no bundle applied" in listing.stdout and "every file is as the wheel installed it" in " ".join(
        listing.stdout.split())
    again = scan(locate(str(root)), launch)
    assert again.verdict == "BLOCKED" and [(f.rule_id, f.location) for f in again.blocking] == gates


def test_the_matrix_names_the_synthesized_bundle_where_no_shipped_one_covers_the_cell():
    # GLM-4.5 on vLLM 0.26.0: no shipped bundle, Glm4MoeForCausalLM lacks SupportsEagle3, and Llama's stack has its
    # shape: the remedy is the bundle `specaudit patch --target Glm4MoeForCausalLM` synthesizes, planned and judged
    # READY. Jamba (IsHybrid) names why none can be synthesized; a target the release does not register, nothing.
    from specaudit.matrix import _answer, _row, build_matrix

    from conftest import engine_tree

    tree = engine_tree("vllm==0.26.0")
    glm, = build_matrix([tree], ["glm-4.5"]).answers
    assert glm.remedies == {"vllm 0.26.0": "specaudit patch --target Glm4MoeForCausalLM (bundle "
                                           "vllm-eagle3-synth-glm4moeforcausallm-0.26.0, synthesized from "
                                           "vllm.model_executor.models.llama.LlamaForCausalLM) makes it READY"}
    tree = engine_tree("vllm==0.33.0")
    targets = [target_of_architecture(a) for a in ("JambaForCausalLM", "NoSuchForCausalLM")]
    row = _row(tree, targets, "cuda", {})
    jamba, unknown = row.cells
    assert jamba.bundle is None and jamba.patch_problem.startswith(
        "no bundle can be synthesized: JambaForCausalLM is IsHybrid in vllm 0.33.0")
    assert "no bundle covers it; no bundle can be synthesized: JambaForCausalLM is IsHybrid" in \
        _answer("JambaForCausalLM", [tree], list(row.cells)).remedies["vllm 0.33.0"]
    assert unknown.verdict == "BLOCKED" and unknown.patch_problem == "" and unknown.bundle is None


def test_sglang_0_5_17_refuses_gemma_whose_head_is_tied_and_leaves_no_bundle(tmp_path):
    # SGLang 0.5.17's GemmaForCausalLM has no lm_head (its logits read model.embed_tokens): every supported class's
    # get_embed_and_head reads self.lm_head or more. The refusal names the first few, and writes nothing.
    with pytest.raises(ShapeRefused, match=r"no class the release supports has a get_embed_and_head reading only what "
                                           r"GemmaForCausalLM has \(LlamaForCausalLM\.get_embed_and_head reads "
                                           r"self\.lm_head; .*; and \d+ more\)"):
        synthesize(engine_analysis("sglang==0.5.17"), target_of_architecture("GemmaForCausalLM"), tmp_path)
    assert list(tmp_path.iterdir()) == []
