"""Each codemod of the patch bundles on small snippets, before and after, in libcst's CodemodTest style: the
ordinary case and the edges each one handles (already applied, shape not found, names already imported, code
that uses a name the module does not bind). The end-to-end runs on real wheels are in test_patch.py; every
snippet here says which engine code it mirrors."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import libcst as cst
import pytest
from libcst.codemod import CodemodContext, CodemodTest, SkipFile

from specaudit.core.types import Site
from specaudit.patch.codemods import (
    AddDispatchBranch,
    Change,
    CollectAuxHiddenStates,
    ExtendAllowlist,
    ImplementProtocol,
    PatchContext,
    UnboundName,
    extend_allowlist,
)
from specaudit.scan.gates import ModelTypeAllowlist

ROOT = Path(__file__).resolve().parents[1]

# deepseek_v2.py's package: its `from .interfaces import ...` resolves against it.
DEEPSEEK_V2 = CodemodContext(full_module_name="vllm.model_executor.models.deepseek_v2",
                             full_package_name="vllm.model_executor.models")


def functions(code: str) -> list[cst.FunctionDef]:
    module = cst.parse_module(textwrap.dedent(code))
    return [statement for statement in module.body if isinstance(statement, cst.FunctionDef)]


class SkipReason:
    """For CodemodTest cases: a codemod that leaves the module as it is says why."""

    TRANSFORM: Any

    def assertSkips(self, before: str, reason: str, context: CodemodContext | None = None, **kwargs: Any) -> None:
        module = cst.parse_module(CodemodTest.make_fixture_data(before))
        with pytest.raises(SkipFile, match=reason):
            self.TRANSFORM(context or CodemodContext(), **kwargs).transform_module(module)


# -- extend_allowlist ----------------------------------------------------------------------------------------

# vllm/config/speculative.py, SpeculativeConfig._verify_args, 0.17.0 (shortened list)
ALLOWLIST_0_17 = """
    def _verify_args(self):
        aux_hidden_states_supported = [
            "llama",
            "qwen",
            "nemotron_h",
        ]
        if (
            self.method in ("eagle3", "extract_hidden_states")
            and self.target_model_config
            and not any(
                supported_model in self.target_model_config.hf_text_config.model_type
                for supported_model in aux_hidden_states_supported
            )
        ):
            raise ValueError(
                f"{self.method} is only supported for {aux_hidden_states_supported}"
                f" models. Got {self.target_model_config.hf_text_config.model_type=}"
            )
