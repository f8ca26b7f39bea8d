"""The library's command line: match, engines, generate, info, convert.

Every subcommand talks to the library only through the public API (``common.match`` and the
engine registry, ``common.graph.io``, ``common.graph.generate``), so what the CLI does a script can do too.
The installed ``gpusm`` command is :func:`experiments.gpusm.main`: these subcommands plus the
harness's ``demo`` and ``experiment``, which it adds through ``build_parser(commands=...)``; the
shared layer does not import the harness.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
from pathlib import Path

from .. import BACKEND
from ..engine.registry import available_engines, create_engine
from ..engine.result import PHASES, Status
from ..errors import GraphFormatError, InvalidGraphError, UnknownEngineError
from ..gpu.backend import gpu_missing_reason
from ..graph.paths import resolve_input
from ..interrupt import command_line, interruptible
from .warmup import add_command as add_warmup

SYMMETRIZE_HELP = ("read a directed file (gsi, snap; directed unless the file is marked undirected) "
                   "as undirected")
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_bytes(text: str) -> int:
    """'11G', '512MB', '1.5GiB' or a plain number of bytes -> bytes (binary units)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)(?:I?B)?\s*", text.upper())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 11G, 512M or bytes)")
    size = int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])
    if size < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is less than one byte (a size in bytes, or e.g. 0.5G)")
    return size


