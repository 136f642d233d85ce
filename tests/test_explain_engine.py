"""Which engine a paste is of, and what classifies it (issue 38): an engine's signature (rules/signatures) or template
(the atlas) names the root cause of a paste only where the paste is known to be of that engine, from the release it
names, its frames or the templates its line is, or where nothing tells its engine but that text.

Both engines word "Model architectures {architectures} are not supported for now. Supported architectures:
{all_supported_archs}" alike: vLLM 0.14.0 vllm/model_executor/models/registry.py:846-849
(_ModelRegistry._raise_for_unsupported) and SGLang 0.5.17 sglang/srt/models/registry.py:50-53 (the same function),
and SGLang's signature `sglang-unsupported-architecture` (rules/signatures/sglang.yaml) matches it. Only SGLang says
"{arch} has no SGlang implementation and the Transformers implementation is not compatible with SGLang.":
sglang/srt/model_loader/utils.py:182-185 (get_model_architecture), which the same signature matches.
"""

from __future__ import annotations

import pytest

from specaudit.explain.atlas_build import load_atlas
from specaudit.explain.diagnose import engine_fits, located, paste_engines, root_cause
from specaudit.explain.raise_sites import bare_line
from specaudit.explain.signatures import explain_file

from conftest import engine_tree

UNSUPPORTED = ("ValueError: Model architectures ['EagleLlamaModel'] are not supported for now. Supported "
               "architectures: dict_keys(['LlamaForCausalLM'])")
HEADER = "Traceback (most recent call last):"


@pytest.fixture(scope="module")
def atlas():
    return load_atlas([engine_tree("vllm==0.14.0"), engine_tree("sglang==0.5.17")])


def _explain(atlas, tmp_path, lines: list[str]):
    from dataclasses import replace

    log = tmp_path / "paste.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    explanation = explain_file(str(log), None, bare_line(atlas))
    explanation = replace(explanation, located=located(explanation, atlas))
    return explanation, root_cause(explanation, None)


def test_a_vllm_worded_paste_is_not_classified_by_sglang_s_signature(atlas, tmp_path):
    explanation, root = _explain(atlas, tmp_path, [
        HEADER,
        '  File "/usr/local/lib/python3.12/site-packages/vllm/model_executor/models/registry.py", line 1061, in '
        'resolve_model_cls',
        "    return self._raise_for_unsupported(architectures)",
        '  File "/usr/local/lib/python3.12/site-packages/vllm/model_executor/models/registry.py", line 846, in '
        '_raise_for_unsupported',
        "    raise ValueError(",
        UNSUPPORTED])
    assert explanation.cause is None or explanation.cause.signature != "sglang-unsupported-architecture" \
        or not explanation.cause.root
    assert paste_engines(explanation) == {"vllm"} and not engine_fits("sglang", explanation)
    assert root.by == "raise site" and root.signature is None
    assert {site.engine for site in explanation.located.sites} == {"vllm"}
    assert explanation.located.sites[0].location == "vllm/model_executor/models/registry.py:846"


def test_an_sglang_worded_paste_is_classified_by_sglang_s_signature(atlas, tmp_path):
    explanation, root = _explain(atlas, tmp_path, [
        "ValueError: EagleLlamaModel has no SGlang implementation and the Transformers implementation is not "
        "compatible with SGLang."])
    assert paste_engines(explanation) == {"sglang"}  # the only engine whose templates the line is
    assert root.by == "signature" and root.signature.signature == "sglang-unsupported-architecture"
    assert explanation.located.sites[0].function == "get_model_architecture"


def test_a_line_both_engines_word_alike_is_classified_by_neither_engine_s_signature(atlas, tmp_path):
    explanation, root = _explain(atlas, tmp_path, [UNSUPPORTED])
    assert paste_engines(explanation) == {"vllm", "sglang"}
    assert explanation.cause is not None and explanation.cause.signature == "sglang-unsupported-architecture"
    assert root.by == "raise site" and root.signature is None  # where it was raised, in both engines
    assert "sglang 0.5.17" in root.summary and "vllm 0.14.0" in root.summary
    # a line of the paste that names its release settles it: vLLM's templates alone, and no SGLang signature
    explanation, root = _explain(atlas, tmp_path, ["INFO 06-04 10:14:40 [api_server.py:1] vLLM API server version "
                                                   "0.14.0", UNSUPPORTED])
    assert explanation.release.get("engine") == "vllm" and paste_engines(explanation) == {"vllm"}
    assert {site.engine for site in explanation.located.sites} == {"vllm"} and root.by == "raise site"
