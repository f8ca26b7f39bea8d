"""The engine registry: names to engine classes, :func:`create_engine` with its option checks
(docs/design.md, "The engine contract")."""

from __future__ import annotations

import importlib
import importlib.util
import inspect

import numpy as np

from ..errors import UnknownEngineError
from .base import Engine

#: Registered engines: name -> "module:Class". An engine's issue adds its line when it lands.
_REGISTRY: dict[str, str] = {
    "cpu": "common.cpu.reference:ReferenceMatcher",
    "gsi": "gsi.engine:GSI",
    "sgsi": "gsi.sgsi:SGSI",
    "egsm": "egsm.engine:EGSM",
    "gmatch": "gmatch.engine:GMatch",
    "stwig": "stwig.engine:STwig",
    "stwig-cpu": "stwig.cpu:STwigCPU",
}
#: gpusm's own engines (what ``gpusm demo`` runs); others come from peers or :func:`register`.
BUILTIN_ENGINES: tuple[str, ...] = tuple(_REGISTRY)
#: Peer CPU engines (common/cpu/peers.py), registered when their package is installed (extra `peers`).
PEER_ENGINES: dict[str, str] = {"networkx": "common.cpu.peers:NetworkXMatcher",
                                "igraph": "common.cpu.peers:IGraphMatcher"}
_REGISTRY.update({name: target for name, target in PEER_ENGINES.items()
                  if importlib.util.find_spec(name) is not None})


def register(name: str, target: str | type) -> None:
    """Register an engine class (or its ``"module:Class"`` path) under ``name``."""
    if isinstance(target, type):
        target = f"{target.__module__}:{target.__qualname__}"
    _REGISTRY[name] = target


def available_engines() -> list[str]:
    """Names of the registered engines, in registration order."""
    return list(_REGISTRY)


def engine_class(name: str) -> type[Engine]:
    """The class registered under ``name``; :class:`~common.errors.UnknownEngineError` (a
    ValueError listing the registered engines) for a name not registered."""
    if name not in _REGISTRY:
        raise UnknownEngineError(name, _REGISTRY)
    module, _, qualname = _REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module), qualname)


def gpu_engines() -> tuple[str, ...]:
    """gpusm's own engines whose searches run CUDA kernels (``uses_device``), in registration order."""
    return tuple(name for name in BUILTIN_ENGINES if engine_class(name).uses_device)


def compared_engines() -> tuple[str, ...]:
    """gpusm's own engines, each algorithm once (no ``variant_of``): the side-by-side comparisons'."""
    return tuple(name for name in BUILTIN_ENGINES if engine_class(name).variant_of is None)


def kernel_packages() -> tuple[str, ...]:
    """The top-level packages holding gpusm's engines' CUDA kernels, ``common`` first: the
    packages of gpusm's registered engine modules, read from the registry without importing
    them (the kernel cache asks while an engine module is being imported; each engine's
    ``kernel_packages`` lies within these, which the contract suite checks)."""
    packages = ["common"]
    for name in BUILTIN_ENGINES:
        package = _REGISTRY[name].partition(":")[0].split(".")[0]
        if package not in packages:
            packages.append(package)
    return tuple(packages)


def create_engine(name: str, **options) -> Engine:
    """Instantiate a registered engine with its constructor options.

    Parameters
    ----------
    name : str
        A registered engine (``available_engines()``): "cpu", "gsi", "sgsi", "egsm", "gmatch",
        "stwig", "stwig-cpu", and "networkx"/"igraph" where installed.
    **options
        Constructor options (``gpusm engines NAME`` lists them); an unknown one is a ValueError.

    Returns
    -------
    Engine
        Unprepared: call ``prepare(data)`` once, then ``match`` (or ``match_batch``) per query.

    Examples
    --------
    >>> from common import Graph, create_engine
    >>> data = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], labels=[0, 0, 1])
    >>> engine = create_engine("cpu").prepare(data)
    >>> engine.match(Graph.from_edges(2, [0], [1], labels=[0, 1])).count
    2
    """
    return instantiate(engine_class(name), options, name)


def instantiate(cls: type[Engine], options: dict, name: str | None = None) -> Engine:
    """:func:`create_engine` for a class, registered or not (``name``: how errors name it;
    default ``cls.name``): an unknown option or one of the wrong type is a ValueError naming it."""
    name = cls.name if name is None else name
    names = option_names(cls)
    unknown = [key for key in options if key not in names]
    if unknown:
        raise ValueError(f"engine {name!r} does not take these options ({', '.join(unknown)}); "
                         f"its options: {', '.join(names)} (`gpusm engines {name}` explains them)")
    check_option_types(name, cls, options)
    return cls(**options)


def option_names(cls: type) -> list[str]:
    """The keyword options ``cls`` takes: its constructor's, and those of the base classes an
    ``**options`` parameter passes them on to."""
    names: list[str] = []
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        parameters = inspect.signature(vars(klass)["__init__"]).parameters.values()
        names += [p.name for p in parameters if p.name != "self" and p.name not in names
                  and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    return names


_OPTION_KINDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
                 "None": "none"}


def check_option_types(name: str, cls: type, options: dict) -> None:
    """A ValueError naming the option, the type its annotation asks for and the value given, for
    an option whose value has none of the plain types (int, float, bool, str, None) it takes.
    Options with other annotations (ranges, sizes) are checked by the engine itself."""
    parameters = inspect.signature(cls).parameters
    for key, value in options.items():
        parameter = parameters.get(key)
        if parameter is None or key == "device_memory_limit" or not isinstance(parameter.annotation, str):
            continue
        kinds = [k.strip() for k in parameter.annotation.split("|")]
        if not kinds or not set(kinds) <= set(_OPTION_KINDS):
            continue
        fits = {"None": value is None, "bool": isinstance(value, (bool, np.bool_)), "str": isinstance(value, str),
                "int": isinstance(value, (int, np.integer)) and not isinstance(value, bool),
                "float": isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)}
        if not any(fits[k] for k in kinds):
            default = "" if parameter.default is inspect.Parameter.empty else f", default {parameter.default!r}"
            raise ValueError(f"engine {name!r}: option {key} takes {' or '.join(_OPTION_KINDS[k] for k in kinds)}"
                             f" ({parameter.annotation}{default}), got {value!r}")
