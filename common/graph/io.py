"""Graph file formats: content-based detection, readers, writers, query sets and count files.

Formats (``FORMATS``; docs/design.md, "The graph layer"):

``graph``
    The SIGMOD'20 study / EGSM / gMatch text format: ``t N M`` (a 4th header field is accepted
    and ignored), one ``v id label [degree]`` line per vertex, one ``e u v [label]`` line per
    undirected edge. Undirected.
``gsi``
    GSI's ``.g`` (gsi.md, "[RC] The code is directed"): per graph ``t # <id>``, a counts line
    ``nV nE maxVertexLabel maxEdgeLabel``, ``v id label`` and ``e from to label`` lines; the file
    ends with ``t # -1``. Several graphs per file, directed labelled edges. An undirected graph
    is written as both arcs of every edge plus a ``# undirected`` line after ``t # -1`` (GSI's
    own reader stops at ``t # -1``), and such a file reads back undirected.
``snap``
    SNAP edge lists: ``#`` comment lines, then ``u v`` per line (tab or spaces). Directed unless
    symmetrised or headed ``# Undirected graph`` (SNAP's own header); ids are remapped to
    ``0..n-1`` in ascending order. No labels, no isolated vertices.
``gmatch-binary``
    gMatch's binary CSR (gmatch.md, "Formats"): little-endian int32 |V|, int32 |E|,
    uint64 off[|V|+1], int32 labels[|V|], int32 adj[2|E|]. Undirected.
``daf``
    DAF's multi-graph format: ``t <id> <N> <sum of degrees>``, then ``id label degree nbr...``
    per vertex. Several graphs per file, undirected.

Any of them may be gzip-compressed; a text file may start with a UTF-8 byte-order mark. Only
regular files are read (not FIFOs or devices), and only when they fit in memory. Text is
tokenised by numpy (:class:`_Text`) and checked on whole arrays; an error names the first bad line.
"""

from __future__ import annotations

import gzip
import os
import re
import stat
import zlib
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import GraphFormatError, InvalidGraphError
from .model import MAX_LABEL, Graph, sorted_unique
from .paths import find_input

__all__ = [
    "FORMATS", "WRITERS", "detect_format", "load_graph", "load_graphs", "load_query_set",
    "read_expected_counts", "save_graph", "write_daf", "write_gmatch_binary", "write_graph", "write_gsi",
    "write_snap",
]

FORMATS = ("graph", "gsi", "snap", "gmatch-binary", "daf")
_UNDIRECTED_FORMATS = ("graph", "gmatch-binary", "daf")
_GSI_UNDIRECTED = re.compile(rb"#\s*undirected\b", re.IGNORECASE)    # after 't # -1'
_SNAP_UNDIRECTED = re.compile(rb"#\s*undirected graph\b", re.IGNORECASE)
_GZIP_MAGIC = b"\x1f\x8b"
_HEAD_BYTES = 1 << 16

# ---------------------------------------------------------------------------------- raw bytes


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == _GZIP_MAGIC


def _regular_size(path: Path) -> int:
    """The size of ``path``, which must be a regular file (a FIFO would block, a device never end)."""
    status = os.stat(path)
    mode = status.st_mode
    if stat.S_ISDIR(mode):
        raise GraphFormatError(path, None, "a folder, not a graph file")
    if not stat.S_ISREG(mode):
        raise GraphFormatError(path, None, "not a regular file (a FIFO, device or socket); "
                                           "graphs are read from regular files")
    return status.st_size


