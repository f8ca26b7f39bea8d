"""The on-disk cache of compiled CUDA kernels: every kernel made by :func:`common.gpu.launch.jit` is
compiled once per GPU architecture and loaded from disk by every later process (CLI calls,
experiment workers, Dask workers, ``gpusm warmup``).

It reuses numba-cuda's cache machinery (index and data files, cubins per compute capability) with
three changes (docs/decisions.md, "Kernel disk cache", says why):

* **Where**: ``<root>/gpusm/<package>/``, root being ``NUMBA_CACHE_DIR`` when set, else Numba's
  user-wide cache directory (:func:`cache_dir`).
* **When fresh**: while the *content* (SHA-256) of every gpusm kernel package and of the kernel's
  own file is unchanged.
* **Which variant**: an entry is keyed by :func:`variant_key`: the code, the closure's values,
  the globals the code names (recursively through the device functions it calls) and the compile
  options; a value the key cannot describe leaves the kernel uncached, never wrongly shared.

A corrupt or unreadable file counts as a miss; an entry whose stored signature differs is
ignored; writers take a per-index file lock. Under the simulator nothing is compiled or cached;
:func:`variant_key` still runs (tests check that every kernel has one).
"""

from __future__ import annotations

import contextlib
import enum
import functools
import hashlib
import logging
import os
import types as pytypes
from pathlib import Path

import numpy as np

log = logging.getLogger("gpusm.kernel_cache")

_ROOT = Path(__file__).resolve().parents[2]            # the repository (the packages' parent)


class Uncacheable(Exception):
    """A kernel's closure or globals hold a value :func:`variant_key` cannot describe."""


@functools.lru_cache(maxsize=None)
def kernel_packages() -> tuple[str, ...]:
    """The packages whose source every cached kernel depends on (device functions, intrinsics):
    those the engines declare (``Engine.kernel_packages``, :func:`common.engine.registry.kernel_packages`)."""
    from ..engine.registry import kernel_packages as declared

    return declared()


def cache_root() -> Path:
    """Numba's cache root: ``NUMBA_CACHE_DIR`` when set, else Numba's user-wide cache folder."""
    configured = os.environ.get("NUMBA_CACHE_DIR", "")
    if configured:
        return Path(configured).expanduser().resolve()
    from numba.cuda.misc.appdirs import AppDirs

    return Path(AppDirs(appname="numba", appauthor=False).user_cache_dir)


def cache_dir() -> Path:
    """The folder holding gpusm's compiled kernels (one subfolder per package)."""
    return cache_root() / "gpusm"


