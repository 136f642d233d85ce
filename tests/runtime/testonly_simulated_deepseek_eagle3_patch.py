"""TEST-ONLY SHIM: an in-process stand-in for the planned specaudit patch that
makes vLLM's DeepseekV2ForCausalLM / DeepseekV3ForCausalLM satisfy
SupportsEagle3. It is NOT the patch and is never shipped; it only exists so
that tests/runtime/aux_hidden_states.py can exercise its EAGLE-3 comparison
branch on DeepSeek before the real patch exists (flag --simulate-patch).

It monkeypatches classes in the imported vllm.model_executor.models.deepseek_v2
module (no file is modified) and mirrors vLLM 0.14's LlamaModel.forward:
aux_hidden_states[j] = hidden_states + residual taken just BEFORE decoder
layer layers[j] runs. At layer 0 (residual is None on the first PP rank) it
uses hidden_states (the embeddings), where LlamaModel would raise a
TypeError (None + tensor).

variant="correct"       as described above
variant="after_layer"   deliberately wrong (captures AFTER the layer, i.e.
                        the input of layer+1); used to show that the harness
                        detects an off-by-one patch.
"""

from __future__ import annotations

from itertools import islice

import torch

VARIANTS = ("correct", "after_layer")


def apply(variant: str = "correct") -> str:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}")
    from vllm.distributed import get_pp_group
    from vllm.model_executor.models import deepseek_v2 as ds
    from vllm.sequence import IntermediateTensors

    if getattr(ds.DeepseekV2ForCausalLM, "set_aux_hidden_state_layers", None):
        raise RuntimeError(
            "DeepseekV2ForCausalLM already has set_aux_hidden_state_layers "
            "(patched tree?): refusing to simulate the patch on top of it"
        )

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        intermediate_tensors: IntermediateTensors | None,
        inputs_embeds: torch.Tensor | None = None,
    ):
        if get_pp_group().is_first_rank:
            if inputs_embeds is not None:
                hidden_states = inputs_embeds
            else:
                hidden_states = self.embed_input_ids(input_ids)
            residual = None
        else:
            assert intermediate_tensors is not None
            hidden_states = intermediate_tensors["hidden_states"]
            residual = intermediate_tensors["residual"]

        llama_4_scaling_config = getattr(self.config, "llama_4_scaling", None)
        if llama_4_scaling_config is not None:
            llama_4_scaling = ds._get_llama_4_scaling(
                original_max_position_embeddings=llama_4_scaling_config[
                    "original_max_position_embeddings"
                ],
                scaling_beta=llama_4_scaling_config["beta"],
                positions=positions,
            )
        else:
            llama_4_scaling = None

        aux_layers = getattr(self, "aux_hidden_state_layers", ())
        aux_hidden_states = []
        # like LlamaModel: idx counts from self.start_layer (== 0 without PP)
        for idx, layer in enumerate(
            islice(self.layers, self.start_layer, self.end_layer)
        ):
            if variant == "correct" and idx in aux_layers:
                aux_hidden_states.append(
                    hidden_states.clone() if residual is None else hidden_states + residual
                )
            hidden_states, residual = layer(
                positions, hidden_states, residual, llama_4_scaling
            )
            if variant == "after_layer" and idx in aux_layers:
                aux_hidden_states.append(hidden_states + residual)

        if not get_pp_group().is_last_rank:
            return IntermediateTensors(
                {"hidden_states": hidden_states, "residual": residual}
            )

        hidden_states, _ = self.norm(hidden_states, residual)
        if len(aux_hidden_states) > 0:
            return hidden_states, aux_hidden_states
        return hidden_states

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        self.model.aux_hidden_state_layers = layers

    def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
        num_layers = len(self.model.layers)
        return (2, num_layers // 2, num_layers - 3)

    ds.DeepseekV2Model.forward = forward
    ds.DeepseekV2ForCausalLM.supports_eagle3 = True
    ds.DeepseekV2ForCausalLM.set_aux_hidden_state_layers = set_aux_hidden_state_layers
    ds.DeepseekV2ForCausalLM.get_eagle3_aux_hidden_state_layers = (
        get_eagle3_aux_hidden_state_layers
    )
    return variant
