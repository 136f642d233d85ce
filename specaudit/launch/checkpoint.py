"""Reading a checkpoint without loading it: config.json and the headers of its safetensors files, or the pickled
index of its ``pytorch_model.bin`` files.

A safetensors file starts with an 8-byte little-endian header length N and N bytes of JSON naming every
tensor's dtype, shape and [begin, end) byte range in the data that follows. Only that header is read
(one seek, one read), whatever the size of the weights; tensor values are read by offset, and only for
the small index tensors (d2t, t2d) a check asks for. No torch, no safetensors library.

A ``.bin`` of ``torch.save`` (1.6 on) is a zip: ``<name>/data.pkl``, a pickle of the state dict whose tensors are
``torch._utils._rebuild_tensor_v2(<storage>, offset, size, stride, ...)`` calls over persistent storage ids
``("storage", torch.FloatStorage, key, location, numel)``, and ``<name>/data/<key>``, each storage's bytes, stored
uncompressed. The pickle is never unpickled: its opcodes are walked (``pickletools``) by a small stack machine that
knows dicts, lists, tuples, strings, numbers and those two calls, and builds nothing else (a call of any other
global is an opaque value, never made). The work is bounded (the pickle's size, its opcodes, the zip's entries).
What cannot be read that way (torch's legacy format, a pickle of something else) is said, per file, in
``Checkpoint.unread``, and the checks that needed its tensors say what they could not check.
"""

from __future__ import annotations

import json
import math
import os
import pickletools
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..core.data import BOOLEAN, INTEGER, INTEGERS, OBJECT, STRING, STRINGS, Field, Kind, check_fields, parse_json
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
BIN_INDEX_FILE = "pytorch_model.bin.index.json"
MAX_PICKLE_BYTES = 64_000_000  # a state dict's pickle is kilobytes to a few MB: its tensors' data lies outside it
MAX_PICKLE_OPS = 5_000_000
MAX_DIMENSIONS = 16  # a weight has a handful; a pickle naming thousands is not a state dict of weights
MAX_ZIP_ENTRIES = 1_000_000
# torch's storage classes -> the safetensors dtype names the checks read.
TORCH_STORAGES = {
    "FloatStorage": "F32", "DoubleStorage": "F64", "HalfStorage": "F16", "BFloat16Storage": "BF16",
    "LongStorage": "I64", "IntStorage": "I32", "ShortStorage": "I16", "CharStorage": "I8", "ByteStorage": "U8",
    "BoolStorage": "BOOL", "Float8_e4m3fnStorage": "F8_E4M3", "Float8_e5m2Storage": "F8_E5M2",
}
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
    return check_config(data, str(config_file))


CLASS_NAMES = Kind("a list of class names", STRINGS.accepts)
# The fields of a model's config.json that the engines' code and specaudit's checks read, with the types
# transformers' configs give them; null only where transformers (or the engine) takes it for unset and derives the
# value (LlamaConfig: num_key_value_heads from num_attention_heads; vLLM's EAGLE-3 head: draft_vocab_size from
# vocab_size, target_hidden_size from hidden_size). Read with another type, a check would judge what the engine
# never sees: bad input.
CONFIG_FIELDS: dict[str, Field] = {
    "architectures": Field(CLASS_NAMES), "model_type": Field(STRING), "auto_map": Field(OBJECT),
    "text_config": Field(OBJECT), "eagle_config": Field(OBJECT), "speculators_config": Field(OBJECT),
    "dflash_config": Field(OBJECT), "quantization_config": Field(OBJECT),
    "rope_scaling": Field(OBJECT, nullable=True), "rope_parameters": Field(OBJECT, nullable=True),
    **{name: Field(INTEGER) for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                                         "vocab_size", "max_position_embeddings", "num_nextn_predict_layers",
                                         "n_predict", "num_aux_hidden_states")},
    **{name: Field(INTEGER, nullable=True) for name in ("num_key_value_heads", "head_dim", "draft_vocab_size",
                                                        "target_hidden_size", "truncated_vocab_size")},
    "tie_word_embeddings": Field(BOOLEAN), "use_aux_hidden_state": Field(BOOLEAN),
    "eagle_aux_hidden_state_layer_ids": Field(INTEGERS), "layer_types": Field(STRINGS),
}


