"""What ``gpusm engines`` prints: each registered engine's capabilities and constructor options,
with defaults from the signature and meanings from the class and module docstrings."""

from __future__ import annotations

import inspect
import re
import sys

from .base import Engine
from .registry import available_engines, engine_class

_GENERIC = {
    "device_memory_limit": "device-memory budget in bytes, to emulate a smaller GPU (None: the whole device)",
}


def _parameters(cls: type) -> list[inspect.Parameter]:
    """Keyword parameters of ``cls.__init__``, following ``**options`` into the base classes."""
    seen: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = list(inspect.signature(init).parameters.values())[1:]
        for p in params:
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in seen:
                seen[p.name] = p
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return list(seen.values())


def _docs(cls: type) -> list[str]:
    """Docstrings to search for an option's meaning: the class's, its module's, then its bases'."""
    out = []
    for klass in cls.__mro__:
        if klass in (Engine, object):
            break
        out.append(inspect.getdoc(klass) or "")
        out.append(inspect.getdoc(sys.modules.get(klass.__module__)) or "")
    return out


def _segments(doc: str) -> list[str]:
    """A docstring cut into clauses: bullets, semicolon-separated parts and sentences."""
    text = re.sub(r"\n\s*[*-]\s+", "\n\x00", doc)            # bullet starts
    parts = []
    for block in text.split("\x00"):
        block = " ".join(block.split())
        parts.extend(p.strip() for p in re.split(r"(?<=[.;])\s+(?=[A-Z`(])|;\s+", block) if p.strip())
    return parts


def option_meaning(name: str, docs: list[str], others: tuple[str, ...] = ()) -> str:
    """The clause that defines ``name`` (one starting with it, else the first naming it), cut
    before the next of the engine's ``others`` options it lists, shortened to one line."""
    found = []
    for doc in docs:
        for part in _segments(doc):
            part = re.sub(r"^(Options?:|and those of [^:]*:)\s*", "", part)
            if f"``{name}``" in part and len(re.sub(r"``\w+``|[\s,;:()./]", "", part)) >= 8:
                found.append((0 if part.startswith(f"``{name}``") else 1, len(found), part))
    if not found:
        return _GENERIC.get(name, "")
    rank, _, part = min(found)
    if rank and name in _GENERIC:
        return _GENERIC[name]
    start = part.index(f"``{name}``")
    if not re.match(rf"``{re.escape(name)}``(:| \(|,| and | caps| is| sets)", part[start:]):
        start = 0                                 # only mentioned here: keep the whole clause
    # Cut before the next option the clause *defines* (its name followed by ':' or ' (').
    ends = [m.start() for o in others if o != name
            for m in re.finditer(rf"``{re.escape(o)}``(?=:| \()", part) if m.start() > start]
    end = min(ends or [len(part)])
    cut = part[start:end].rstrip(" ,;/")
    if cut.endswith(" and") or cut.endswith(" or"):
        cut = cut.rsplit(" ", 1)[0]
    if len(cut) - len(name) - 4 < 8:            # only the name: keep the whole clause
        cut = part
    cut = cut.replace("``", "")
    return cut if len(cut) <= 150 else cut[:147].rstrip() + "..."


def describe_engine(name: str) -> dict:
    """Name, class, summary, what queries it takes, and options (name, default, meaning)."""
    cls = engine_class(name)
    doc = inspect.getdoc(cls) or ""
    docs = _docs(cls)
    params = _parameters(cls)
    names = tuple(p.name for p in params)
    options = [{"name": p.name,
                "default": None if p.default is inspect.Parameter.empty else p.default,
                "meaning": option_meaning(p.name, docs, names)} for p in params]
    return {
        "engine": name, "class": f"{cls.__module__}.{cls.__qualname__}",
        "summary": " ".join(doc.split("\n\n")[0].split()),
        "edge_labels": cls.supports_edge_labels, "directed": cls.supports_directed,
        "homomorphic": cls.supports_homomorphic, "disconnected": cls.supports_disconnected,
        "max_query_vertices": cls.max_query_vertices, "options": options,
    }


def describe_engines() -> list[dict]:
    return [describe_engine(name) for name in available_engines()]


def format_engines(entries: list[dict]) -> str:
    lines = []
    for e in entries:
        takes = [k.replace("_", " ") for k in ("edge_labels", "directed", "homomorphic", "disconnected") if e[k]]
        limit = e["max_query_vertices"]
        lines.append(f"{e['engine']}  ({e['class']})")
        lines.append(f"  {e['summary']}")
        lines.append(f"  takes: {', '.join(takes) or 'undirected, vertex-labelled, connected queries'}"
                     f"; query vertices: {'any number' if limit is None else f'at most {limit}'}")
        for o in e["options"]:
            lines.append(f"  -o {o['name']}={o['default']!r}" + (f"  {o['meaning']}" if o["meaning"] else ""))
        lines.append("")
    return "\n".join(lines)
