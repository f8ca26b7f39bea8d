"""What ``gpusm engines`` prints: each registered engine's capabilities and constructor options,
with defaults from the signature and meanings from the numpydoc ``Parameters`` section of the
engine's class docstring (and of the base classes its ``**options`` reach)."""

from __future__ import annotations

import inspect
import re

from .engine import available_engines, engine_class


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


def _plain(text: str) -> str:
    """reST roles and literals as plain text: ``:mod:`a.b``` -> a.b, ````x```` -> x."""
    return re.sub(r":\w+:`~?([^`]+)`", r"\1", text).replace("``", "")


def numpydoc_parameters(doc: str) -> dict[str, tuple[str, str]]:
    """The ``Parameters`` section of a numpydoc docstring: name -> (type, description), each on
    one line. An entry ``a, b : int`` documents both names."""
    lines = inspect.cleandoc(doc or "").splitlines()
    out: dict[str, tuple[str, str]] = {}
    try:
        i = next(i for i in range(len(lines) - 1)
                 if lines[i].strip() == "Parameters" and set(lines[i + 1].strip()) == {"-"})
    except StopIteration:
        return out
    names: list[str] = []
    kind, text = "", []

    def flush():
        for n in names:
            out[n] = (kind, _plain(" ".join(text)))

    for j in range(i + 2, len(lines)):
        line = lines[j]
        if line and not line[0].isspace():
            if j + 1 < len(lines) and lines[j + 1].strip() and set(lines[j + 1].strip()) == {"-"}:
                break                                    # the next section's header
            flush()
            head, _, kind = line.partition(" : ")
            names, kind, text = [n.strip() for n in head.split(",")], kind.strip(), []
        elif line.strip():
            text.append(line.strip())
    flush()
    return out


def option_docs(cls: type) -> dict[str, tuple[str, str]]:
    """Option name -> (type, meaning) from the ``Parameters`` sections of ``cls`` and its bases
    (the most derived class that documents a name wins)."""
    out: dict[str, tuple[str, str]] = {}
    for klass in cls.__mro__:
        for name, entry in numpydoc_parameters(klass.__dict__.get("__doc__") or "").items():
            out.setdefault(name, entry)
    return out


def describe_engine(name: str) -> dict:
    """Name, class, summary, what queries it takes, and options (name, default, type, meaning)."""
    cls = engine_class(name)
    doc = inspect.getdoc(cls) or ""
    docs = option_docs(cls)
    options = [{"name": p.name,
                "default": None if p.default is inspect.Parameter.empty else p.default,
                "type": docs.get(p.name, ("", ""))[0],
                "meaning": docs.get(p.name, ("", ""))[1]} for p in _parameters(cls)]
    return {
        "engine": name, "class": f"{cls.__module__}.{cls.__qualname__}",
        "summary": _plain(" ".join(doc.split("\n\n")[0].split())),
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
            kind = f" ({o['type']})" if o["type"] else ""
            lines.append(f"  -o {o['name']}={o['default']!r}{kind}" + (f"  {o['meaning']}" if o["meaning"] else ""))
        lines.append("")
    return "\n".join(lines)
