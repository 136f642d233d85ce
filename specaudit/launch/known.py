"""Known runtime failures (``rules/signatures/known-<engine>.yaml``, marked
``kind: known-failures``): crashes that depend on the release and on the
launch's features (CUDA graphs, an FP8 KV cache, DP attention, a quantized drafter, pipeline parallelism), each with
the public thread or pull request it comes from, the releases it was seen in and the fix or workaround.

``explain`` names the entry whose error text a log shows (their patterns join the crash signatures, before the
engine's own: signatures.py). ``known_failures(engine, version, features, method)`` answers the other question, a
launch's cell: which known failures a release and a set of launch features match, for ``scan`` to warn of before
launch; ``launch_features(engine, options)`` reads the features from a launch command's options.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..core.data import data_dir, read_yaml
from ..core.errors import SpecauditError

if TYPE_CHECKING:
    from packaging.version import Version


@dataclass(frozen=True)
class KnownFailure:
    id: str
    engine: str
    title: str
    pattern: re.Pattern  # the error text it prints, searched in each log line
    specifier: str  # PEP 440: the releases it was seen in (and, where a fix is known, those before the fix)
    seen_in: tuple[str, ...]  # the releases the thread reports it on, as they were named there
    fixed_in: str | None  # the first release with the fix, where one is known
    features: tuple[str, ...]  # launch features that must all hold for it (launch_features names them)
    methods: tuple[str, ...]  # speculative methods it was seen with ("*" for any)
    thread: str  # the public issue or pull request
    fix: str  # the fix or the workaround
    examples: tuple[str, ...] = ()
    counterexamples: tuple[str, ...] = ()

    @functools.cached_property
    def releases(self) -> Callable[[Version], bool]:
        """``specifier`` as a test of a release (prereleases included): its clauses held by ``_holds``, which plays
        packaging's own comparisons for the operators the known-failures files use (``==``, ``!=``, ``<``, ``<=``,
        ``>``, ``>=``); any other (``~=``, ``===``, ``==X.*``) is held by packaging's SpecifierSet, whose import
        (packaging.specifiers with packaging.tags and utils: ~27 ms, 2 MB) a scan otherwise never pays."""
        clauses = [c.strip() for c in self.specifier.split(",") if c.strip()]
        parsed = [_clause(c) for c in clauses]
        if all(parsed):
            from packaging.version import Version

            bounds = [(operator, Version(version)) for operator, version in (c for c in parsed if c)]
            return lambda release: all(_holds(operator, release, bound) for operator, bound in bounds)
        from packaging.specifiers import SpecifierSet

        specifiers = SpecifierSet(self.specifier)
        return lambda release: specifiers.contains(release, prereleases=True)

    @property
    def hint(self) -> str:
        """What explain prints: the fix, where the failure was seen and with what, and the thread."""
        where = f"seen in {self.engine} {', '.join(self.seen_in)}"
        where += f", fixed in {self.fixed_in}" if self.fixed_in else ", no fixed release recorded"
        needs = f" with {', '.join(self.features)}" if self.features else ""
        methods = "" if "*" in self.methods else f" ({', '.join(self.methods)})"
        return f"{self.fix} Known failure{methods}{needs}: {where}; {self.thread}"

    def applies(self, version: str | None, features: Iterable[str], method: str | None = None) -> bool:
        """Whether a launch of ``version`` with ``features`` (and ``method``) is in this failure's cell. A version
        that is not PEP 440 matches nothing; no version (unknown) matches every release."""
        if method and "*" not in self.methods and method.lower() not in {m.lower() for m in self.methods}:
            return False
        if not set(self.features) <= set(features):
            return False
        if version is None:
            return True
        from packaging.version import InvalidVersion, Version

        try:
            return self.releases(Version(version))
        except InvalidVersion:
            return False


_CLAUSE = re.compile(r"^(==|!=|<=|>=|<|>)\s*([0-9][0-9A-Za-z.+!-]*)$")


def _clause(text: str) -> tuple[str, str] | None:
    """One clause of a specifier as (operator, version), where it is one ``_holds`` plays (no wildcard, no ``~=``, no
    ``===``, a version PEP 440 parses); None otherwise."""
    found = _CLAUSE.match(text)
    if found is None or found[2].endswith(".*"):
        return None
    from packaging.version import InvalidVersion, Version

    try:
        Version(found[2])
    except InvalidVersion:
        return None
    return found[1], found[2]


def _holds(operator: str, release: Version, bound: Version) -> bool:
    """packaging.specifiers.Specifier's comparison of ``release`` with ``bound`` (packaging 26.2, specifiers.py
    ``_compare_*``): ``==``/``!=`` on the public version where the bound has no local part; ``<=``/``>=`` on the public
    version; ``<`` not of a prerelease of the bound (from its earliest, ``.dev0``) unless the bound is one; ``>`` not of
    a post-release of the bound unless the bound is one, nor of a local version of it."""
    public = _version(release, local=False)
    if operator in ("==", "!="):
        equal = (release if bound.local else public) == bound
        return equal if operator == "==" else not equal
    if operator == "<=":
        return public <= bound
    if operator == ">=":
        return public >= bound
    if operator == "<":
        return release < bound and not (not bound.is_prerelease and release.is_prerelease
                                         and release >= _version(bound, dev=0, local=False))
    return release > bound and not (not bound.is_postrelease and release.is_postrelease
                                    and _version(release, post=None, dev=None, local=False) == bound) \
        and not (release.local is not None and public == bound)


_KEEP: Any = object()


def _version(version: Version, post: Any = _KEEP, dev: Any = _KEEP, local: bool = True) -> Version:
    """``version`` with its post and dev parts replaced (None: without), and without its local part unless ``local``."""
    from packaging.version import Version

    post = version.post if post is _KEEP else post
    dev = version.dev if dev is _KEEP else dev
    text = f"{version.epoch}!" + ".".join(map(str, version.release))
    text += f"{version.pre[0]}{version.pre[1]}" if version.pre else ""
    text += (f".post{post}" if post is not None else "") + (f".dev{dev}" if dev is not None else "")
    text += f"+{version.local}" if local and version.local else ""
    return Version(text)


@dataclass(frozen=True)
class Feature:
    """A launch feature, read from the launch command's options (names without the leading dashes)."""

    name: str
    options: tuple[str, ...]  # the option, with its aliases
    value: re.Pattern | None = None  # the option's value must match this
    above: float | None = None  # or be a number above this
    default: bool = False  # on when the option is absent (CUDA graphs)
    off_with: tuple[str, ...] = ()  # flags that turn a default-on feature off (--enforce-eager)

    def holds(self, options: Mapping[str, object]) -> bool:
        if any(_flag(options.get(flag)) for flag in self.off_with):
            return False
        given = next((options[o] for o in self.options if o in options), None)
        if given is None:
            return self.default
        if self.value is not None:
            return bool(self.value.search(str(given)))
        if self.above is not None:
            try:
                return float(str(given)) > self.above
            except ValueError:
                return False
        return _flag(given)


