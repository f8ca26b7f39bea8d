"""Fuzz gpusm from the outside: random small graph pairs against networkx, and mutated graph files
through the ``gpusm match`` command line.

Pairs: seeded random networkx data graphs (at most 12 vertices) and queries (at most 5) with
labels of mixed kinds (ints, strings, negative numbers, ``"0"``, labels the data lacks), optional
edge labels, some directed pairs, disconnected queries, and queries that must be refused (a
self-loop, no vertices). Each is matched with ``gpusm.match`` on every engine and compared with
networkx's count of subgraph monomorphisms (and, for some, its set of embeddings). Engines run in
worker processes that are killed past a hard limit, so a hang is reported, not waited for.

Files: valid files of every format gpusm reads (``.graph``, GSI ``.g``, SNAP, gMatch binary,
DAF; also gzipped), mutated (truncated, bytes flipped, garbage, bad ids and labels, missing
fields, BOM, empty, binary, ...) and passed to ``gpusm match`` as data or query. A run must end
with exit status 0 or 2 and a one-line error, never a traceback or a hang. A mutation whose
invalidity is certain must be refused (else a silent acceptance); one that keeps the graph (BOM,
CRLF, gzip, blank lines, comments) must give the unmutated file's count.

Printed last: the summary; details in ``pairs.csv`` and ``files.csv`` under ``--out`` (the
mutated files stay in ``--out``/files). Exit status 1 if anything failed.

    python -m experiments.bench.fuzz --pairs 300 --files 300 --seed 1 --out results/fuzz
    python -m experiments.bench.fuzz --show-pair 17 --seed 1     # one pair, to reproduce
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import multiprocessing
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------------- pairs

#: Label pools: the data draws from one, a query from the same plus labels the data lacks.
LABEL_POOLS = {
    "int": [0, 1, 2, 3],
    "mixed": [0, 1, -1, -7, "0", "a", "b", ("t", 1)],
    "str": ["x", "y", "z", "0"],
    "negative": [-1, -2, -3],
}
ABSENT_LABELS = ["absent", 99, -99, "1"]
EDGE_POOLS = {"int": [0, 1, 2], "mixed": [0, "r", -1]}


@dataclass
class Pair:
    """One data graph and one query, both networkx graphs, with how to compare them."""

    index: int
    data: object
    query: object
    labels: str                  # a LABEL_POOLS key, or "none"
    edge_label: str | None       # the edge attribute holding labels, or None
    refuse: str = ""             # why the query must be refused ("" if it is valid)
    collect: bool = False        # also compare the embeddings
    notes: list = field(default_factory=list)

    def describe(self) -> str:
        def graph(g):
            nodes = [(v, d.get("label")) for v, d in g.nodes(data=True)]
            edges = [(u, v, d.get("elabel")) if self.edge_label else (u, v) for u, v, d in g.edges(data=True)]
            return f"nodes={nodes} edges={edges}"
        kind = "DiGraph" if self.data.is_directed() else "Graph"
        return (f"pair {self.index} ({kind}, labels={self.labels}, edge_label={self.edge_label}, "
                f"notes={self.notes})\n  data:  {graph(self.data)}\n  query: {graph(self.query)}")


def _rename(rng: random.Random, graph, notes: list, what: str):
    """Sometimes give the nodes ids other than 0..n-1 (strings, gaps, shuffled order)."""
    import networkx as nx

    roll = rng.random()
    if roll < 0.15:
        notes.append(f"{what}: string ids")
        return nx.relabel_nodes(graph, {v: f"n{v}" for v in graph})
    if roll < 0.3:
        notes.append(f"{what}: sparse ids")
        return nx.relabel_nodes(graph, {v: 3 * v + 5 for v in graph})
    if roll < 0.4:
        notes.append(f"{what}: shuffled insertion order")
        order = list(graph.nodes)
        rng.shuffle(order)
        out = graph.__class__()
        out.add_nodes_from((v, graph.nodes[v]) for v in order)
        out.add_edges_from(graph.edges(data=True))
        return out
    return graph


def make_pair(seed: int, index: int) -> Pair:
    """The pair number ``index`` of run ``seed`` (the same pair on every machine)."""
    import networkx as nx

    rng = random.Random(f"gpusm-fuzz:{seed}:{index}")
    directed = rng.random() < 0.15
    cls = nx.DiGraph if directed else nx.Graph
    labels = rng.choice(["none", "int", "int", "mixed", "mixed", "str", "negative"])
    pool = [] if labels == "none" else rng.sample(LABEL_POOLS[labels], rng.randint(1, len(LABEL_POOLS[labels])))
    edge_pool = EDGE_POOLS[rng.choice(list(EDGE_POOLS))] if rng.random() < 0.25 else None
    edge_label = "elabel" if edge_pool else None
    notes: list = []

    n = 0 if rng.random() < 0.02 else rng.randint(1, 12)
    data = cls()
    for v in range(n):
        data.add_node(v, **({"label": rng.choice(pool)} if pool else {}))
    density = rng.uniform(0.1, 0.7)
    for u in range(n):
        for v in range(n):
            if u != v and (directed or u < v) and rng.random() < density:
                data.add_edge(u, v, **({"elabel": rng.choice(edge_pool)} if edge_pool else {}))
    if n and rng.random() < 0.05:
        v = rng.randrange(n)
        data.add_edge(v, v, **({"elabel": rng.choice(edge_pool)} if edge_pool else {}))
        notes.append("data self-loop")

    def label(v=None):
        if rng.random() < 0.1:
            notes.append("query label the data lacks")
            return rng.choice(ABSENT_LABELS)
        return data.nodes[v]["label"] if v is not None else rng.choice(pool)

    def elabel(source=None):
        if rng.random() < 0.1:
            return rng.choice(ABSENT_LABELS)
        return source if source is not None else rng.choice(edge_pool)

    qn = rng.randint(1, 5)
    query = cls()
    if n and rng.random() < 0.6:                       # a piece of the data graph: often found
        start = rng.randrange(n)
        chosen, frontier = [start], [start]
        undirected = data.to_undirected(as_view=True)
        while frontier and len(chosen) < qn:
            v = rng.choice(frontier)
            fresh = [w for w in undirected[v] if w not in chosen]
            if not fresh:
                frontier.remove(v)
                continue
            chosen.append(rng.choice(fresh))
            frontier.append(chosen[-1])
        for v in chosen:
            query.add_node(v, **({"label": label(v)} if pool else {}))
        for u, v, d in data.subgraph(chosen).edges(data=True):
            if u != v and rng.random() < 0.8:
                query.add_edge(u, v, **({"elabel": elabel(d["elabel"])} if edge_pool else {}))
        query = nx.convert_node_labels_to_integers(query) if rng.random() < 0.5 else query
        notes.append("query from the data")
    else:
        for v in range(qn):
            query.add_node(v, **({"label": label()} if pool else {}))
        density = rng.uniform(0.3, 1.0)
        for u in range(qn):
            for v in range(qn):
                if u != v and (directed or u < v) and rng.random() < density:
                    query.add_edge(u, v, **({"elabel": elabel()} if edge_pool else {}))
        notes.append("random query")
    if rng.random() < 0.1:
        extra = max((v for v in query if isinstance(v, int)), default=-1) + 1
        query.add_node(extra, **({"label": label()} if pool else {}))
        notes.append("isolated query vertex")
    refuse = ""
    if rng.random() < 0.05 and query.number_of_nodes():
        v = rng.choice(list(query))
        query.add_edge(v, v, **({"elabel": elabel()} if edge_pool else {}))
        refuse = "self-loop"
    elif rng.random() < 0.02:
        query = cls()
        refuse = "no vertices"
    data = _rename(rng, data, notes, "data")
    query = _rename(rng, query, notes, "query")
    return Pair(index, data, query, labels, edge_label, refuse, collect=rng.random() < 0.25, notes=notes)


def networkx_embeddings(pair: Pair, order: list | None) -> tuple[int, set | None]:
    """networkx's count of subgraph monomorphisms (ordered embeddings), and with ``order`` (the
    query's nodes in gpusm's column order) the embeddings as tuples of data nodes."""
    from networkx.algorithms import isomorphism as iso

    node_match = None if pair.labels == "none" else (lambda a, b: a["label"] == b["label"])
    edge_match = None if pair.edge_label is None else (lambda a, b: a["elabel"] == b["elabel"])
    cls = iso.DiGraphMatcher if pair.data.is_directed() else iso.GraphMatcher
    matcher = cls(pair.data, pair.query, node_match=node_match, edge_match=edge_match)
    count, found = 0, set() if order is not None else None
    for mapping in matcher.subgraph_monomorphisms_iter():
        count += 1
        if found is not None:
            back = {q: d for d, q in mapping.items()}
            found.add(tuple(back[q] for q in order))
    return count, found


def _query_order(pair: Pair) -> list:
    """The query's nodes in the order of gpusm's embedding columns."""
    import numpy as np

    from common.graph.interop import from_networkx

    data = from_networkx(pair.data, "label", pair.edge_label)
    query = from_networkx(pair.query, "label", pair.edge_label, like=data)
    ids = query.meta.get("original_ids")
    return list(range(query.num_vertices)) if ids is None else [v.item() if isinstance(v, np.generic) else v
                                                                 for v in np.asarray(ids).tolist()]


def _declared_unsupported(engine: str, pair: Pair) -> str:
    """What the query needs that ``engine`` declares it lacks ('' if nothing)."""
    import networkx as nx

    from common.engine.registry import engine_class

    cls = engine_class(engine)
    needs = []
    if pair.edge_label and not cls.supports_edge_labels:
        needs.append("edge labels")
    if pair.data.is_directed() and not cls.supports_directed:
        needs.append("directed")
    q = pair.query
    connected = q.number_of_nodes() and (nx.is_weakly_connected(q) if q.is_directed() else nx.is_connected(q))
    if not connected and not cls.supports_disconnected:
        needs.append("disconnected")
    limit = getattr(cls, "max_query_vertices", None)
    if limit is not None and q.number_of_nodes() > limit:
        needs.append("query size")
    return ", ".join(needs)


def check_pair(pair: Pair, engine: str, timeout_s: float, expected: tuple[int, set | None] | None) -> dict:
    """Match ``pair`` on ``engine`` and judge the answer (``verdict``: ok, refused, unsupported,
    partial, or a failure: disagreement, traceback, silent, refusal, unsupported-no-reason)."""
    import traceback

    import gpusm

    row = dict(kind="pair", index=pair.index, engine=engine, directed=pair.data.is_directed(),
               labels=pair.labels, edge_labels=bool(pair.edge_label), data_n=pair.data.number_of_nodes(),
               data_m=pair.data.number_of_edges(), query_n=pair.query.number_of_nodes(),
               query_m=pair.query.number_of_edges(), refuse=pair.refuse, collect=pair.collect,
               expected="" if expected is None else expected[0], status="", count="", verdict="", detail="",
               seconds=0.0)
    started = time.perf_counter()
    try:
        result = gpusm.match(pair.data, pair.query, engine=engine, timeout_s=timeout_s, collect=pair.collect,
                             edge_label=pair.edge_label)
    except ValueError as exc:          # gpusm's input errors are ValueErrors
        row["seconds"] = round(time.perf_counter() - started, 3)
        message = str(exc)
        row["detail"] = message[:300]
        if pair.refuse:
            row["verdict"] = "refused" if pair.refuse in message else "unclear-refusal"
        else:
            row["verdict"] = "refusal"
        return row
    except Exception:                  # noqa: BLE001 - any other exception is a crash
        row["seconds"] = round(time.perf_counter() - started, 3)
        row["verdict"], row["detail"] = "traceback", traceback.format_exc()[-1500:]
        return row
    row["seconds"] = round(time.perf_counter() - started, 3)
    row["status"], row["count"] = str(result.status), result.count
    if pair.refuse:
        row["verdict"], row["detail"] = "silent", f"a query with {pair.refuse} was answered: {result.status}"
        return row
    status = str(result.status)
    if status == "unsupported":
        declared = _declared_unsupported(engine, pair)
        # with a reason it is fine; "undeclared": the reason is not a kind the class declares lacking
        row["verdict"] = "unsupported" if declared else "unsupported-undeclared"
        if not result.reason:
            row["verdict"] = "unsupported-no-reason"
        row["detail"] = f"{result.reason} (needs: {declared or 'nothing the engine declares lacking'})"
        return row
    if status in ("timeout", "oom", "overflow"):
        row["verdict"], row["detail"] = "partial", result.reason[:300]
        if result.count > expected[0]:
            row["verdict"] = "disagreement"
            row["detail"] = f"{status} with a lower bound {result.count} above the count {expected[0]}"
        return row
    if result.count != expected[0]:
        row["verdict"], row["detail"] = "disagreement", f"{status}: {result.count} != networkx {expected[0]}"
        return row
    if pair.collect and expected[1] is not None:
        got = [tuple(v.item() if hasattr(v, "item") else v for v in r) for r in result.embeddings.tolist()]
        if len(got) != len(set(got)) or set(got) != expected[1]:
            row["verdict"] = "disagreement"
            missing, extra = expected[1] - set(got), set(got) - expected[1]
            row["detail"] = (f"embeddings differ: {len(got)} rows ({len(set(got))} distinct), "
                             f"missing {sorted(map(repr, missing))[:3]}, extra {sorted(map(repr, extra))[:3]}")
            return row
    row["verdict"] = "ok"
    return row


def _pair_worker(conn, seed: int, engines: list[str], timeout_s: float) -> None:
    """Worker process: for each pair index received, one ("row", dict) per engine."""
    while True:
        index = conn.recv()
        if index is None:
            return
        pair = make_pair(seed, index)
        expected = None
        if not pair.refuse:
            order = _query_order(pair) if pair.collect else None
            expected = networkx_embeddings(pair, order)
        for engine in engines:
            conn.send(check_pair(pair, engine, timeout_s, expected))


class _Worker:
    def __init__(self, ctx, seed, engines, timeout_s):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_pair_worker, args=(child, seed, engines, timeout_s), daemon=True)
        self.proc.start()
        child.close()
        self.index, self.pending, self.deadline, self.warm = None, [], 0.0, set()

    def give(self, index, engines, limit):
        self.conn.send(index)
        self.index, self.pending = index, list(engines)
        self.deadline = time.monotonic() + limit(self, self.pending[0])

    def stop(self, kill=False):
        try:
            if kill:
                self.proc.kill()
            else:
                self.conn.send(None)
            self.proc.join(10)
        except (OSError, BrokenPipeError):
            pass
        if self.proc.is_alive():
            self.proc.kill()


def run_pairs(args, log) -> list[dict]:
    """Every pair on every engine, in ``args.jobs`` worker processes."""
    ctx = multiprocessing.get_context("spawn")
    engines = args.engines
    rows: list[dict] = []
    todo = list(range(args.pairs))

    def limit(worker, engine):   # a first call compiles kernels: allow for it
        return args.hang_s + (0 if engine in worker.warm else args.warmup_s)

    def lost(worker, verdict, detail):
        for i, engine in enumerate(worker.pending):
            rows.append(dict(kind="pair", index=worker.index, engine=engine, verdict=verdict if i == 0 else "skipped",
                             detail=detail if i == 0 else f"after {worker.pending[0]} {verdict}"))
        log(f"pair {worker.index}: {worker.pending[0]} {verdict}")

    workers = [_Worker(ctx, args.seed, engines, args.timeout) for _ in range(max(1, min(args.jobs, args.pairs)))]
    done, started = 0, time.monotonic()
    try:
        while todo or any(w.index is not None for w in workers):
            for w in workers:
                if w.index is None and todo:
                    w.give(todo.pop(0), engines, limit)
            busy = [w for w in workers if w.index is not None]
            timeout = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready = wait([w.conn for w in busy], timeout=timeout)
            for i, w in enumerate(workers):
                if w.index is None:
                    continue
                if w.conn in ready:
                    try:
                        row = w.conn.recv()
                    except (EOFError, OSError):
                        lost(w, "crash", f"worker process died (exit {w.proc.exitcode})")
                        w.stop(kill=True)
                        workers[i] = w = _Worker(ctx, args.seed, engines, args.timeout)
                        done += 1
                        continue
                    rows.append(row)
                    w.warm.add(w.pending.pop(0))
                    if row["verdict"] not in ("ok", "refused", "unsupported", "unsupported-undeclared"):
                        log(f"pair {w.index}: {row['engine']} {row['verdict']}: {str(row['detail'])[:200]}")
                    if w.pending:
                        w.deadline = time.monotonic() + limit(w, w.pending[0])
                    else:
                        w.index = None
                        done += 1
                        if done % 25 == 0:
                            log(f"pairs: {done}/{args.pairs} in {time.monotonic() - started:.0f} s")
                elif time.monotonic() >= w.deadline:
                    lost(w, "hang", f"no answer within {limit(w, w.pending[0]):.0f} s")
                    w.stop(kill=True)
                    workers[i] = _Worker(ctx, args.seed, engines, args.timeout)
                    done += 1
    finally:
        for w in workers:
            w.stop()
    return sorted(rows, key=lambda r: (r["index"], engines.index(r["engine"])))


# ---------------------------------------------------------------------------------- files

#: Mutations that keep the graph: the count must stay the unmutated file's.
KEEPS = "keeps"
#: Mutations that certainly make the file invalid: it must be refused.
INVALID = "invalid"
#: Mutations that may or may not: any clean outcome will do.
UNKNOWN = "unknown"

TEXT_FORMATS = ("graph", "gsi", "snap", "daf")


@dataclass
class Seed:
    """A valid file: its bytes, format and role (what it is read as)."""

    name: str
    fmt: str
    content: bytes
    role: str                     # "data" or "query"
    partner: Path                 # the file it is matched with
    snap_header: bool = False     # a SNAP file with the '# Nodes: N Edges: M' comment


def _random_graph(rng: random.Random, n: int, directed: bool, labels: int, edge_labels: int | None):
    """(n, edges [(u, v, label)], vertex labels), simple, no self-loops."""
    pairs = [(u, v) for u in range(n) for v in range(n) if u != v and (directed or u < v)]
    rng.shuffle(pairs)
    chosen = pairs[:rng.randint(n - 1, len(pairs))]
    edges = [(u, v, rng.randrange(edge_labels) if edge_labels else None) for u, v in chosen]
    return n, edges, [rng.randrange(labels) for _ in range(n)]


def _write_graph(n, edges, labels, degrees=True, edge_labels=False) -> bytes:
    deg = [0] * n
    for u, v, _ in edges:
        deg[u] += 1
        deg[v] += 1
    lines = [f"t {n} {len(edges)}"]
    lines += [f"v {v} {labels[v]}" + (f" {deg[v]}" if degrees else "") for v in range(n)]
    lines += [f"e {u} {v}" + (f" {lab}" if edge_labels else "") for u, v, lab in edges]
    return ("\n".join(lines) + "\n").encode()


def _write_gsi(graphs) -> bytes:
    lines = []
    for gid, (n, edges, labels) in enumerate(graphs):
        lines.append(f"t # {gid}")
        lines.append(f"{n} {len(edges)} {max(labels, default=0)} {max((e[2] for e in edges), default=0)}")
        lines += [f"v {v} {labels[v]}" for v in range(n)]
        lines += [f"e {u} {v} {lab}" for u, v, lab in edges]
    lines.append("t # -1")
    return ("\n".join(lines) + "\n").encode()


def _write_snap(rng, n, edges, header: bool) -> bytes:
    ids = rng.sample(range(1, 1000), n)
    lines = ["# Directed graph: fuzz seed"]
    if header:
        lines.append(f"# Nodes: {len({x for e in edges for x in e[:2]})} Edges: {len(edges)}")   # ids on edges
    lines.append("# FromNodeId\tToNodeId")
    lines += [f"{ids[u]}\t{ids[v]}" for u, v, _ in edges]
    return ("\n".join(lines) + "\n").encode()


def _write_daf(n, edges, labels) -> bytes:
    nbrs = [[] for _ in range(n)]
    for u, v, _ in edges:
        nbrs[u].append(v)
        nbrs[v].append(u)
    lines = [f"t 0 {n} {sum(len(x) for x in nbrs)}"]
    lines += [" ".join(map(str, [v, labels[v], len(nbrs[v]), *sorted(nbrs[v])])) for v in range(n)]
    return ("\n".join(lines) + "\n").encode()


def _write_binary(n, edges, labels) -> bytes:
    import numpy as np

    from common.graph.model import Graph

    graph = Graph.from_edges(n, [e[0] for e in edges], [e[1] for e in edges], labels=labels)
    header = np.array([n, graph.num_edges], dtype="<i4").tobytes()
    return (header + graph.offsets.astype("<u8").tobytes() + graph.labels.astype("<i4").tobytes()
            + graph.neighbors.astype("<i4").tobytes())


def make_seeds(rng: random.Random, folder: Path) -> list[Seed]:
    """Valid files of every format, as data and as query, with the partner files they run with."""
    folder.mkdir(parents=True, exist_ok=True)
    partners = {
        "undirected-data": _write_graph(*_random_graph(rng, 12, False, 3, None)),
        "undirected-query": _write_graph(3, [(0, 1, None), (1, 2, None)], [0, 0, 0]),
        "directed-query": _write_gsi([(2, [(0, 1, 0)], [0, 0])]),
    }
    paths = {}
    for name, content in partners.items():
        paths[name] = folder / f"partner-{name}.{'g' if 'directed-' in name else 'graph'}"
        paths[name].write_bytes(content)
    seeds = []
    for k in range(3):
        und = _random_graph(rng, rng.randint(3, 10), False, 3, None)
        und_el = _random_graph(rng, rng.randint(3, 8), False, 3, 2)
        dirg = _random_graph(rng, rng.randint(3, 8), True, 3, 2)
        small = _random_graph(rng, rng.randint(2, 4), False, 3, None)
        small_el = _random_graph(rng, rng.randint(2, 4), False, 3, 2)     # GSI, read undirected
        data_files = [
            ("graph", _write_graph(*und, degrees=k % 2 == 0), "undirected-query", False),
            ("graph", _write_graph(*und_el, edge_labels=True), "undirected-query", False),
            ("gsi", _write_gsi([dirg]), "directed-query", False),
            ("snap", _write_snap(rng, *dirg[:2], header=k % 2 == 0), "directed-query", k % 2 == 0),
            ("daf", _write_daf(*und), "undirected-query", False),
            ("gmatch-binary", _write_binary(*und), "undirected-query", False),
        ]
        query_files = [
            ("graph", _write_graph(*small, degrees=k % 2 == 1), "undirected-data", False),
            ("gsi", _write_gsi([small_el, small_el] if k == 1 else [small_el]), "undirected-data", False),
            ("snap", _write_snap(rng, *small[:2], header=k % 2 == 1), "undirected-data", k % 2 == 1),
            ("daf", _write_daf(*small), "undirected-data", False),
            ("gmatch-binary", _write_binary(*small), "undirected-data", False),
        ]
        for role, files in (("data", data_files), ("query", query_files)):
            for j, (fmt, content, partner, header) in enumerate(files):
                seeds.append(Seed(f"{role}-{k}-{j}-{fmt}", fmt, content, role, paths[partner], header))
    for real in ("yeast/queries/query_dense_4_1.graph", "gmatch_test/queries/Q_0.graph"):
        path = ROOT / "data" / real
        if path.is_file():
            seeds.append(Seed(f"query-{path.stem}", "graph", path.read_bytes(), "query", paths["undirected-data"]))
    return seeds


def _lines(seed: Seed) -> list[bytes]:
    return seed.content.split(b"\n")


def _records(seed: Seed, lines: list[bytes], kinds=(b"v", b"e")) -> list[int]:
    """Indices of the lines holding vertices or edges (per format)."""
    out = []
    for i, line in enumerate(lines):
        parts = line.split()
        if not parts:
            continue
        if seed.fmt in ("graph", "gsi") and parts[0] in kinds:
            out.append(i)
        elif seed.fmt == "snap" and not parts[0].startswith(b"#"):
            out.append(i)
        elif seed.fmt == "daf" and parts[0] != b"t":
            out.append(i)
    return out


def _id_fields(seed: Seed, parts: list[bytes]) -> list[int]:
    """Positions of vertex ids in a record line."""
    if seed.fmt in ("graph", "gsi"):
        return [1, 2] if parts[0] == b"e" else [1]
    if seed.fmt == "snap":
        return [0, 1]
    return [0] + list(range(3, len(parts)))         # daf: the id, then the neighbours


def _edit(seed: Seed, rng, pick, change) -> bytes | None:
    """Change one record line (chosen among those ``pick`` accepts) with ``change(parts)``."""
    lines = _lines(seed)
    rows = [i for i in _records(seed, lines) if pick(lines[i].split())]
    if not rows:
        return None
    i = rng.choice(rows)
    parts = change(lines[i].split())
    if parts is None:
        return None
    lines[i] = b" ".join(parts)
    return b"\n".join(lines)


def _set_field(seed, rng, value: bytes, fields=None):
    def change(parts):
        where = fields(parts) if fields else _id_fields(seed, parts)
        if not where:
            return None
        parts[rng.choice(where)] = value
        return parts
    return _edit(seed, rng, lambda p: True, change)


def _label_field(seed: Seed, parts) -> list[int]:
    if seed.fmt in ("graph", "gsi") and parts[0] == b"v":
        return [2]
    if seed.fmt == "daf":
        return [1]
    return []


def mutate(seed: Seed, rng: random.Random, name: str) -> tuple[bytes, str] | None:
    """``(bytes, certainty)`` of mutation ``name`` on ``seed``, or None where it does not apply."""
    text, fmt, lines = seed.fmt in TEXT_FORMATS, seed.fmt, _lines(seed)
    content = seed.content
    if name == "empty":
        return b"", INVALID
    if name == "blank":
        return b" \n\n\t\r\n", INVALID
    if name == "binary-garbage":
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))) + b"\0", INVALID
    if name == "bom":
        return b"\xef\xbb\xbf" + content, KEEPS if text else INVALID
    if name == "crlf":
        return (content.replace(b"\n", b"\r\n"), KEEPS) if text else None
    if name == "trailing-blank-lines":
        return (content + b"\n\n   \n\t\n", KEEPS) if text else None
    if name == "gzip":
        return gzip.compress(content, mtime=0), KEEPS
    if name == "gzip-truncated":
        packed = gzip.compress(content, mtime=0)
        return packed[:len(packed) - rng.randint(1, 8)], INVALID
    if name == "snap-comment":
        if fmt != "snap":
            return None
        i = rng.randrange(len(lines))
        return b"\n".join(lines[:i] + [b"# a comment \xff\xfe"] + lines[i:]), KEEPS
    if name == "nul-line":
        i = rng.randrange(len(lines)) if text else 0
        return (b"\n".join(lines[:i] + [b"\0\0\0"] + lines[i:]), INVALID) if text else (content + b"\0\0\0", INVALID)
    if name == "truncate-bytes":
        stripped = content.rstrip()
        if len(stripped) < 2:
            return None
        cut = rng.randrange(1, len(stripped))
        certain = fmt in ("gsi", "gmatch-binary")      # the closing 't # -1' / the size header
        return content[:cut], INVALID if certain else UNKNOWN
    if name == "flip-bytes":
        data = bytearray(content)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data), UNKNOWN
    if name == "insert-garbage":
        at = rng.randrange(len(content) + 1)
        junk = bytes(rng.choice(b"0123456789 -\t#tve\n\xff\x80xyz") for _ in range(rng.randint(1, 20)))
        return content[:at] + junk + content[at:], UNKNOWN
    if name == "long-line":
        return (b"\n".join(lines[:1] + [b" ".join([b"1"] * 50000)] + lines[1:]), INVALID) if text else None
    if fmt == "gmatch-binary":
        return _mutate_binary(content, rng, name)
    if name == "drop-header":
        return (b"\n".join(lines[1:]), INVALID) if fmt in ("graph", "gsi", "daf") else None
    if name == "drop-closing":
        if fmt != "gsi":
            return None
        return content.rstrip().rsplit(b"\n", 1)[0] + b"\n", INVALID
    if name == "drop-line":
        if fmt == "snap" and not seed.snap_header:
            return None                                # SNAP has nothing that would notice
        rows = _records(seed, lines)
        i = rng.choice(rows)
        return b"\n".join(lines[:i] + lines[i + 1:]), INVALID
    if name == "duplicate-line":
        if fmt == "snap" and not seed.snap_header:
            return None                                # SNAP drops repeated edges (documented)
        rows = _records(seed, lines, kinds=(b"e",) if fmt != "daf" else (b"v", b"e"))
        if not rows:
            return None
        i = rng.choice(rows)
        return b"\n".join(lines[:i + 1] + [lines[i]] + lines[i + 1:]), INVALID
    if name == "header-count":
        if fmt in ("graph", "daf"):
            row = 0
        elif fmt == "gsi":
            row = 1
        elif seed.snap_header:
            row = next(i for i, line in enumerate(lines) if line.startswith(b"# Nodes:"))
        else:
            return None
        parts = lines[row].split(b" ")
        numeric = [j for j, p in enumerate(parts) if p.isdigit()]
        numeric = numeric[:2] if fmt != "daf" else numeric[1:3]    # N, M (daf: N, degree sum)
        j = rng.choice(numeric)
        parts[j] = str(int(parts[j]) + rng.choice([-1, 1, 7])).encode()
        if parts[j].startswith(b"-"):
            parts[j] = str(int(parts[j]) + 2).encode()
        lines[row] = b" ".join(parts)
        return b"\n".join(lines), INVALID
    if name == "short-line":
        def pick(parts):
            if fmt == "graph":
                return parts[0] == b"e" and len(parts) == 3 or parts[0] == b"v" and len(parts) == 3
            return True
        out = _edit(seed, rng, pick, lambda parts: parts[:-1])
        return (out, INVALID) if out is not None else None
    if name == "extra-field":
        def pick(parts):
            return fmt != "graph" or parts[0] == b"e" and len(parts) == 4
        out = _edit(seed, rng, pick, lambda parts: parts + [b"1"])
        return (out, INVALID) if out is not None else None
    if name == "negative-id":
        out = _set_field(seed, rng, f"-{rng.randint(1, 5)}".encode())
        return (out, INVALID) if out is not None else None
    if name == "huge-id":
        out = _set_field(seed, rng, b"1" + b"0" * rng.randint(19, 40))
        return (out, INVALID) if out is not None else None
    if name == "big-id":
        out = _set_field(seed, rng, str(10 ** rng.randint(4, 18)).encode())
        return (out, UNKNOWN if fmt == "snap" else INVALID) if out is not None else None
    if name == "non-integer":
        token = rng.choice([b"1.5", b"x", b"0x1", b"1e3", b"+1", "\u0661".encode(), b"--1", b"nan"])
        out = _set_field(seed, rng, token)
        return (out, INVALID) if out is not None else None
    if name == "negative-label":
        out = _set_field(seed, rng, b"-1", fields=lambda p: _label_field(seed, p))
        return (out, INVALID) if out is not None else None
    if name == "huge-label":
        out = _set_field(seed, rng, str(1 << 24).encode(), fields=lambda p: _label_field(seed, p))
        return (out, INVALID) if out is not None else None
    if name == "self-loop":
        if fmt not in ("graph", "gsi"):
            return None                                # SNAP drops self-loops (documented)

        def loop(parts):
            parts[2] = parts[1]
            return parts
        out = _edit(seed, rng, lambda p: p[0] == b"e", loop)
        return (out, INVALID) if out is not None else None
    if name == "offsets":
        return None                                    # gMatch binary only
    raise ValueError(f"unknown mutation {name!r}")


def _mutate_binary(content: bytes, rng: random.Random, name: str) -> tuple[bytes, str] | None:
    import numpy as np

    if name == "header-count":
        nv, ne = np.frombuffer(content[:8], dtype="<i4")
        which = rng.randrange(2)
        values = [int(nv), int(ne)]
        values[which] += rng.choice([-1, 1, 1 << 20])
        return np.array(values, dtype="<i4").tobytes() + content[8:], INVALID
    if name == "negative-id":
        return np.array([-1], dtype="<i4").tobytes() + content[4:], INVALID
    if name == "huge-id":
        return np.array([2 ** 31 - 1, 2 ** 31 - 1], dtype="<i4").tobytes() + content[8:], INVALID
    if name == "extra-field":
        return content + bytes(rng.randint(1, 16)), INVALID
    if name == "big-id":                               # an adjacency entry out of range
        nv = int(np.frombuffer(content[:4], dtype="<i4")[0])
        adj_at = 8 + 8 * (nv + 1) + 4 * nv
        if adj_at >= len(content):
            return None
        k = rng.randrange((len(content) - adj_at) // 4)
        data = bytearray(content)
        data[adj_at + 4 * k:adj_at + 4 * k + 4] = np.array([nv + rng.randint(0, 1000)], dtype="<i4").tobytes()
        return bytes(data), INVALID
    if name == "negative-label":
        nv = int(np.frombuffer(content[:4], dtype="<i4")[0])
        at = 8 + 8 * (nv + 1) + 4 * rng.randrange(nv)
        data = bytearray(content)
        data[at:at + 4] = np.array([-1], dtype="<i4").tobytes()
        return bytes(data), INVALID
    if name == "offsets":
        nv = int(np.frombuffer(content[:4], dtype="<i4")[0])
        at = 8 + 8 * rng.randrange(nv + 1)
        data = bytearray(content)
        data[at:at + 8] = np.array([rng.choice([2 ** 63, 2 ** 40, 3])], dtype="<u8").tobytes()
        return bytes(data), UNKNOWN
    return None


MUTATIONS = ("empty", "blank", "binary-garbage", "bom", "crlf", "trailing-blank-lines", "gzip", "gzip-truncated",
             "snap-comment", "nul-line", "truncate-bytes", "flip-bytes", "insert-garbage", "long-line",
             "drop-header", "drop-closing", "drop-line", "duplicate-line", "header-count", "short-line",
             "extra-field", "negative-id", "huge-id", "big-id", "non-integer", "negative-label", "huge-label",
             "self-loop", "offsets")


def run_cli(data: Path, query: Path, engine: str, timeout_s: float) -> tuple[int | None, str, str]:
    """``gpusm match DATA QUERY`` in a fresh interpreter: (exit status or None on a hang, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "gpusm", "match", str(data), str(query), "-e", engine, "--format", "json",
           "--quiet", "--timeout", "20"]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=timeout_s, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired as exc:
        return None, (exc.stdout or b"").decode("utf-8", "replace"), (exc.stderr or b"").decode("utf-8", "replace")
    return done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")


