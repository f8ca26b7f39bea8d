"""The error types of gpusm's public API (one place, so callers can catch them by name)."""

from __future__ import annotations


class InvalidGraphError(ValueError):
    """A graph's arrays violate the CSR invariants (:class:`common.graph.model.Graph`)."""


class GraphFormatError(ValueError):
    """A graph or query file is malformed: names the file, the line (1-based) and the problem."""

    def __init__(self, path, line: int | None, problem: str):
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


class UnknownEngineError(ValueError):
    """No engine is registered under this name; the message lists the registered ones."""

    def __init__(self, name: str, registered):
        self.name = name
        self.registered = list(registered)
        super().__init__(f"unknown engine {name!r}; registered engines: {', '.join(self.registered)}")


class DeviceOutOfMemory(MemoryError):
    """An allocation would exceed the device-memory budget (``device_memory_limit`` or the card),
    or with ``memory="host"`` an engine's host-memory cap (status oom either way)."""

    def __init__(self, requested: int, in_use: int, limit: int, what: str = "", memory: str = "device"):
        self.requested, self.in_use, self.limit = requested, in_use, limit
        label = f" for {what}" if what else ""
        super().__init__(f"{memory} allocation of {requested:,} bytes{label} exceeds the budget: "
                         f"{in_use:,} of {limit:,} bytes already in use")


__all__ = ["GraphFormatError", "InvalidGraphError", "DeviceOutOfMemory", "UnknownEngineError"]