"""


class ExtendAllowlistTest(SkipReason, CodemodTest):
    TRANSFORM = ExtendAllowlist

    def test_a_list_of_one_value_a_line_gets_a_line_more(self) -> None:
        self.assertCodemod(ALLOWLIST_0_17, ALLOWLIST_0_17.replace('"nemotron_h",\n', '"nemotron_h",\n            "kimi_k2",\n'),
                           name="aux_hidden_states_supported", values=["llama", "qwen", "nemotron_h"], add=["kimi_k2"])

    def test_a_list_on_one_line_stays_on_one_line(self) -> None:
        # vllm/config/speculative.py, 0.14.0
        before = """
            eagle3_target_supported = ["llama", "qwen", "minicpm", "gpt_oss"]
            if self.method == "eagle3" and not any(s in model_type for s in eagle3_target_supported):
                raise ValueError(f"Eagle3 is only supported for {eagle3_target_supported} models.")
        """
        after = before.replace('"gpt_oss"]', '"gpt_oss", "deepseek_v3", "kimi_k2"]')
        self.assertCodemod(before, after, name="eagle3_target_supported", values=["llama", "qwen", "minicpm", "gpt_oss"],
                           add=["deepseek_v3", "kimi_k2"])

    def test_a_list_literal_in_the_test_itself(self) -> None:
        # the exact-membership form of the rule's examples (rules/vllm/model-type-allowlist.yaml), the list in place
        before = """
            if self.hf_text_config.model_type not in ["llama", "qwen3"]:
                raise ValueError("EAGLE-3 is only supported for llama and qwen3")
        """
        self.assertCodemod(before, before.replace('"qwen3"]', '"qwen3", "kimi_k2"]'), name=None, values=["llama", "qwen3"],
                           add=["kimi_k2"])

    def test_already_extended_is_left_as_it_is(self) -> None:
        applied = ALLOWLIST_0_17.replace('"nemotron_h",\n', '"nemotron_h",\n            "kimi_k2",\n')
        arguments = {"name": "aux_hidden_states_supported", "values": ["llama", "qwen", "nemotron_h"], "add": ["kimi_k2"]}
        self.assertCodemod(applied, applied, expected_skip=True, **arguments)
        self.assertSkips(applied, "already has kimi_k2", **arguments)

    def test_a_list_that_is_not_the_gates_is_not_touched(self) -> None:
        # the list of another release (0.16.0 has no nemotron_h) under the same name
        before = ALLOWLIST_0_17.replace('            "nemotron_h",\n', "")
        arguments = {"name": "aux_hidden_states_supported", "values": ["llama", "qwen", "nemotron_h"], "add": ["kimi_k2"]}
        self.assertCodemod(before, before, expected_skip=True, **arguments)
        self.assertSkips(before, "has no list aux_hidden_states_supported of llama, qwen, nemotron_h", **arguments)

    def test_a_comment_on_a_line_stays_there(self) -> None:
        # one value a line, a comment after one, as vllm/collect_env.py (0.17.0) writes `"vllm_version",  # vllm specific field`
        before = """
            supported = [
                "llama",  # and llama4 (substring test)
                "qwen",
            ]
        """
        after = """
            supported = [
                "llama",  # and llama4 (substring test)
                "qwen",
                "kimi_k2",
            ]
        """
        self.assertCodemod(before, after, name="supported", values=["llama", "qwen"], add=["kimi_k2"])


# -- add_dispatch_branch -------------------------------------------------------------------------------------

# vllm/v1/spec_decode/eagle.py, EagleProposer.load_model, 0.17.0 (the first branch's list shortened)
DISPATCH_0_17 = """
    if supports_multimodal(target_model):
        # handle multimodality
        if self.get_model_name(target_model) in [
            "Qwen2_5_VLForConditionalGeneration",
            "Qwen3VLForConditionalGeneration",
        ]:
            self.model.config.image_token_index = target_model.config.image_token_id
        elif self.get_model_name(target_model) == "PixtralForConditionalGeneration":
            self.model.config.image_token_index = (
                target_model.config.vision_config.image_token_id
            )
        else:
            self.model.config.image_token_index = (
                target_model.config.image_token_index
            )
        target_language_model = target_model.get_language_model()
    else:
        target_language_model = target_model
"""
KIMI_BRANCH = """        elif self.get_model_name(target_model) in ("KimiK25ForConditionalGeneration",):
            self.model.config.image_token_index = (
                target_model.config.media_placeholder_token_id
            )
"""
ELSE = "        else:\n            self.model"  # where the new branch goes
KIMI_DISPATCH = {"guard": "supports_multimodal", "subject": "target_model", "classes": ["KimiK25ForConditionalGeneration"],
                 "old_read": "config.image_token_index", "attribute": "media_placeholder_token_id"}


class AddDispatchBranchTest(SkipReason, CodemodTest):
    TRANSFORM = AddDispatchBranch

    def test_a_branch_before_the_else_reads_the_attribute_the_config_has(self) -> None:
        self.assertCodemod(DISPATCH_0_17, DISPATCH_0_17.replace(ELSE, KIMI_BRANCH + ELSE), **KIMI_DISPATCH)

    def test_several_classes_share_the_branch(self) -> None:
        arguments = {**KIMI_DISPATCH, "classes": ["KimiK25ForConditionalGeneration", "KimiVLForConditionalGeneration"]}
        branch = KIMI_BRANCH.replace('("KimiK25ForConditionalGeneration",)',
                                     '("KimiK25ForConditionalGeneration", "KimiVLForConditionalGeneration")')
        self.assertCodemod(DISPATCH_0_17, DISPATCH_0_17.replace(ELSE, branch + ELSE), **arguments)

    def test_already_applied_is_left_as_it_is(self) -> None:
        applied = DISPATCH_0_17.replace(ELSE, KIMI_BRANCH + ELSE)
        self.assertCodemod(applied, applied, expected_skip=True, **KIMI_DISPATCH)

    def test_a_branch_upstream_wrote_is_left_as_it_is(self) -> None:
        # 0.18.0: `elif self.get_model_name(target_model) == "KimiK25ForConditionalGeneration":`
        upstream = DISPATCH_0_17.replace(ELSE, KIMI_BRANCH.replace(
            ' in ("KimiK25ForConditionalGeneration",)', ' == "KimiK25ForConditionalGeneration"') + ELSE)
        self.assertCodemod(upstream, upstream, expected_skip=True, **KIMI_DISPATCH)
        self.assertSkips(upstream, "already names KimiK25ForConditionalGeneration", **KIMI_DISPATCH)

    def test_a_dispatch_without_an_else_is_not_found(self) -> None:
        before = DISPATCH_0_17.replace("""        else:
            self.model.config.image_token_index = (
                target_model.config.image_token_index
            )