@functools.lru_cache(maxsize=None)
def packages_digest() -> str:
    """SHA-256 of the source of every kernel package, subpackages included (file paths and
    contents, sorted)."""
    digest = hashlib.sha256()
    for package in kernel_packages():
        for path in sorted((_ROOT / package).rglob("*.py")):
            digest.update(f"{path.relative_to(_ROOT).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def source_stamp(py_file: str) -> tuple:
    """What an index file must match to be used: the packages' and the kernel's file's content
    (a file is read again when its modification time or size changes)."""
    st = os.stat(py_file)
    return ("gpusm-kernel-cache", 1, packages_digest(), _file_digest(py_file, st.st_mtime_ns, st.st_size))


def _subfolder(py_file: str) -> str:
    """``gsi`` for a kernel in ``gsi/join.py``, ``common_gpu`` for one in ``common/gpu/scan.py``;
    a kernel elsewhere (a test) gets its folder's name and a hash of its path."""
    folder = Path(py_file).resolve().parent
    parts = folder.relative_to(_ROOT).parts if folder.is_relative_to(_ROOT) else ()
    if parts and parts[0] in kernel_packages():
        return "_".join(parts)
    return f"{folder.name}_{hashlib.sha1(str(folder).encode()).hexdigest()[:12]}"


# ---------------------------------------------------------------------------- variant keys
def variant_key(py_func, options: dict | None = None) -> str:
    """A SHA-256 naming what a compile of ``py_func`` depends on besides its argument types and
    the GPU: its code, its closure's values, the module globals its code names, the same for
    every function it calls through those (device functions), and the compile ``options``.
    Raises :class:`Uncacheable` for a value it cannot describe."""
    description = (_describe(py_func, set()), _describe(dict(options or {}), set()))
    return hashlib.sha256(repr(description).encode()).hexdigest()


_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def _describe(value, seen: set):
    """A repr-able description of ``value``, equal for values a compile cannot tell apart."""
    if isinstance(value, _SCALARS):
        return (type(value).__name__, value)
    if isinstance(value, np.generic):
        return ("np", value.dtype.str, value.item())
    if isinstance(value, np.dtype):
        return ("dtype", value.str)
    if isinstance(value, np.ndarray):       # a global array is frozen into the kernel as a constant
        return ("ndarray", value.dtype.str, value.shape, hashlib.sha256(value.tobytes()).hexdigest())
    if isinstance(value, enum.Enum):
        return ("enum", type(value).__qualname__, value.name, _describe(value.value, seen))
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_describe(v, seen) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(_describe(v, seen)) for v in value)))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(_describe(k, seen)), _describe(v, seen)) for k, v in value.items())))
    if isinstance(value, pytypes.ModuleType):
        return ("module", value.__name__)
    if isinstance(value, type):
        return ("class", value.__module__, value.__qualname__)
    if isinstance(value, pytypes.FunctionType):
        return _describe_function(value, seen)
    wrapped = _wrapped_function(value)
    if wrapped is not None:
        return ("jit", type(value).__name__, _describe_function(wrapped, seen))
    if _is_numba_type(value):
        return ("numba-type", str(value))
    if isinstance(value, pytypes.BuiltinFunctionType):
        return ("builtin", getattr(value, "__module__", None), value.__qualname__)
    name = getattr(value, "__name__", None) or getattr(value, "_name", None)
    if type(value).__module__.startswith("numba") and isinstance(name, str):
        return ("numba-object", type(value).__qualname__, name)    # an intrinsic, a stub, a math fn
    raise Uncacheable(f"cannot describe a {type(value).__module__}.{type(value).__qualname__} for the kernel cache")


def _wrapped_function(value):
    """The Python function behind a dispatcher: numba-cuda's (``py_func``), gpusm's
    :class:`common.gpu.launch.Kernel`, the simulator's (``fn``), a CPU ``njit`` dispatcher."""
    for attribute in ("py_func", "fn"):
        function = getattr(value, attribute, None) if not isinstance(value, type) else None
        if isinstance(function, pytypes.FunctionType):
            return function
    dispatcher = getattr(value, "dispatcher", None)
    return None if dispatcher is None else _wrapped_function(dispatcher)


def _is_numba_type(value) -> bool:
    try:
        from numba.core.types import Type
    except ImportError:                       # pragma: no cover - numba always has it
        return False
    return isinstance(value, Type)


def _describe_function(function, seen: set):
    identity = (function.__module__, function.__qualname__)
    if id(function) in seen:
        return ("function", *identity)        # recursion: already described above
    seen.add(id(function))
    code = function.__code__
    closure = tuple(_describe(cell.cell_contents, seen) for cell in function.__closure__ or ())
    referenced = []
    for name in sorted(_names(code)):
        if name in function.__globals__:
            referenced.append((name, _describe(function.__globals__[name], seen)))
    defaults = _describe(function.__defaults__, seen)
    return ("function", *identity, _code_digest(code), closure, tuple(referenced), defaults)


def _names(code) -> set:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            names |= _names(const)
    return names


def _code_digest(code) -> str:
    digest = hashlib.sha256(code.co_code)
    for const in code.co_consts:
        digest.update(_code_digest(const).encode() if isinstance(const, pytypes.CodeType) else repr(const).encode())
    return digest.hexdigest()


# ---------------------------------------------------------------------------- files
def _index_file_class():
    """numba-cuda's index and data files, made robust (see the module docstring)."""
    from numba.cuda.core.caching import IndexDataCacheFile

    class SafeIndexFile(IndexDataCacheFile):
        """Index and data files whose corrupt contents read as missing and whose writers lock."""

        def _load_index(self):
            try:
                return super()._load_index()
            except Exception as error:      # a truncated or garbled pickle raises nearly anything
                log.warning("kernel cache: unreadable index %s (%s); recompiling", self._index_path, error)
                return {}

        def load(self, key):
            try:
                return super().load(key)
            except Exception as error:
                log.warning("kernel cache: unreadable entry in %s (%s); recompiling", self._cache_path, error)
                return None

        def save(self, key, data):
            with _locked(self._index_path + ".lock"):
                super().save(key, data)

    return SafeIndexFile