def _available_memory() -> int | None:
    """Bytes of memory available now (Linux's MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _check_memory(path: Path, size: int) -> None:
    """Refuse a file whose bytes alone would not fit in the available memory."""
    available = _available_memory()
    if available is not None and size > available:
        raise GraphFormatError(path, None, f"too large to read: {size:,} bytes, but only "
                                           f"{available:,} bytes of memory are available")


def _read_bytes(path: Path, limit: int | None = None) -> bytes:
    """The file's bytes, gunzipped when it starts with the gzip magic (at most ``limit`` bytes).
    Only a regular file is read, and read whole only when its bytes fit in memory."""
    size = _regular_size(path)
    gzipped = _is_gzip(path)
    if limit is None:
        _check_memory(path, size)
    try:
        if not gzipped:
            with open(path, "rb") as f:
                return f.read() if limit is None else f.read(limit)
        try:
            with gzip.open(path, "rb") as f:
                return f.read() if limit is None else f.read(limit)
        except (OSError, EOFError, zlib.error) as exc:
            raise GraphFormatError(path, None, f"corrupt gzip data: {exc}") from None
    except MemoryError:
        raise GraphFormatError(path, None, "not enough memory to read it") from None


def _binary_sizes(data: bytes) -> tuple[int, int, int] | None:
    """(|V|, |E|, expected file size) from a gMatch binary header, or None if too short."""
    if len(data) < 8:
        return None
    nv, ne = (int(x) for x in np.frombuffer(data, dtype="<i4", count=2))
    return nv, ne, 8 + 8 * (nv + 1) + 4 * nv + 8 * ne


_BOM = b"\xef\xbb\xbf"


def _without_bom(data: bytes) -> bytes:
    """Text without a leading UTF-8 byte-order mark."""
    return data[len(_BOM):] if data.startswith(_BOM) else data


def _is_int_token(token: bytes) -> bool:
    return re.fullmatch(rb"-?[0-9]+", token) is not None


def _detect(path: Path, head: bytes, size: Callable[[], int]) -> str:
    """Classify a file from its first bytes (``size()`` gives the full, decompressed size)."""
    if not head.strip():
        raise GraphFormatError(path, None, "empty file")
    if b"\0" in head:  # never in text; always in a gMatch binary (off[0] is 8 zero bytes)
        sizes = _binary_sizes(head)
        if sizes is not None and sizes[0] >= 0 and sizes[1] >= 0 and sizes[2] == size():
            return "gmatch-binary"
        hint = "" if sizes is None else (
            f"; read as a gMatch binary CSR its header says |V|={sizes[0]}, |E|={sizes[1]}, "
            f"which needs {sizes[2]} bytes, but the file has {size()} (truncated?)")
        raise GraphFormatError(path, None, f"unknown format: binary data{hint}")
    head = _without_bom(head)
    rows = [line.split() for line in head.split(b"\n")]
    rows = [r for r in rows if r and not r[0].startswith(b"#")]
    if not rows:
        raise GraphFormatError(path, None, "unknown format: only comment lines")
    first = rows[0]
    if first[0] == b"t":
        if len(first) > 1 and first[1].startswith(b"#"):
            return "gsi"
        if len(first) == 4 and len(rows) > 1 and _is_int_token(rows[1][0]):
            return "daf"
        counts_line = len(rows) > 1 and len(rows[1]) == 4 and all(_is_int_token(t) for t in rows[1])
        if counts_line:
            return "gsi"            # a GSI header without its '#': the reader names the problem
        return "graph"
    if first[0] in (b"v", b"e"):
        return "graph"  # a .graph file without its header: the reader names the problem
    if all(_is_int_token(tok) for tok in first):
        return "snap"
    shown = b" ".join(first)[:60].decode("latin-1")
    raise GraphFormatError(path, None, f"unknown format: first data line is {shown!r} "
                           f"(expected one of {', '.join(FORMATS)})")


def detect_format(path) -> str:
    """The format of a graph file, judged from its content: one of :data:`FORMATS`."""
    path = Path(path)
    head = _read_bytes(path, _HEAD_BYTES)

    def size() -> int:
        if len(head) < _HEAD_BYTES:
            return len(head)
        return len(_read_bytes(path)) if _is_gzip(path) else path.stat().st_size

    return _detect(path, head, size)


# ---------------------------------------------------------------------------------- tokens

_BLANK = np.zeros(256, dtype=bool)
_BLANK[[9, 10, 11, 12, 13, 32]] = True
_MARK = np.ones(256, dtype=np.uint8)  # newline or a byte that cannot be part of an integer
_MARK[[9, 11, 12, 13, 32]] = 0
_MARK[ord("0"):ord("9") + 1] = 0
_MAX_DIGITS = 18  # any 18-digit integer fits in int64


class _Text:
    """A text file cut into whitespace-separated tokens, all at once.

    Token arrays: ``start``/``end`` (byte range), ``line`` (1-based), ``is_int`` and ``value``
    (the integer, for tokens matching ``-?[0-9]{1,18}``). Row arrays, one entry per non-blank
    line: ``first`` (its first token), ``nfields``, ``lineno`` and ``kind`` (the first token's
    byte when that token is a single character, else 0).
    """

    def __init__(self, path: Path, data: bytes):
        self.path, self.data = path, data
        self.buf = buf = np.frombuffer(data, dtype=np.uint8)
        blank = _BLANK[buf]
        start = np.flatnonzero(~blank & np.concatenate(([True], blank[:-1])))
        end = np.flatnonzero(~blank & np.concatenate((blank[1:], [True]))) + 1
        del blank
        # One pass of sums over the spans [s0, e0), [e0, s1), [s1, e1), ...: a token span counts
        # its non-digit bytes, a gap counts its newlines (_MARK is 1 for both kinds of byte).
        bounds = np.empty(2 * start.size, dtype=np.int64)
        bounds[0::2], bounds[1::2] = start, end
        sums = np.zeros(bounds.size, dtype=np.int64)
        inside = bounds.size - int(bool(start.size) and end[-1] == buf.size)  # no gap after the end
        if inside:
            sums[:inside] = np.add.reduceat(_MARK[buf], bounds[:inside], dtype=np.int64)
        non_digits, gap_newlines = sums[0::2], sums[1::2]
        self.line = np.empty(start.size, dtype=np.int64)
        if start.size:
            self.line[0] = 1 + data.count(b"\n", 0, int(start[0]))
            np.cumsum(gap_newlines[:-1], out=self.line[1:])
            self.line[1:] += self.line[0]
        negative = buf[start] == ord("-")
        length = end - start
        self.is_int = (non_digits == negative) & (length > negative) & (length - negative <= _MAX_DIGITS)
        self.start, self.end = start, end
        self.value = np.zeros(start.size, dtype=np.int64)
        if self.is_int.any():
            self.value[self.is_int] = self._parse_ints(length)

        row_start = np.ones(start.size, dtype=bool)
        row_start[1:] = gap_newlines[:-1] > 0
        self.first = np.flatnonzero(row_start)
        self.nfields = np.diff(np.append(self.first, start.size))
        self.lineno = self.line[self.first]
        single = length[self.first] == 1
        self.kind = np.where(single, buf[start[self.first]], 0).astype(np.uint8)

    def _parse_ints(self, length: np.ndarray) -> np.ndarray:
        """Parse every integer token in one C call, after blanking out the other tokens."""
        other = np.flatnonzero(~self.is_int)
        text = self.data
        if other.size:
            copy = self.buf.copy()
            copy[_spans(self.start[other], length[other])] = ord(" ")
            text = copy.tobytes()
        values = np.fromstring(text, dtype=np.int64, sep=" ")
        if values.size != int(self.is_int.sum()):
            raise RuntimeError(f"{self.path}: integer tokenizer disagreement "
                               f"({values.size} values for {int(self.is_int.sum())} tokens)")
        return values

    # -- access ----------------------------------------------------------------------------
    @property
    def num_rows(self) -> int:
        return int(self.first.size)

    def token(self, index: int) -> str:
        text = self.data[self.start[index]:self.end[index]].decode("utf-8", "replace")
        return text if len(text) <= 40 else text[:37] + "..."

    def field(self, rows: np.ndarray, j: int) -> np.ndarray:
        """Integer value of field ``j`` (0-based) of each row in ``rows``."""
        return self.value[self.first[rows] + j]

    def error(self, row: int, problem: str) -> GraphFormatError:
        return GraphFormatError(self.path, int(self.lineno[row]), problem)

    def line_error(self, line: int, problem: str) -> GraphFormatError:
        return GraphFormatError(self.path, int(line), problem)


class _Checks:
    """Collects vectorised syntax checks and raises the one whose first bad line comes first."""

    def __init__(self, text: _Text):
        self.text = text
        self.best: tuple[int, Callable[[], str]] | None = None

    def rows(self, bad: np.ndarray, message: Callable[[int], str]) -> None:
        """``bad`` is a bool mask over rows; ``message(row)`` describes the first bad row."""
        hits = np.flatnonzero(bad)
        if hits.size:
            row = int(hits[0])
            self._offer(int(self.text.lineno[row]), lambda: message(row))

    def tokens(self, bad: np.ndarray, message: Callable[[int], str]) -> None:
        """``bad`` is a bool mask over tokens; ``message(token)`` describes the first bad token."""
        hits = np.flatnonzero(bad)
        if hits.size:
            tok = int(hits[0])
            self._offer(int(self.text.line[tok]), lambda: message(tok))

    def integers(self, expected: np.ndarray) -> None:
        """Every token where ``expected`` is True must be an integer."""
        def message(tok: int) -> str:
            token = self.text.token(tok)
            if re.fullmatch(r"-?[0-9]+", token):
                return f"integer {token} is too large (at most {_MAX_DIGITS} digits)"
            return f"non-integer token {token!r}"

        self.tokens(expected & ~self.text.is_int, message)

    def _offer(self, line: int, message: Callable[[], str]) -> None:
        if self.best is None or line < self.best[0]:
            self.best = (line, message)

    def raise_first(self) -> None:
        if self.best is not None:
            line, message = self.best
            raise self.text.line_error(line, message())


def _first(bad: np.ndarray) -> int | None:
    """Index of the first True entry (entries are in file order), or None."""
    return int(np.argmax(bad)) if bad.any() else None


def _kind_name(text: _Text, row: int) -> str:
    return text.token(int(text.first[row]))


def _spans(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ``range(start, start + count)`` over the pairs, without a Python loop."""
    counts = np.maximum(counts, 0)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(total)