""", "")
        self.assertCodemod(before, before, expected_skip=True, **KIMI_DISPATCH)
        self.assertSkips(before, "no `if supports_multimodal\\(target_model\\):` with a dispatch", **KIMI_DISPATCH)

    def test_a_dispatch_outside_the_guard_is_not_touched(self) -> None:
        # the same chain, not under `if supports_multimodal(target_model):`
        before = "\n".join(line[4:] for line in DISPATCH_0_17.splitlines()[2:-3])
        self.assertCodemod(before, before, expected_skip=True, **KIMI_DISPATCH)


# -- implement_protocol --------------------------------------------------------------------------------------

# patches/vllm/code/deepseek_v2_eagle3.py, as the bundle inserts it (in the order of 0.14.0's protocol)
EAGLE3_MEMBERS = """
    def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
        num_layers = len(self.model.layers)
        return (2, num_layers // 2, num_layers - 3)

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.model.aux_hidden_state_layers = tuple(layers)
        self.model.make_empty_intermediate_tensors = make_empty_intermediate_tensors_factory(
            ["hidden_states", "residual", *(f"aux_hidden_state_{j}" for j in range(len(layers)))],
            self.config.hidden_size,
        )
"""
# vllm/model_executor/models/deepseek_v2.py, 0.14.0 (its imports and DeepseekV2ForCausalLM, shortened)
DEEPSEEK_V2_0_14 = """
    from torch import nn

    from .interfaces import MixtureOfExperts, SupportsEagle, SupportsLoRA, SupportsPP
    from .utils import (
        PPMissingLayer,
        make_empty_intermediate_tensors_factory,
    )


    class DeepseekV2ForCausalLM(
        nn.Module, SupportsPP, DeepseekV2MixtureOfExperts, SupportsLoRA, SupportsEagle
    ):
        packed_modules_mapping = {
            "gate_up_proj": ["gate_proj", "up_proj"],
        }

        def load_weights(self, weights):
            return loaded_params


    class DeepseekForCausalLM(DeepseekV2ForCausalLM):
        pass
"""
DEEPSEEK_V2_0_14_PATCHED = """
    from torch import nn

    from .interfaces import MixtureOfExperts, SupportsEagle, SupportsEagle3, SupportsLoRA, SupportsPP
    from .utils import (
        PPMissingLayer,
        make_empty_intermediate_tensors_factory,
    )


    class DeepseekV2ForCausalLM(
        nn.Module, SupportsPP, DeepseekV2MixtureOfExperts, SupportsLoRA, SupportsEagle, SupportsEagle3
    ):
        packed_modules_mapping = {
            "gate_up_proj": ["gate_proj", "up_proj"],
        }

        def load_weights(self, weights):
            return loaded_params

        def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
            num_layers = len(self.model.layers)
            return (2, num_layers // 2, num_layers - 3)

        def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
            self.model.aux_hidden_state_layers = tuple(layers)
            self.model.make_empty_intermediate_tensors = make_empty_intermediate_tensors_factory(
                ["hidden_states", "residual", *(f"aux_hidden_state_{j}" for j in range(len(layers)))],
                self.config.hidden_size,
            )


    class DeepseekForCausalLM(DeepseekV2ForCausalLM):
        pass
"""
SUPPORTS_EAGLE3 = {"protocol": "SupportsEagle3", "protocol_module": "vllm.model_executor.models.interfaces"}


class ImplementProtocolTest(SkipReason, CodemodTest):
    TRANSFORM = ImplementProtocol

    def test_the_base_its_import_in_order_and_the_members(self) -> None:
        self.assertCodemod(DEEPSEEK_V2_0_14, DEEPSEEK_V2_0_14_PATCHED, context_override=DEEPSEEK_V2,
                           class_name="DeepseekV2ForCausalLM", members=functions(EAGLE3_MEMBERS), **SUPPORTS_EAGLE3)

    def test_an_import_of_one_name_a_line_keeps_its_layout(self) -> None:
        # vllm/model_executor/models/kimi_k25.py, 0.17.0 (the members: patches/vllm/code/kimi_k25_eagle3.py)
        before = """
            from vllm.model_executor.models.interfaces import (
                SupportsMultiModal,
                SupportsPP,
                SupportsQuant,
            )
            from vllm.model_executor.models.kimi_k25_vit import (
                KimiK25MultiModalProjector,
            )


            class KimiK25ForConditionalGeneration(
                nn.Module, SupportsMultiModal, SupportsPP, SupportsQuant
            ):
                def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]):
                    loader = AutoWeightsLoader(self)
                    return loader.load_weights(weights, mapper=self.hf_to_vllm_mapper)
        """
        after = """
            from vllm.model_executor.models.interfaces import (
                SupportsEagle3,
                SupportsMultiModal,
                SupportsPP,
                SupportsQuant,
            )
            from vllm.model_executor.models.kimi_k25_vit import (
                KimiK25MultiModalProjector,
            )


            class KimiK25ForConditionalGeneration(
                nn.Module, SupportsMultiModal, SupportsPP, SupportsQuant, SupportsEagle3
            ):
                def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]):
                    loader = AutoWeightsLoader(self)
                    return loader.load_weights(weights, mapper=self.hf_to_vllm_mapper)

                def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
                    return self.language_model.get_eagle3_aux_hidden_state_layers()
        """
        members = functions("""
            def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
                return self.language_model.get_eagle3_aux_hidden_state_layers()
        """)
        self.assertCodemod(before, after, class_name="KimiK25ForConditionalGeneration", members=members, **SUPPORTS_EAGLE3)

    def test_bases_one_a_line_get_one_more_line(self) -> None:
        # DeepseekV2ForCausalLM's bases as 0.18.0 writes them (one a line), before SupportsEagle3 was among them
        before = """
            from vllm.model_executor.models.interfaces import SupportsEagle3


            class DeepseekV2ForCausalLM(
                nn.Module,
                SupportsPP,
                SupportsEagle,
            ):
                pass
        """
        after = """
            from vllm.model_executor.models.interfaces import SupportsEagle3


            class DeepseekV2ForCausalLM(
                nn.Module,
                SupportsPP,
                SupportsEagle,
                SupportsEagle3,
            ):
                pass
        """
        self.assertCodemod(before, after, class_name="DeepseekV2ForCausalLM", members=[], **SUPPORTS_EAGLE3)

    def test_a_module_with_no_import_from_the_protocols_module_gets_one_after_its_imports(self) -> None:
        # vllm/model_executor/models/deepseek_mtp.py, 0.17.0: it imports nothing from interfaces
        before = """
            import torch.nn as nn

            from vllm.logger import init_logger

            from .utils import maybe_prefix

            logger = init_logger(__name__)


            class DeepSeekMTP(nn.Module, DeepseekV2MixtureOfExperts):
                pass
        """
        after = """
            import torch.nn as nn

            from vllm.logger import init_logger

            from .utils import maybe_prefix
            from vllm.model_executor.models.interfaces import SupportsEagle3

            logger = init_logger(__name__)


            class DeepSeekMTP(nn.Module, DeepseekV2MixtureOfExperts, SupportsEagle3):
                pass
        """
        self.assertCodemod(before, after, class_name="DeepSeekMTP", members=[], **SUPPORTS_EAGLE3)

    def test_a_name_the_module_binds_already_is_not_imported_again(self) -> None:
        # the protocol defined in the module itself, as vllm/model_executor/models/interfaces.py defines them
        before = """
            class SupportsEagle3(Protocol):
                supports_eagle3: ClassVar[Literal[True]] = True


            class DeepseekV2ForCausalLM(nn.Module):
                pass
        """
        after = before.replace("(nn.Module)", "(nn.Module, SupportsEagle3)")
        self.assertCodemod(before, after, class_name="DeepseekV2ForCausalLM", members=[], **SUPPORTS_EAGLE3)

    def test_members_the_class_has_are_not_added_again(self) -> None:
        before = DEEPSEEK_V2_0_14_PATCHED.replace(", SupportsEagle3", "")
        self.assertCodemod(before, DEEPSEEK_V2_0_14_PATCHED, context_override=DEEPSEEK_V2,
                           class_name="DeepseekV2ForCausalLM", members=functions(EAGLE3_MEMBERS), **SUPPORTS_EAGLE3)

    def test_already_applied_is_left_as_it_is(self) -> None:
        arguments = {"class_name": "DeepseekV2ForCausalLM", "members": functions(EAGLE3_MEMBERS), **SUPPORTS_EAGLE3}
        self.assertCodemod(DEEPSEEK_V2_0_14_PATCHED, DEEPSEEK_V2_0_14_PATCHED, context_override=DEEPSEEK_V2,
                           expected_skip=True, **arguments)
        self.assertSkips(DEEPSEEK_V2_0_14_PATCHED, "already has SupportsEagle3 as a base and its members",
                         context=DEEPSEEK_V2, **arguments)

    def test_a_class_the_module_lacks_is_not_found(self) -> None:
        arguments = {"class_name": "DeepseekV3ForCausalLM", "members": [], **SUPPORTS_EAGLE3}
        self.assertCodemod(DEEPSEEK_V2_0_14, DEEPSEEK_V2_0_14, expected_skip=True, **arguments)
        self.assertSkips(DEEPSEEK_V2_0_14, "has no class DeepseekV3ForCausalLM", **arguments)

    def test_a_member_that_uses_a_name_the_module_does_not_bind_is_refused(self) -> None:
        before = DEEPSEEK_V2_0_14.replace("    make_empty_intermediate_tensors_factory,\n", "")
        with pytest.raises(UnboundName, match="set_aux_hidden_state_layers uses make_empty_intermediate_tensors_factory"):
            ImplementProtocol(CodemodContext(filename="deepseek_v2.py"), class_name="DeepseekV2ForCausalLM",
                              members=functions(EAGLE3_MEMBERS), **SUPPORTS_EAGLE3).transform_module(
                cst.parse_module(CodemodTest.make_fixture_data(before)))


# -- collect_aux_hidden_states -------------------------------------------------------------------------------

# vllm/model_executor/models/deepseek_v2.py, DeepseekV2Model, 0.14.0 (__init__ and forward shortened)
DEEPSEEK_V2_MODEL_0_14 = """
    import torch
    from itertools import islice


    class DeepseekV2Model(nn.Module):
        fall_back_to_pt_during_load = False

        def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
            super().__init__()
            self.make_empty_intermediate_tensors = make_empty_intermediate_tensors_factory(
                ["hidden_states", "residual"], config.hidden_size
            )

        def forward(
            self,
            input_ids: torch.Tensor,
            positions: torch.Tensor,
            intermediate_tensors: IntermediateTensors | None,
            inputs_embeds: torch.Tensor | None = None,
        ) -> torch.Tensor | IntermediateTensors:
            if get_pp_group().is_first_rank:
                hidden_states = self.embed_input_ids(input_ids)
                residual = None
            else:
                hidden_states = intermediate_tensors["hidden_states"]
                residual = intermediate_tensors["residual"]

            for layer in islice(self.layers, self.start_layer, self.end_layer):
                hidden_states, residual = layer(
                    positions, hidden_states, residual, llama_4_scaling
                )

            if not get_pp_group().is_last_rank:
                return IntermediateTensors(
                    {"hidden_states": hidden_states, "residual": residual}
                )

            hidden_states, _ = self.norm(hidden_states, residual)
            return hidden_states