def judge_cli(rc: int | None, stdout: str, stderr: str, certainty: str, baseline: list | None) -> tuple[str, str]:
    """(verdict, detail) of one CLI run on a mutated file: ok, or hang, traceback, bad-exit,
    bad-error, silent (an invalid file accepted), false-refusal or disagreement (a kept graph
    refused or counted differently)."""
    if rc is None:
        return "hang", "no exit within the time limit"
    if "Traceback" in stderr:
        return "traceback", stderr.strip()[-1500:]
    if rc == 2:
        lines = stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("gpusm match: error: "):
            return "bad-error", stderr.strip()[-500:]
        if certainty == KEEPS:
            return "false-refusal", lines[0]
        return "ok", lines[0]
    if rc != 0:
        return "bad-exit", f"exit {rc}: {stderr.strip()[-300:]} {stdout.strip()[-300:]}"
    try:
        counts = [(row["status"], row["count"]) for row in json.loads(stdout)]
    except (ValueError, KeyError, TypeError):
        return "bad-exit", f"exit 0 without the JSON rows: {stdout[-300:]!r}"
    if certainty == INVALID:
        return "silent", f"accepted: {counts}"
    if certainty == KEEPS and baseline is not None and counts != baseline:
        return "disagreement", f"{counts} != unmutated {baseline}"
    return "ok", f"accepted: {counts}"


