"""The syntax trees the index keeps (scan.index.SYNTAX_KEPT_BYTES) and a function parsed alone from its lines
(TreeIndex.function): the same nodes, lines and columns included, as the file's own tree gives, whether its tree is
still kept or not."""

from __future__ import annotations

import ast

import pytest

from specaudit.scan import index as index_module
from specaudit.scan.facts import definitions
from specaudit.scan.index import FUNCTIONS, _parse_function, build_index
from specaudit.tree.locate import locate
from tests.conftest import engine_tree

EDGES = '''\
"""A module."""
import functools


def top(a, b=1):
    return a + b


@functools.cache
@staticmethod
async def decorated():
    """A docstring
whose lines start at column 0."""
    return [x
for x in range(3)]


class A:
    def method(self):
        def inner():
            return 1
        return inner() \\
            + 2

    if True:
        def under_an_if(self):  # a method bound in a branch, one level deeper
            return "\\tx"


def f(x): return x
'''


def _functions(source: bytes) -> dict[str, ast.AST]:
    return {qual: node for qual, node in definitions(ast.parse(source)).items() if isinstance(node, FUNCTIONS)}


def _alone(source: bytes, node: ast.AST) -> ast.AST | None:
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return _parse_function(source, first, node.end_lineno, node.col_offset)


def test_a_function_parsed_alone_is_the_files_own():
    source = EDGES.encode()
    functions = _functions(source)
    assert set(functions) == {"top", "decorated", "A.method", "A.under_an_if", "f"}
    for qual, node in functions.items():
        alone = _alone(source, node)
        assert alone is not None, qual
        assert ast.dump(alone, include_attributes=True) == ast.dump(node, include_attributes=True), qual


@pytest.mark.parametrize("release, relpath", [
    ("vllm==0.33.0", "vllm/v1/worker/gpu_model_runner.py"),  # 311 KB: the largest file a vLLM trace reads
    ("vllm==0.17.0", "vllm/config/speculative.py"),  # pydantic validators, decorators
    ("sglang==0.5.23", "sglang/srt/server_args.py"),
])
def test_every_function_of_an_engine_file_parsed_alone_is_the_files_own(release, relpath):
    source = (engine_tree(release).root / relpath).read_bytes()
    functions = _functions(source)
    assert len(functions) > 10
    for qual, node in functions.items():
        alone = _alone(source, node)
        assert alone is not None and ast.dump(alone, include_attributes=True) == \
            ast.dump(node, include_attributes=True), qual


def test_lines_that_are_no_function_give_none():
    source = EDGES.encode()
    assert _parse_function(source, 1, 2, 0) is None  # the docstring and an import
    assert _parse_function(source, 20, 24, 4) is None  # half a method


def test_the_trees_kept_are_bounded_and_a_function_of_a_dropped_one_is_the_same(make_tree, monkeypatch):
    root = make_tree({f"vllm/m{i}.py": EDGES for i in range(6)})
    monkeypatch.setattr(index_module, "SYNTAX_KEPT_BYTES", 2 * len(EDGES))
    index = build_index(locate(str(root)))
    own = {i: index.definitions(f"vllm/m{i}.py")["A.method"] for i in range(6)}
    counts = dict(index.parsed)
    index.syntax("vllm/m4.py"), index.syntax("vllm/m5.py")  # the two read last: kept
    assert index.parsed == counts
    parsed = []
    monkeypatch.setattr(index_module, "parse", lambda *a: parsed.append(a) or ast.parse(a[0]))
    dropped = index.function("vllm/m0.py", "A.method")
    assert dropped is not None and dropped is not own[0]  # parsed again, alone
    assert ast.dump(dropped, include_attributes=True) == ast.dump(own[0], include_attributes=True)
    assert parsed == []  # ... not the file
    assert index.function("vllm/m0.py", "A.nothing") is None and parsed == []
    assert index.function("vllm/m5.py", "A.method") is own[5]  # kept: the tree's own node


def test_a_file_parsed_a_third_time_is_kept_beside_the_recent_ones(make_tree, monkeypatch):
    """The player reads some modules over and over (SGLang's server_args.py, for each argument it plays): the file
    parsed again and again keeps its tree past the bound of the recent ones, and is parsed no more."""
    root = make_tree({f"vllm/m{i}.py": EDGES for i in range(3)})
    monkeypatch.setattr(index_module, "SYNTAX_KEPT_BYTES", len(EDGES))  # one tree
    index = build_index(locate(str(root)))
    for _ in range(5):
        for i in range(3):
            index.syntax(f"vllm/m{i}.py")
    parsed = dict(index.parsed)
    assert max(parsed.values()) == index_module.OFTEN_PARSED  # under the bound alone: once a read, 16 times
    index.syntax("vllm/m0.py"), index.syntax("vllm/m1.py"), index.syntax("vllm/m2.py")
    assert index.parsed == parsed


def test_a_module_indexed_for_its_facts_only_keeps_no_tree(make_tree):
    """The landscape reads the facts of every class and the code of few (TreeIndex.facts_only): a module it indexes
    keeps its facts, not its tree; a file it reads is kept as anywhere."""
    root = make_tree({f"vllm/m{i}.py": EDGES for i in range(2)})
    index = build_index(locate(str(root)))
    with index.facts_only():
        assert set(index.module("vllm.m0").classes) == {"A"}
        index.syntax("vllm/m1.py")
    parsed = dict(index.parsed)
    index.syntax("vllm/m1.py")  # read within: kept
    assert index.parsed == parsed
    index.syntax("vllm/m0.py")  # indexed within: parsed again
    assert parsed["vllm/m0.py"] == 1 and index.parsed["vllm/m0.py"] == 2
