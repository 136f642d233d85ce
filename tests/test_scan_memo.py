"""What the index keeps between scans (scan/index.py TreeIndex.memo): the launch's method resolution
(methods/resolve.py), the speculative config's members it reads, and the runner choice (scan/runner.py) are kept by
what they read of the launch while the release's files are unchanged, so that a warm scan neither parses nor plays the
resolving modules again; what is kept is bounded by kind, the least recently used going first; and a kept answer is the
one computing it gives."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specaudit.launch.request import Launch
from specaudit.launch.target import load_preset
from specaudit.methods.resolve import _resolve, keys_as_read, resolve
from specaudit.scan.audit import analyze, runner_decision
from specaudit.scan.facts import ReleaseModules
from specaudit.scan.index import MEMO_KEPT, build_index
from specaudit.scan.trace import load_path_spec
from specaudit.tree.locate import locate

from conftest import engine_tree


def test_each_kind_keeps_its_most_recently_used(make_tree):
    index = build_index(locate(str(make_tree({"vllm/a.py": "X = 1\n"}))))
    computed: list[str] = []

    def memo(name: str) -> str:
        return index.memo(name, lambda: computed.append(name) or name)

    kept = MEMO_KEPT["trace"]
    for i in range(kept):
        memo(f"trace:{i}")
    memo("trace:0")  # used again: the most recent now
    memo(f"trace:{kept}")  # one more than the kind keeps: the least recently used goes, trace:1
    assert computed == [f"trace:{i}" for i in range(kept)] + [f"trace:{kept}"]
    memo("trace:0")
    memo("trace:1")
    assert computed[-1] == "trace:1"  # computed again: it had gone
    assert len([k for k in index._store.extras if k.startswith("memo:trace:")]) == kept
    for i in range(MEMO_KEPT[""] + 3):  # another kind is bounded by its own count, and leaves the traces be
        memo(f"resolution:{i}")
    assert len([k for k in index._store.extras if k.startswith("memo:resolution:")]) == MEMO_KEPT[""]
    assert len([k for k in index._store.extras if k.startswith("memo:trace:")]) == kept


def test_a_kept_result_is_computed_again_once_a_file_it_read_changes(make_tree):
    root = make_tree({"vllm/a.py": "X = 1\n"})
    index = build_index(locate(str(root)))
    index.module("vllm.a")
    assert index.memo("resolution:x", lambda: "first") == "first"
    index.save()
    assert build_index(locate(str(root))).memo("resolution:x", lambda: "second") == "first"  # unchanged: kept
    (root / "vllm/a.py").write_text("X = 2\n")
    assert build_index(locate(str(root))).memo("resolution:x", lambda: "third") == "third"


# Launches whose resolution plays the release's resolving code on each of its ways: the method inferred from the
# drafter (vLLM 0.33.0 config/speculative.py SpeculativeConfig.__post_init__; SGLang 0.5.23 server_args.py
# ServerArgs._handle_speculative_decoding), a refusal (num_speculative_tokens missing), and a key spelt with dashes
# (vLLM's EngineArgs.create_speculative_config rewrites `-` as `_`, engine/arg_utils.py).
LAUNCHES = {
    "vllm==0.33.0": [{"method": "eagle3", "model": "/d", "num_speculative_tokens": 3},
                     {"method": "eagle3", "model": "/d"},
                     {"method": "mtp", "num-speculative-tokens": 1},
                     {"model": "/d", "num_speculative_tokens": 2}],
    "vllm==0.34.0": [{"method": "eagle3", "model": "/d", "num_speculative_tokens": 3},
                     {"method": "mtp", "num_speculative_tokens": 1}],
    "sglang==0.5.23": [{"method": "EAGLE3", "model": "/d", "num_speculative_tokens": 3},
                       {"method": "NEXTN", "num_speculative_tokens": 1}],
}


@pytest.fixture
def own_index_cache(monkeypatch, tmp_path):
    """This test's own cache of the tree's index (the facts of files stay the session's): no other process writes it
    between the cold scan and the warm one."""
    import specaudit.scan.index as index_module

    session = index_module.cache_dir

    def cache_dir(*parts: str, create: bool = True):
        if parts == ("index",):
            (tmp_path / "index").mkdir(exist_ok=True)
            return tmp_path / "index"
        return session(*parts, create=create)

    monkeypatch.setattr(index_module, "cache_dir", cache_dir)


@pytest.mark.parametrize("release", sorted(LAUNCHES))
def test_a_warm_resolution_is_the_one_computed(release, own_index_cache):
    tree = engine_tree(release)
    cold = analyze(tree)
    launches = [Launch(load_preset("kimi-k2.5"), method=str(s["method"]).lower() if s.get("method") else None,
                       draft=s.get("model"), speculative=s, engine=tree.engine.name) for s in LAUNCHES[release]]
    computed = []
    for launch in launches:
        code = ReleaseModules(cold.index, cold.registry)
        launch = keys_as_read(launch, code, cold.engine_methods)
        assert resolve(launch, code, cold.engine_methods) is not None  # kept in the index
        computed.append(_resolve(launch, code, cold.engine_methods))  # played out, not kept
    cold.index.save()
    warm = analyze(tree)
    for launch, first in zip(launches, computed):
        code = ReleaseModules(warm.index, warm.registry)
        again = resolve(keys_as_read(launch, code, warm.engine_methods), code, warm.engine_methods)
        assert replace(again, member=first.member) == first
        assert (again.fields, again.coverage) == (first.fields, first.coverage)
        for expression in ("num_speculative_tokens", "use_eagle()", "draft_tensor_parallel_size", "method"):
            assert again.member(expression) == first.member(expression), expression
    resolving = [m for m in ("vllm.engine.arg_utils", "vllm.config.model", "vllm.config.parallel",
                             "sglang.srt.server_args") if m in warm.index.files]
    assert resolving and not {warm.index.files[m] for m in resolving} & set(warm.index.parsed)  # nothing parsed


@pytest.mark.parametrize("release", ["vllm==0.33.0", "vllm==0.34.0"])
def test_a_warm_runner_choice_is_the_one_computed(release, own_index_cache):
    tree = engine_tree(release)
    choice = load_path_spec("vllm").runner
    assert choice is not None
    launches = [Launch(load_preset("kimi-k2.5")), Launch(load_preset("llama3"), env={"VLLM_USE_V2_MODEL_RUNNER": "1"})]
    cold = analyze(tree)
    computed = [runner_decision(cold, choice, launch, "eagle3") for launch in launches]
    cold.index.save()
    warm = analyze(tree)
    assert [runner_decision(warm, choice, launch, "eagle3") for launch in launches] == computed
    assert "vllm/config/vllm.py" not in warm.index.parsed


def test_a_class_statement_is_kept_by_its_files_content(make_tree):
    """scan.resolve reads a class's statement (the target's MRO: its methods, what they assign to self) from the facts
    shared by every tree (TreeIndex.kept) where its file was parsed before: the same statement, lines included, and the
    file not parsed; a file changed since gives its new statement."""
    import ast

    from specaudit.scan.resolve import Resolver

    root = make_tree({"vllm/m.py": "X = 0\n\n\nclass A:\n    def __init__(self):\n        self.x = 1\n"})

    def statement() -> tuple[str, bool]:
        index = build_index(locate(str(root)))
        resolver = Resolver(index)
        found = resolver.find_class("vllm.m", "A")
        node = resolver._class_node(found)  # type: ignore[arg-type]
        assert node is not None
        return ast.dump(node, include_attributes=True), "vllm/m.py" in index.parsed

    cold = statement()
    assert cold[1]  # parsed
    assert statement() == (cold[0], False)  # kept: not parsed
    (root / "vllm/m.py").write_text("class A:\n    def __init__(self):\n        self.y = 2\n")
    changed = statement()
    assert changed[1] and "'y'" in changed[0] and changed[0] != cold[0]


def test_a_key_is_the_same_in_every_process():
    """A memo's key is a digest of what it reads, sets included (the runner choice's `present` runners): the same
    whatever order the process's string hashing gives a set, else a warm scan computed again half the time."""
    import subprocess
    import sys

    code = ("from dataclasses import replace; from specaudit.methods.resolve import key_digest; "
            "from specaudit.scan.trace import load_path_spec; "
            "print(key_digest((replace(load_path_spec('vllm').runner, present=frozenset({'v1', 'v2'})), {'x': {1, 'a'}})))")
    keys = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**__import__("os").environ, "PYTHONHASHSEED": seed}).stdout for seed in "1234"}
    assert len(keys) == 1 and len(next(iter(keys)).strip()) == 32
