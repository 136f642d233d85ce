"""The smoke's preflight. The probe (remote_probe.py, run by the engine's own Python on the node) reports
the node: its Python, the engine, GPUs, the port, leftovers of earlier launches, the target's and drafter's
checkpoints. The engine's ``.py`` files and the drafter's headers are mirrored here, and the static scan reads
them for the target and drafter named on the node, before anything is launched.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Protocol

from ..core.cache import cache_dir, inside, slug, staged_tree
from ..core.data import parse_json
from ..core.engines import ENGINES
from ..core.errors import SpecauditError
from ..core.types import SmokeVerdict, Verdict
from ..launch.checkpoint import Checkpoint, check_config, read_checkpoint
from ..launch.command import LaunchCommand, strip_assignments
from ..launch.request import Launch, method_of
from ..launch.target import Target, load_model
from ..results.outcome import Preflight
from ..results.scan import ScanResult
from ..scan.audit import scan as run_scan
from ..tree.locate import EngineTree, locate_directory
from .remote import Transport, bash_command, quote_command, remote_script
from .session import SmokeOptions, Stop

_PROBE = remote_script("probe")


class Node(Protocol):
    """What the preflight needs of a launch's session (session.Session), or of a node of a fleet: the options, the
    way in, and a timeline to note events on."""

    @property
    def options(self) -> SmokeOptions: ...

    @property
    def remote(self) -> Transport: ...

    def note(self, phase: str, text: str, at: float | None = None) -> None: ...


class RemoteEngine:
    """The engine on the node as the probe sees it: the preflight of the node, and the scan of its own files."""

    def __init__(self, session: Node, command: LaunchCommand, port: int):
        self.session, self.command, self.port = session, command, port
        self.engine = command.engine
        self.host = session.options.host
        self.runs_dir = session.options.runs_dir  # expanded on the remote by the probe
        self.record: Preflight | None = None
        self.scan: ScanResult | None = None

    def preflight(self) -> None:
        """Probe the node, then scan its engine; stop BLOCKED on a problem of the node or a blocked scan."""
        info = self.probe()
        record = self.record
        assert record is not None
        if record.problems:
            raise Stop(SmokeVerdict.BLOCKED, "; ".join(record.problems))
        scan = self.scan = self.scan_engine(info)
        self.session.note("scan", f"{scan.verdict} ({len(scan.blocking)} blocking gate(s)) in {scan.seconds:.1f} s")
        if scan.verdict == Verdict.BLOCKED and not self.session.options.launch_anyway:
            first = scan.blocking[0]
            raise Stop(SmokeVerdict.BLOCKED, f"the static scan says BLOCKED: {first.title} ({first.location}); "
                                             "nothing launched (--launch-anyway to launch regardless)")

    def probe(self) -> dict:
        """The probe's report of the node (remote_probe.py info), kept as ``record``; nothing judged yet."""
        self.session.note("preflight", "remote Python, engine, GPUs, port, leftovers")
        spec = self.command.speculative
        paths = [[p, r] for p, r in ((self.command.model, self.command.options.get("revision")),
                                     (spec.get("model"), spec.get("revision"))) if p]
        profile = ENGINES[self.engine]
        request = {"package": profile.package, "distributions": list(profile.distributions), "port": self.port,
                   "runs_dir": self.runs_dir, "checkpoints": paths, "dependencies": list(profile.dependencies)}
        info = _probe_answer(self._probe("info", request), self.host)
        self.runs_dir = info["runs_dir"]
        record = self.record = preflight_of(info, self.port, self.engine)
        self.session.note("preflight", f"{record.python}; {record.engine} at {record.engine_root}")
        return info

    def _probe(self, command: str, request: dict) -> bytes:
        """remote_probe.py COMMAND, run by the Python of the launch command's program, with its environment."""
        program, env = strip_assignments(list(self.session.options.argv))
        source = resources.files("specaudit.smoke").joinpath("remote_probe.py").read_text()
        env_prefix = quote_command(["env", *env]) + " " if env else ""
        proc = self.session.remote.run(env_prefix + bash_command(_PROBE, program[0], command, json.dumps(request)),
                                       input=source, timeout=300, check=False)
        if proc.returncode != 0:
            lines = proc.stderr.decode(errors="replace").strip().splitlines()
            raise Stop(SmokeVerdict.BLOCKED, f"preflight failed on {self.host}: "
                                             f"{lines[-1] if lines else f'exit status {proc.returncode}'}")
        return proc.stdout

    def scan_engine(self, info: dict) -> ScanResult:
        """The static scan of the remote engine's own files, for the target and drafter named on the remote."""
        tree = replace(self._mirror_engine(info["engine"]), modules=frozenset(info.get("modules") or ()) or None)
        checkpoints = info["checkpoints"]
        target = self._target(checkpoints)
        draft = self.command.speculative.get("model")
        drafter = None
        if draft and checkpoints[draft].get("config") is not None:
            drafter = self._checkpoint(draft, checkpoints[draft])
        weights, problem = self._target_weights(checkpoints, draft)
        launch = Launch(target=target, method=method_of(self.command.speculative),
                        engine=self.engine, draft=draft, drafter=drafter, speculative=self.command.speculative,
                        options=self.command.options, target_weights=weights, target_weights_problem=problem,
                        env=self.command.env)
        # The platform branch the engine takes there: CUDA where nvidia-smi lists a GPU, else its CPU build (the
        # model runner, the attention backends and the gates differ between them). Other accelerators are not probed.
        platform = "cuda" if self.record is not None and self.record.gpus else "cpu"
        self.session.note("scan", f"platform {platform} (the node's GPUs as nvidia-smi lists them)")
        return run_scan(tree, launch, platform=platform)

    def _target_weights(self, checkpoints: dict, draft: str | None) -> tuple[Checkpoint | None, str]:
        """The target's safetensors headers as the node has them, for a speculative launch (as launch_of reads a local
        target's): an MTP launch drafts with the target's own layers, and a drafter's head is held against the
        target's where the engine replaces it. The probe sent them with the config; a target it could not read there
        (a Hub id the node has not cached) is judged without them, as the scan of a Hub id with a drafter is."""
        model = self.command.model
        if not model or not (self.command.speculative or draft):
            return None, ""
        checkpoint = checkpoints.get(model) or {}
        if checkpoint.get("config") is None:
            return None, ""
        try:
            return self._checkpoint(model, checkpoint), ""
        except SpecauditError as exc:
            return None, str(exc)

    def _checkpoint(self, path: str, probed: dict) -> Checkpoint:
        """A checkpoint of the node, read from what the probe sent of it (its config and safetensors headers)."""
        return replace(read_checkpoint(str(_mirror_checkpoint(path, probed))), path=f"{self.host}:{path}")

    def _target(self, checkpoints: dict) -> Target | None:
        """The target's config as the node has it; a Hub id the node has not cached, as the Hub has it."""
        model, revision = self.command.model, self.command.options.get("revision")
        if not model:
            return None
        target = None
        if checkpoints[model].get("error") and "hub" in checkpoints[model]:
            # A Hub id the node has not cached: the engine downloads it; its config is the Hub's, read from here.
            try:
                target = load_model(model, revision)
            except SpecauditError as exc:
                raise Stop(SmokeVerdict.BLOCKED, str(exc)) from None
        if checkpoints[model].get("config") is not None:
            hub = checkpoints[model].get("hub")
            where = f"{hub['snapshot']}/config.json, from the node's Hub cache" if hub else f"{model}/config.json"
            source = f"{self.host}:{where}"
            try:
                config = parse_json(checkpoints[model]["config"], source)
                if not isinstance(config, dict):
                    raise SpecauditError(f"{source}: expected a JSON object")
                check_config(config, source)
            except SpecauditError as exc:
                raise Stop(SmokeVerdict.BLOCKED, str(exc)) from None
            target = Target(name=f"{model}@{revision}" if revision else model, source=source, config=config)
        return target

    def _mirror_engine(self, engine: dict) -> EngineTree:
        """The remote engine's ``.py`` files, copied once per content (the probe's fingerprint)."""
        # The version is the node's METADATA's: one safe component, as every name built from input.
        base = cache_dir("remote", slug(self.host))
        dest = inside(base, base / slug(f"{self.engine}-{engine['version']}-{engine['fingerprint'][:16]}"))
        if not (dest / ".complete").exists():
            self.session.note("scan", "copying the remote engine's .py files (once per release)")
            profile = ENGINES[self.engine]
            data = self._probe("pack", {"package": profile.package, "distributions": list(profile.distributions)})
            with (staged_tree(dest, engine["package_dir"]) as staging,
                  tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive):
                archive.extractall(staging, filter="data")
        tree = locate_directory(dest, self.engine)
        return EngineTree(tree.engine, tree.version, tree.root, f"{self.host}:{engine['root']}")


