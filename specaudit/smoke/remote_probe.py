"""Run on the GPU node by the engine's own Python, fed on stdin: ``python - info|pack JSON``. Standard library
only, and it never imports the engine: the engine is found with ``find_spec`` and read as files.

info  the Python, the engine (version, location, ``.py`` files that differ from the wheel's RECORD), GPUs and
      the processes holding them, whether the port is taken, leftovers of earlier launches, and the target's
      and drafter's config.json and safetensors headers (small integer tensors included: d2t, t2d), from a
      directory or, for a Hub id, from the node's Hub cache (where the engine will load it from).
pack  the engine's ``.py`` files and metadata as a gzipped tar on stdout, for the static scan.
"""

import base64
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import os
import pkgutil
import platform
import re
import shutil
import socket
import struct
import subprocess
import sys
import tarfile
from stat import S_ISLNK

SMALL_TENSOR_BYTES = 4 << 20
INTEGER_DTYPES = {"I64", "I32", "I16", "I8", "U8", "U16", "U32", "U64", "BOOL"}


def engine_files(package_dir):
    for folder, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def requirement_name(line):
    """The distribution a Requires-Dist line names, normalized (PEP 503)."""
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    return re.sub(r"[-_.]+", "-", name.group(1)).lower() if name else ""


def dependencies(dist, names):
    """Each of ``names`` that the engine's METADATA requires, or that one of the others requires (torch requires
    triton and its CUDA runtime): the Requires-Dist lines that name it, by whom, and the version installed beside the
    engine (None: not installed). Nothing is imported."""
    found = {}
    for by in [dist, *(_distribution(n) for n in names)]:
        for line in (by.requires or []) if by is not None else []:
            name = requirement_name(line)
            if name in names:
                found.setdefault(name, {"requires": [], "installed": None})["requires"].append(
                    {"by": by.metadata["Name"], "line": line})
    for name in names:
        installed = _distribution(name)
        if installed is not None:
            found.setdefault(name, {"requires": [], "installed": None})["installed"] = installed.version
    return found


def _distribution(name):
    try:
        return importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def markers():
    """The environment a requirement's markers are evaluated in (PEP 508), as packaging's default_environment."""
    implementation = sys.implementation
    version = ".".join(str(part) for part in implementation.version[:3])
    return {"implementation_name": implementation.name, "implementation_version": version, "os_name": os.name,
            "platform_machine": platform.machine(), "platform_release": platform.release(),
            "platform_system": platform.system(), "platform_version": platform.version(),
            "python_full_version": platform.python_version(), "platform_python_implementation":
            platform.python_implementation(), "python_version": ".".join(platform.python_version_tuple()[:2]),
            "sys_platform": sys.platform}


