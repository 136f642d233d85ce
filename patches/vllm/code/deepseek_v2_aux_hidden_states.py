# Methods the bundle adds to DeepseekV2Model so that its forward can return the hidden states of the
# EAGLE-3 aux layers beside the final ones. Written for specaudit; each function becomes a method of the
# class. `torch` and `DeepseekAttention` are the module's own.


def _aux_hidden_state(self, layer, hidden_states, residual):
    # The residual stream entering the layer: what LlamaModel collects, and what a drafter is trained on.
    state = hidden_states if residual is None else hidden_states + residual
    # In float16 the decoder layers keep that stream divided by routed_scaling_factor from the first
    # layer's attention on (their overflow guard); drafters are trained on the unscaled stream.
    if residual is not None and state.dtype == torch.float16 and not isinstance(layer.self_attn, DeepseekAttention):
        state = state * layer.routed_scaling_factor
    return state


def _received_aux_hidden_states(self, intermediate_tensors):
    # Under pipeline parallelism an earlier stage sends what it collected: one slot per aux layer.
    slots = len(self.aux_hidden_state_layers)
    if intermediate_tensors is None:
        return [None] * slots
    return [intermediate_tensors.tensors.get(f"aux_hidden_state_{j}") for j in range(slots)]


def _aux_intermediate_tensors(self, aux_hidden_states, hidden_states):
    # Slots that a later stage fills travel as zeros, so every stage sends the same keys.
    return {
        f"aux_hidden_state_{j}": torch.zeros_like(hidden_states) if state is None else state
        for j, state in enumerate(aux_hidden_states)
    }
