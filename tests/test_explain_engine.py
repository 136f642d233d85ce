"""Which engine a paste is of, and what classifies it (issue 38): an engine's signature (rules/signatures) or template
(the atlas) names the root cause of a paste only where the paste is known to be of that engine, from the release it
names, its frames or the templates its line is, or where nothing tells its engine but that text.

Both engines word "Model architectures {architectures} are not supported for now. Supported architectures:
{all_supported_archs}" alike: vLLM 0.14.0 vllm/model_executor/models/registry.py:846-849 (0.17.0: :931-934;
_ModelRegistry._raise_for_unsupported, called by resolve_model_cls at :1061 / :1092) and SGLang 0.5.17
sglang/srt/models/registry.py:50-53 (0.5.23: :63-66; the same function), and SGLang's signature
`sglang-unsupported-architecture` (rules/signatures/sglang.yaml) matches it. Only SGLang says "{arch} has no SGlang
implementation and the Transformers implementation is not compatible with SGLang.": sglang/srt/model_loader/utils.py
:182-185 (0.5.23: :185-188; resolve_transformers_arch), which the same signature matches.
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


# (vLLM, SGLang, vLLM's raise line, its caller's line, SGLang's raise line in resolve_transformers_arch)
RELEASES = {"0.14": ("vllm==0.14.0", "sglang==0.5.17", 846, 1061, 182),
            "0.17": ("vllm==0.17.0", "sglang==0.5.23", 931, 1092, 185)}


@pytest.fixture(scope="module", params=sorted(RELEASES))
def releases(request):
    vllm, sglang, *lines = RELEASES[request.param]
    return load_atlas([engine_tree(vllm), engine_tree(sglang)]), lines, (vllm.replace("==", " "), sglang.replace("==", " "))


def _explain(atlas, tmp_path, lines: list[str]):
    from dataclasses import replace

    log = tmp_path / "paste.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    explanation = explain_file(str(log), None, bare_line(atlas))
    explanation = replace(explanation, located=located(explanation, atlas))
    return explanation, root_cause(explanation, None)


def test_a_vllm_worded_paste_is_not_classified_by_sglang_s_signature(releases, tmp_path):
    atlas, (raised, caller, _), _ = releases
    explanation, root = _explain(atlas, tmp_path, [
        HEADER,
        f'  File "/usr/local/lib/python3.12/site-packages/vllm/model_executor/models/registry.py", line {caller}, in '
        'resolve_model_cls',
        "    return self._raise_for_unsupported(architectures)",
        f'  File "/usr/local/lib/python3.12/site-packages/vllm/model_executor/models/registry.py", line {raised}, in '
        '_raise_for_unsupported',
        "    raise ValueError(",
        UNSUPPORTED])
    assert explanation.cause is None or explanation.cause.signature != "sglang-unsupported-architecture" \
        or not explanation.cause.root
    assert paste_engines(explanation) == {"vllm"} and not engine_fits("sglang", explanation)
    assert root.by == "raise site" and root.signature is None
    assert {site.engine for site in explanation.located.sites} == {"vllm"}
    assert explanation.located.sites[0].location == f"vllm/model_executor/models/registry.py:{raised}"


def test_an_sglang_worded_paste_is_classified_by_sglang_s_signature(releases, tmp_path):
    atlas, (_, _, raised), _ = releases
    explanation, root = _explain(atlas, tmp_path, [
        "ValueError: EagleLlamaModel has no SGlang implementation and the Transformers implementation is not "
        "compatible with SGLang."])
    assert paste_engines(explanation) == {"sglang"}  # the only engine whose templates the line is
    assert root.by == "signature" and root.signature.signature == "sglang-unsupported-architecture"
    assert explanation.located.sites[0].location == f"sglang/srt/model_loader/utils.py:{raised}"
    assert explanation.located.sites[0].function == "resolve_transformers_arch"


def test_a_line_both_engines_word_alike_is_classified_by_neither_engine_s_signature(releases, tmp_path):
    atlas, _, labels = releases
    explanation, root = _explain(atlas, tmp_path, [UNSUPPORTED])
    assert paste_engines(explanation) == {"vllm", "sglang"}
    assert explanation.cause is not None and explanation.cause.signature == "sglang-unsupported-architecture"
    assert root.by == "raise site" and root.signature is None  # where it was raised, in both engines
    assert all(label in root.summary for label in labels)
    # a line of the paste that names its release settles it: vLLM's templates alone, and no SGLang signature
    explanation, root = _explain(atlas, tmp_path, ["INFO 06-04 10:14:40 [api_server.py:1] vLLM API server version "
                                                   "0.14.0", UNSUPPORTED])
    assert explanation.release.get("engine") == "vllm" and paste_engines(explanation) == {"vllm"}
    assert {site.engine for site in explanation.located.sites} == {"vllm"} and root.by == "raise site"
