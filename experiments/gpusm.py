"""The installed ``gpusm`` command: the library's subcommands (:mod:`common.cli`) plus the
harness's ``demo`` (:func:`experiments.papers.compare.demo`) and ``experiment`` (:mod:`experiments.cli`).

``python -m experiments.gpusm ARGS`` is the same as ``gpusm ARGS``.
"""

from __future__ import annotations

import shlex
import sys

from common import cli


def cmd_demo(args) -> int:
    from .papers.compare import demo

    table = demo(seed=args.seed, size=args.size, timeout_s=args.timeout, peers=args.peers)
    disagreed = table.loc[table["disagreed"] != "-", "disagreed"].astype(int)
    if disagreed.any():
        return cli.EXIT_DISAGREE
    return cli.EXIT_PARTIAL if table.attrs["unanswered"] else cli.EXIT_OK


def cmd_experiment(args) -> int:
    from . import cli as experiments_cli

    return experiments_cli.run(args, command="gpusm " + shlex.join(sys.argv[1:]))


def add_commands(sub) -> None:
    """Add ``demo`` and ``experiment`` to the subparsers of :func:`common.cli.build_parser`."""
    from .cli import add_arguments

    d = sub.add_parser("demo", help="gpusm's engines side by side on a built-in workload")
    d.add_argument("--seed", type=int, default=7)
    d.add_argument("--size", choices=["tiny", "default"],
                   help="workload size (default: tiny under the simulator, default on a GPU)")
    d.add_argument("--timeout", type=float,
                   help="per-query deadline in seconds (default: 10 on a GPU, 300 in the simulator)")
    d.add_argument("--peers", action="store_true",
                   help="also run the installed peer engines (networkx, igraph: common/peers.py)")
    d.set_defaults(func=cmd_demo)

    x = sub.add_parser("experiment", help="run a paper's table or figure (resumable); --list names them")
    add_arguments(x)
    x.set_defaults(func=cmd_experiment)


def build_parser():
    """The ``gpusm`` parser: :func:`common.cli.build_parser` with :func:`add_commands`."""
    return cli.build_parser(commands=(add_commands,))


def main(argv: list[str] | None = None) -> int:
    """Run ``gpusm`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    return cli.main(argv, commands=(add_commands,))


if __name__ == "__main__":
    sys.exit(main())
