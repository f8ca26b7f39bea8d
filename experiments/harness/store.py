"""Results files that survive interruption, damage and a second run.

- :class:`RowFile` appends one whole row at a time (the line is checked to end in a newline,
  then written, flushed and synced), after :func:`repair` has made the file whole.
- :func:`repair` reads a raw CSV record by record. A record that is not whole (no final
  newline, cut inside a quoted field, a wrong field count), a header line inside the data, or a
  second row for a key already seen, is moved to ``<file>.damaged`` with a
  :class:`DamagedRowWarning` naming the file and line; its query then runs again. ``skipped``
  rows are dropped too (their pairs run again). The file is rewritten through a temporary file
  and :func:`os.replace`, so a crash leaves the old file or the new one, never half of one.
- :func:`set_aside` moves the rows a given function names to ``<file>.discarded`` (the runner's rows
  measured under other settings, when asked to run them again), rewriting the file atomically.
- :func:`write_rows` writes a finished table (a benchmark's per-query rows) whole, through a
  temporary file and a rename.
- :class:`FolderLock` keeps two runs out of one output folder: the second one raises
  :class:`FolderLocked` naming the holder's pid and host. The lock is an ``fcntl.flock`` that the
  kernel drops when its process ends, so a killed run leaves nothing to take over.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import socket
import threading
import time
import warnings
from pathlib import Path


class DamagedRowWarning(UserWarning):
    """A results file had rows that were not whole; they were set aside and will run again."""


class FolderLocked(RuntimeError):
    """Another live run holds the output folder."""


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    path = Path(path)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temp.open("w", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        if temp.exists():
            temp.unlink()


def write_rows(path: Path, rows: list[dict], fields=None) -> Path:
    """Write ``rows`` as a whole CSV file at once (:func:`write_atomic`): a header of ``fields``
    (default: every key of the rows, in the order first seen), a missing value left empty."""
    if fields is None:
        fields = list(dict.fromkeys(key for row in rows for key in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(fields))
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, buffer.getvalue())
    return Path(path)


def _format(fields, values) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow(values)
    return buffer.getvalue()


def repair(path: Path, fields: tuple, key: tuple, drop_status: str | None = None,
           validate=None) -> list[tuple[int, str]]:
    """Make ``path`` whole (module docstring); return the (line, problem) pairs set aside.

    ``validate(row: dict) -> problem or None`` checks the values of a record with the right
    field count (a record read across a broken quote can have it by chance). Kept records are
    written back through :mod:`csv`, so the file parses the same way with any reader.
    """
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return []
    with path.open(newline="") as handle:
        lines = handle.read().splitlines(keepends=True)
    header = list(fields)
    status_at = header.index("status")
    key_at = [header.index(k) for k in key]
    good, damaged, seen = [_format(header, header)], [], {}
    dropped = False
    i = 0
    while i < len(lines):
        reader = csv.reader(lines[i:])
        try:
            record = next(reader)
            used = reader.line_num
        except csv.Error:                       # e.g. a quote never closed before the end
            record, used = None, len(lines) - i
        text = "".join(lines[i:i + used])
        problem = None
        if record is None or not text.endswith("\n"):
            problem = "cut short: no final newline"
        elif len(record) != len(header):
            problem = f"{len(record)} fields, expected {len(header)}"
        elif i == 0 and record != header:
            problem = "not the expected header"
        elif i > 0 and record == header:
            problem = "a header line inside the data"
        elif i > 0 and validate is not None:
            problem = validate(dict(zip(header, record)))
        if problem is not None:
            # set aside the first physical line only, and read on from the next one: a
            # record swallowed by a broken quote is recovered
            damaged.append((i + 1, problem, lines[i]))
            i += 1
            continue
        if i == 0:
            pass
        elif drop_status is not None and record[status_at] == drop_status:
            dropped = True
        else:
            row_key = tuple(record[k] for k in key_at)
            if row_key in seen:
                damaged.append((i + 1, f"duplicate of line {seen[row_key]}", text))
            else:
                seen[row_key] = i + 1
                good.append(_format(header, record))
        i += used
    if not damaged and not dropped:
        return []
    if damaged:
        aside = path.with_name(path.name + ".damaged")
        with aside.open("a", newline="") as handle:
            for line, problem, text in damaged:
                handle.write(f"# {path.name}:{line}: {problem}\n{text}"
                             + ("" if text.endswith("\n") else "\n"))
        for line, problem, _ in damaged:
            warnings.warn(f"{path}:{line}: damaged row set aside in {aside.name} ({problem}); "
                          "its query runs again", DamagedRowWarning, stacklevel=3)
    write_atomic(path, "".join(good))
    return [(line, problem) for line, problem, _ in damaged]


def set_aside(path: Path, fields: tuple, reason, suffix: str = ".discarded") -> list[tuple[int, str]]:
    """Move the records for which ``reason(row: dict)`` names a reason to ``<path><suffix>`` (each
    after a ``# <file>:<line>: <reason>`` line) and rewrite ``path`` without them, through
    :func:`write_atomic`; return the (line, reason) pairs moved. ``path`` must be whole (:func:`repair`)."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return []
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        kept, moved, line = [_format(header, header)], [], reader.line_num
        for record in reader:
            start, line = line + 1, reader.line_num
            why = reason(dict(zip(header, record))) if len(record) == len(fields) else None
            if why is None:
                kept.append(_format(header, record))
            else:
                moved.append((start, why, _format(header, record)))
    if not moved:
        return []
    with path.with_name(path.name + suffix).open("a", newline="") as handle:
        for start, why, text in moved:
            handle.write(f"# {path.name}:{start}: {why}\n{text}")
    write_atomic(path, "".join(kept))
    return [(start, why) for start, why, _ in moved]


class RowFile:
    """Append-only writer of whole rows (call :func:`repair` on the file first)."""

    def __init__(self, path: Path, fields: tuple):
        self.path = Path(path)
        self.fields = tuple(fields)
        new = not self.path.exists() or self.path.stat().st_size == 0
        self.handle = self.path.open("a", newline="")
        if new:
            self._write(_format(self.fields, self.fields))

    def _write(self, line: str) -> None:
        if not line.endswith("\n"):
            raise ValueError(f"{self.path}: refusing to write a row without its newline")
        self.handle.write(line)
        self.handle.flush()
        os.fsync(self.handle.fileno())

    def write(self, row: dict) -> None:
        self._write(_format(self.fields, [_cell(row.get(f)) for f in self.fields]))

    def close(self) -> None:
        self.handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _cell(value):
    return "" if value is None else value


# ---------------------------------------------------------------------- the folder lock
LOCK_NAME = ".gpusm-run.lock"


class FolderLock:
    """An exclusive claim on an output folder by this process (module docstring).

    The claim is an ``fcntl.flock`` on the lock file, held open while the lock is held: the
    kernel drops it when the process ends, however it ends, so a dead run's lock needs no
    takeover. The file names the holder (pid, host, command) for the message of a refused run.
    Re-entrant within one process: a second ``acquire`` by the holder nests.
    """

    _held: dict = {}                         # resolved lock path -> [depth, open file], this process
    _guard = threading.Lock()

    def __init__(self, folder: Path | str, command: str = ""):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self.command = command

    def holder(self) -> dict | None:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}

    def _refuse(self) -> FolderLocked:
        holder = {}
        for _ in range(20):                  # the holder writes its name just after its flock
            holder = self.holder()
            if holder:
                break
            time.sleep(0.01)
        holder = holder or {}
        pid, host = holder.get("pid"), holder.get("host")
        who = f"pid {pid} on host {host}" if pid else "an unreadable lock"
        since = f", since {holder['started']}" if holder.get("started") else ""
        return FolderLocked(f"{self.folder} is in use by another run ({who}{since}"
                            + (f": {holder['command']}" if holder.get("command") else "")
                            + f"); wait for it, or delete {self.path} if that run is gone")

    def acquire(self) -> "FolderLock":
        self.folder.mkdir(parents=True, exist_ok=True)
        me = str(self.path.resolve())
        with FolderLock._guard:
            held = FolderLock._held.get(me)
            if held:
                held[0] += 1
                return self
            for _ in range(100):
                handle = open(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644), "r+")
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    handle.close()
                    raise self._refuse() from None
                try:
                    same = os.stat(self.path).st_ino == os.fstat(handle.fileno()).st_ino
                except FileNotFoundError:
                    same = False
                if not same:                 # the holder before us removed that file: take the new one
                    handle.close()
                    continue
                try:
                    self._claim(handle)
                except BaseException:
                    handle.close()
                    raise
                FolderLock._held[me] = [1, handle]
                return self
            raise FolderLocked(f"{self.folder}: could not take the lock {self.path}")

    def _claim(self, handle) -> None:
        """Write this process's name into the locked file (a dead run's name there is replaced)."""
        handle.seek(0)
        left = handle.read()
        try:
            pid = json.loads(left).get("pid") if left.strip() else None
        except (ValueError, AttributeError):
            pid = None
        if isinstance(pid, int) and pid != os.getpid():
            warnings.warn(f"{self.folder}: replacing the lock of pid {pid}, which is no longer running")
        info = {"pid": os.getpid(), "host": socket.gethostname(), "command": self.command,
                "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(info) + "\n")
        handle.flush()
        os.fsync(handle.fileno())

    def release(self) -> None:
        me = str(self.path.resolve())
        with FolderLock._guard:
            held = FolderLock._held.get(me)
            if held is None:
                return
            if held[0] > 1:
                held[0] -= 1
                return
            del FolderLock._held[me]
            handle = held[1]
            try:
                self.path.unlink(missing_ok=True)   # still ours: unlinked before the flock is let go
            finally:
                handle.close()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
