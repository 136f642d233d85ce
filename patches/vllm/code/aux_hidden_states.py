# Methods the bundle adds to a decoder stack (DeepseekV2Model) so that its forward can return the hidden
# states of the EAGLE-3 aux layers beside the final ones. Written for specaudit; each function becomes a
# method of the class. `torch` is the module's own import.


def _aux_hidden_state(self, hidden_states, residual):
    # The residual stream entering the layer: what LlamaModel collects, and what a drafter is trained on.
    return hidden_states if residual is None else hidden_states + residual


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
