"""Reading a checkpoint without loading it: config.json and the headers of its safetensors files.

A safetensors file starts with an 8-byte little-endian header length N and N bytes of JSON naming every
tensor's dtype, shape and [begin, end) byte range in the data that follows. Only that header is read
(one seek, one read), whatever the size of the weights; tensor values are read by offset, and only for
the small index tensors (d2t, t2d) a check asks for. No torch, no safetensors library.
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..core.errors import SpecauditError

ITEM_SIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "U16": 2, "I16": 2, "F16": 2, "BF16": 2,
    "U32": 4, "I32": 4, "F32": 4,
    "U64": 8, "I64": 8, "F64": 8,
}
_INT_FORMATS = {"I64": "q", "I32": "i", "I16": "h", "I8": "b", "U8": "B", "BOOL": "?", "U16": "H", "U32": "I",
                "U64": "Q"}
MAX_HEADER_BYTES = 100_000_000  # the limit the safetensors format itself sets
INDEX_FILE = "model.safetensors.index.json"
# The JSON of a checkpoint is read only to this size: configs are kilobytes, a shard index of thousands of
# tensors a few megabytes; past it, a file is not what it says it is.
MAX_JSON_BYTES = 64_000_000


def read_config(path: str) -> dict[str, Any]:
    """A checkpoint's config.json, with one clear error for each way it can be wrong."""
    directory = Path(path).expanduser()
    config_file = directory / "config.json" if directory.is_dir() or not directory.suffix else directory
    if not config_file.is_file():
        raise SpecauditError(f"{config_file}: no config.json (is {path} a model checkpoint directory?)")
    size = config_file.stat().st_size
    if size > MAX_JSON_BYTES:
        raise SpecauditError(f"{config_file}: {size / 1e6:.0f} MB, larger than any model config: not read")
    try:
        data = json.loads(config_file.read_text(encoding="utf-8"))
    except ValueError as exc:  # not UTF-8, not JSON, or an integer past the 4,300-digit limit
        raise SpecauditError(f"{config_file}: malformed JSON ({exc})") from None
    except RecursionError:
        raise SpecauditError(f"{config_file}: JSON nested too deeply to be a model config") from None
    if not isinstance(data, dict):
        raise SpecauditError(f"{config_file}: expected a JSON object, got {type(data).__name__}")
    for config in (data, data.get("text_config")):
        architectures = config.get("architectures") if isinstance(config, dict) else None
        if architectures is not None and not (isinstance(architectures, list)
                                              and all(isinstance(a, str) for a in architectures)):
            raise SpecauditError(f"{config_file}: \"architectures\" must be a list of class names, "
                                 f"not {json.dumps(architectures)[:60]}")
    return data


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str  # path of the safetensors file that holds it
    start: int  # absolute byte offsets of its data in that file
    end: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def describe(self) -> str:
        return f"{self.name}: {self.dtype} {list(self.shape)}"


class ByteSource(Protocol):
    """Where a safetensors file's bytes are read from: a local file, or a file on the Hub read by ranges."""

    @property
    def name(self) -> str: ...  # what messages call it: a path or a URL (read-only: a property satisfies it)

    def size(self) -> int: ...

    def read(self, start: int, length: int) -> bytes: ...


@dataclass(frozen=True)
class LocalFile:
    path: Path

    @property
    def name(self) -> str:
        return str(self.path)

    def size(self) -> int:
        return os.path.getsize(self.path)

    def read(self, start: int, length: int) -> bytes:
        with open(self.path, "rb") as fh:
            fh.seek(start)
            return fh.read(length)


@dataclass(frozen=True)
class Checkpoint:
    path: str
    config: dict[str, Any]
    tensors: dict[str, TensorInfo]
    sources: dict[str, ByteSource] = field(default_factory=dict, compare=False)  # file -> its bytes, where not local

    def tensor(self, *names: str) -> TensorInfo | None:
        """The first tensor found under any of the names, with or without a leading ``model.``."""
        for name in names:
            for candidate in (name, f"model.{name}"):
                if candidate in self.tensors:
                    return self.tensors[candidate]
        return None

    def integers(self, tensor: TensorInfo) -> list[int]:
        """An integer or bool tensor's values, read from its byte range only."""
        code = _INT_FORMATS.get(tensor.dtype)
        if code is None:
            raise SpecauditError(f"{tensor.file}: {tensor.name} is {tensor.dtype}, not an integer tensor")
        source = self.sources.get(tensor.file) or LocalFile(Path(tensor.file))
        data = source.read(tensor.start, tensor.end - tensor.start)
        if len(data) != tensor.end - tensor.start:
            raise SpecauditError(f"{tensor.file}: truncated: {tensor.name}'s data ends past the end of the file")
        return list(struct.unpack(f"<{tensor.numel}{code}", data))


