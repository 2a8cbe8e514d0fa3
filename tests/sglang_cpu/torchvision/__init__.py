"""A placeholder for torchvision, whose PyPI build needs a CUDA torch (issue 38): SGLang imports
its transforms unconditionally (0.5.23 multimodal/internvl_utils.py:5), transformers for images.
A text model uses none of it. Every submodule exists; every name in one is a class that raises
when made, whose attributes are names (enum members such as ``InterpolationMode.BICUBIC``)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

__version__ = "0.28.0"


class _Names(type):
    def __getattr__(cls, attr: str) -> str:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return f"{cls.__name__}.{attr}"


def _missing(name: str) -> type:
    class Missing(metaclass=_Names):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise NotImplementedError(f"torchvision placeholder: {name}")

        def __class_getitem__(cls, item: Any) -> type:
            return cls
    Missing.__name__ = name.rsplit(".", 1)[-1]
    return Missing


def _names(module: str) -> Callable[[str], type]:
    def getattr_(name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return _missing(f"{module}.{name}")
    return getattr_


__getattr__ = _names("torchvision")


class _Submodules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = _names(spec.name)  # type: ignore[method-assign]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


sys.meta_path.insert(0, _Submodules())