def run_files(args, log) -> list[dict]:
    """``args.files`` mutated files (and a few special paths) through ``gpusm match``."""
    from concurrent.futures import ThreadPoolExecutor

    rng = random.Random(f"gpusm-fuzz-files:{args.seed}")
    folder = Path(args.out) / "files"
    seeds = make_seeds(rng, folder / "seeds")
    cases = []                                     # (name, role, path, partner, certainty, seed, mutation)
    for seed in seeds:
        path = folder / "seeds" / seed.name
        path.write_bytes(seed.content)
        cases.append((seed.name, seed.role, path, seed.partner, KEEPS, seed.name, "none"))
    special = folder / "special"
    special.mkdir(parents=True, exist_ok=True)
    fifo = special / "fifo"
    if not fifo.exists() and hasattr(os, "mkfifo"):
        os.mkfifo(fifo)
    partner = next(s.partner for s in seeds if s.role == "data")
    query_partner = next(s.partner for s in seeds if s.role == "query")
    for what, path in (("folder", special), ("fifo", fifo), ("missing", special / "missing.graph"),
                       ("dev-null", Path("/dev/null"))):
        if what == "fifo" and not fifo.exists():
            continue
        cases.append((f"special-{what}-as-data", "data", path, partner, INVALID, "-", what))
        cases.append((f"special-{what}-as-query", "query", path, query_partner, INVALID, "-", what))
    made = 0
    attempts = 0
    while made < args.files and attempts < args.files * 20:
        attempts += 1
        seed, name = rng.choice(seeds), rng.choice(MUTATIONS)
        out = mutate(seed, rng, name)
        if out is None:
            continue
        content, certainty = out
        path = folder / f"{made:04d}-{seed.name}-{name}"
        path.write_bytes(content)
        cases.append((path.name, seed.role, path, seed.partner, certainty, seed.name, name))
        made += 1

    def one(case):
        name, role, path, partner, certainty, _, _ = case
        data, query = (path, partner) if role == "data" else (partner, path)
        started = time.perf_counter()
        rc, stdout, stderr = run_cli(data, query, args.file_engine, args.file_timeout)
        return case, rc, stdout, stderr, round(time.perf_counter() - started, 2)

    rows = []
    baselines: dict[str, list] = {}
    seeds_first = [c for c in cases if c[6] == "none"]
    rest = [c for c in cases if c[6] != "none"]
    started = time.monotonic()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for batch in (seeds_first, rest):
            for k, (case, rc, stdout, stderr, seconds) in enumerate(pool.map(one, batch)):
                name, role, path, _, certainty, seed_name, mutation = case
                if mutation == "none":
                    verdict, detail = judge_cli(rc, stdout, stderr, KEEPS, None)
                    if verdict == "ok" and rc == 0:
                        baselines[seed_name] = [(r["status"], r["count"]) for r in json.loads(stdout)]
                    elif verdict == "ok":
                        verdict, detail = "false-refusal", f"a valid seed was refused: {detail}"
                else:
                    verdict, detail = judge_cli(rc, stdout, stderr, certainty, baselines.get(seed_name))
                rows.append(dict(kind="file", file=name, role=role, seed=seed_name, mutation=mutation,
                                 certainty=certainty, engine=args.file_engine, rc="" if rc is None else rc,
                                 verdict=verdict, detail=detail, seconds=seconds))
                if verdict != "ok":
                    log(f"file {name} ({role}, {mutation}): {verdict}: {detail[:300]}")
                if (len(rows)) % 100 == 0:
                    log(f"files: {len(rows)}/{len(cases)} in {time.monotonic() - started:.0f} s")
    return rows