"""
DEEPSEEK_V2_MODEL_0_14_PATCHED = """
    import torch
    from itertools import islice


    class DeepseekV2Model(nn.Module):
        fall_back_to_pt_during_load = False

        def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
            super().__init__()
            self.make_empty_intermediate_tensors = make_empty_intermediate_tensors_factory(
                ["hidden_states", "residual"], config.hidden_size
            )
            self.aux_hidden_state_layers = tuple[int, ...]()

        def forward(
            self,
            input_ids: torch.Tensor,
            positions: torch.Tensor,
            intermediate_tensors: IntermediateTensors | None,
            inputs_embeds: torch.Tensor | None = None,
        ) -> torch.Tensor | IntermediateTensors:
            if get_pp_group().is_first_rank:
                hidden_states = self.embed_input_ids(input_ids)
                residual = None
            else:
                hidden_states = intermediate_tensors["hidden_states"]
                residual = intermediate_tensors["residual"]

            aux_hidden_states = self._received_aux_hidden_states(intermediate_tensors)
            for idx, layer in enumerate(islice(self.layers, self.start_layer, self.end_layer), start=self.start_layer):
                if idx in self.aux_hidden_state_layers:
                    aux_hidden_states[self.aux_hidden_state_layers.index(idx)] = (
                        self._aux_hidden_state(layer, hidden_states, residual)
                    )
                hidden_states, residual = layer(
                    positions, hidden_states, residual, llama_4_scaling
                )

            if not get_pp_group().is_last_rank:
                return IntermediateTensors(
                    {"hidden_states": hidden_states, "residual": residual, **self._aux_intermediate_tensors(aux_hidden_states, hidden_states)}
                )

            hidden_states, _ = self.norm(hidden_states, residual)
            if self.aux_hidden_state_layers:
                return hidden_states, aux_hidden_states
            return hidden_states

        def _aux_hidden_state(self, layer, hidden_states, residual):
            return hidden_states if residual is None else hidden_states + residual