def read_checkpoint(path: str) -> Checkpoint:
    directory = Path(path).expanduser()
    if directory.exists() and not directory.is_dir():
        raise SpecauditError(f"{path}: a file; give the drafter's checkpoint directory (with its config.json)")
    config = read_config(str(directory))
    files = _weight_files(directory)
    tensors: dict[str, TensorInfo] = {}
    for file in files:
        tensors.update(read_header(LocalFile(file)))
    return Checkpoint(str(directory), config, tensors)


def _weight_files(directory: Path) -> list[Path]:
    index = directory / INDEX_FILE
    if index.is_file():
        if index.stat().st_size > MAX_JSON_BYTES:
            raise SpecauditError(f"{index}: {index.stat().st_size / 1e6:.0f} MB, larger than any shard index: not read")
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (ValueError, KeyError, TypeError):  # ValueError: not JSON (or UTF-8), or an integer past the limit
            raise SpecauditError(f"{index}: malformed index (expected a JSON object with a weight_map)") from None
        if not isinstance(weight_map, dict) or not all(isinstance(n, str) for n in weight_map.values()):
            raise SpecauditError(f"{index}: malformed index (weight_map must map tensor names to shard file names)")
        files = sorted({directory / name for name in weight_map.values()})
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise SpecauditError(f"{index}: names shards that are missing: {', '.join(missing)}")
        return files
    files = sorted(p for p in directory.glob("*.safetensors") if p.is_file())
    if not files:
        others = sorted(p.name for p in directory.glob("*.bin")) + sorted(p.name for p in directory.glob("*.pt"))
        also = f" (found {', '.join(others)}: only safetensors headers are read)" if others else ""
        raise SpecauditError(f"{directory}: no *.safetensors weights{also}")
    return files


def read_header(source: ByteSource) -> dict[str, TensorInfo]:
    """The tensors a safetensors file declares, checked against the file's real size."""
    file, size = source.name, source.size()
    head = source.read(0, 8)
    if len(head) < 8:
        raise SpecauditError(f"{file}: truncated safetensors file ({size} bytes, no header)")
    (length,) = struct.unpack("<Q", head)
    if length > MAX_HEADER_BYTES:
        raise SpecauditError(f"{file}: header length {length} is beyond the format's limit: not a safetensors file?")
    if 8 + length > size:
        raise SpecauditError(f"{file}: truncated safetensors file (header of {length} bytes, file of {size})")
    raw = source.read(8, length)
    try:
        header = json.loads(raw)
    except ValueError:  # not UTF-8, not JSON, or an integer past the 4,300-digit limit
        raise SpecauditError(f"{file}: the safetensors header is not valid JSON") from None
    if not isinstance(header, dict):
        raise SpecauditError(f"{file}: the safetensors header is not a JSON object")
    data_start = 8 + length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        tensors[name] = _tensor(file, name, entry, data_start, size)
    return tensors


def _tensor(file: str, name: str, entry: Any, data_start: int, size: int) -> TensorInfo:
    try:
        dtype, shape, (begin, end) = entry["dtype"], tuple(entry["shape"]), entry["data_offsets"]
    except (KeyError, TypeError, ValueError):
        raise SpecauditError(f"{file}: header entry {name!r} lacks dtype, shape or data_offsets") from None
    if not isinstance(dtype, str) or dtype not in ITEM_SIZE:
        raise SpecauditError(f"{file}: {name} has unknown dtype {dtype!r}")
    if not all(isinstance(d, int) and d >= 0 for d in shape) or not all(isinstance(o, int) for o in (begin, end)):
        raise SpecauditError(f"{file}: {name} has a malformed shape or offsets")
    expected = math.prod(shape) * ITEM_SIZE[dtype]
    if begin < 0 or end - begin != expected:
        raise SpecauditError(f"{file}: the header lies about {name}: offsets [{begin}, {end}) hold {end - begin} bytes, "
                             f"{dtype} {list(shape)} needs {expected}")
    if data_start + end > size:
        raise SpecauditError(f"{file}: truncated: {name}'s data ends at byte {data_start + end}, the file has {size}")
    return TensorInfo(name, dtype, shape, str(file), data_start + begin, data_start + end)
