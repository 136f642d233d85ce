"""The engine's model registry, architecture name -> module and class, read from source.

vLLM keeps ``"Arch": ("module", "Class")`` dicts in ``model_executor/models/registry.py`` and merges them
with ``**`` spreads; which dicts exist and how they merge changes between releases, so every
module-level dict of that shape is read, and each architecture remembers the dict that declares it.

SGLang imports every plain module of ``srt/models`` (not its subpackages) and registers each class its
``EntryClass`` names (one class or a list), under the class's ``__name__``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .facts import ClassInfo, LiteralRef, Merge
from .resolve import Resolver


@dataclass(frozen=True)
class RegistryEntry:
    architecture: str
    module: str
    class_name: str
    declared_in: str  # the registry dict that names it, e.g. _MULTIMODAL_MODELS
    line: int  # of that dict


@dataclass(frozen=True)
class Registry:
    file: str
    entries: dict[str, RegistryEntry]

    def lookup(self, architectures: list[str]) -> RegistryEntry | None:
        """The entry the engine would take: the first registered architecture of the config's list."""
        for arch in architectures:
            if arch in self.entries:
                return self.entries[arch]
        return None


def read_registry(resolver: Resolver) -> Registry | None:
    if resolver.index.tree.engine.registry_style == "entry_class":
        return _entry_class_registry(resolver)
    return _dict_registry(resolver)


def _entry_class_registry(resolver: Resolver) -> Registry | None:
    index = resolver.index
    package = index.tree.engine.models_package
    entries: dict[str, RegistryEntry] = {}
    for name, relpath in sorted(index.files.items()):
        # pkgutil.iter_modules over the package, `if not ispkg`: its plain modules only.
        if name.rpartition(".")[0] != package or relpath.endswith("__init__.py"):
            continue
        module = index.module(name)
        if module is None:
            continue
        declared = module.name_lists.get("EntryClass") or (
            (module.aliases["EntryClass"],) if "EntryClass" in module.aliases else ())
        for dotted in declared:
            found = resolver.resolve(module, dotted)
            if isinstance(found, ClassInfo):
                entries.setdefault(found.name, RegistryEntry(found.name, found.module, found.name,
                                                             f"{module.name}.EntryClass",
                                                             module.literal_lines.get("EntryClass", 0)))
    registry_module = index.files.get(index.tree.engine.registry_module)
    return Registry(file=registry_module or package.replace(".", "/"), entries=entries) if entries else None


def _dict_registry(resolver: Resolver) -> Registry | None:
    profile = resolver.index.tree.engine
    module = resolver.index.module(profile.registry_module)
    if module is None:
        return None
    entries: dict[str, RegistryEntry] = {}
    for name, value in module.literals.items():
        # Leaf dicts declare; merged dicts (**spreads) only repeat them.
        if isinstance(value, Merge) and any(isinstance(p, LiteralRef) for p in value.parts):
            continue
        mapping = resolver.literal(module, name)
        if not isinstance(mapping, dict) or not mapping:
            continue
        if not all(_is_entry(v) for v in mapping.values()):
            continue
        for arch, (relname, class_name) in mapping.items():
            entries.setdefault(arch, RegistryEntry(
                architecture=arch,
                module=_module_name(relname, profile.package, profile.models_package),
                class_name=class_name,
                declared_in=name,
                line=module.literal_lines.get(name, 0),
            ))
    return Registry(file=module.path, entries=entries)


def _is_entry(value: object) -> bool:
    return isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value)


def _module_name(relname: str, package: str, models_package: str) -> str:
    # Later releases also register absolute module names (vllm.models.kimi_k3).
    return relname if relname.startswith(package + ".") else f"{models_package}.{relname}"
