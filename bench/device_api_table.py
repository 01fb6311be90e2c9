#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The timing table of gpu-host/run device-api's report (device-api.txt): per level and put shape, each
configuration's median us per put over its rounds (the spread: the rounds' lowest and highest run medians ...
each run's median is of 5 timed launches), and the ratio of the first configuration named to each other one.

    bench/device_api_table.py device-api.txt "our device code" "UCX's device code"
    bench/device_api_table.py DIR ourhdr ucxhdr

A directory holds gpu-host/run device-prebuilt's logs (bench-ROUND-check-NAME.log): configurations by NAME.
"""
import glob
import os
import re
import statistics
import sys
from collections import defaultdict


def main():
    report, configs = sys.argv[1], sys.argv[2:]
    runs = defaultdict(lambda: defaultdict(list))  # config -> (level, bytes, count) -> [us per put]
    current = None
    if os.path.isdir(report):
        lines = []
        for log in sorted(glob.glob(os.path.join(report, "bench-*-check-*.log"))):
            lines.append("### check-bench_0:_" + re.sub(r".*-check-", "", os.path.basename(log)) + "\n")
            lines += open(log).readlines()
    else:
        lines = open(report).readlines()
    for line in lines:
        m = re.match(r"### check-bench_\d+:_(.*)\.log", line)
        if m:
            current = m.group(1).replace("__", ", ").replace("_", " ")
            continue
        m = re.match(r"bench (\w+) (\d+) B x (\d+): median [\d.]+ ms \([\d.-]+\), ([\d.]+) us per put", line)
        if m and current is not None:
            runs[current][(m.group(1), int(m.group(2)), int(m.group(3)))].append(float(m.group(4)))
    norm = lambda text: re.sub(r"[^a-z0-9]", "", text.lower())
    names = [next(c for c in runs if norm(want) == norm(c)) for want in configs]
    print("| level | put | " + " | ".join(f"{n}: us per put" for n in names) + " | " +
          " | ".join(f"{n} / {names[0]} (time)" for n in names[1:]) + " |")
    print("|---" * (2 + 2 * len(names) - 1) + "|")
    for key in runs[names[0]]:
        cells, medians = [], []
        for n in names:
            v = runs[n][key]
            med = statistics.median(v)
            medians.append(med)
            cells.append(f"{med:.3f} ({min(v):.3f}-{max(v):.3f})")
        ratios = [f"{m / medians[0]:.2f}x" for m in medians[1:]]  # >1: the first is faster
        print(f"| {key[0]} | {key[1]} B x {key[2]} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()
