# SupportsEagle3 members for KimiK25ForConditionalGeneration: the wrapper delegates to its language model
# (a DeepseekV3ForCausalLM), whose forward it returns as is. Written for specaudit.


def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
    self.language_model.set_aux_hidden_state_layers(layers)
    self.make_empty_intermediate_tensors = self.language_model.make_empty_intermediate_tensors


def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
    return self.language_model.get_eagle3_aux_hidden_state_layers()


def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
    return self.language_model.get_eagle3_default_aux_hidden_state_layers()