# ---------------------------------------------------------------------------------- shared checks


def _check_vertex_ids(text: _Text, rows: np.ndarray, ids: np.ndarray, n: int, what: str) -> None:
    """Each id in ``0..n-1`` exactly once (``rows`` are the defining lines, in file order)."""
    k = _first((ids < 0) | (ids >= n))
    if k is not None:
        raise text.error(rows[k], f"vertex id {int(ids[k])} out of range 0..{n - 1} ({what})")
    earlier, later = _repeats(ids)
    _raise_first_pair(text, rows, earlier, later,
                      "vertex {value} is defined twice (first on line {first})", ids)


def _vertex_labels(text: _Text, rows: np.ndarray, id_field: int, n: int, what: str,
                   maximum: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(ids, labels by id) of ``n`` vertices defined by ``rows`` (id in field ``id_field``, its
    label in the next field), both checked (:func:`_check_vertex_ids` with ``what``,
    :func:`_check_labels` with ``maximum``)."""
    ids = text.field(rows, id_field)
    _check_vertex_ids(text, rows, ids, n, what)
    vlabels = text.field(rows, id_field + 1)
    _check_labels(text, rows, vlabels, "vertex", maximum)
    labels = np.zeros(n, dtype=np.int32)
    labels[ids] = vlabels
    return ids, labels


def _check_labels(text: _Text, rows: np.ndarray, labels: np.ndarray, what: str,
                  maximum: int | None = None) -> None:
    """Labels must lie in 0..MAX_LABEL, and be at most ``maximum`` where a header gives one."""
    top = MAX_LABEL if maximum is None else min(maximum, MAX_LABEL)
    k = _first((labels < 0) | (labels > top))
    if k is not None:
        value = int(labels[k])
        if value < 0:
            bound = "negative"
        elif maximum is not None and value > maximum:
            bound = f"above the header's maximum {maximum}"
        else:
            bound = f"above the largest supported label {MAX_LABEL:,} (renumber the labels 0..L-1)"
        raise text.error(rows[k], f"{what} label {value} is {bound}")


def _edge_graph(text: _Text, rows: np.ndarray, n: int, src: np.ndarray, dst: np.ndarray,
                elab: np.ndarray | None, labels: np.ndarray, *, directed: bool,
                merge_reverse: bool, name: str, meta: dict) -> Graph:
    """Check an edge list read from ``rows`` (one edge per row, in file order) and build the CSR.

    Errors name the first offending line: endpoint out of range, self-loop, repeated edge. For an
    undirected graph ``(u, v)`` and ``(v, u)`` are the same edge; with ``merge_reverse`` (a
    directed file read as undirected) such a pair is merged when its labels agree.
    """
    k = _first((src < 0) | (src >= n) | (dst < 0) | (dst >= n))
    if k is not None:
        x = int(src[k]) if not 0 <= src[k] < n else int(dst[k])
        raise text.error(rows[k], f"edge endpoint {x} out of range 0..{n - 1}")
    k = _first(src == dst)
    if k is not None:
        raise text.error(rows[k], f"self-loop on vertex {int(src[k])}")
    if elab is not None:
        _check_labels(text, rows, elab, "edge")
    if directed or merge_reverse:
        _raise_on_repeat(text, rows, src * np.int64(n) + dst, "duplicate edge")
    lo, hi = (src, dst) if directed else (np.minimum(src, dst), np.maximum(src, dst))
    if not directed:
        key = lo * np.int64(n) + hi
        if merge_reverse:
            earlier, later = _repeats(key)
            if elab is not None:
                differ = elab[earlier] != elab[later]
                _raise_first_pair(text, rows, earlier[differ], later[differ],
                                  "edge reverses the edge on line {first} with another label; "
                                  "read undirected, the two cannot be merged")
            keep = np.ones(key.size, dtype=bool)
            keep[later] = False
            lo, hi = lo[keep], hi[keep]
            elab = None if elab is None else elab[keep]
        else:
            _raise_on_repeat(text, rows, key, "duplicate edge")
        rows_out, cols = np.concatenate([lo, hi]), np.concatenate([hi, lo])
        elab = None if elab is None else np.concatenate([elab, elab])
    else:
        rows_out, cols = lo, hi
    full_key = rows_out * np.int64(n) + cols
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows_out, minlength=n), out=offsets[1:])
    if elab is None:
        neighbors = np.sort(full_key) % n if n else full_key
    else:
        order = np.argsort(full_key, kind="stable")
        neighbors, elab = cols[order], elab[order]
    return Graph(offsets, neighbors, labels, elab, directed=directed, name=name, meta=meta)


def _repeats(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (earlier, later) of equal keys, adjacent in file order within each group."""
    sorted_key = np.sort(key)
    if not np.any(sorted_key[1:] == sorted_key[:-1]):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(key, kind="stable")
    repeat = np.flatnonzero(key[order][1:] == key[order][:-1])
    return order[repeat], order[repeat + 1]


def _raise_first_pair(text: _Text, rows, earlier, later, problem: str, values=None) -> None:
    """Report the pair whose later line comes first; ``problem`` may name ``{first}`` (the
    earlier line) and ``{value}`` (``values`` at the later entry)."""
    if earlier.size:
        k = int(np.argmin(rows[later]))
        first = int(text.lineno[rows[earlier[k]]])
        value = None if values is None else int(values[later[k]])
        raise text.error(int(rows[later[k]]), problem.format(first=first, value=value))


def _raise_on_repeat(text: _Text, rows, key, problem: str) -> None:
    earlier, later = _repeats(key)
    _raise_first_pair(text, rows, earlier, later, problem + ": the same edge is on line {first}")


# ---------------------------------------------------------------------------------- .graph


def _parse_graph(text: _Text, directed: bool, name: str, meta: dict) -> list[Graph]:
    """``t N M [L]`` / ``v id label [degree]`` / ``e u v [label]``; one undirected graph."""
    kind, nf = text.kind, text.nfields
    is_t, is_v, is_e = kind == ord("t"), kind == ord("v"), kind == ord("e")
    checks = _Checks(text)
    checks.rows(~(is_t | is_v | is_e), lambda r: f"unknown line type {_kind_name(text, r)!r} "
                                                 "(expected 't', 'v' or 'e')")
    checks.rows(is_t & ((nf < 3) | (nf > 4)),
                lambda r: f"header needs the form 't N M', found {nf[r]} fields")
    checks.rows(is_v & ((nf < 3) | (nf > 4)),
                lambda r: f"vertex line needs the form 'v id label [degree]', found {nf[r]} fields")
    checks.rows(is_e & ((nf < 3) | (nf > 4)),
                lambda r: f"edge line needs the form 'e u v [label]', found {nf[r]} fields")
    if text.num_rows and not is_t[0]:
        checks.rows(np.arange(text.num_rows) == 0, lambda r: "expected the header 't N M' first")
    checks.rows(is_t & (np.arange(text.num_rows) > 0),
                lambda r: "a second 't' header: a .graph file holds one graph")
    expect_int = np.ones(text.start.size, dtype=bool)
    expect_int[text.first] = False
    checks.integers(expect_int)
    checks.raise_first()

    header = 0
    n, m = int(text.value[text.first[header] + 1]), int(text.value[text.first[header] + 2])
    if n < 0 or m < 0:
        raise text.error(header, "negative vertex or edge count in the header")
    vrows, erows = np.flatnonzero(is_v), np.flatnonzero(is_e)
    if vrows.size != n:
        raise text.error(header, f"header declares {n} vertices but the file has {vrows.size} 'v' lines")
    if erows.size != m:
        raise text.error(header, f"header declares {m} edges but the file has {erows.size} 'e' lines")
    ids, labels = _vertex_labels(text, vrows, 1, n, f"the header declares {n} vertices")
    src, dst = text.field(erows, 1), text.field(erows, 2)
    elab = None
    labelled = nf[erows] == 4
    if labelled.any():
        elab = np.zeros(erows.size, dtype=np.int64)
        elab[labelled] = text.field(erows[labelled], 3)
    graph = _edge_graph(text, erows, n, src, dst, elab, labels, directed=False,
                        merge_reverse=False, name=name, meta=meta)
    with_degree = nf[vrows] == 4
    if with_degree.any():
        declared = text.field(vrows[with_degree], 3)
        actual = graph.degrees[ids[with_degree]]
        k = _first(declared != actual)
        if k is not None:
            raise text.error(vrows[with_degree][k], f"vertex {int(ids[with_degree][k])} declares degree "
                                  f"{int(declared[k])} but has {int(actual[k])} edges")
    return [graph]


# ---------------------------------------------------------------------------------- GSI .g


def _sections(text: _Text, is_t: np.ndarray, id_field: int) -> list[tuple[int, int]]:
    """(first row, end row) of each block that starts at a 't' row; graph ids must not repeat."""
    heads = np.flatnonzero(is_t)
    ids = text.field(heads, id_field)
    earlier, later = _repeats(ids)
    _raise_first_pair(text, heads, earlier, later, "graph id {value} repeats (first on line {first})", ids)
    ends = np.append(heads[1:], text.num_rows)
    return [(int(a), int(b)) for a, b in zip(heads, ends)]


def _comment_line(text: _Text, row: int) -> bytes:
    """The text of comment row ``row`` (its tokens' span)."""
    return text.data[text.start[text.first[row]]:text.end[text.first[row] + text.nfields[row] - 1]]


def _parse_gsi(text: _Text, directed: bool | None, name: str, meta: dict) -> list[Graph]:
    """``t # id`` / ``nV nE maxVL maxEL`` / ``v id label`` / ``e from to label`` ... ``t # -1``,
    then optional ``#`` comment lines; ``directed=None``: undirected iff one is ``# undirected``."""
    kind, nf, rows = text.kind, text.nfields, np.arange(text.num_rows)
    comment = text.buf[text.start[text.first]] == ord("#")
    last = int(np.flatnonzero(~comment)[-1]) if (~comment).any() else -1
    trailer = comment & (rows > last)
    if directed is None:
        directed = not any(_GSI_UNDIRECTED.match(_comment_line(text, r)) for r in np.flatnonzero(trailer))
    kind = np.where(trailer, 0, kind)
    is_t = kind == ord("t")
    is_counts = np.zeros(text.num_rows, dtype=bool)
    is_counts[1:] = is_t[:-1] & text.is_int[text.first[1:]]
    is_v, is_e = kind == ord("v"), kind == ord("e")
    second = text.first + np.minimum(1, nf - 1)
    hash_mark = (text.end[second] - text.start[second] == 1) & (text.buf[text.start[second]] == ord("#"))
    checks = _Checks(text)
    checks.rows(~(is_t | is_counts | is_v | is_e | trailer),
                lambda r: f"unknown line type {_kind_name(text, r)!r} (expected 't', 'v' or 'e')")
    checks.rows(is_t & ((nf != 3) | ~hash_mark), lambda r: "graph header needs the form 't # <id>'")
    checks.rows(is_counts & (nf != 4), lambda r: "counts line needs the form "
                f"'nV nE maxVertexLabel maxEdgeLabel', found {nf[r]} fields")
    checks.rows(is_v & (nf != 3), lambda r: f"vertex line needs the form 'v id label', found {nf[r]} fields")
    checks.rows(is_e & (nf != 4),
                lambda r: f"edge line needs the form 'e from to label', found {nf[r]} fields")
    if not is_t[0]:
        checks.rows(rows == 0, lambda r: "expected the graph header 't # 0' first")
    expect_int = np.repeat(~trailer, nf)
    expect_int[text.first[is_t | is_v | is_e]] = False
    expect_int[second[is_t]] = False
    checks.integers(expect_int)
    checks.raise_first()

    t_rows = np.flatnonzero(is_t)
    ids = text.field(t_rows, 2)
    closing = t_rows[ids == -1]
    if closing.size == 0:
        raise text.error(text.num_rows - 1, "missing the closing 't # -1' line (truncated file?)")
    if int(closing[0]) != last:
        raise text.error(int(closing[0]) + 1, "content after the closing 't # -1' line")
    negative = t_rows[ids < -1]
    if negative.size:
        raise text.error(int(negative[0]), "graph id must be non-negative (only 't # -1' ends the file)")

    graphs = []
    for head, stop in _sections(text, is_t, 2)[:-1]:
        if head + 1 == stop or not is_counts[head + 1]:
            raise text.error(head, "graph header must be followed by the counts line "
                                   "'nV nE maxVertexLabel maxEdgeLabel'")
        counts_row = head + 1
        nv, ne, max_vl, max_el = (int(x) for x in text.value[text.first[counts_row] + np.arange(4)])
        if min(nv, ne) < 0:
            raise text.error(counts_row, "negative vertex or edge count")
        block = np.arange(counts_row + 1, stop)
        vrows, erows = block[is_v[block]], block[is_e[block]]
        if vrows.size != nv:
            raise text.error(counts_row, f"counts line declares {nv} vertices but the graph has "
                                         f"{vrows.size} 'v' lines")
        if erows.size != ne:
            raise text.error(counts_row, f"counts line declares {ne} edges but the graph has "
                                         f"{erows.size} 'e' lines")
        _, labels = _vertex_labels(text, vrows, 1, nv, f"the counts line declares {nv} vertices", max_vl)
        elab = text.field(erows, 3)
        _check_labels(text, erows, elab, "edge", max_el)
        gid = int(text.value[text.first[head] + 2])
        graphs.append(_edge_graph(text, erows, nv, text.field(erows, 1), text.field(erows, 2), elab,
                                  labels, directed=directed, merge_reverse=True,
                                  name=name, meta={**meta, "graph_id": gid}))
    return graphs


# ---------------------------------------------------------------------------------- DAF


def _parse_daf(text: _Text, directed: bool, name: str, meta: dict) -> list[Graph]:
    """``t <id> <N> <sum of degrees>`` then ``id label degree nbr...`` per vertex; undirected."""
    kind, nf = text.kind, text.nfields
    rows = np.arange(text.num_rows)
    is_t = kind == ord("t")
    checks = _Checks(text)
    checks.rows(is_t & (nf != 4), lambda r: "graph header needs the form 't <id> <N> <sum of degrees>', "
                                            f"found {nf[r]} fields")
    checks.rows(~is_t & (nf < 3), lambda r: "vertex line needs the form 'id label degree nbr...', "
                                            f"found {nf[r]} fields")
    if text.num_rows and not is_t[0]:
        checks.rows(rows == 0, lambda r: "expected the graph header 't <id> <N> <sum of degrees>' first")
    expect_int = np.ones(text.start.size, dtype=bool)
    expect_int[text.first[is_t]] = False
    checks.integers(expect_int)
    checks.raise_first()
    vertex_rows = np.flatnonzero(~is_t)
    declared = text.field(vertex_rows, 2)
    listed = nf[vertex_rows] - 3
    k = _first(declared != listed)
    if k is not None:
        row = vertex_rows[k]
        raise text.error(row, f"vertex {int(text.value[text.first[row]])} declares degree "
                              f"{int(declared[k])} but lists {int(listed[k])} neighbours")

    graphs = []
    for head, stop in _sections(text, is_t, 1):
        gid, n, degree_sum = (int(x) for x in text.value[text.first[head] + np.arange(1, 4)])
        if n < 0:
            raise text.error(head, "negative vertex count")
        vrows = np.arange(head + 1, stop)
        if vrows.size != n:
            raise text.error(head, f"header declares {n} vertices but the graph has "
                                   f"{vrows.size} vertex lines")
        vid, labels = _vertex_labels(text, vrows, 0, n, f"the header declares {n} vertices")
        degrees = nf[vrows] - 3
        if int(degrees.sum()) != degree_sum:
            raise text.error(head, f"header declares a degree sum of {degree_sum} but the vertex "
                                   f"lines list {int(degrees.sum())} neighbours")
        graphs.append(_adjacency_graph(text, vrows, vid, degrees, labels, name,
                                       {**meta, "graph_id": gid}))
    return graphs


def _adjacency_graph(text: _Text, vrows, vid, degrees, labels, name: str, meta: dict) -> Graph:
    """Undirected graph from per-vertex neighbour lists, which must be symmetric and simple."""
    n = labels.size
    tokens = _spans(text.first[vrows] + 3, degrees)
    src = np.repeat(vid, degrees)
    dst = text.value[tokens]
    owner = np.repeat(vrows, degrees)
    bad = (dst < 0) | (dst >= n)
    if bad.any():
        k = int(np.argmax(bad))
        raise text.error(int(owner[k]), f"neighbour {int(dst[k])} out of range 0..{n - 1}")
    loop = src == dst
    if loop.any():
        k = int(np.argmax(loop))
        raise text.error(int(owner[k]), f"self-loop on vertex {int(src[k])}")
    key = src * np.int64(n) + dst
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    repeat = np.flatnonzero(sorted_key[1:] == sorted_key[:-1])
    if repeat.size:
        k = int(order[repeat[np.argmin(owner[order[repeat]])]])
        raise text.error(int(owner[k]), f"neighbour {int(dst[k])} is listed twice")
    missing = ~np.isin(dst * np.int64(n) + src, sorted_key)
    if missing.any():
        k = int(np.argmax(missing))
        raise text.error(int(owner[k]), f"vertex {int(src[k])} lists {int(dst[k])} as a neighbour, "
                                        f"but {int(dst[k])} does not list {int(src[k])}")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=offsets[1:])
    return Graph(offsets, sorted_key % n if n else sorted_key, labels, name=name, meta=meta)


