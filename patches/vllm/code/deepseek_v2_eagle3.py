# SupportsEagle3 members for DeepseekV2ForCausalLM (and its subclass DeepseekV3ForCausalLM). The bundle adds
# those the release's protocol has and the class lacks. Written for specaudit.


def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
    self.model.aux_hidden_state_layers = tuple(layers)
    # The aux hidden states travel with the intermediate tensors between pipeline stages.
    self.model.make_empty_intermediate_tensors = make_empty_intermediate_tensors_factory(
        ["hidden_states", "residual", *(f"aux_hidden_state_{j}" for j in range(len(layers)))],
        self.config.hidden_size,
    )
    self.make_empty_intermediate_tensors = self.model.make_empty_intermediate_tensors


def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
    num_layers = len(self.model.layers)
    return (2, num_layers // 2, num_layers - 3)


def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
    num_layers = len(self.model.layers)
    return (2, num_layers // 2, num_layers - 3)
