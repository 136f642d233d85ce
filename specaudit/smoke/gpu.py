"""What a GPU launch's log and ``nvidia-smi`` say, beyond the crash: the model runner and attention backend the engine
picked, CUDA-graph capture as a phase of its start-up, and the GPU's memory and processes.

Every pattern is a line the engine really printed on the H200 (validation/gpu/logs/: vLLM 0.26.0, SGLang 0.5.17):
vLLM's worker says ``Using V2 Model Runner`` (vllm/v1/worker/gpu_worker.py, init_device) or, falling back,
``Model Runner V2 does not yet support ...; using the V1 model runner instead.`` (vllm/config/vllm.py,
VllmConfig.use_v2_model_runner), and says nothing for a launch that takes V1 by default (a MoE target); the attention
selector says ``Using FLASH_ATTN attention backend out of potential backends: [...]``
(vllm/v1/attention/selector.py); the CUDA-graph capture draws ``Capturing CUDA graphs (FULL): ...`` progress bars
and ends ``Graph capturing finished in 2 secs, took 0.25 GiB`` (vllm/v1/worker/gpu_model_runner.py, capture_model).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_V2 = re.compile(r"Using V2 Model Runner")
_V1_FALLBACK = re.compile(r"Model Runner V2 (?:does not yet support (?P<what>.*?)|requires Triton); "
                          r"using the V1 model runner instead")
_V1_FRAME = re.compile(r"vllm/v1/worker/gpu_model_runner\.py")
_V2_FRAME = re.compile(r"vllm/v1/worker/gpu/")
_WORKER_RAN = re.compile(r"Starting to load model|Model loading took")
_BACKEND = re.compile(r"Using (?P<backend>[A-Z][A-Z0-9_]*) attention backend(?: out of potential backends: "
                      r"\[(?P<options>[^\]]*)\])?")
_SGLANG_BACKEND = re.compile(r"attention_backend='(?P<backend>[a-z0-9_]+)'")
_CAPTURE = re.compile(r"Capturing CUDA graphs \((?P<mode>[A-Z_]+)\)")
_CAPTURED = re.compile(r"Graph capturing finished in (?P<secs>[0-9.]+) secs?, took (?P<gib>[0-9.]+) GiB")
# SGLang 0.5.17 (the H200's llama--agree--compiled.log): "Capture target prefill CUDA graph begin. backend=breakable,
# ..." then "Capture target prefill CUDA graph end. elapsed=71.48 s, mem usage=0.18 GB, avail mem=138.80 GB.", and
# likewise target verify, draft prefill, draft decode (sglang/srt/model_executor/cuda_graph_runner.py)
_SGLANG_CAPTURE = re.compile(r"Capture (?P<graph>[a-z ]+?) CUDA graph (?P<what>begin|end)\."
                             r"(?: elapsed=(?P<secs>[0-9.]+) s, mem usage=(?P<gib>[0-9.]+) GB)?")
_SGLANG_NO_GRAPH = re.compile(r"disable_cuda_graph=True")


@dataclass(frozen=True)
class RunnerSeen:
    runner: str  # "v1", "v2", or "" when the log does not tell
    why: str  # the line or frame that told


def runner_in_log(text: str) -> str:
    return runner_seen(text).runner


def runner_seen(text: str) -> RunnerSeen:
    """The model runner a vLLM log shows: its own line, its fallback warning, the runner's frames in a traceback, or
    a worker that loaded the model without the V2 line (V1 says nothing)."""
    text = _ANSI.sub("", text)
    if found := _V2.search(text):
        return RunnerSeen("v2", found.group(0))
    if found := _V1_FALLBACK.search(text):
        return RunnerSeen("v1", found.group(0))
    if _V2_FRAME.search(text):
        return RunnerSeen("v2", "a traceback through vllm/v1/worker/gpu/ (Model Runner V2)")
    if _V1_FRAME.search(text):
        return RunnerSeen("v1", "a traceback through vllm/v1/worker/gpu_model_runner.py (Model Runner V1)")
    if _WORKER_RAN.search(text):
        return RunnerSeen("v1", "the worker loaded the model without saying 'Using V2 Model Runner'")
    return RunnerSeen("", "")


@dataclass(frozen=True)
class GraphCapture:
    """CUDA-graph capture: a phase of start-up between the KV cache and serving (absent with --enforce-eager)."""

    modes: tuple[str, ...]  # vLLM: FULL, PIECEWISE...
    seconds: float | None
    gib: float | None


@dataclass(frozen=True)
class GpuLogFacts:
    runner: RunnerSeen
    attention_backends: tuple[str, ...] = ()  # in the order the log names them (the drafter's may differ)
    capture: GraphCapture | None = None
    cuda_graphs_disabled: bool = False
    lines: dict[str, int] = field(default_factory=dict)  # fact -> the first line (1-based) that showed it


def log_facts(text: str) -> GpuLogFacts:
    """The GPU facts of a vLLM or SGLang log."""
    clean = _ANSI.sub("", text)
    lines: dict[str, int] = {}
    backends: list[str] = []
    modes: list[str] = []
    seconds = gib = None
    for number, line in enumerate(clean.splitlines(), 1):
        for found in _BACKEND.finditer(line):
            if found["backend"] not in backends:
                backends.append(found["backend"])
                lines.setdefault("attention_backend", number)
        sglang = _SGLANG_BACKEND.search(line)
        if sglang and sglang["backend"] not in backends:
            backends.append(sglang["backend"])
            lines.setdefault("attention_backend", number)
        for mode in _CAPTURE.finditer(line):
            if mode["mode"] not in modes:
                modes.append(mode["mode"])
            lines.setdefault("cuda_graph_capture", number)
        captured = _CAPTURED.search(line)
        if captured:
            seconds, gib = float(captured["secs"]), float(captured["gib"])
            lines.setdefault("cuda_graph_captured", number)
        ended = _SGLANG_CAPTURE.search(line)
        if ended and ended["what"] == "begin" and ended["graph"] not in modes:
            modes.append(ended["graph"])
            lines.setdefault("cuda_graph_capture", number)
        elif ended and ended["what"] == "end" and ended["secs"]:
            seconds = (seconds or 0.0) + float(ended["secs"])
            gib = (gib or 0.0) + float(ended["gib"])
            lines["cuda_graph_captured"] = number
    capture = GraphCapture(tuple(modes), seconds, gib) if modes or seconds is not None else None
    return GpuLogFacts(runner_seen(clean), tuple(backends), capture, bool(_SGLANG_NO_GRAPH.search(clean)), lines)


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str
    used_mib: int


@dataclass(frozen=True)
class GpuState:
    """``nvidia-smi``: each GPU's name and memory, and the processes holding memory on it."""

    gpus: tuple[tuple[str, int, int], ...]  # (name, used MiB, total MiB)
    processes: tuple[GpuProcess, ...]
    driver: str = ""
    cuda: str = ""