def check_config(config: dict[str, Any], source: str) -> dict[str, Any]:
    """A model's config whose fields, and its text model's (``text_config``), have their types (CONFIG_FIELDS)."""
    check_fields(config, CONFIG_FIELDS, source)
    if isinstance(config.get("text_config"), dict):
        check_fields(config["text_config"], CONFIG_FIELDS, source, "text_config.")
    return config


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
    unread: dict[str, str] = field(default_factory=dict)  # weight file -> why its tensors could not be read

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
        if tensor.start < 0:
            raise SpecauditError(f"{tensor.file}: {tensor.name}'s data is not stored where it can be read by offset")
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
    unread: dict[str, str] = {}
    for file in files:
        if file.suffix == ".safetensors":
            tensors.update(read_header(LocalFile(file)))
            continue
        try:
            tensors.update(read_torch_bin(file))
        except UnreadableBin as exc:  # said, and the checks go on without this file's tensors
            unread[str(file)] = str(exc)
    return Checkpoint(str(directory), config, tensors, unread=unread)


def _weight_files(directory: Path) -> list[Path]:
    """The safetensors files (sharded by their index, or all of them); where there are none, the ``.bin`` files of
    torch.save (by ``pytorch_model.bin.index.json``, or all of them)."""
    index = directory / INDEX_FILE
    if not index.is_file() and not any(p.is_file() for p in directory.glob("*.safetensors")):
        bins = _bin_files(directory)
        if bins:
            return bins
    return _indexed(directory, index) if index.is_file() else _safetensors_files(directory)


def _bin_files(directory: Path) -> list[Path]:
    index = directory / BIN_INDEX_FILE
    if index.is_file():
        return _indexed(directory, index)
    return sorted(p for p in directory.glob("*.bin") if p.is_file())


def _indexed(directory: Path, index: Path) -> list[Path]:
    if index.stat().st_size > MAX_JSON_BYTES:
        raise SpecauditError(f"{index}: {index.stat().st_size / 1e6:.0f} MB, larger than any shard index: not read")
    try:
        weight_map = parse_json(index.read_bytes(), str(index))["weight_map"]
    except (KeyError, TypeError):
        raise SpecauditError(f"{index}: malformed index (expected a JSON object with a weight_map)") from None
    if not isinstance(weight_map, dict) or not all(isinstance(n, str) for n in weight_map.values()):
        raise SpecauditError(f"{index}: malformed index (weight_map must map tensor names to shard file names)")
    files = sorted({directory / name for name in weight_map.values()})
    if any(f.parent != directory or f.name in ("", ".", "..") for f in files):
        raise SpecauditError(f"{index}: names shards outside the checkpoint directory")
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise SpecauditError(f"{index}: names shards that are missing: {', '.join(missing)}")
    return files


def _safetensors_files(directory: Path) -> list[Path]:
    files = sorted(p for p in directory.glob("*.safetensors") if p.is_file())
    if not files:
        others = sorted(p.name for p in directory.glob("*.bin")) + sorted(p.name for p in directory.glob("*.pt"))
        also = f" (found {', '.join(others)}: safetensors and torch.save .bin files are read)" if others else ""
        raise SpecauditError(f"{directory}: no *.safetensors or *.bin weights{also}")
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
    header = parse_json(raw, f"{file}: the safetensors header")
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


# -- torch.save's .bin, read without unpickling --------------------------------------------------------------------


class UnreadableBin(Exception):
    """A .bin whose tensors cannot be read without running its pickle: why, in a phrase."""


@dataclass(frozen=True)
class _Global:
    module: str
    name: str


@dataclass(frozen=True)
class _Storage:
    dtype: str | None  # None: a storage class specaudit does not know
    key: str
    numel: int | None


@dataclass(frozen=True)
class _Tensor:
    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


class _Opaque:
    """A call of a global the reader does not know: never made; a value nothing is read from."""


_MARK = object()
_REBUILDS = {("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_tensor")}
_DICTS = {("collections", "OrderedDict"), ("builtins", "dict"), ("__builtin__", "dict")}
_PARAMETERS = {("torch._utils", "_rebuild_parameter"), ("torch._utils", "_rebuild_parameter_with_state")}