# ---------------------------------------------------------------------------------- SNAP

_SNAP_COUNTS = re.compile(rb"#\s*Nodes:\s*(\d+)\s+Edges:\s*(\d+)")


def _parse_snap(text: _Text, directed: bool | None, name: str, meta: dict) -> list[Graph]:
    """``#`` comments, then ``u v`` per line; ``directed=None``: undirected iff a header comment
    starts ``# Undirected graph``. Ids are remapped to ``0..n-1`` in ascending order
    (``meta["original_ids"]``); self-loops and repeated lines are dropped and counted in
    ``meta["dropped_self_loops"]`` / ``meta["dropped_repeated_edges"]``. A SNAP header comment
    ``# Nodes: N Edges: M`` is checked against the distinct ids and the edge lines."""
    comment = text.buf[text.start[text.first]] == ord("#")
    data_rows = np.flatnonzero(~comment)
    checks = _Checks(text)
    checks.rows(~comment & (text.nfields != 2),
                lambda r: f"edge line needs the form 'u v', found {text.nfields[r]} fields")
    expect_int = np.repeat(~comment, text.nfields)
    checks.integers(expect_int)
    checks.raise_first()
    src, dst = text.field(data_rows, 0), text.field(data_rows, 1)
    k = _first((src < 0) | (dst < 0))
    if k is not None:
        raise text.error(data_rows[k], "negative vertex id")
    ends = np.concatenate([src, dst])
    original = sorted_unique(ends)
    n = original.size
    inverse = np.searchsorted(original, ends)
    src, dst = inverse[:src.size], inverse[src.size:]
    header_rows = np.flatnonzero(comment[:data_rows[0]] if data_rows.size else comment)
    if directed is None:
        directed = not any(_SNAP_UNDIRECTED.match(_comment_line(text, r)) for r in header_rows)
    for row in header_rows:
        match = _SNAP_COUNTS.match(_comment_line(text, row))
        if match:
            nodes, edges = int(match.group(1)), int(match.group(2))
            if nodes != n or edges != data_rows.size:
                raise text.error(int(row), f"header comment says {nodes} nodes and {edges} edges, but "
                                           f"the file has {n} distinct ids and {data_rows.size} edge lines")
    loops = src == dst
    pair = src[~loops] * np.int64(n) + dst[~loops]
    repeated = pair.size - sorted_unique(pair).size
    meta = {**meta, "original_ids": original.astype(np.int64), "dropped_self_loops": int(loops.sum()),
            "dropped_repeated_edges": int(repeated)}
    return [Graph.from_edges(n, src, dst, directed=directed, name=name, meta=meta)]