"""  # noqa: E501 (the dict the codemod extends stays on its line, as the old one was)
# patches/vllm/code/deepseek_v2_aux_hidden_states.py, its first helper shortened to what needs no other name
AUX_HELPER = """
    def _aux_hidden_state(self, layer, hidden_states, residual):
        return hidden_states if residual is None else hidden_states + residual
"""


class CollectAuxHiddenStatesTest(SkipReason, CodemodTest):
    TRANSFORM = CollectAuxHiddenStates

    def test_init_the_layer_loop_the_next_stage_and_the_return(self) -> None:
        self.assertCodemod(DEEPSEEK_V2_MODEL_0_14, DEEPSEEK_V2_MODEL_0_14_PATCHED, class_name="DeepseekV2Model",
                           helpers=functions(AUX_HELPER))

    def test_already_applied_is_left_as_it_is(self) -> None:
        arguments = {"class_name": "DeepseekV2Model", "helpers": functions(AUX_HELPER)}
        self.assertCodemod(DEEPSEEK_V2_MODEL_0_14_PATCHED, DEEPSEEK_V2_MODEL_0_14_PATCHED, expected_skip=True, **arguments)
        self.assertSkips(DEEPSEEK_V2_MODEL_0_14_PATCHED, "DeepseekV2Model already collects aux hidden states", **arguments)

    def test_a_stack_that_collects_as_upstream_does_is_left_as_it_is(self) -> None:
        # 0.18.0's DeepseekV2Model: `self.aux_hidden_state_layers = tuple[int, ...]()` in __init__, its own loop
        upstream = DEEPSEEK_V2_MODEL_0_14.replace(
            '["hidden_states", "residual"], config.hidden_size\n            )\n',
            '["hidden_states", "residual"], config.hidden_size\n            )\n'
            "            self.aux_hidden_state_layers = tuple[int, ...]()\n")
        self.assertCodemod(upstream, upstream, expected_skip=True, class_name="DeepseekV2Model", helpers=[])

    def test_a_loop_over_a_slice_of_the_layers_is_not_found(self) -> None:
        # 0.8.5 to 0.10.x: `for layer in self.layers[self.start_layer:self.end_layer]:`
        before = DEEPSEEK_V2_MODEL_0_14.replace("islice(self.layers, self.start_layer, self.end_layer)",
                                                "self.layers[self.start_layer:self.end_layer]")
        self.assertCodemod(before, before, expected_skip=True, class_name="DeepseekV2Model", helpers=[])
        self.assertSkips(before, r"forward has no `for layer in islice\(self.layers, ...\)` loop followed by a return",
                         class_name="DeepseekV2Model", helpers=[])

    def test_a_forward_that_sends_nothing_to_the_next_stage_is_not_changed_at_all(self) -> None:
        # a stack without pipeline parallelism: the codemod would leave the aux states on one stage
        before = DEEPSEEK_V2_MODEL_0_14.replace("""
            if not get_pp_group().is_last_rank:
                return IntermediateTensors(
                    {"hidden_states": hidden_states, "residual": residual}
                )