def read_torch_bin(path: Path) -> dict[str, TensorInfo]:
    """The tensors a torch.save zip declares (names, dtypes, shapes, and their data's place in the file where it is
    stored uncompressed), read from its pickle's opcodes without unpickling it."""
    if not zipfile.is_zipfile(path):
        raise UnreadableBin("not a zip: torch's legacy (pre-1.6) format, whose tensors are not read")
    try:
        with zipfile.ZipFile(path) as archive:
            entries = archive.infolist()
            if len(entries) > MAX_ZIP_ENTRIES:
                raise UnreadableBin(f"{len(entries)} zip entries: more than a checkpoint has")
            pickles = [e for e in entries if e.filename.endswith("/data.pkl") or e.filename == "data.pkl"]
            if len(pickles) != 1:
                raise UnreadableBin("no data.pkl in the zip: not a torch.save file")
            entry = pickles[0]
            if entry.file_size > MAX_PICKLE_BYTES:
                raise UnreadableBin(f"data.pkl of {entry.file_size / 1e6:.0f} MB: larger than a state dict's index")
            with archive.open(entry) as fh:
                data = fh.read(MAX_PICKLE_BYTES + 1)
            if len(data) > MAX_PICKLE_BYTES:
                raise UnreadableBin("data.pkl inflates past its declared size")
            state = _walk_pickle(data)
            prefix = entry.filename[: -len("data.pkl")]
            members = {e.filename: e for e in entries}
            return _tensors(path, state, prefix, members)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise UnreadableBin(f"a damaged zip ({exc})") from None


def _tensors(path: Path, state: object, prefix: str, members: dict[str, zipfile.ZipInfo]) -> dict[str, TensorInfo]:
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]  # a training checkpoint that wraps the weights
    if not isinstance(state, dict):
        raise UnreadableBin(f"its pickle holds a {type(state).__name__}, not a state dict")
    found: dict[str, TensorInfo] = {}
    for name, value in state.items():
        if not isinstance(name, str) or not isinstance(value, _Tensor):
            continue  # metadata, or what is not a tensor
        dtype = value.storage.dtype
        if dtype is None:
            raise UnreadableBin(f"{name} is held in a storage class specaudit does not know")
        if len(value.shape) > MAX_DIMENSIONS:
            raise UnreadableBin(f"{name} has {len(value.shape)} dimensions, more than any weight has")
        numel = math.prod(value.shape)
        start = end = -1  # not readable by offset, unless stored contiguous and uncompressed
        member = members.get(f"{prefix}data/{value.storage.key}")
        contiguous = len(value.stride) == len(value.shape) and _contiguous(value.shape, value.stride)
        if member is not None and member.compress_type == zipfile.ZIP_STORED and contiguous:
            data_start = _data_offset(path, member)
            if data_start is not None:
                start = data_start + value.offset * ITEM_SIZE[dtype]
                end = start + numel * ITEM_SIZE[dtype]
                if end > data_start + member.file_size:
                    raise UnreadableBin(f"{name}'s data ends past its storage")
        found[name] = TensorInfo(name, dtype, value.shape, str(path), start, end)
    return found


