#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Instructions per operation, function by function, of two callgrind profiles of the same program (issue 62).

    bench/callgrind_per_op.py OPS A.out B.out [--names A B] [--min 0.5]
    bench/callgrind_per_op.py OPS A.out [--min 0.5]     one profile: where its instructions go

OPS: the operations each profile counted (cux_opcost's burst: 5 rounds x (ITERATIONS / 1024 + 1) x 1,024 puts).
Each function's own instructions (callgrind_annotate --inclusive=no), its inlined parts summed under its name,
divided by OPS; rows sorted by the difference, the total last. A wall-clock figure on a 2-core VM moves a few
percent run to run; an instruction count does not move at all, so it tells two builds' posting apart where a
timing cannot (the mock's own work is the same for both and cancels). HACKING.md says how to run callgrind on
the module (valgrind 3.19 lacks the pidfd system calls its proofs make).
"""
import argparse
import collections
import re
import subprocess

ROW = re.compile(r'\s*([\d,]+)\s+\([^)]*\)\s+(\S+?):(\S+)')
CLONE = re.compile(r'\.(isra|constprop|part|cold)\.\d+')


def per_function(path):
    out = subprocess.run(['callgrind_annotate', '--inclusive=no', '--threshold=100', path],
                         capture_output=True, text=True, check=True).stdout
    counts = collections.Counter()
    rows = False
    for line in out.splitlines():
        if 'file:function' in line:
            rows = True
            continue
        if rows and line.startswith('-- Auto-annotated'):
            break
        m = ROW.match(line) if rows else None
        if m:
            counts[CLONE.sub('', m.group(3))] += int(m.group(1).replace(',', ''))
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('ops', type=float)
    ap.add_argument('a')
    ap.add_argument('b', nargs='?')
    ap.add_argument('--names', nargs='+', default=['A', 'B'])
    ap.add_argument('--min', type=float, default=0.5, help='rows whose difference is under this are left out')
    args = ap.parse_args()
    a = per_function(args.a)
    if args.b is None:
        print('%-40s %9s' % ('instructions per operation', args.names[0][:9]))
        for fn in sorted(a, key=lambda f: (-a[f], f)):
            if a[fn] / args.ops >= args.min:
                print('%-40s %9.1f' % (fn[:40], a[fn] / args.ops))
        print('%-40s %9.1f' % ('total', sum(a.values()) / args.ops))
        return
    b = per_function(args.b)
    print('%-40s %9s %9s %9s' % ('instructions per operation', args.names[0][:9], args.names[1][:9], 'diff'))
    for fn in sorted(set(a) | set(b), key=lambda f: (a[f] - b[f], f)):
        if abs(a[fn] - b[fn]) / args.ops >= args.min:
            print('%-40s %9.1f %9.1f %+9.1f' % (fn[:40], a[fn] / args.ops, b[fn] / args.ops,
                                                (a[fn] - b[fn]) / args.ops))
    ta, tb = sum(a.values()) / args.ops, sum(b.values()) / args.ops
    print('%-40s %9.1f %9.1f %+9.1f' % ('total', ta, tb, ta - tb))


if __name__ == '__main__':
    main()