""", "")
        self.assertCodemod(before, before, expected_skip=True, class_name="DeepseekV2Model", helpers=[])
        self.assertSkips(before, r"builds no IntermediateTensors\(\{...\}\) for the next stage", class_name="DeepseekV2Model",
                         helpers=[])

    def test_a_class_the_module_lacks_is_not_found(self) -> None:
        self.assertSkips(DEEPSEEK_V2_MODEL_0_14, "has no class DeepseekV3Model", class_name="DeepseekV3Model", helpers=[])

    def test_a_helper_that_uses_a_name_the_module_does_not_bind_is_refused(self) -> None:
        # the bundle's real helpers: torch and DeepseekAttention are deepseek_v2.py's own; this module binds no
        # DeepseekAttention. Attribute names, keywords, parameters, locals and builtins are not free names.
        helpers = functions((ROOT / "patches/vllm/code/deepseek_v2_aux_hidden_states.py").read_text())
        with pytest.raises(UnboundName, match="_aux_hidden_state uses DeepseekAttention, which deepseek_v2.py does not bind"):
            CollectAuxHiddenStates(CodemodContext(filename="deepseek_v2.py"), class_name="DeepseekV2Model",
                                   helpers=helpers).transform_module(
                cst.parse_module(CodemodTest.make_fixture_data(DEEPSEEK_V2_MODEL_0_14)))
        bound = DEEPSEEK_V2_MODEL_0_14.replace("import torch\n", "import torch\n    from .deepseek import DeepseekAttention\n")
        CollectAuxHiddenStates(CodemodContext(), class_name="DeepseekV2Model", helpers=helpers).transform_module(
            cst.parse_module(CodemodTest.make_fixture_data(bound)))


# -- a change applies whole or not at all ------------------------------------------------------------------


class AllowlistContext(PatchContext):
    """The allowlist gate blocks at the given sites (what the scan would say)."""

    def __init__(self, root: Path, sites: list[Site]):
        super().__init__(SimpleNamespace(tree=SimpleNamespace(root=root)), {}, {}, {})  # type: ignore[arg-type]
        self.gate_sites = sites

    def blocking_sites(self, rule_id: str) -> list[Site]:
        return self.gate_sites


def allowlist_site(file: str, values: list[str]) -> Site:
    details = ModelTypeAllowlist.Details("substring", values, "supported", "model_type", True, ["eagle3"])
    return Site("vllm-eagle3-model-type-allowlist", file, 1, 2, "", "ValueError", None, details)


def test_a_change_one_of_whose_sites_is_not_found_leaves_the_working_copy_as_it_was(tmp_path):
    # two sites: the first file's list is extended, the second's is not the gate's, so nothing of the change stays
    context = AllowlistContext(tmp_path, [allowlist_site("a.py", ["llama"]), allowlist_site("b.py", ["qwen"])])
    context.sources = {"a.py": 'supported = ["llama"]\n', "b.py": 'supported = ["mistral"]\n'}
    change = Change("allowlist", "vllm-eagle3-model-type-allowlist", "extend_allowlist", {"add": ["kimi_k2"]}, tmp_path)
    assert extend_allowlist(change, context) == "b.py has no list supported of qwen"
    assert context.sources == {"a.py": 'supported = ["llama"]\n', "b.py": 'supported = ["mistral"]\n'}
    context.gate_sites = context.gate_sites[:1]
    assert extend_allowlist(change, context) is None
    assert context.sources["a.py"] == 'supported = ["llama", "kimi_k2"]\n'
