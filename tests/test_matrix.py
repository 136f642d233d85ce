"""specaudit matrix over real vLLM releases. The facts, from the scans of tests/test_vllm_facts.py and the
kimi_k2 bundle (patches/vllm/eagle3-kimi-k2): Kimi-K2.5 is not registered in 0.14.0 (the bundle cannot register
it), is blocked by three gates in 0.17.0 that the bundle opens, and is READY in 0.33.0; Llama 3 is READY in all."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from specaudit.launch.request import Launch
from specaudit.launch.target import load_preset
from specaudit.matrix import build_matrix
from specaudit.report import to_html, to_markdown, to_sarif
from specaudit.scan import index
from specaudit.scan.audit import scan

from conftest import vllm_tree
from helpers import specaudit


@pytest.fixture(scope="module")
def matrix():
    # The trees as locate_all gives them: one at a time, as each is ready.
    return build_matrix(iter([vllm_tree(v) for v in ("0.33.0", "0.14.0", "0.17.0")]), ["kimi-k2.5", "llama3"])


def test_the_releases_are_in_version_order_and_each_cell_is_a_scan(matrix):
    assert matrix.releases == ["vllm 0.14.0", "vllm 0.17.0", "vllm 0.33.0"]
    assert [c.verdict for c in matrix.cells if c.target == "kimi-k2.5"] == ["BLOCKED", "BLOCKED", "READY"]
    assert {c.verdict for c in matrix.cells if c.target == "llama3"} == {"READY"}
    assert [g.rule_id for g in matrix.cell("kimi-k2.5", "vllm 0.17.0").blocking] == [
        "vllm-eagle3-model-type-allowlist", "vllm-eagle3-image-token-read", "vllm-eagle3-interface"]
    assert len(matrix.results) == 6


def test_the_answers_name_the_first_working_release_and_what_opens_each_blocked_one(matrix):
    kimi, llama = matrix.answers
    assert kimi.works_from == ("vllm 0.33.0",) and llama.works_from == ("vllm 0.14.0",)
    patched = matrix.cell("kimi-k2.5", "vllm 0.17.0")
    assert (patched.bundle, patched.patched) == ("vllm-eagle3-kimi-k2", "READY")
    assert kimi.remedies["vllm 0.17.0"].startswith("specaudit patch --target kimi_k2 ")  # the bundle's target
    unregistered = matrix.cell("kimi-k2.5", "vllm 0.14.0")
    assert unregistered.blocking[0].rule_id == "vllm-architecture-registered"
    assert unregistered.patched == "BLOCKED"
    assert kimi.remedies["vllm 0.14.0"].startswith("upgrade to vllm 0.33.0")
    assert llama.remedies == {}


def test_every_format_renders_the_same_matrix(matrix):
    markdown = to_markdown(matrix)
    assert "works unpatched from **vllm 0.33.0**" in markdown
    assert "| vllm 0.17.0 | BLOCKED: EAGLE-3 target model-type allowlist +2; patched: READY | READY |" in markdown
    assert "<details>" in markdown
    assert "vllm 0.17.0: made by specaudit" in markdown  # each release's provenance
    assert json.loads(json.dumps(matrix.to_dict()))["answers"][0]["works_from"] == ["vllm 0.33.0"]
    runs = json.loads(to_sarif(matrix))["runs"]
    errors = [r["ruleId"] for run in runs for r in run["results"] if r["level"] == "error"]
    assert len(runs) == 6 and len(errors) == 2 + 3
    assert 'class="cell BLOCKED patchable"' in to_html(matrix)


def test_a_tree_is_analysed_once_and_a_bundle_planned_once_for_the_targets_it_covers(monkeypatch):
    from specaudit import matrix as module

    calls = {"analyze": 0, "plan": 0}

    def counted(name, function):
        def call(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        return call

    monkeypatch.setattr(module, "analyze", counted("analyze", module.analyze))
    monkeypatch.setattr(module, "plan", counted("plan", module.plan))
    one = build_matrix([vllm_tree("0.17.0")], ["kimi-k2.5", "kimi-k2"])  # one tree: scanned here, not in a worker
    assert [(c.verdict, c.patched) for c in one.cells] == [("BLOCKED", "READY"), ("BLOCKED", "READY")]
    assert calls == {"analyze": 1, "plan": 1}


@pytest.mark.network  # the CLI fetches vllm==0.14.0 and vllm==0.33.0
def test_the_cli_exit_code_is_the_worst_cell(tmp_path):
    proc = specaudit("matrix", "--target", "llama3", "vllm==0.14.0", "vllm==0.33.0", "--format", "md",
                     "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "llama3: works unpatched from vllm 0.14.0" in proc.stdout
    assert len(list(tmp_path.glob("matrix-llama3-*.md"))) == 1


def test_each_engine_has_its_own_first_working_release():
    """Kimi-K2.5 on SGLang: 0.5.8 has no model module that provides its architecture, 0.5.23 does (the SGLang facts
    of tests/test_sglang_facts.py); no bundle covers SGLang."""
    from conftest import engine_tree

    trees = [engine_tree("sglang==0.5.23"), vllm_tree("0.33.0"), engine_tree("sglang==0.5.8")]
    kimi, = build_matrix(trees, ["kimi-k2.5"]).answers
    assert kimi.works_from == ("sglang 0.5.23", "vllm 0.33.0")
    assert kimi.remedies == {"sglang 0.5.8": "upgrade to sglang 0.5.23 (no bundle covers it)"}


# -- the facts the trees' index caches share -----------------------------------------------------------------------


def index_cache_in(monkeypatch, root) -> None:
    """The index caches, the shared facts with them, under ``root`` (conftest keeps them in the session's)."""

    def cache_dir(*parts: str, create: bool = True):
        path = root.joinpath(*parts)
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return path

    monkeypatch.setattr(index, "cache_dir", cache_dir)


def shared_entries(root) -> set:
    return {path for path in (root / "index/facts").rglob("*") if path.is_file()}


def test_a_release_indexed_after_another_parses_only_what_changed_and_scans_the_same(tmp_path, monkeypatch):
    earlier, later = vllm_tree("0.17.0"), vllm_tree("0.17.1")  # located before the cache is this test's own
    launch = Launch(load_preset("kimi-k2.5"))
    index_cache_in(monkeypatch, tmp_path / "shared")
    scan(earlier, launch)
    index.finish_left_work()  # the pool's workers write the shared facts while the scan goes on
    first = shared_entries(tmp_path / "shared")
    after_earlier = scan(later, launch)
    added = shared_entries(tmp_path / "shared") - first
    index_cache_in(monkeypatch, tmp_path / "own")
    alone = scan(later, launch)
    assert 0 < len(added) < len(first) / 10  # 0.17.1 changed a few of the files 0.17.0 has
    assert replace(after_earlier, seconds=0, provenance=None) == replace(alone, seconds=0, provenance=None)


def test_a_damaged_shared_entry_is_dropped_with_a_warning_and_its_file_indexed_again(tmp_path, monkeypatch, capsys):
    index_cache_in(monkeypatch, tmp_path)
    shared = index._SharedFacts("salt", "cuda")
    shared.put({"classes": 3}, "module", "vllm/a.py", "d1")
    assert shared.get("module", "vllm/a.py", "d1") == {"classes": 3}
    entry, = shared_entries(tmp_path)
    entry.write_bytes(entry.read_bytes()[:-2])  # truncated
    assert shared.get("module", "vllm/a.py", "d1") is None
    assert "the shared index entry" in capsys.readouterr().err and not entry.exists()
    assert shared.get("module", "vllm/a.py", "d2") is None and capsys.readouterr().err == ""  # never written: no warning


def test_the_shared_facts_are_bounded_dropping_the_entries_used_least_recently(tmp_path, monkeypatch):
    index_cache_in(monkeypatch, tmp_path)
    monkeypatch.setattr(index, "SHARED_FACTS_BYTES", 10_000)
    monkeypatch.setattr(index._SharedFacts, "unbounded", 0)
    monkeypatch.setattr(index._SharedFacts, "bounded", False)
    shared = index._SharedFacts("salt", "cuda")
    for n in range(10):
        index._SharedFacts.unbounded += shared.put("x" * 2000, "module", f"vllm/m{n}.py", "d")
        os.utime(shared._path(("module", f"vllm/m{n}.py", "d")), (n, n))  # m0 the oldest
    assert shared.get("module", "vllm/m0.py", "d") == "x" * 2000  # now the one used last
    shared.bound()
    kept = {n for n in range(10) if shared._path(("module", f"vllm/m{n}.py", "d")).exists()}
    assert sum(path.stat().st_size for path in shared_entries(tmp_path)) <= 10_000
    assert 0 in kept and 1 not in kept and 9 in kept


def test_the_pools_workers_write_the_shared_facts_after_the_build_and_the_parent_counts_them(make_tree, tmp_path,
                                                                                              monkeypatch):
    """A file's entries are packed where it is parsed (index._parse_one); once the build is done, the pool's workers
    write them while this process goes on (TreeIndex._write_shared), and this process counts them, to bound the
    store. A later build, or this process's exit, waits for them."""
    from specaudit.scan.index import build_index
    from specaudit.tree.locate import locate

    root = make_tree({f"vllm/model_executor/models/m{n}.py": f"class M{n}:\n    pass\n" for n in range(40)})
    index_cache_in(monkeypatch, tmp_path / "shared")
    monkeypatch.setattr(index, "_parse_workers", 2)
    monkeypatch.setattr(index._SharedFacts, "unbounded", 0)
    monkeypatch.setenv("WRITERS", str(tmp_path / "writers"))
    monkeypatch.setattr(index, "write_entries", _recorded_write)
    built = build_index(locate(str(root)))
    index.finish_left_work()
    assert len(built.modules) >= 40
    entries = shared_entries(tmp_path / "shared")
    assert len(entries) >= 40 and index._SharedFacts.unbounded == sum(path.stat().st_size for path in entries)
    writers = (tmp_path / "writers").read_text().split()
    assert writers and str(os.getpid()) not in writers  # the workers wrote them, not this process


def test_the_shared_facts_a_broken_pool_cannot_take_are_written_by_the_build_itself(make_tree, tmp_path, monkeypatch):
    """A worker that died once its parse was done breaks the pool: the entries left to it are written here, and the
    scan goes on (a cache entry is never worth a failed scan)."""
    from concurrent.futures.process import BrokenProcessPool

    from specaudit.scan.index import build_index
    from specaudit.tree.locate import locate

    index_cache_in(monkeypatch, tmp_path / "shared")
    built = build_index(locate(str(make_tree({"vllm/model_executor/models/m.py": "class M:\n    pass\n"}))))
    index.finish_left_work()
    shared = index._SharedFacts("salt", "cuda")
    built._unwritten = [shared.entry({"n": n}, "module", f"vllm/m{n}.py", "d") for n in range(3)]

    class Broken:
        started, workers = True, 2

        def leave(self, *work):
            raise BrokenProcessPool("a worker died")

    built._write_shared(Broken())
    assert [shared.get("module", f"vllm/m{n}.py", "d") for n in range(3)] == [{"n": 0}, {"n": 1}, {"n": 2}]


_write_entries = index.write_entries


def _recorded_write(entries):
    """index.write_entries, noting the process it runs in; at module level: the pool's workers are sent it by name."""
    with open(os.environ["WRITERS"], "a") as out:
        out.write(f"{os.getpid()}\n")
    return _write_entries(entries)


# -- a target named as patch --target names one ----------------------------------------------------------------------


def test_a_target_is_named_as_patch_names_one():
    # One resolver for both commands (patch.synthesize.target_named): a preset by its name or its Hub id, an
    # architecture by its class name; a name that is neither is refused with the presets close to it.
    from specaudit.core.errors import SpecauditError
    from specaudit.patch.synthesize import target_named

    assert target_named("kimi-k2.5").source == "preset kimi-k2.5"
    assert target_named("moonshotai/Kimi-K2.5").name == "kimi-k2.5"
    mixtral = target_named("MixtralForCausalLM")
    assert (mixtral.name, mixtral.source, mixtral.architectures) == (
        "MixtralForCausalLM", "architecture MixtralForCausalLM", ["MixtralForCausalLM"])
    with pytest.raises(SpecauditError, match="unknown target preset 'kimi-k2.6'; did you mean kimi-k2.5"):
        target_named("kimi-k2.6")


def test_an_architecture_column_names_the_bundle_patch_synthesizes_for_it():
    # SGLang 0.5.23 supports neither Mixtral nor Gemma 2 for EAGLE-3 (no set_eagle3_layers_to_capture). Mixtral's
    # remedy is the bundle `specaudit patch --target MixtralForCausalLM` synthesizes from LlamaForCausalLM (its
    # decoder layers go through the attention boundary LlamaDecoderLayer captures at), planned and judged READY;
    # Gemma 2's layers neither do nor keep their stream in the hidden states alone: why none can be synthesized.
    from conftest import engine_tree

    made = build_matrix([engine_tree("sglang==0.5.23")], ["MixtralForCausalLM", "Gemma2ForCausalLM"])
    assert made.targets == ["MixtralForCausalLM", "Gemma2ForCausalLM"]
    mixtral, gemma2 = made.cells
    assert (mixtral.verdict, mixtral.bundle, mixtral.patched) == (
        "BLOCKED", "sglang-eagle3-synth-mixtralforcausallm-0.5.23", "READY")
    assert made.answers[0].remedies == {"sglang 0.5.23": (
        "specaudit patch --target MixtralForCausalLM (bundle sglang-eagle3-synth-mixtralforcausallm-0.5.23, "
        "synthesized from sglang.srt.models.llama.LlamaForCausalLM) makes it READY")}
    assert gemma2.verdict == "BLOCKED" and gemma2.bundle is None
    assert made.answers[1].remedies["sglang 0.5.23"].startswith(
        "no release of the range works (no bundle covers it; no bundle can be synthesized: Gemma2Model ")


@pytest.mark.network  # the CLI fetches sglang==0.5.23 where the cache lacks it
def test_the_cli_takes_an_architecture_name():
    from specaudit.core import cache

    proc = specaudit("matrix", "--target", "GPT2LMHeadModel", "sglang==0.5.23", env_cache=cache.cache_dir())
    assert proc.returncode != 2, proc.stderr  # not refused as an unknown preset
    assert "unknown target preset" not in proc.stderr
    assert "specaudit patch --target GPT2LMHeadModel (bundle sglang-eagle3-synth-gpt2lmheadmodel-0.5.23" in \
        " ".join(proc.stdout.split())
