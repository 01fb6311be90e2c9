#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""One module against another over many nixlbench cells (issue 62 item 3: a no-regression check).

Reads nixl_compare.py's nixlbench.csv. Per operation, over the cells chosen (block and batch bounds), the ratio
A / B of GB/s (or of another column, --metric: for times, above 1 is slower; prep_us, the time NIXL takes to make
a transfer's request, runs no module code and so measures how fast the process's CPU was): per cell the ratio of
medians and whether the two modules' min-max ranges are apart; and the geometric mean over the cells per repeat
(A's repeat r against B's repeat r: interleaved runs share the machine's moment), with its median and min-max
across repeats. A difference counts only where the repeats' range of that mean stays on one side of 1; with two
repeats that happens by chance one time in two (take five or more).

  nixl_ratio.py CSV --a ours --b ours-before [--metric gbps] [--max-block 65536] [--min-batch 64]
"""
import argparse
import csv
import math
import statistics
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--a", default="ours")
    ap.add_argument("--b", default="ours-before")
    ap.add_argument("--metric", default="gbps", help="a column of the CSV: gbps (default), post_us, prep_us...")
    ap.add_argument("--min-block", type=int, default=0)
    ap.add_argument("--max-block", type=int, default=1 << 62)
    ap.add_argument("--min-batch", type=int, default=0)
    ap.add_argument("--max-batch", type=int, default=1 << 62)
    args = ap.parse_args()

    values = defaultdict(dict)  # (op, block, batch, module) -> {repeat: the metric}
    with open(args.csv) as f:
        for row in csv.DictReader(f):
            block, batch = int(row["block"]), int(row["batch"])
            if not (args.min_block <= block <= args.max_block and args.min_batch <= batch <= args.max_batch):
                continue
            if row["module"] in (args.a, args.b) and row[args.metric] and float(row[args.metric]) > 0:
                values[(row["op"], block, batch, row["module"])][int(row["repeat"])] = float(row[args.metric])

    ops = sorted({k[0] for k in values})
    bounds = [f"{name} {op} {value}" for name, op, value, default in
              (("block", ">=", args.min_block, 0), ("block", "<=", args.max_block, 1 << 62),
               ("batch", ">=", args.min_batch, 0), ("batch", "<=", args.max_batch, 1 << 62)) if value != default]
    print(f"{args.a} / {args.b}, {args.metric}; cells with {', '.join(bounds) or 'any block and batch'}")
    for op in ops:
        cells = sorted({(k[1], k[2]) for k in values if k[0] == op})
        per_repeat = defaultdict(list)  # repeat -> log ratios of its cells
        above = below = 0
        print(f"\n{op}: block batch  ratio-of-medians  {args.a} min-max  {args.b} min-max")
        for block, batch in cells:
            a, b = values.get((op, block, batch, args.a), {}), values.get((op, block, batch, args.b), {})
            if not a or not b:
                continue
            ratio = statistics.median(a.values()) / statistics.median(b.values())
            apart = "above" if min(a.values()) > max(b.values()) else \
                    "below" if max(a.values()) < min(b.values()) else ""
            above += apart == "above"
            below += apart == "below"
            print(f"  {block:>8} {batch:>5}  {ratio:5.2f}  {min(a.values()):7.2f}-{max(a.values()):<7.2f} "
                  f"{min(b.values()):7.2f}-{max(b.values()):<7.2f} {apart}")
            for r in set(a) & set(b):
                per_repeat[r].append(math.log(a[r] / b[r]))
        means = [math.exp(statistics.mean(v)) for _, v in sorted(per_repeat.items())]
        if means:
            verdict = "higher" if min(means) > 1 else "lower" if max(means) < 1 else "no difference"
            print(f"{op}: {len(cells)} cells, ranges apart: {above} above, {below} below; geometric mean per "
                  f"repeat {' '.join(f'{m:.2f}' for m in means)}: median {statistics.median(means):.2f} "
                  f"({min(means):.2f}-{max(means):.2f}), {verdict}")


if __name__ == "__main__":
    main()