@contextlib.contextmanager
def _locked(path: str):
    """An exclusive lock on ``path`` (POSIX ``flock``; no lock where that is unavailable)."""
    try:
        import fcntl
    except ImportError:                       # pragma: no cover - Windows
        yield
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_ENSURED: set = set()


@functools.lru_cache(maxsize=None)
def _cache_classes():
    """The GPU-side classes (numba-cuda's dispatcher module is absent under the simulator)."""
    from numba.cuda.core.caching import _CacheLocator
    from numba.cuda.dispatcher import CUDACache, CUDACacheImpl

    safe_index_file = _index_file_class()

    class Locator(_CacheLocator):
        """``<cache_dir>/<package>``, fresh while the sources' contents are unchanged."""

        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = str(cache_dir() / _subfolder(py_file))

        def ensure_cache_path(self):
            if self._cache_path not in _ENSURED:
                super().ensure_cache_path()
                _ENSURED.add(self._cache_path)

        def get_cache_path(self):
            return self._cache_path

        def get_source_stamp(self):
            return source_stamp(self._py_file)

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            return cls(py_func, py_file) if os.path.exists(py_file) else None

    class Impl(CUDACacheImpl):
        _locator_classes = [Locator]

    class KernelCache(CUDACache):
        """numba-cuda's kernel cache with gpusm's location, freshness and variant key."""

        _impl_class = Impl

        def __init__(self, py_func, options):
            self.options = options
            self._variant = None
            super().__init__(py_func)
            self._cache_file = safe_index_file(self._cache_path, self._impl.filename_base,
                                               self._impl.locator.get_source_stamp())

        @property
        def variant(self) -> str:
            """:func:`variant_key`, computed on the first load (the globals a compile freezes)."""
            if self._variant is None:
                self._variant = variant_key(self._py_func, self.options)
            return self._variant

        def _load_overload(self, sig, target_context):
            if self._enabled:
                try:
                    self.variant
                except Uncacheable as reason:
                    log.info("kernel cache: %s stays uncached: %s", self._name, reason)
                    self.disable()
            return super()._load_overload(sig, target_context)

        def _index_key(self, sig, codegen):
            import numba_cuda

            key = (sig, codegen.magic_tuple(), numba_cuda.__version__, self.variant)
            if self._launch_config_key is not None:
                key += (("launch_config", self._launch_config_key),)
            return key

        def load_overload(self, sig, target_context):
            try:
                kernel = super().load_overload(sig, target_context)
            except Exception as error:
                log.warning("kernel cache: could not load %s (%s); recompiling", self._name, error)
                return None
            if kernel is not None and tuple(kernel.signature.args) != tuple(_argument_types(sig)):
                log.warning("kernel cache: entry of %s has another signature; recompiling", self._name)
                return None
            return kernel

        def save_overload(self, sig, data):
            try:
                super().save_overload(sig, data)
            except Exception as error:      # an unwritable folder, a full disk: keep the kernel
                log.warning("kernel cache: could not save %s (%s)", self._name, error)

    return KernelCache


def _argument_types(sig):
    from numba.cuda.core import sigutils

    return sigutils.normalize_signature(sig)[0]


def enable(dispatcher, options: dict) -> None:
    """Give a numba-cuda kernel dispatcher gpusm's disk cache. A kernel whose closure or globals
    hold a value :func:`variant_key` cannot describe stays uncached (found on its first compile);
    so does a kernel without a source file (typed at a prompt, ``python -c``)."""
    try:
        dispatcher._cache = _cache_classes()(dispatcher.py_func, options)
    except (OSError, RuntimeError) as error:  # numba-cuda: "no locator available for file '<string>'"
        log.info("kernel cache: %s stays uncached: %s", dispatcher.py_func.__qualname__, error)


def cached_entries(folder: Path | None = None) -> int:
    """How many compiled kernels (data files) the cache folder holds."""
    folder = cache_dir() if folder is None else folder
    return sum(1 for _ in folder.rglob("*.nbc")) if folder.exists() else 0