def _mirror_checkpoint(path: str, checkpoint: dict) -> Path:
    """config.json and the safetensors files, as sparse files holding only headers and index tensors."""
    key = hashlib.sha256(json.dumps([path, checkpoint], sort_keys=True).encode()).hexdigest()[:16]
    dest = cache_dir("remote", "checkpoints", key)
    (dest / "config.json").write_text(checkpoint["config"], encoding="utf-8")
    for name, entry in checkpoint["files"].items():
        if Path(name).name != name:  # the probe lists a directory: a name with a folder in it is not the probe's
            raise SpecauditError(f"{path}: the node named a checkpoint file {name[:80]!r}, not a file name")
        if "text" in entry:
            (dest / name).write_text(entry["text"], encoding="utf-8")
            continue
        with open(dest / name, "wb") as fh:
            fh.write(base64.b64decode(entry["header"]))
            for start, data in entry["ranges"]:
                fh.seek(start)
                fh.write(base64.b64decode(data))
            fh.truncate(entry["size"])
    return dest


def _probe_answer(raw: bytes, host: str) -> dict:
    """The probe's answer: a JSON object with what the probe always reports. What else came back (a ``python3`` that
    prints a banner first, a wrapper that is not Python) stops the node's preflight in one line."""
    try:
        info = parse_json(raw, f"the probe's answer from {host}")
    except SpecauditError as exc:
        raise Stop(SmokeVerdict.BLOCKED, f"{exc}: is the launch command's Python a Python?") from None
    kinds: dict[str, type | tuple[type, ...]] = {
        "python": dict, "hostname": str, "engine": (dict, type(None)), "patches": (dict, type(None)), "checkpoints": dict,
        "leftovers": list, "runs_dir": str}
    wrong = [key for key, kind in kinds.items() if not isinstance(info, dict) or not isinstance(info.get(key), kind)]
    if wrong:
        raise Stop(SmokeVerdict.BLOCKED, f"the probe's answer from {host} is not the probe's "
                                         f"({', '.join(wrong)} missing or mistyped)")
    return info