def _flag(value: object) -> bool:
    return value is not None and value is not False and str(value).lower() not in ("false", "0", "no", "none")


KNOWN_FAILURES = "known-failures"  # the `kind:` of a known-failures file, beside the signature files


def _directory(directory: Path | None) -> Path:
    return directory or data_dir("rules") / "signatures"


def _files(engines: Iterable[str] | None, directory: Path | None) -> list[tuple[Path, dict]]:
    loaded = []
    for path in sorted(_directory(directory).glob("*.yaml")):
        try:
            data = read_yaml(path)
            if data.get("kind") == KNOWN_FAILURES and (engines is None or data["engine"] in engines):
                loaded.append((path, data))
        except (yaml.YAMLError, KeyError, TypeError, AttributeError) as exc:
            raise SpecauditError(f"{path}: not a valid signature file ({type(exc).__name__}: {exc})") from None
    return loaded


def load_known_failures(engines: Iterable[str] | None = None, directory: Path | None = None) -> list[KnownFailure]:
    made = []
    for path, data in _files(engines, directory):
        try:
            for entry in data["failures"]:
                made.append(KnownFailure(
                    id=entry["id"], engine=data["engine"], title=entry["title"], pattern=re.compile(entry["pattern"]),
                    specifier=str(entry["releases"]), seen_in=tuple(str(v) for v in entry["seen_in"]),
                    fixed_in=str(entry["fixed_in"]) if entry.get("fixed_in") else None,
                    features=tuple(entry.get("features", ())), methods=tuple(entry.get("methods", ("*",))),
                    thread=entry["thread"], fix=" ".join(entry["fix"].split()),
                    examples=tuple(entry.get("examples", ())), counterexamples=tuple(entry.get("counterexamples", ()))))
        except (KeyError, TypeError, re.error) as exc:
            raise SpecauditError(f"{path}: not a valid known-failures file ({type(exc).__name__}: {exc})") from None
    return made


def load_features(engine: str, directory: Path | None = None) -> list[Feature]:
    made = []
    for path, data in _files([engine], directory):
        try:
            for name, entry in (data.get("features") or {}).items():
                made.append(Feature(
                    name=name, options=tuple(entry.get("options", ())),
                    value=re.compile(entry["value"]) if "value" in entry else None, above=entry.get("above"),
                    default=bool(entry.get("default", False)), off_with=tuple(entry.get("off_with", ()))))
        except (AttributeError, TypeError, re.error) as exc:
            raise SpecauditError(f"{path}: not a valid known-failures file ({type(exc).__name__}: {exc})") from None
    return made


def launch_features(engine: str, options: Mapping[str, object], directory: Path | None = None) -> set[str]:
    """The features a launch has, from its command's options (``{"kv-cache-dtype": "fp8", "enforce-eager": True}``:
    names without dashes, flags as True): the ``features:`` of the engine's known-failures file."""
    normal = {key.lstrip("-").replace("_", "-"): value for key, value in options.items()}
    return {feature.name for feature in load_features(engine, directory) if feature.holds(normal)}


def known_failures(engine: str, version: str | None, features: Iterable[str], method: str | None = None,
                   directory: Path | None = None) -> list[KnownFailure]:
    """The known failures of ``engine`` whose cell holds a launch of ``version`` with ``features`` and ``method``:
    what a scan of that launch warns of."""
    wanted = set(features)
    return [f for f in load_known_failures([engine], directory) if f.applies(version, wanted, method)]