# ---------------------------------------------------------------------------------- gMatch binary


def _parse_gmatch_binary(path: Path, data: bytes, name: str, meta: dict) -> list[Graph]:
    """int32 |V|, int32 |E|, uint64 off[|V|+1], int32 labels[|V|], int32 adj[2|E|] (little-endian)."""
    sizes = _binary_sizes(data)
    if sizes is None or min(sizes[:2]) < 0 or sizes[2] != len(data):
        detail = "" if sizes is None else f": header says |V|={sizes[0]}, |E|={sizes[1]}, " \
                                          f"which needs {sizes[2]} bytes"
        raise GraphFormatError(path, None, f"truncated or corrupt gMatch binary CSR "
                                           f"({len(data)} bytes{detail})")
    nv, ne, _ = sizes
    at = 8
    offsets = np.frombuffer(data, dtype="<u8", count=nv + 1, offset=at)
    at += 8 * (nv + 1)
    labels = np.frombuffer(data, dtype="<i4", count=nv, offset=at)
    at += 4 * nv
    adj = np.frombuffer(data, dtype="<i4", count=2 * ne, offset=at)

    def fail(problem: str) -> GraphFormatError:
        return GraphFormatError(path, None, f"corrupt gMatch binary CSR: {problem}")

    if offsets[0] != 0 or offsets[-1] != 2 * ne:
        raise fail(f"offsets must run from 0 to 2|E|={2 * ne}, found {offsets[0]}..{offsets[-1]}")
    if offsets.max() > 2 * ne:
        raise fail(f"offset of vertex {int(np.argmax(offsets))} exceeds 2|E|={2 * ne}")
    offsets = offsets.astype(np.int64)
    drops = np.flatnonzero(np.diff(offsets) < 0)
    if drops.size:
        raise fail(f"offsets decrease at vertex {int(drops[0])}")
    if nv and labels.min() < 0:
        raise fail(f"vertex {int(np.argmin(labels))} has a negative label")
    try:
        return [Graph(offsets, adj, labels, name=name, meta=meta)]
    except InvalidGraphError as exc:
        raise fail(str(exc)) from None


