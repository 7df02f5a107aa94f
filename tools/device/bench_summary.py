#!/usr/bin/env python3
"""One line per test of a `tern bench --json` output (stdin): the median and the slowest of the
repetitions' tokens/s, the median's ms per token, the host's ms per token and dispatches per token.
Usage: tern bench ... --json | bench_summary.py LABEL"""
import json
import statistics
import sys

label = sys.argv[1] if len(sys.argv) > 1 else ""
text = sys.stdin.read()
try:
    tests = json.loads(text)
except json.JSONDecodeError:
    print(f"{label}: no JSON from tern bench: {text.strip()[-300:]}")
    sys.exit(1)
for t in tests:
    s = t["samples_ts"]
    med = statistics.median(s)
    print(f"{label:<32} {t['test']:<14} median {med:9.1f} tok/s  min {min(s):9.1f}  {1000 / med:.4f} ms"
          f"  host {t.get('encode_ms_per_token', 0):.3f} ms  dispatches {t.get('dispatches_per_token')}")
