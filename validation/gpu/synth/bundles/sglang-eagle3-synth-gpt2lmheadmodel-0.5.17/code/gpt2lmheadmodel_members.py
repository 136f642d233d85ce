# For GPT2LMHeadModel: get_embed_and_head from sglang.srt.models.llama.LlamaForCausalLM; set_eagle3_layers_to_capture from sglang.srt.models.gemma3_causal.Gemma3ForCausalLM, as this release has them.
# Derived by specaudit; each function becomes a method of the class.

from typing import List
from typing import Optional


def get_embed_and_head(self):
    return self.model.embed_tokens.weight, self.lm_head.weight


def set_eagle3_layers_to_capture(self, layer_ids: Optional[List[int]] = None):
    if layer_ids is None:
        self.capture_aux_hidden_states = True
        num_layers = self.config.num_hidden_layers
        self.model.layers_to_capture = [2, num_layers // 2, num_layers - 3]
    else:
        self.capture_aux_hidden_states = True
        # we plus 1 here because in sglang, for the ith layer, it takes the output
        # of the (i-1)th layer as aux hidden state
        self.model.layers_to_capture = [val + 1 for val in layer_ids]