# ---------------------------------------------------------------------------------- public API

_TEXT_PARSERS = {"graph": _parse_graph, "gsi": _parse_gsi, "snap": _parse_snap, "daf": _parse_daf}


def _file_stem(path: Path) -> str:
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return Path(name).stem


def _direction(fmt: str, directed: bool | None, symmetrize: bool) -> bool | None:
    if directed and symmetrize:
        raise ValueError("directed=True contradicts symmetrize=True")
    if fmt in _UNDIRECTED_FORMATS:
        if directed:
            raise ValueError(f"the {fmt!r} format is undirected; directed=True is not supported")
        return False
    if symmetrize:
        return False
    return None if directed is None else bool(directed)      # None: as the file says


def load_graphs(path, *, directed: bool | None = None, symmetrize: bool = False,
                name: str | None = None, fmt: str | None = None) -> list[Graph]:
    """Every graph in a file, its format detected from the content (or forced by ``fmt``).

    ``directed`` defaults to the file's: ``gsi`` and ``snap`` are directed unless the file is marked
    undirected (see :data:`FORMATS`); the others are undirected and refuse ``directed=True``. ``symmetrize=True`` (or
    ``directed=False``) reads a directed file as undirected. Graphs are named after the file
    stem (``name`` overrides it); in a file with several graphs, each gets ``_<id>`` appended,
    the id from the file kept in ``meta["graph_id"]``.
    """
    path = find_input(path)
    data = _read_bytes(path)
    if fmt is None:
        fmt = _detect(path, data[:_HEAD_BYTES], lambda: len(data))
    elif fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    is_directed = _direction(fmt, directed, symmetrize)
    base = name if name is not None else _file_stem(path)
    meta = {"source": str(path), "format": fmt}
    if fmt == "gmatch-binary":
        return _parse_gmatch_binary(path, data, base, meta)
    data = _without_bom(data)
    if not data.strip():
        raise GraphFormatError(path, None, "empty file")
    try:
        graphs = _TEXT_PARSERS[fmt](_Text(path, data), is_directed, base, meta)
    except MemoryError:
        raise GraphFormatError(path, None, f"not enough memory to parse its {len(data):,} bytes") from None
    if len(graphs) > 1:
        graphs = [g.replace(name=f"{base}_{g.meta['graph_id']}") for g in graphs]
    return graphs


