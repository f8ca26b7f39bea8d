"""The authors' GSI's count, emulated on the CPU (:mod:`experiments.papers.gsi_filter`), beside cpu's
on GSI Fig. 14's Enron and gowalla queries: with the labels written + 1 (as the authors' GSI was
first run here, counts above cpu's) and with the ids the ``gsi-authors`` engine writes.

    python -m experiments.bench.gsi_filter --scale medium --queries 20
"""

from __future__ import annotations

import argparse

import numpy as np

from common.engine.registry import create_engine

from ..harness.workloads import SCALES
from ..papers.gsi_filter import GSILabelIds, gsi_filter_count, gsi_signatures
from ..papers.gsi_icde20 import DATASETS, QUERIES


def main(argv=None) -> int:
    """GSI Fig. 14's Enron and gowalla queries: cpu's count, and GSI's (emulated) with the labels
    written + 1 and with the ids the ``gsi-authors`` engine writes (the query's labels kept)."""
    parser = argparse.ArgumentParser(prog="python -m experiments.bench.gsi_filter", description=main.__doc__)
    parser.add_argument("--scale", default="medium", choices=sorted(SCALES))
    parser.add_argument("--queries", type=int, default=20, help="the first this many queries of each set")
    args = parser.parse_args(argv)
    print("dataset query cpu gsi(labels+1) gsi(engine's ids)")
    for dataset in DATASETS[:2]:
        data = dataset.load(SCALES[args.scale])
        queries, _ = QUERIES.build(data, dataset, SCALES[args.scale])
        cpu = create_engine("cpu").prepare(data)
        plus_one = gsi_signatures(data, data.labels.astype(np.int64) + 1)
        for query in queries[:args.queries]:
            ids = GSILabelIds(data.label_frequencies, kept=np.unique(query.labels))
            print(dataset.name, query.name, cpu.match(query).count,
                  gsi_filter_count(data, query, query.labels.astype(np.int64) + 1, plus_one),
                  gsi_filter_count(data, query, ids(query.labels), gsi_signatures(data, ids(data.labels))),
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
