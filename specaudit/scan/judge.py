"""What a gate kind or a drafter check may ask of the launch and the release: the kinds see them only through
``Judge``, so that judging depends on no stage's internals (scan/audit.py's LaunchJudge answers it)."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..core.types import EngineFunction
from ..launch.request import Launch
from ..methods.resolve import Resolution
from ..tree.locate import EngineTree
from .facts import ClassInfo, ModuleInfo


class TargetFacts(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def architectures(self) -> list[str]: ...
    @property
    def text_model_type(self) -> str: ...
    @property
    def config(self) -> dict[str, Any]: ...
    def config_value(self, path: str) -> tuple[bool, Any]: ...


class DrafterFacts(Protocol):
    @property
    def config(self) -> dict[str, Any]: ...


class ClassFacts(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def module(self) -> str: ...


class RegistryEntryFacts(Protocol):
    @property
    def architecture(self) -> str: ...
    @property
    def module(self) -> str: ...
    @property
    def class_name(self) -> str: ...
    @property
    def declared_in(self) -> str: ...


class ConformanceFacts(Protocol):
    """Whether a class has what a protocol (or a method list) asks: True, False, or None when it cannot be told."""

    @property
    def protocol(self) -> str: ...
    @property
    def conforms(self) -> bool | None: ...
    @property
    def reason(self) -> str: ...
    @property
    def provided_by(self) -> dict[str, str]: ...


class ReleaseCode(Protocol):
    """The release's code as the checks read it: its tree, its modules' files, their syntax trees."""

    @property
    def tree(self) -> EngineTree: ...
    @property
    def files(self) -> Mapping[str, str]:
        """Module name -> the file's path relative to the tree root."""
        ...

    def syntax(self, relpath: str) -> ast.Module:
        """A file's syntax tree; SyntaxProblem or OSError when it has none."""
        ...

    def module(self, name: str) -> ModuleInfo | None:
        """A module's indexed facts; None where the tree has no such module or it does not parse."""
        ...

    def note_read(self, relpath: str) -> None:
        """A check read this file: what is kept of the scan depends on its content too."""
        ...

    def source(self, relpath: str) -> bytes:
        """A file's bytes."""
        ...


class NameResolver(Protocol):
    """What a check asks of the scan's resolver (resolve.Resolver): a name as a module binds it, a class by module and
    name, a class's MRO, and the definition of a method an instance calls."""

    def resolve(self, module: ModuleInfo, dotted: str) -> Any: ...
    def find_class(self, module: str, name: str) -> ClassInfo | Any: ...
    def hierarchy(self, cls: ClassInfo) -> Any: ...
    def method_node(self, cls: ClassInfo, name: str) -> tuple[ClassInfo, ast.FunctionDef] | None: ...


class Judge(Protocol):
    """What the gate kinds and the drafter checks need to judge a launch: the launch itself (its method resolved),
    the release's code, and questions about the target class in the resolved tree."""

    @property
    def launch(self) -> Launch: ...
    @property
    def resolution(self) -> Resolution | None:
        """How the release's own code resolves the launch's method and rewrites its draft (None: not resolved, as
        for the landscape of a release or the presets a patch bundle is checked on)."""
        ...
    @property
    def release(self) -> ReleaseCode: ...
    @property
    def resolver(self) -> NameResolver:
        """Names of the release resolved as its modules bind them (classes, their MROs and methods)."""
        ...
    @property
    def part_builders(self) -> tuple[str, ...]:
        """The functions that build a part of a target as the class the registry maps their literal
        ``architectures=[...]`` to (the path file's target_parts builders)."""
        ...
    @property
    def runner(self) -> str | None:
        """The model runner the launch's traced path takes (None: the engine has one, or no path was traced)."""
        ...
    @property
    def method(self) -> str: ...
    @property
    def target(self) -> TargetFacts: ...
    @property
    def drafter(self) -> DrafterFacts | None: ...
    @property
    def registry_read(self) -> bool:
        """Whether the engine's model registry could be read at all."""
        ...

    def registered(self, architectures: Sequence[str]) -> RegistryEntryFacts | None: ...

    def target_class(self) -> ClassFacts | None: ...

    def target_class_problem(self) -> str: ...

    def target_conformance(self, protocol: str) -> ConformanceFacts | None:
        """Whether the target class satisfies a protocol of the engine's; None when the engine defines none by that
        name."""
        ...

    def target_has_method(self, method: str) -> ConformanceFacts: ...

    def lineage(self, module: str, class_name: str) -> list[str]:
        """The names of a class and its bases in MRO order; just the name when it cannot be resolved."""
        ...

    def mro(self, module: str, class_name: str) -> list[tuple[str, str]]:
        """(module, class name) of a class and each base of it in the tree, in MRO order; empty when the class is not
        in the tree."""
        ...

    def config_class_name(self, owner: str) -> str: ...

    def argument_values(self, defaults_files: Sequence[str]) -> dict[str, Any]: ...

    def token_attributes(self) -> list[str]: ...

    def engine_functions(self, names: Sequence[str], files: Sequence[str] = ()) -> list[EngineFunction]:
        """The release's functions (module functions or methods) of these names: those the launch's traced path
        follows or calls first, else those in the files the globs name."""
        ...

    def target_method(self, name: str) -> EngineFunction | None:
        """The target class's method of that name, its own or the nearest base's (None: not found)."""
        ...