def find_engine(package, distributions, names=()):
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    package_dir = os.path.realpath(list(spec.submodule_search_locations)[0])
    dist = None
    for name in distributions:
        try:
            dist = importlib.metadata.distribution(name)
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    fingerprint, content, digests = hashlib.sha256(), hashlib.sha256(), {}
    for path in engine_files(package_dir):
        # Keyed by real path. os.walk below a real path descends no symlink: only the file itself may be one.
        stat, real = os.lstat(path), path
        if S_ISLNK(stat.st_mode):
            stat, real = os.stat(path), os.path.realpath(path)
        relpath = os.path.relpath(path, package_dir)
        fingerprint.update(f"{relpath}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
        with open(path, "rb") as fh:
            digests[real] = digest = hashlib.sha256(fh.read()).digest()
        content.update(f"{relpath}\0{digest.hex()}\n".encode())
    info = {"package_dir": package_dir, "root": os.path.dirname(package_dir), "version": None,
            "distribution": None, "dist_info": None, "fingerprint": fingerprint.hexdigest(),
            "record": record_check(dist, package, digests) if dist else None}
    if dist is not None:
        info.update(version=dist.version, distribution=dist.metadata["Name"],
                    dist_info=str(getattr(dist, "_path", "")) or None, dependencies=dependencies(dist, names))
        content.update(f"{dist.metadata['Name']}\0{dist.version}\n".encode())
    info["content"] = content.hexdigest()  # the .py files' bytes and the release: equal on two nodes, one scan
    return info


def record_check(dist, package, digests=None):
    """The engine's ``.py`` files whose sha256 differs from the wheel's RECORD (a local patch), or are missing.
    ``digests``: the sha256 of files already read, by real path."""
    modified, missing, checked, real_dirs, digests = [], [], 0, {}, digests or {}
    for entry in dist.files or []:
        if not entry.hash or entry.hash.mode != "sha256" or not str(entry).endswith(".py"):
            continue
        if not str(entry).startswith(package + "/"):
            continue
        path = entry.locate()
        checked += 1
        # The real path of each directory once (a few hundred), not of each of a release's thousands of files.
        folder, name = os.path.split(str(path))
        real = os.path.join(real_dirs.setdefault(folder, os.path.realpath(folder)), name)
        raw = digests[real] if real in digests else digests.get(os.path.realpath(real))  # a symlink: its target's
        try:
            if raw is None:
                with open(path, "rb") as fh:
                    raw = hashlib.sha256(fh.read()).digest()
            digest = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        except FileNotFoundError:
            missing.append(str(entry))
            continue
        if digest != entry.hash.value:
            modified.append(str(entry))
    return {"checked": checked, "modified": modified, "missing": missing}


def gpus():
    if shutil.which("nvidia-smi") is None:
        return None
    def query(what, fields):
        out = subprocess.run(["nvidia-smi", f"--query-{what}={fields}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            return {"error": (out.stderr or out.stdout).strip()}
        return [[cell.strip() for cell in line.split(",")] for line in out.stdout.splitlines() if line.strip()]
    return {"gpus": query("gpu", "index,uuid,name,memory.used,memory.total,memory.free"),
            "processes": query("compute-apps", "gpu_uuid,pid,process_name,used_memory")}


def port_in_use(port):
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.settimeout(1.0)
                if sock.connect_ex((address, port)) == 0:
                    return True
        except OSError:
            continue
    return False


def group_alive(pgid):
    """Whether the process group has a process that is not a zombie (zombies hold no memory and no GPU)."""
    if not os.path.isdir("/proc"):
        try:
            os.killpg(pgid, 0)
            return True
        except OSError:
            return False
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        state, _, group = stat[stat.rindex(")") + 2:].split()[:3]
        if state != "Z" and int(group) == pgid:
            return True
    return False


def leftovers(runs_dir):
    """Earlier launches whose process group still lives."""
    found = []
    if not os.path.isdir(runs_dir):
        return found
    for run in sorted(os.listdir(runs_dir)):
        folder = os.path.join(runs_dir, run)
        try:
            with open(os.path.join(folder, "pid")) as fh:
                pgid = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        if not group_alive(pgid):
            continue
        command = ""
        try:
            with open(os.path.join(folder, "command")) as fh:
                command = fh.read().strip()
        except OSError:
            pass
        found.append({"run": folder, "pgid": pgid, "command": command})
    return found


def hub_cache():
    """The Hub cache as huggingface_hub finds it: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.path.expanduser(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return os.path.join(os.path.expanduser(home), "hub")


def hub_snapshot(repo, revision):
    """The snapshot of ``org/name`` at ``revision`` (a branch or tag ref, or a commit) in the node's Hub cache, and
    whether its weights are all there; None when the cache does not have it."""
    folder = os.path.join(hub_cache(), "models--" + repo.replace("/", "--"))
    ref = os.path.join(folder, "refs", revision or "main")
    commit = revision
    if os.path.isfile(ref):
        with open(ref, encoding="utf-8") as fh:
            commit = fh.read().strip()
    snapshot = os.path.join(folder, "snapshots", commit or "")
    if not commit or not os.path.isfile(os.path.join(snapshot, "config.json")):
        return None
    index = os.path.join(snapshot, "model.safetensors.index.json")
    try:
        with open(index, encoding="utf-8") as fh:
            shards = set(json.load(fh)["weight_map"].values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        shards = {n for n in os.listdir(snapshot) if n.endswith(".safetensors")} or {"model.safetensors"}
    cached = all(os.path.isfile(os.path.join(snapshot, shard)) for shard in shards)
    return {"snapshot": snapshot, "cache": hub_cache(), "weights_cached": cached}


def checkpoint(path, revision=None):
    """config.json and, per safetensors file, its size, header and the bytes of its small integer tensors; a Hub id
    is read in the node's Hub cache."""
    expanded = os.path.expanduser(path)
    hub = None
    if not os.path.isdir(expanded) and path.count("/") == 1 and not path.startswith((".", "~")):
        hub = hub_snapshot(path, revision)
        if hub is None:
            return {"error": f"{path}: not in the Hub cache of the node ({hub_cache()})", "hub": {"cache": hub_cache()}}
        expanded = hub["snapshot"]
    if not os.path.isdir(expanded):
        return {"error": f"{path}: no such directory on the remote"}
    result = {"config": None, "files": {}, "hub": hub}
    path = expanded
    config = os.path.join(path, "config.json")
    if os.path.isfile(config):
        with open(config, encoding="utf-8", errors="replace") as fh:
            result["config"] = fh.read()
    for name in sorted(os.listdir(path)):
        if not (name.endswith(".safetensors") or name == "model.safetensors.index.json"):
            continue
        file = os.path.join(path, name)
        if name.endswith(".json"):
            with open(file, encoding="utf-8", errors="replace") as fh:
                result["files"][name] = {"text": fh.read()}
            continue
        size = os.path.getsize(file)
        with open(file, "rb") as fh:
            head = fh.read(8)
            length = struct.unpack("<Q", head)[0] if len(head) == 8 else 0
            header = head + fh.read(min(length, 100_000_000))
            ranges = []
            try:
                entries = json.loads(header[8:])
                for entry in entries.values():
                    if not isinstance(entry, dict) or entry.get("dtype") not in INTEGER_DTYPES:
                        continue
                    begin, end = entry["data_offsets"]
                    if end - begin <= SMALL_TENSOR_BYTES:
                        fh.seek(8 + length + begin)
                        ranges.append([8 + length + begin, base64.b64encode(fh.read(end - begin)).decode()])
            except (ValueError, KeyError, TypeError, AttributeError):
                pass  # the checks on this side name what is wrong with it
        result["files"][name] = {"size": size, "header": base64.b64encode(header).decode(), "ranges": ranges}
    return result


def specaudit_cache():
    """The node's specaudit cache, as specaudit finds it there (core/cache.py): SPECAUDIT_CACHE, else
    XDG_CACHE_HOME/specaudit, else ~/.cache/specaudit."""
    if os.environ.get("SPECAUDIT_CACHE"):
        return os.path.expanduser(os.environ["SPECAUDIT_CACHE"])
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "specaudit")


def patch_state(engine, package):
    """The patch state ``specaudit patch`` keeps for this tree on the node (tree/provenance.py's shadow_dir: keyed by
    the package directory's device and inode, or by the tree's path before), with the sha256 of each file a bundle
    changed as it is now; None when no bundle was ever applied here."""
    if engine is None:
        return None
    st = os.stat(engine["package_dir"])
    keys = (hashlib.sha1(f"{st.st_dev}:{st.st_ino}".encode()).hexdigest()[:12],
            hashlib.sha1(os.path.realpath(engine["root"]).encode()).hexdigest()[:12])
    patches = os.path.join(specaudit_cache(), "patches")
    try:
        names = sorted(os.listdir(patches))
    except OSError:
        return None
    for key in keys:
        for name in names:
            if not name.endswith("-" + key) or not name.startswith(package + "-"):
                continue
            folder = os.path.join(patches, name)
            try:
                with open(os.path.join(folder, "state.json"), encoding="utf-8") as fh:
                    state = json.load(fh)
            except (OSError, ValueError) as exc:
                return {"dir": folder, "error": str(exc)}
            current = {}
            for rel in (state.get("files") or {}) if isinstance(state, dict) else {}:
                try:
                    with open(os.path.join(engine["root"], rel), "rb") as fh:
                        current[rel] = hashlib.sha256(fh.read()).hexdigest()
                except OSError:
                    current[rel] = None
            return {"dir": folder, "state": state, "current": current,
                    "interrupted": os.path.exists(os.path.join(folder, "journal.json"))}
    return None


def info(request):
    engine = find_engine(request["package"], request["distributions"], request.get("dependencies", ()))
    return {
        "python": {"executable": sys.executable, "version": platform.python_version(), "markers": markers()},
        # What the engine's environment can import at the top level (an optional package the engine checks for, such
        # as suffix decoding's arctic_inference): names only, nothing imported.
        "modules": sorted({m.name for m in pkgutil.iter_modules()}),
        "hostname": socket.gethostname(),
        "engine": engine,
        "patches": patch_state(engine, request["package"]),
        "gpus": gpus(),
        "port_in_use": port_in_use(request["port"]) if request.get("port") else None,
        "runs_dir": os.path.expanduser(request["runs_dir"]),
        "leftovers": leftovers(os.path.expanduser(request["runs_dir"])),
        "checkpoints": {path: checkpoint(path, revision) for path, revision in request.get("checkpoints", [])},
    }


def pack(request):
    engine = find_engine(request["package"], request["distributions"])
    if engine is None:
        sys.exit(f"{request['package']} is not installed for {sys.executable}")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for path in engine_files(engine["package_dir"]):
            tar.add(path, arcname=os.path.relpath(path, engine["root"]), recursive=False)
        if engine["dist_info"] and os.path.isdir(engine["dist_info"]):
            for name in ("METADATA", "RECORD"):
                file = os.path.join(engine["dist_info"], name)
                if os.path.isfile(file):
                    tar.add(file, arcname=os.path.join(os.path.basename(engine["dist_info"]), name))
    sys.stdout.buffer.write(buffer.getvalue())


if __name__ == "__main__":
    command, request = sys.argv[1], json.loads(sys.argv[2])
    if command == "pack":
        pack(request)
    else:
        json.dump(info(request), sys.stdout)
