"""Import-time stand-ins for ``triton``, ``torchvision`` and ``einops`` (tests/real only).

SGLang and vLLM import Triton kernels and torchvision ops at module level; neither loads on a
CPU-only torch here. The cache/scheduler code under test never launches a kernel, so any
``triton.*`` / ``torchvision.*`` import yields a permissive fake module: decorators
(``@triton.jit``, ``@triton.autotune(...)``) return the function unchanged, CamelCase names are
real (fake) classes so ``isinstance`` works, and ``triton.runtime.driver`` is absent so
"which GPU backend?" probes fall back to "cpu". ``einops`` is not installed: the graph
runner's module imports it for tensor rearranges the bucket choice under test never calls.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

FAKED_ROOTS = frozenset({"triton", "torchvision", "einops"})


class _Anything:
    """Callable, indexable, attribute-rich placeholder; falsy so feature probes say 'no'."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __call__(self, *args: object, **kwargs: object) -> object:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a bare decorator
        return self

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") or name == "driver":
            raise AttributeError(name)
        return self

    def __getitem__(self, key: object) -> object:
        return self

    def __iter__(self):
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (object,)


_ANY = _Anything()


class _AnyMeta(type):
    def __getattr__(cls, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        return _ANY


class _FakeModule(types.ModuleType):
    def __getattr__(self, name: str) -> object:
        if name.startswith("__") or name == "driver":
            raise AttributeError(name)
        if name[:1].isupper():
            fake_type = _AnyMeta(name, (_Anything,), {"__module__": self.__name__})
            setattr(self, name, fake_type)
            return fake_type
        return _ANY


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: object = None, target: object = None):
        if fullname.split(".")[0] in FAKED_ROOTS:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _FakeModule(spec.name)
        module.__path__ = []
        if "." not in spec.name:
            # Low version: transformers' "torchvision >= X" gates stay closed.
            module.__version__ = "0.0.0"
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        parent, _, child = module.__name__.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], child, module)


def install() -> None:
    """Idempotent: put the finder first on ``sys.meta_path``."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
