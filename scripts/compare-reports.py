#!/usr/bin/env python3
"""Side by side: the byte metrics of two gate reports (e.g. CPU vs CUDA), per component."""
import json
import sys

MIB = 1024 * 1024


def load(p):
    with open(p) as f:
        return json.load(f)


a, b = load(sys.argv[1]), load(sys.argv[2])
ta, tb = a["testbed"]["backend"], b["testbed"]["backend"]
print(f"{'component':<10} {'metric':<16} {ta + ' MiB':>12} {tb + ' MiB':>12} {'ratio':>8}")
for name, ca in a["components"].items():
    cb = b["components"].get(name)
    if not cb:
        continue
    for m, va in ca["metrics"].items():
        vb = cb["metrics"].get(m)
        if not vb or va["unit"] != "bytes":
            continue
        x, y = va["value"], vb["value"]
        r = f"{y / x:.3f}" if x else "-"
        print(f"{name:<10} {m:<16} {x / MIB:>12.2f} {y / MIB:>12.2f} {r:>8}")
    for m in ("step_time", "loss"):
        va, vb = ca["metrics"].get(m), cb["metrics"].get(m)
        if va and vb:
            print(f"{name:<10} {m:<16} {va['value']:>12.4g} {vb['value']:>12.4g}")