def _contiguous(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Row-major and dense: each stride the product of the sizes after it (sizes of 1 take any stride), the products
    made once, from the last dimension back."""
    expected = 1
    for size, step in zip(reversed(shape), reversed(stride)):
        if size > 1 and step != expected:
            return False
        expected *= size
    return True


def _data_offset(path: Path, member: zipfile.ZipInfo) -> int | None:
    """Where a stored zip member's bytes begin in the file: past its local header (whose name and extra field
    lengths may differ from the central directory's)."""
    with open(path, "rb") as fh:
        fh.seek(member.header_offset)
        header = fh.read(30)
    if len(header) < 30 or header[:4] != b"PK\x03\x04":
        return None
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    return member.header_offset + 30 + name_length + extra_length


def _walk_pickle(data: bytes) -> object:
    """The value a pickle builds, played out on its opcodes with nothing of Python's run: dicts, lists, tuples,
    strings, numbers, None and booleans are themselves; the two torch calls that rebuild a tensor are _Tensor; the
    persistent ids of storages are _Storage; any other global's call is _Opaque."""
    stack: list = []
    items: list
    memo: dict[int, object] = {}
    marks: list[int] = []

    def pop_mark() -> list:
        if not marks:
            raise UnreadableBin("a malformed pickle (no mark)")
        at = marks.pop()
        items = stack[at:]
        del stack[at:]
        return items

    try:
        for count, (op, arg, _) in enumerate(pickletools.genops(data)):
            if count > MAX_PICKLE_OPS:
                raise UnreadableBin(f"more than {MAX_PICKLE_OPS} pickle opcodes: not a state dict's index")
            name = op.name
            if name in ("PROTO", "FRAME"):
                continue
            if name == "STOP":
                return stack[-1] if stack else None
            if name == "MARK":
                marks.append(len(stack))
            elif name in ("EMPTY_DICT",):
                stack.append({})
            elif name in ("EMPTY_LIST",):
                stack.append([])
            elif name == "EMPTY_TUPLE":
                stack.append(())
            elif name in ("BINUNICODE", "SHORT_BINUNICODE", "UNICODE", "BINUNICODE8", "BININT", "BININT1", "BININT2",
                          "LONG1", "LONG4", "INT", "LONG", "BINFLOAT", "FLOAT", "SHORT_BINSTRING", "BINSTRING",
                          "STRING", "SHORT_BINBYTES", "BINBYTES", "BINBYTES8"):
                stack.append(arg)
            elif name == "NONE":
                stack.append(None)
            elif name in ("NEWTRUE", "NEWFALSE"):
                stack.append(name == "NEWTRUE")
            elif name == "TUPLE":
                stack.append(tuple(pop_mark()))
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                n = int(name[-1])
                last = tuple(stack[-n:])
                del stack[-n:]
                stack.append(last)
            elif name == "LIST":
                stack.append(list(pop_mark()))
            elif name == "DICT":
                items = pop_mark()
                stack.append(dict(zip(items[::2], items[1::2])))
            elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
                memo[int(arg or 0)] = stack[-1]
            elif name == "MEMOIZE":
                memo[len(memo)] = stack[-1]
            elif name in ("BINGET", "LONG_BINGET", "GET"):
                stack.append(memo[int(arg or 0)])
            elif name in ("GLOBAL",):
                module, _, attr = str(arg).partition(" ")
                stack.append(_Global(module, attr))
            elif name == "STACK_GLOBAL":
                attr, module = stack.pop(), stack.pop()
                stack.append(_Global(str(module), str(attr)))
            elif name == "SETITEM":
                value, key = stack.pop(), stack.pop()
                _set(stack[-1], key, value)
            elif name == "SETITEMS":
                items = pop_mark()
                for key, value in zip(items[::2], items[1::2]):
                    _set(stack[-1], key, value)
            elif name == "APPEND":
                value = stack.pop()
                if isinstance(stack[-1], list):
                    stack[-1].append(value)
            elif name == "APPENDS":
                items = pop_mark()
                if isinstance(stack[-1], list):
                    stack[-1].extend(items)
            elif name == "BINPERSID":
                stack.append(_storage(stack.pop()))
            elif name == "REDUCE":
                args, func = stack.pop(), stack.pop()
                stack.append(_reduce(func, args))
            elif name in ("NEWOBJ", "NEWOBJ_EX"):
                if name == "NEWOBJ_EX":
                    stack.pop()
                stack.pop()
                stack.pop()
                stack.append(_Opaque())
            elif name == "BUILD":
                stack.pop()  # an object's state: nothing of it is set
            elif name == "POP":
                stack.pop()
            elif name == "POP_MARK":
                pop_mark()
            elif name == "DUP":
                stack.append(stack[-1])
            else:
                raise UnreadableBin(f"its pickle uses {name}, which a state dict's index does not")
    except UnreadableBin:
        raise
    except (ValueError, IndexError, KeyError, TypeError, RecursionError, MemoryError) as exc:
        raise UnreadableBin(f"a malformed pickle ({type(exc).__name__})") from None
    raise UnreadableBin("a pickle with no STOP")


def _set(target: object, key: object, value: object) -> None:
    if isinstance(target, dict):
        try:
            target[key] = value
        except TypeError:  # an unhashable key: not a state dict's
            raise UnreadableBin("a dict keyed by what is not a name") from None


def _storage(pid: object) -> object:
    """A storage's persistent id: ("storage", torch.<Type>Storage, key, location, numel)."""
    if isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _Global):
        numel = pid[4] if isinstance(pid[4], int) else None
        return _Storage(TORCH_STORAGES.get(pid[1].name), str(pid[2]), numel)
    return _Opaque()


def _reduce(func: object, args: object) -> object:
    if not isinstance(func, _Global) or not isinstance(args, tuple):
        return _Opaque()
    called = (func.module, func.name)
    if called in _REBUILDS and len(args) >= 4 and isinstance(args[0], _Storage):
        storage, offset, shape, stride = args[:4]
        if isinstance(offset, int) and isinstance(shape, tuple) and isinstance(stride, tuple) \
                and all(isinstance(d, int) and d >= 0 for d in shape) and all(isinstance(d, int) for d in stride):
            return _Tensor(storage, offset, shape, stride)
        return _Opaque()
    if called in _PARAMETERS and args and isinstance(args[0], _Tensor):
        return args[0]
    if called in _DICTS:
        return dict(args[0]) if args and isinstance(args[0], dict) else {}
    return _Opaque()