_SMI_HEADER = re.compile(r"Driver Version:\s*(?P<driver>[0-9.]+)\s+CUDA Version:\s*(?P<cuda>[0-9.]+)")
_SMI_GPU = re.compile(r"^\|\s+\d+\s+(?P<name>NVIDIA[^|]*?)\s{2,}.*$")
_SMI_MEMORY = re.compile(r"(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB")
_SMI_PROCESS = re.compile(r"^\|\s+\d+\s+\S+\s+\S+\s+(?P<pid>\d+)\s+\S+\s+(?P<name>\S.*?)\s+(?P<mib>\d+)MiB\s*\|")


def parse_nvidia_smi(text: str) -> GpuState:
    """The plain ``nvidia-smi`` table, optionally preceded by ``--query-compute-apps=pid,process_name,used_memory
    --format=csv`` output (the two as grid.py and smoke's probe take them)."""
    processes: dict[int, GpuProcess] = {}
    gpus: list[tuple[str, int, int]] = []
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("pid, process_name")), None)
    if header is not None:
        for row in csv.reader(io.StringIO("\n".join(lines[header + 1:]))):
            if len(row) == 3 and row[0].strip().isdigit() and row[2].strip().endswith("MiB"):
                pid = int(row[0])
                processes[pid] = GpuProcess(pid, row[1].strip(), int(row[2].strip().split()[0]))
    found = _SMI_HEADER.search(text)
    name = None
    for line in lines:
        if m := _SMI_GPU.match(line):
            name = m["name"].strip()
        elif name and (m := _SMI_MEMORY.search(line)):
            gpus.append((name, int(m["used"]), int(m["total"])))
            name = None
        elif m := _SMI_PROCESS.match(line):
            pid = int(m["pid"])
            processes.setdefault(pid, GpuProcess(pid, m["name"], int(m["mib"])))
    return GpuState(tuple(gpus), tuple(processes.values()), found["driver"] if found else "",
                    found["cuda"] if found else "")


class GpuLines:
    """The GPU facts of a live log, line by line, each once: (timeline phase, text) to note as it arrives. The
    CUDA-graph capture is a phase of its own ("cuda graphs": its start, then its end with time and memory)."""

    def __init__(self) -> None:
        self.runner = ""
        self.backends: list[str] = []
        self.capturing = False
        self.captured = False

    def feed(self, line: str) -> list[tuple[str, str]]:
        line = _ANSI.sub("", line)
        notes = []
        if not self.runner:
            if _V2.search(line):
                self.runner = "v2"
                notes.append(("gpu", "Model Runner V2 (the log says 'Using V2 Model Runner')"))
            elif found := _V1_FALLBACK.search(line):
                self.runner = "v1"
                notes.append(("gpu", f"Model Runner V1: {found.group(0)}"))
        for found in _BACKEND.finditer(line):
            if found["backend"] not in self.backends:
                self.backends.append(found["backend"])
                notes.append(("gpu", f"attention backend {found['backend']}"
                              + (f" (of {found['options']})" if found["options"] else "")))
        if not self.capturing and (mode := _CAPTURE.search(line)):
            self.capturing = True
            notes.append(("cuda graphs", f"capturing ({mode['mode']})"))
        if not self.captured and (done := _CAPTURED.search(line)):
            self.captured = True
            notes.append(("cuda graphs", f"captured in {done['secs']} s, {done['gib']} GiB"))
        ended = _SGLANG_CAPTURE.search(line)  # SGLang captures several graphs, each a begin and an end
        if ended and ended["what"] == "begin":
            self.capturing = True
            notes.append(("cuda graphs", f"capturing {ended['graph']}"))
        elif ended and ended["what"] == "end":
            notes.append(("cuda graphs", f"captured {ended['graph']}"
                          + (f" in {ended['secs']} s, {ended['gib']} GB" if ended["secs"] else "")))
        return notes