def load_graph(path, *, directed: bool | None = None, symmetrize: bool = False,
               name: str | None = None, fmt: str | None = None) -> Graph:
    """Read the one graph in a file, its format detected from the content.

    Parameters
    ----------
    path : str or pathlib.Path
        A graph file: ``graph`` (t/v/e text), ``gsi``, ``gmatch-binary`` or a SNAP edge list
        (optionally gzipped). A relative path not found in the working directory is looked up
        in the data folder (``$GPUSM_DATA``, else the checkout's ``data/``:
        :func:`common.graph.paths.find_input`).
    directed : bool, optional
        Defaults to the file's: ``gsi`` and ``snap`` are directed unless marked undirected, the
        others undirected.
    symmetrize : bool
        Read a directed file as undirected.
    name : str, optional
        The graph's name (default: the file stem).
    fmt : str, optional
        Force a format instead of detecting it.

    Returns
    -------
    Graph
        The graph; a SNAP list's compacted ids keep the file's ids in ``meta["original_ids"]``.

    Raises
    ------
    FileNotFoundError
        Neither the path nor the data folder has the file (the message names where it looked).
    GraphFormatError
        The file is not a valid graph, or holds several (read those with :func:`load_graphs`).

    Examples
    --------
    >>> from gpusm import load_graph
    >>> hprd = load_graph("hprd/HPRD.graph")      # data/hprd/HPRD.graph unless ./hprd/HPRD.graph exists
    >>> hprd.num_vertices, hprd.num_edges
    (9460, 34998)
    """
    graphs = load_graphs(path, directed=directed, symmetrize=symmetrize, name=name, fmt=fmt)
    if not graphs:
        raise GraphFormatError(path, None, "the file holds no graph")
    if len(graphs) > 1:
        raise GraphFormatError(path, None, f"the file holds {len(graphs)} graphs; "
                                           "call load_graphs to read them all")
    return graphs[0]