def preflight_of(info: dict, port: int, engine_name: str) -> Preflight:
    """The probe's report, as the smoke report shows it, and the problems that stop the launch."""
    engine = info["engine"]
    problems = []
    if engine is None:
        problems.append(f"{engine_name} is not installed for {info['python']['executable']}")
    if info["port_in_use"]:
        problems.append(f"port {port} is already in use on {info['hostname']}")
    for leftover in info["leftovers"]:
        problems.append(f"an earlier launch still runs: process group {leftover['pgid']} ({leftover['run']}): "
                        f"stop it with kill -- -{leftover['pgid']}")
    for path, checkpoint in info["checkpoints"].items():
        # A hub id ("org/name") is the engine's to download; a path must be there.
        if path.startswith(("/", "~", ".")) and (checkpoint.get("error") or checkpoint.get("config") is None):
            problems.append(checkpoint.get("error") or f"{path}: no config.json on {info['hostname']}")
    gpus = info["gpus"] or {}
    record = (engine or {}).get("record") or {}
    return Preflight(
        hostname=info["hostname"], python=f"{info['python']['executable']} ({info['python']['version']})",
        engine=f"{engine_name} {engine['version']}" if engine else f"{engine_name}: not installed",
        engine_root=engine["root"] if engine else "",
        modified_files=record.get("modified", []) + [f"{m} (missing)" for m in record.get("missing", [])],
        gpus=_rows(gpus.get("gpus"), ("index", "uuid", "name", "memory_used_mib", "memory_total_mib", "memory_free_mib")),
        gpu_processes=_rows(gpus.get("processes"), ("gpu_uuid", "pid", "process_name", "used_memory_mib")),
        nvidia_smi=info["gpus"] is not None, port=port, port_in_use=bool(info["port_in_use"]),
        leftovers=info["leftovers"], problems=problems,
        models=[_model_line(path, checkpoint) for path, checkpoint in info["checkpoints"].items()],
    )


def _model_line(path: str, checkpoint: dict) -> str:
    """Where the node will load a model from, and whether a Hub id's weights are already there."""
    hub = checkpoint.get("hub")
    if hub is None:
        return checkpoint.get("error") or f"{path}: a directory on the node"
    if "snapshot" not in hub:
        return f"{path}: not in the node's Hub cache ({hub['cache']}): the engine downloads it at launch"
    weights = "weights cached" if hub["weights_cached"] else \
        "weights NOT cached: the engine downloads them at launch, inside the launch time"
    return f"{path}: the node's Hub cache, snapshot {hub['snapshot']}; {weights}"


def _rows(table, names: tuple[str, ...]) -> list[dict[str, str]]:
    return [dict(zip(names, row)) for row in table] if isinstance(table, list) else []
