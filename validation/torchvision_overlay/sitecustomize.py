"""Lazy torchvision shim for a +cpu torch next to PyPI's CUDA torchvision (same logic as
validation/runtime_eagle3.py's _install_torchvision_shim): on the first `import torchvision`, if its
_C extension cannot load, define the two op schemas (torchvision::nms / ::qnms) that
torchvision/_meta_registrations.py registers fake kernels for unconditionally."""
import importlib.abc
import sys


class _TorchvisionShim(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        import glob
        import importlib.util
        import os

        import torch

        spec = importlib.util.find_spec("torchvision")
        libs = [p for loc in (spec.submodule_search_locations or []) for p in glob.glob(os.path.join(loc, "_C*.so"))]
        try:
            torch.ops.load_library(libs[0])
        except (IndexError, OSError, ImportError, RuntimeError):
            global _LIB
            _LIB = torch.library.Library("torchvision", "FRAGMENT")
            _LIB.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            _LIB.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        return None


sys.meta_path.insert(0, _TorchvisionShim())