# ---------------------------------------------------------------------------------- report

PAIR_FAILURES = {"disagreement": "disagreements", "traceback": "tracebacks", "crash": "tracebacks",
                 "silent": "silent acceptances", "unclear-refusal": "unclear errors", "hang": "hangs",
                 "refusal": "valid inputs refused", "unsupported-no-reason": "unsupported without a reason"}
FILE_FAILURES = {"disagreement": "disagreements", "traceback": "tracebacks", "silent": "silent acceptances",
                 "hang": "hangs", "bad-error": "unclear errors", "bad-exit": "other exit statuses",
                 "false-refusal": "valid inputs refused"}


def _write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)


def summary(pair_rows: list[dict], file_rows: list[dict], engines: list[str]) -> tuple[str, int]:
    """(the one-screen summary, number of failures)."""
    from collections import Counter

    lines, failures = [], 0
    pairs = len({r["index"] for r in pair_rows})
    verdicts = Counter(r["verdict"] for r in pair_rows)
    lines.append(f"pairs: {pairs} pairs x {len(engines)} engines = {len(pair_rows)} runs: {verdicts['ok']} agree, "
                 f"{verdicts['refused']} refused as they must be, {verdicts['unsupported']} unsupported as declared, "
                 f"{verdicts['partial']} timed out, {verdicts['skipped']} skipped after a hang")
    undeclared = Counter(r["engine"] for r in pair_rows if r["verdict"] == "unsupported-undeclared")
    if undeclared:
        lines.append("  unsupported for a reason of their own (not a failure): "
                     + ", ".join(f"{e} {n}" for e, n in undeclared.items()))
    for category in dict.fromkeys(PAIR_FAILURES.values()):
        n = sum(c for v, c in verdicts.items() if PAIR_FAILURES.get(v) == category)
        failures += n
        lines.append(f"  {category:32s} {n}")
    bad = Counter(r["engine"] for r in pair_rows if r["verdict"] in PAIR_FAILURES)
    if bad:
        lines.append("  failures by engine: " + ", ".join(f"{e} {n}" for e, n in bad.items()))
    verdicts = Counter(r["verdict"] for r in file_rows)
    certain = Counter(r["certainty"] for r in file_rows)
    lines.append(f"files: {len(file_rows)} runs of gpusm match ({certain[INVALID]} certainly invalid, "
                 f"{certain[KEEPS]} valid, {certain[UNKNOWN]} either): {verdicts['ok']} clean")
    for category in dict.fromkeys(FILE_FAILURES.values()):
        n = sum(c for v, c in verdicts.items() if FILE_FAILURES.get(v) == category)
        failures += n
        lines.append(f"  {category:32s} {n}")
    lines.append(f"FAILED: {failures}" if failures else "PASSED: no failures")
    return "\n".join(lines), failures