def natural_key(text: str) -> list:
    """Sort key that orders digit runs by value: ``q_2`` before ``q_10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


#: Files a query folder may hold beside its graphs (QuerySet.save writes params.json).
_METADATA_SUFFIXES = {".json", ".md", ".csv", ".npy", ".yaml", ".yml"}


def load_query_set(folder_or_files, **options) -> list[Graph]:
    """Queries from a folder (every non-hidden file in it except metadata such as a query set's
    ``params.json``, in natural order: ``q_2`` before ``q_10``), from one file (all its graphs: GSI
    and DAF files hold several), or from a list of
    files (in the order given). Each graph is named after its file stem; ``options`` go to
    :func:`load_graphs`. A file that holds no graph is an error."""
    if isinstance(folder_or_files, (str, Path)):
        source = find_input(folder_or_files)
        if source.is_dir():
            files = sorted((p for p in source.iterdir() if p.is_file() and not p.name.startswith(".")
                            and p.suffix.lower() not in _METADATA_SUFFIXES),
                           key=lambda p: natural_key(p.name))
            if not files:
                raise FileNotFoundError(f"no query files in {source}")
        else:
            files = [source]
    else:
        files = [Path(p) for p in folder_or_files]
    queries = []
    for file in files:
        graphs = load_graphs(file, **options)
        if not graphs:
            raise GraphFormatError(file, None, "the file holds no graph")
        queries += graphs
    return queries


def read_expected_counts(path) -> dict[str, int]:
    """Known embedding counts: ``name:count`` (hprd) or ``name count`` (yeast, gmatch_test) per
    line; blank lines and ``#`` comments are skipped. Keys lose a ``.graph`` suffix, so they equal
    the stems that :func:`load_query_set` gives the queries."""
    path = find_input(path)
    counts: dict[str, int] = {}
    first_seen: dict[str, int] = {}
    lines = _without_bom(_read_bytes(path)).decode("utf-8", "replace").splitlines()
    for lineno, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        fields = text.rsplit(":", 1) if ":" in text else text.split()
        fields = [f.strip() for f in fields]
        if len(fields) != 2 or not fields[0]:
            raise GraphFormatError(path, lineno, f"expected 'name:count' or 'name count', found {text!r}")
        key, value = fields
        if not re.fullmatch(r"[0-9]+", value):
            raise GraphFormatError(path, lineno, f"count {value!r} is not a non-negative integer")
        key = key[:-len(".graph")] if key.endswith(".graph") else key
        if key in counts:
            raise GraphFormatError(path, lineno, f"{key!r} is listed twice (first on line {first_seen[key]})")
        counts[key], first_seen[key] = int(value), lineno
    if not counts:
        raise GraphFormatError(path, None, "no counts in the file")
    return counts


# ---------------------------------------------------------------------------------- writers


def _format_rows(template: str, *columns: np.ndarray) -> str:
    """``template`` applied to each row of the columns (one C-level % over all values)."""
    if not columns or columns[0].size == 0:
        return ""
    values = np.column_stack(columns).ravel().tolist()
    return (template * columns[0].size) % tuple(values)


def _refuse(graph: Graph, fmt: str, *, directed: bool = False, edge_labels: bool = False,
            labels: bool = False) -> None:
    """One-line ValueError for what the ``fmt`` format cannot hold of ``graph``."""
    what = f"graph {graph.name!r}" if graph.name else "the graph"
    if directed and graph.directed:
        raise ValueError(f"the {fmt} format is undirected and {what} is directed: write it as gsi or snap, "
                         "or read it as undirected (symmetrize=True, --symmetrize)")
    if edge_labels and graph.has_edge_labels:
        raise ValueError(f"the {fmt} format has no edge labels and {what} has some: write it as graph or gsi")
    if labels and graph.num_vertices and graph.labels.any():
        raise ValueError(f"the {fmt} format has no vertex labels and {what} has some: "
                         "write it as graph, gsi, gmatch-binary or daf")


def write_graph(graph: Graph, path) -> None:
    """Write the ``.graph`` text format (edge labels, if any, as a 4th field of ``e`` lines)."""
    _refuse(graph, "graph", directed=True)
    src, dst, elab = graph.edges()
    ids = np.arange(graph.num_vertices)
    parts = [f"t {graph.num_vertices} {graph.num_edges}\n",
             _format_rows("v %d %d %d\n", ids, graph.labels, graph.degrees)]
    if elab is None:
        parts.append(_format_rows("e %d %d\n", src, dst))
    else:
        parts.append(_format_rows("e %d %d %d\n", src, dst, elab))
    Path(path).write_text("".join(parts))


def _graph_list(graphs_or_graph) -> list[Graph]:
    return [graphs_or_graph] if isinstance(graphs_or_graph, Graph) else list(graphs_or_graph)


def write_gsi(graphs_or_graph, path) -> None:
    """Write GSI's ``.g`` format: one or several graphs, then ``t # -1``.

    Labels are written as stored (GSI's own code expects them to start at 1); graphs without edge
    labels get label 0 on every edge. Every arc of the CSR is an ``e`` line: an undirected graph
    gets both arcs of each edge and a ``# undirected`` line after ``t # -1``, which GSI's reader
    never reaches, so the authors' binary reads it as its symmetric directed graph and
    :func:`load_graphs` as undirected. The graphs of one file share one direction.
    """
    graphs = _graph_list(graphs_or_graph)
    if len({g.directed for g in graphs}) > 1:
        raise ValueError("a gsi file holds graphs of one direction; write the directed and the undirected "
                         "graphs to separate files")
    parts = []
    for i, graph in enumerate(graphs):
        src = np.repeat(np.arange(graph.num_vertices, dtype=np.int64), graph.degrees)
        dst = graph.neighbors
        elab = np.zeros(src.size, dtype=np.int32) if graph.edge_labels is None else graph.edge_labels
        max_vl = int(graph.labels.max()) if graph.num_vertices else 0
        max_el = int(elab.max()) if elab.size else 0
        parts.append(f"t # {i}\n{graph.num_vertices} {src.size} {max_vl} {max_el}\n")
        parts.append(_format_rows("v %d %d\n", np.arange(graph.num_vertices), graph.labels))
        parts.append(_format_rows("e %d %d %d\n", src, dst, elab))
    parts.append("t # -1\n")
    if graphs and not graphs[0].directed:
        parts.append("# undirected: every edge is written as its two arcs\n")
    Path(path).write_text("".join(parts))


def write_snap(graph: Graph, path) -> None:
    """Write a SNAP edge list under SNAP's header (``# Directed graph`` or ``# Undirected graph``,
    which the reader honours; an undirected edge once). Refuses vertex or edge labels and isolated
    vertices (ids are renumbered over the edges' endpoints on reading)."""
    _refuse(graph, "snap", edge_labels=True, labels=True)
    src, dst, _ = graph.edges()
    touched = np.zeros(graph.num_vertices, dtype=bool)
    touched[src], touched[dst] = True, True
    if not touched.all() or not graph.num_vertices:
        where = f" (vertex {int(np.argmin(touched))} has none)" if graph.num_vertices else ""
        raise ValueError(f"a snap edge list holds only vertices with an edge{where}: write it as graph or gsi")
    kind = "Directed" if graph.directed else "Undirected"
    header = (f"# {kind} graph: {graph.name or 'gpusm'}\n# Nodes: {graph.num_vertices} Edges: {src.size}\n"
              "# FromNodeId\tToNodeId\n")
    Path(path).write_text(header + _format_rows("%d\t%d\n", src, dst))


def write_daf(graphs_or_graph, path) -> None:
    """Write DAF's format: per graph ``t <id> <N> <sum of degrees>``, then
    ``id label degree nbr...`` per vertex (undirected, vertex labels only)."""
    parts = []
    for i, graph in enumerate(_graph_list(graphs_or_graph)):
        _refuse(graph, "daf", directed=True, edge_labels=True)
        parts.append(f"t {i} {graph.num_vertices} {graph.neighbors.size}\n")
        for v in range(graph.num_vertices):
            row = graph.neighbors[graph.offsets[v]:graph.offsets[v + 1]]
            parts.append(" ".join(map(str, (v, int(graph.labels[v]), row.size, *row.tolist()))) + "\n")
    Path(path).write_text("".join(parts))


def write_gmatch_binary(graph: Graph, path) -> None:
    """Write gMatch's binary CSR (undirected, vertex-labelled, no edge labels)."""
    _refuse(graph, "gmatch-binary", directed=True, edge_labels=True)
    with open(path, "wb") as f:
        f.write(np.array([graph.num_vertices, graph.num_edges], dtype="<i4").tobytes())
        f.write(graph.offsets.astype("<u8").tobytes())
        f.write(graph.labels.astype("<i4").tobytes())
        f.write(graph.neighbors.astype("<i4").tobytes())


WRITERS = {"graph": write_graph, "gsi": write_gsi, "snap": write_snap, "gmatch-binary": write_gmatch_binary,
           "daf": write_daf}
#: the writers that take a list of graphs (one file, several graphs)
MULTI_GRAPH_FORMATS = ("gsi", "daf")


def save_graph(graph: Graph, path, fmt: str) -> None:
    """Write ``graph`` in the named format (a key of :data:`WRITERS`)."""
    if fmt not in WRITERS:
        raise ValueError(f"no writer for format {fmt!r}; writable formats: {', '.join(WRITERS)}")
    WRITERS[fmt](graph, path)
