"""launch/known.py holds a known failure's releases with its own PEP 440 comparisons (packaging.specifiers is not
imported by a scan): they answer as packaging's SpecifierSet.contains(version, prereleases=True) does, on the
specifiers the known-failures files use and on the edges of each operator (prereleases, post-releases, local
versions, dev releases)."""

from __future__ import annotations

import itertools

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from specaudit.launch.known import KnownFailure, _clause, load_known_failures

VERSIONS = ["0.5.8", "0.5.9", "0.5.9rc1", "0.5.9.dev3", "0.5.9.post1", "0.5.9+cu118", "0.5.9.post1+cu118",
            "0.5.22", "0.5.23", "0.5.23rc0", "0.5.23.dev0", "0.5.23a1.post2", "0.5.23.post1", "0.5.23+local",
            "0.5.7", "0.9.2", "0.9.2+cu121", "0.9.2.post1", "0.9.2rc1", "0.26.1rc1.dev693", "0.26.1rc1",
            "0.26.1rc1.dev693+g1234", "0.26.1", "1!0.1", "0.15.1", "0.15.1.0", "0.19.1.dev0"]
BOUNDS = ["0.5.9", "0.5.23", "0.5.9rc1", "0.5.9.post1", "0.26.1rc1.dev693", "0.9.2", "0.15.1.0", "1!0.1"]


def failure(specifier: str) -> KnownFailure:
    return KnownFailure("x", "vllm", "x", None, specifier, (), None, (), ("*",), "", "")  # type: ignore[arg-type]


@pytest.mark.parametrize("operator", ["==", "!=", "<", "<=", ">", ">="])
def test_each_operator_answers_as_packaging(operator: str) -> None:
    for bound, version in itertools.product(BOUNDS, VERSIONS):
        specifier = f"{operator}{bound}"
        assert _clause(specifier) is not None
        expected = SpecifierSet(specifier).contains(Version(version), prereleases=True)
        assert failure(specifier).releases(Version(version)) is expected, (specifier, version)


def test_the_files_specifiers_answer_as_packaging() -> None:
    """Every known failure of both engines (rules/signatures/known-*.yaml: `==0.9.2`, `>0.5.8,<0.5.23`, ...)."""
    known = load_known_failures()
    assert {f.engine for f in known} == {"vllm", "sglang"}
    assert any("," in f.specifier for f in known)  # a range of two clauses among them
    for entry, version in itertools.product(known, VERSIONS):
        expected = SpecifierSet(entry.specifier).contains(Version(version), prereleases=True)
        assert entry.releases(Version(version)) is expected, (entry.specifier, version)


@pytest.mark.parametrize("specifier", ["~=0.5.9", "==0.5.*", "===0.5.9", ">=0.5,~=0.5.9"])
def test_other_operators_are_held_by_packaging(specifier: str) -> None:
    for version in VERSIONS:
        expected = SpecifierSet(specifier).contains(Version(version), prereleases=True)
        assert failure(specifier).releases(Version(version)) is expected, (specifier, version)