def build_parser() -> argparse.ArgumentParser:
    from common.engine.registry import available_engines

    p = argparse.ArgumentParser(prog="python -m experiments.bench.fuzz", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=200, help="random graph pairs (default 200)")
    p.add_argument("--files", type=int, default=200, help="mutated files (default 200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--engines", nargs="+", default=None, metavar="ENGINE",
                   help=f"engines for the pairs (default: all registered: {' '.join(available_engines())})")
    p.add_argument("--file-engine", default="cpu", help="engine of the CLI runs (default cpu)")
    p.add_argument("--out", default="results/fuzz", help="folder for the CSVs and mutated files")
    p.add_argument("--jobs", type=int, default=1, help="worker processes for the pairs, CLI runs at once for files")
    p.add_argument("--timeout", type=float, default=30.0, help="per-match deadline (timeout_s) in seconds")
    p.add_argument("--hang-s", type=float, default=120.0,
                   help="seconds past which a match counts as a hang (its worker is killed)")
    p.add_argument("--warmup-s", type=float, default=300.0, help="extra seconds for an engine's first match")
    p.add_argument("--file-timeout", type=float, default=60.0, help="seconds past which a CLI run counts as a hang")
    p.add_argument("--show-pair", type=int, metavar="INDEX", help="print pair INDEX of --seed and exit")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.show_pair is not None:
        pair = make_pair(args.seed, args.show_pair)
        print(pair.describe())
        if not pair.refuse:
            print(f"  networkx count: {networkx_embeddings(pair, None)[0]}")
        return 0
    from common.engine.registry import available_engines

    args.engines = args.engines or available_engines()
    unknown = sorted(set(args.engines) - set(available_engines()))
    if unknown:
        print(f"unknown engines: {', '.join(unknown)} (registered: {', '.join(available_engines())})", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def log(message):
        print(f"[{time.monotonic() - started:6.0f} s] {message}", file=sys.stderr, flush=True)

    pair_rows = run_pairs(args, log) if args.pairs > 0 else []
    _write_csv(out / "pairs.csv", pair_rows)
    file_rows = run_files(args, log) if args.files > 0 else []
    _write_csv(out / "files.csv", file_rows)
    text, failures = summary(pair_rows, file_rows, args.engines)
    print(f"fuzz: seed {args.seed}, {time.monotonic() - started:.0f} s; details in {out}/pairs.csv, {out}/files.csv")
    print(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