def parse_option(text: str) -> tuple[str, object]:
    """'key=value' with value read as int, float, bool or string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"engine option must be key=value, got {text!r}")
    for convert in (int, float):
        try:
            return key, convert(value)
        except ValueError:
            pass
    lowered = value.lower()
    if lowered in ("true", "false"):
        return key, lowered == "true"
    return key, None if lowered == "none" else value


# ---------------------------------------------------------------------- match
def cmd_match(args) -> int:
    from ..graph.io import load_graph, load_query_set

    options = dict(args.option or [])
    if args.device_memory_limit is not None:
        options["device_memory_limit"] = args.device_memory_limit
    if args.dask == "local-cuda":
        reason = gpu_missing_reason()
        if reason:
            raise ValueError(f"--dask local-cuda (one dask-cuda worker per GPU) needs an NVIDIA GPU: {reason}")
    engine = create_engine(args.engine, **options)
    starting = start_device_in_background() if engine.uses_device and not args.dask else None
    data = load_graph(resolve_input(args.data), symmetrize=args.symmetrize)
    # Queries take undirected data's direction (a GSI query file read against it is undirected);
    # against directed data, an undirected format stays undirected and is refused below.
    queries = load_query_set(resolve_input(args.query), directed=False if not data.directed else None)
    undirected = [q for q in queries if q.directed != data.directed]
    if undirected:
        raise ValueError(f"the data graph {data.name!r} is directed (a {data.meta.get('format', 'directed')} file "
                         f"not marked undirected) but query {undirected[0].name!r} is undirected: pass "
                         "--symmetrize to read the data graph as undirected")
    if args.collect is not None:          # before the search, not after it
        check_writable(args.collect, folder=len(queries) > 1 or Path(args.collect).is_dir())
    if args.skip < 0:
        raise ValueError(f"--skip must be >= 0, got {args.skip}")
    into_folder = len(queries) > 1
    total, skipped = len(queries), min(args.skip, len(queries))
    queries = queries[skipped:]              # --skip N: a resumed run
    from tqdm import tqdm

    if engine.uses_device:                  # a CPU engine does not import numba.cuda
        from ..gpu.runtime import backend_label

        if starting is not None:
            starting.join()

        backend = backend_label()
    else:
        backend = "cpu"
    rows = []
    statuses = set()
    progress = tqdm(total=len(queries), desc=f"{args.engine} on {data.name or 'data'}", unit="query", file=sys.stderr,
                    disable=args.quiet or len(queries) < 2)
    kwargs = dict(limit=args.limit, collect=args.collect is not None, timeout_s=args.timeout,
                  homomorphic=args.homomorphic)
    lost = None

    def save(tally) -> None:                 # Ctrl-C: print the finished rows
        progress.close()
        if rows:
            _print_rows(rows, args.format, single=False)
        tally.note = f"{len(rows)} printed" + (f", embeddings in {args.collect}" if args.collect else "")

    resume = lambda tally: command_line("gpusm", _with_skip(getattr(args, "argv", sys.argv[1:]), tally.done))  # noqa: E731
    with interruptible(resume, save=save, total=total, unit="queries") as tally:
        tally.done = skipped
        if args.dask:
            from ..distributed import LostQueries

            try:
                results = _match_on_dask(args, data, queries, options, kwargs, progress)
            except LostQueries as exc:         # print what was answered, then name what was not
                results, lost = exc.results, exc
        else:
            engine.prepare(data)
            results = _match_in_batches(engine, queries, kwargs, progress)
        for result, query in zip(results, queries):     # results first: the progress bar ends at n/n
            if result is None:                 # lost with the cluster
                continue
            if args.dask:                      # the backend of the worker that ran it
                backend = result.stats.get("dask_backend", backend)
            if args.collect is not None and result.embeddings is not None:
                target = Path(args.collect)
                _save_embeddings(result.embeddings, target, query.name,
                                 into_folder=into_folder or target.is_dir())
            rows.append(dict(result.to_row(), backend=backend))
            statuses.add(result.status)
            tally.done = skipped + len(rows)
    if rows or lost is None:
        _print_rows(rows, args.format, single=total == 1)
    if lost is not None:
        print(f"gpusm match: error: {lost}", file=sys.stderr)
        return EXIT_LOST
    return match_exit_code(statuses, args.allow_partial)


def start_device_in_background() -> threading.Thread:
    """Import numba.cuda and create the CUDA context on a thread while the main thread reads the
    graph files (the driver's start-up waits on the GPU, not on the interpreter). An error there is
    left for the engine to raise where the main thread reports it."""

    def start():
        try:
            from ..gpu.runtime import cuda, simulator_active

            if not simulator_active():
                cuda.current_context()
        except Exception:
            pass

    thread = threading.Thread(target=start, name="gpusm-device-start", daemon=True)
    thread.start()
    return thread


CLI_BATCH = 64          # queries handed to Engine.match_batch at a time (the progress bar's step)


def _with_skip(argv: list[str], skip: int) -> list[str]:
    """``argv`` with its ``--skip`` replaced by ``--skip skip``."""
    out, it = [], iter(argv)
    for arg in it:
        if arg == "--skip":
            next(it, None)
        elif not arg.startswith("--skip="):
            out.append(arg)
    return out + ["--skip", str(skip)] if skip else out


def _match_in_batches(engine, queries, kwargs, progress):
    """Results in query order through ``engine.match_batch`` (engines with batches share launches
    among small queries), ``CLI_BATCH`` queries at a time so the progress bar moves; an engine
    without batches answers one query at a time, so Ctrl-C keeps every finished one."""
    from ..engine.base import Engine

    step = CLI_BATCH if type(engine)._match_batch is not Engine._match_batch else 1
    for first in range(0, len(queries), step):
        chunk = queries[first:first + step]
        yield from engine.match_batch(chunk, **kwargs)
        progress.update(len(chunk))
    progress.close()


def _match_on_dask(args, data, queries, options, kwargs, progress) -> list:
    """The query set as Dask tasks (common/distributed.py) on ``--dask``'s cluster, in query order."""
    try:
        import distributed
    except ImportError:
        raise ValueError("--dask needs dask and distributed: pip install -e '.[dask]'") from None
    from ..distributed import match_many

    cluster = None
    workers = {} if args.dask_workers is None else {"n_workers": args.dask_workers}
    if args.dask == "local":               # CPU processes: the simulator or the cpu engines
        cluster = distributed.LocalCluster(threads_per_worker=1, processes=True,
                                           dashboard_address=None, **workers)
    elif args.dask == "local-cuda":        # one worker per visible GPU
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            raise ValueError("--dask local-cuda needs dask-cuda: pip install -e '.[dask]'") from None
        cluster = LocalCUDACluster(dashboard_address=None, **workers)
    client = distributed.Client(cluster if cluster is not None else args.dask)
    try:
        # one task per query; each answer is kept as it comes (a cluster that dies later keeps it)
        return match_many(data, queries, args.engine, client=client, groups=len(queries),
                          on_result=lambda i, result: progress.update(), **kwargs, **options)
    finally:
        progress.close()
        client.close()
        if cluster is not None:
            cluster.close()


#: Exit codes of ``gpusm match`` (also in ``gpusm --help``).
EXIT_OK, EXIT_DISAGREE, EXIT_USAGE, EXIT_PARTIAL, EXIT_UNSUPPORTED, EXIT_LOST = 0, 1, 2, 3, 4, 5
EXIT_CODES = f"""exit codes:
  {EXIT_OK}  every query answered (status ok or limit)
  {EXIT_DISAGREE}  demo: an engine disagreed with cpu
  {EXIT_USAGE}  bad command line or input (file missing or malformed, unknown engine or option)
  {EXIT_PARTIAL}  a query timed out, ran out of device memory or overflowed the engine's count
     (its count is a lower bound)
  {EXIT_UNSUPPORTED}  an engine could not take a query (status unsupported) or failed on it (status error:
     an external binary crashed)
  {EXIT_LOST}  match --dask: the cluster lost queries (named on stderr; the answered ones are printed)
  match --allow-partial turns {EXIT_PARTIAL} and {EXIT_UNSUPPORTED} into {EXIT_OK}, except for an error."""


def match_exit_code(statuses, allow_partial: bool = False) -> int:
    """The exit status of ``gpusm match`` for the statuses its queries ended with (EXIT_CODES)."""
    if Status.ERROR in statuses:
        return EXIT_UNSUPPORTED
    if allow_partial:
        return EXIT_OK
    if statuses & {Status.TIMEOUT, Status.OOM, Status.OVERFLOW}:
        return EXIT_PARTIAL
    if Status.UNSUPPORTED in statuses:
        return EXIT_UNSUPPORTED
    return EXIT_OK


def _save_embeddings(embeddings, target: Path, query_name: str, into_folder: bool) -> None:
    import numpy as np

    if into_folder:
        target.mkdir(parents=True, exist_ok=True)
        target = target / f"{query_name}.npy"
    if target.suffix == ".npy":
        np.save(target, embeddings)
    else:
        np.savetxt(target, embeddings, fmt="%d", delimiter=" ")


def _print_rows(rows: list[dict], fmt: str, single: bool) -> None:
    if fmt == "json":
        print(json.dumps(rows, indent=2))                  # always a list, one object per query
        return
    if single and fmt != "csv":
        row = rows[0]
        print(f"engine:  {row['engine']}")
        print(f"backend: {row['backend']}")
        print(f"query:   {row['query']}")
        print(f"status:  {row['status']}" + (f" ({row['reason']})" if row["reason"] else ""))
        print(f"count:   {_count_text(row)}" + _lower_bound_note(row["status"]))
        phases = "  ".join(f"{p}={row[f'{p}_s'] * 1e3:.3f}ms" for p in PHASES if row[f"{p}_s"])
        print(f"time:    {row['seconds'] * 1e3:.3f} ms  {phases}")
        if row["peak_device_bytes"]:
            print(f"peak device memory: {row['peak_device_bytes']:,} bytes")
        return
    import pandas as pd  # csv and tables only: one query prints without it

    frame = pd.DataFrame(rows)
    if fmt == "csv":
        frame.to_csv(sys.stdout, index=False)
        return
    frame["count"] = [_count_text(row) for row in rows]
    columns = ["query", "status", "count", "seconds"] + [f"{p}_s" for p in PHASES]
    print(frame[[c for c in columns if c in frame]].to_string(index=False))
    print(f"engine: {rows[0]['engine']}  backend: {rows[0]['backend']}"
          + ("  (>=N: a lower bound, the search did not finish)"
             if any(row["status"] in PARTIAL_STATUSES for row in rows) else ""))


#: Statuses whose count is a lower bound (the search stopped before the end, not at ``--limit``,
#: or the count passed the engine's counters).
PARTIAL_STATUSES = (str(Status.TIMEOUT), str(Status.OOM), str(Status.OVERFLOW))


def _lower_bound_note(status: str) -> str:
    """What the single-query output says after a count that is a lower bound."""
    if status == str(Status.OVERFLOW):
        return " (a lower bound: the count passed the engine's counters)"
    return " (a lower bound: the search did not finish)" if status in PARTIAL_STATUSES else ""


def _count_text(row: dict) -> str:
    """The count as printed in the table output: ``>=N`` when it is a lower bound."""
    return f">={row['count']}" if row["status"] in PARTIAL_STATUSES else str(row["count"])


# ---------------------------------------------------------------------- generate
def check_writable(path, folder: bool = False) -> None:
    """Refuse, before any work, an output that cannot be written: a file target that is a folder
    (or a folder target that is a file), a missing or read-only parent folder."""
    import os

    path = Path(path)
    if folder and path.exists() and not path.is_dir():
        raise ValueError(f"{path} exists and is not a folder")
    if not folder and path.is_dir():
        raise ValueError(f"{path} is a folder, not a file")
    where = path if folder and path.is_dir() else path.parent
    while folder and not where.exists() and where != where.parent:
        where = where.parent                                 # a folder target is created
    if not where.is_dir():
        raise ValueError(f"cannot write {path}: folder {where} does not exist")
    if not os.access(where, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ValueError(f"cannot write {path}: permission denied")


def cmd_generate(args) -> int:
    from ..graph import generate
    from ..graph.io import load_graph, save_graph

    check_writable(args.out, folder=args.what == "queries")
    if args.what == "rmat":
        labels = None
        if args.labels > 1:
            labels = (generate.uniform_labels(args.vertices, args.labels, seed=args.seed)
                      if args.label_dist == "uniform" else
                      generate.power_law_labels(args.vertices, args.labels, args.exponent, seed=args.seed))
        graph = generate.rmat(args.vertices, args.edges, *args.abcd, seed=args.seed, labels=labels,
                              name=Path(args.out).stem)
        save_graph(graph, args.out, args.format)
        print(f"wrote {graph!r} to {args.out}")
    elif args.what == "queries":
        if args.method == "gsi" and not args.edges:
            raise ValueError("--method gsi needs --edges, the query's edge target")
        data = load_graph(resolve_input(args.data))
        qs = generate.query_set(data, args.count, args.size, seed=args.seed, method=args.method,
                                **({"num_edges": args.edges} if args.edges else {}))
        qs.save(args.out)
        print(f"wrote {len(qs.queries)} {args.method} queries of {args.size} vertices to {args.out}")
    else:  # pattern
        graph = generate.pattern(args.name)
        save_graph(graph, args.out, args.format)
        print(f"wrote pattern {args.name}: {graph!r} to {args.out}")
    return 0


# ---------------------------------------------------------------------- info / convert / demo
def cmd_info(args) -> int:
    import pandas as pd

    from ..graph.io import load_graphs

    if not args.graphs and not args.device:
        raise ValueError("name at least one graph file, or --device")
    if args.device:
        from ..gpu.runtime import device_info
        for key, value in device_info().items():
            print(f"{key}: {value}")
    rows = []
    for g in (g for path in args.graphs for g in load_graphs(resolve_input(path), symmetrize=args.symmetrize)):
        rows.append({"graph": g.name, "|V|": g.num_vertices, "|E|": g.num_edges, "labels": g.num_labels,
                     "edge labels": g.num_edge_labels if g.has_edge_labels else 0,
                     "avg degree": round(g.average_degree, 2), "max degree": g.max_degree,
                     "directed": g.directed})
    if rows:
        frame = pd.DataFrame(rows)
        print(frame.to_csv(index=False) if args.format == "csv" else frame.to_string(index=False))
    return 0


def cmd_convert(args) -> int:
    from ..graph.io import MULTI_GRAPH_FORMATS, load_graphs, save_graph

    check_writable(args.output)
    graphs = load_graphs(args.input, symmetrize=args.symmetrize)
    if len(graphs) > 1 and args.to not in MULTI_GRAPH_FORMATS:
        raise ValueError(f"{args.input} holds {len(graphs)} graphs but the {args.to} format holds one: "
                         f"convert to {' or '.join(MULTI_GRAPH_FORMATS)}, or split the file")
    save_graph(graphs if len(graphs) > 1 else graphs[0], args.output, args.to)
    print(f"wrote {len(graphs)} graph(s) to {args.output} as {args.to}")
    return 0


def cmd_engines(args) -> int:
    from ..engine.describe import describe_engines, format_engines

    entries = describe_engines()
    if args.engines:
        known = {e["engine"] for e in entries}
        unknown = [n for n in args.engines if n not in known]
        if unknown:
            raise UnknownEngineError(unknown[0], sorted(known))
        entries = [e for e in entries if e["engine"] in args.engines]
    if args.format == "json":
        print(json.dumps(entries, indent=2, default=repr))
    else:
        print(format_engines(entries), end="")
    return 0


def version_text() -> str:
    import importlib.metadata

    def v(dist):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"
    from .. import __version__
    return f"gpusm {__version__} (numba {v('numba')}, numba-cuda {v('numba-cuda')}, backend: {BACKEND})"


# ---------------------------------------------------------------------- parser
def build_parser(commands=()) -> argparse.ArgumentParser:
    """The parser of every subcommand; each of ``commands`` is called with the subparsers object
    to add more (each sets ``func``, called with the parsed arguments, returning the exit status)."""
    parser = argparse.ArgumentParser(prog="gpusm", description=(
        "GPU subgraph matching: GSI/SGSI, EGSM, gMatch and STwig side by side. "
        f"Backend now: {BACKEND}."), formatter_class=argparse.RawDescriptionHelpFormatter, epilog=(
        "data: real graphs (HPRD, yeast, GitHub, SNAP) ship in the checkout's data/ folder; set\n"
        "  GPUSM_DATA to a folder of the same layout to use another. Relative input paths not\n"
        "  found in the current directory are looked up there.\n"
        "engines: `gpusm engines` lists each engine's -o options with defaults and meaning.\n" + EXIT_CODES))
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", required=True)

    m = sub.add_parser("match", help="count (or list) the embeddings of a query in a data graph")
    m.add_argument("data", help="data graph file (any supported format); a relative path not found "
                                "here is looked up in the bundled data folder ($GPUSM_DATA overrides it)")
    m.add_argument("query", help="query graph file (GSI/DAF files may hold several), or a folder of query files")
    m.add_argument("--engine", "-e", default="cpu", choices=available_engines())
    m.add_argument("--limit", type=int, help="stop after this many embeddings")
    m.add_argument("--collect", metavar="PATH",
                   help="write the embeddings (.npy, else text); a folder (one .npy per query) when "
                        "there are several queries or PATH is a folder")
    m.add_argument("--timeout", type=float, help="per-query deadline in seconds")
    m.add_argument("--device-memory-limit", type=parse_bytes, metavar="SIZE",
                   help="emulate a smaller GPU, e.g. 11G")
    m.add_argument("--homomorphic", action="store_true", help="drop injectivity (where supported)")
    m.add_argument("--symmetrize", action="store_true", help=SYMMETRIZE_HELP)
    m.add_argument("--option", "-o", type=parse_option, action="append", metavar="KEY=VALUE",
                   help="engine constructor option (repeatable)")
    m.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="json is always a list (one object per query); every format names the backend")
    m.add_argument("--allow-partial", action="store_true",
                   help="exit 0 even when a query timed out, ran out of memory or was unsupported")
    m.add_argument("--quiet", "-q", action="store_true", help="no progress bar for a folder of queries")
    m.add_argument("--skip", type=int, default=0, metavar="N",
                   help="skip the first N queries of the set (resume an interrupted run; Ctrl-C prints N)")
    m.add_argument("--dask", metavar="local|local-cuda|ADDRESS",
                   help="run the queries as Dask tasks: local = CPU worker processes, local-cuda = one "
                        "worker per GPU (dask-cuda), or a scheduler address (needs the dask extra)")
    m.add_argument("--dask-workers", type=int, metavar="N",
                   help="workers of --dask local / local-cuda (default: one per core / per GPU)")
    m.set_defaults(func=cmd_match)

    e = sub.add_parser("engines", help="list the engines, what queries they take, and their -o options")
    e.add_argument("engines", nargs="*", help="only these engines")
    e.add_argument("--format", choices=["table", "json"], default="table")
    e.set_defaults(func=cmd_engines)

    g = sub.add_parser("generate", help="generate data graphs, query sets and patterns")
    gsub = g.add_subparsers(dest="what", required=True)
    r = gsub.add_parser("rmat", help="labelled R-MAT graph")
    r.add_argument("--vertices", type=int, required=True, metavar="N",
                   help="number of vertices (required)")
    r.add_argument("--edges", type=int, required=True, metavar="M", help="number of undirected edges (required)")
    r.add_argument("--abcd", type=float, nargs=4, default=[0.57, 0.19, 0.19, 0.05], metavar=("A", "B", "C", "D"),
                   help="R-MAT quadrant probabilities (default: 0.57 0.19 0.19 0.05)")
    r.add_argument("--labels", type=int, default=1, help="number of vertex labels (default: %(default)s)")
    r.add_argument("--label-dist", choices=["uniform", "power-law"], default="power-law",
                   help="how labels are drawn (default: %(default)s)")
    r.add_argument("--exponent", type=float, default=1.0, help="power-law exponent (default: %(default)s)")
    r.add_argument("--seed", type=int, default=0,
                   help="random seed: the same seed gives the same graph (default: %(default)s)")
    r.add_argument("--format", default="graph", choices=["graph", "gsi", "gmatch-binary"],
                   help="output format (default: %(default)s)")
    r.add_argument("--out", required=True, metavar="PATH", help="output graph file (required)")
    q = gsub.add_parser("queries", help="query set by random walk from a data graph")
    q.add_argument("data")
    q.add_argument("--count", type=int, default=100, help="number of queries (default: %(default)s)")
    q.add_argument("--size", type=int, required=True, help="query vertices")
    q.add_argument("--method", choices=["induced", "walk", "gsi", "stwig"], default="induced",
                   help="induced: EGSM/gMatch random walk; walk: walked edges only; gsi: walk with "
                        "an edge target; stwig: N vertices + 2N random edges")
    q.add_argument("--edges", type=int, help="edge target (method gsi)")
    q.add_argument("--seed", type=int, default=0,
                   help="random seed: the same seed gives the same queries (default: %(default)s)")
    q.add_argument("--out", required=True, metavar="FOLDER", help="output folder (required)")
    p = gsub.add_parser("pattern", help="unlabelled pattern P1-P9 of the gMatch paper")
    p.add_argument("name")
    p.add_argument("--format", default="graph", choices=["graph", "gsi", "gmatch-binary"])
    p.add_argument("--out", required=True)
    g.set_defaults(func=cmd_generate)

    i = sub.add_parser("info", help="graph statistics as in the papers' dataset tables")
    i.add_argument("graphs", nargs="*")
    i.add_argument("--device", action="store_true", help="also report the GPU (or simulator) found")
    i.add_argument("--symmetrize", action="store_true", help=SYMMETRIZE_HELP)
    i.add_argument("--format", choices=["table", "csv"], default="table")
    i.set_defaults(func=cmd_info)

    c = sub.add_parser("convert", help="convert between graph formats")
    c.add_argument("input")
    c.add_argument("output")
    c.add_argument("--to", required=True, choices=["graph", "gsi", "snap", "gmatch-binary", "daf"])
    c.add_argument("--symmetrize", action="store_true", help=SYMMETRIZE_HELP)
    c.set_defaults(func=cmd_convert)

    add_warmup(sub)
    for add in commands:
        add(sub)
    return parser


def main(argv: list[str] | None = None, commands=()) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``) and run the subcommand; returns the exit status
    (errors in the input are status 2 with a one-line message)."""
    args = build_parser(commands).parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)     # for a resume hint
    try:
        return args.func(args)
    except (GraphFormatError, InvalidGraphError, FileNotFoundError, ValueError, KeyError) as exc:
        print(f"gpusm {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:                  # stdout closed early (`gpusm ... | head`): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())    # so that the exit's flush does not fail again
        return 0
    except OSError as exc:                   # a folder as a file, no permission, a full disk, ...
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"gpusm {args.command}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gpusm {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
