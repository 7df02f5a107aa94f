#!/usr/bin/env python3
"""Summaries for tools/device/gen_run.sh's step 0 (why `tern run` decodes slower than `tern bench`):

  timeline FILE...   each `tern -vv run` log's greedy read-backs ("webgpu: decode steps A-B read back
                     T ms after the stream began") as ms per step of each batch, first to last, so a
                     slow start shows as the first batches' figures;
  clocks CSV MARKS   nvidia-smi's samples (timestamp, pstate, clocks.sm, clocks.mem, power.draw,
                     utilization.gpu[, reasons]) between each pair of marks ("TIME start NAME" /
                     "TIME end NAME"): the SM and memory clocks' min / median / max, the pstates seen,
                     and the time from the start to the first sample at the highest SM clock.
"""
import csv
import datetime
import re
import statistics
import sys

READ = re.compile(r"decode steps (\d+)-(\d+) read back ([0-9.]+) ms after the stream began")


def timeline(paths):
    for path in paths:
        streams, cur = [], []
        with open(path, errors="replace") as f:
            for line in f:
                m = READ.search(line)
                if not m:
                    continue
                a, b, t = int(m.group(1)), int(m.group(2)), float(m.group(3))
                if a == 0 and cur:
                    streams.append(cur)
                    cur = []
                cur.append((a, b, t))
        if cur:
            streams.append(cur)
        # The last stream is the generation (the warm-up's come first).
        for i, s in enumerate(streams):
            per, prev_b, prev_t = [], -1, 0.0
            for a, b, t in s:
                per.append((t - prev_t) / (b - prev_b))
                prev_b, prev_t = b, t
            kind = "generation" if i == len(streams) - 1 else f"warm-up stream {i + 1}"
            shown = " ".join(f"{x:.2f}" for x in per[:24]) + (" ..." if len(per) > 24 else "")
            print(f"{path}: {kind}: {s[-1][1] + 1} steps in {s[-1][2]:.1f} ms; ms/step by batch: {shown}")


def parse_time(text):
    text = text.strip()
    for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
        try:
            return datetime.datetime.strptime(text, fmt)
        except ValueError:
            pass
    return None


def number(text):
    m = re.search(r"[0-9.]+", text)
    return float(m.group(0)) if m else None


def clocks(csv_path, marks_path):
    rows = []
    with open(csv_path, errors="replace") as f:
        for r in csv.reader(f):
            if len(r) < 6:
                continue
            t = parse_time(r[0])
            if t is None:
                continue
            rows.append((t, r[1].strip(), number(r[2]), number(r[3]), number(r[4]), number(r[5]),
                         r[6].strip() if len(r) > 6 else ""))
    spans, open_at = [], {}
    with open(marks_path) as f:
        for line in f:
            parts = line.split(None, 3)
            if len(parts) < 4:
                continue
            t = parse_time(parts[0] + " " + parts[1])
            if parts[2] == "start":
                open_at[parts[3].strip()] = t
            elif parts[2] == "end" and parts[3].strip() in open_at:
                spans.append((parts[3].strip(), open_at.pop(parts[3].strip()), t))
    top = max((r[2] for r in rows if r[2] is not None), default=0)
    for name, t0, t1 in spans:
        sel = [r for r in rows if t0 <= r[0] <= t1]
        if not sel:
            print(f"{name}: no samples")
            continue
        sm = [r[2] for r in sel if r[2] is not None]
        mem = [r[3] for r in sel if r[3] is not None]
        pw = [r[4] for r in sel if r[4] is not None]
        at_top = next(((r[0] - t0).total_seconds() for r in sel if r[2] == top), None)
        reasons = sorted({r[6] for r in sel if r[6]})
        print(f"{name}: {len(sel)} samples over {(t1 - t0).total_seconds():.2f} s; SM MHz min/median/max "
              f"{min(sm):.0f}/{statistics.median(sm):.0f}/{max(sm):.0f}; mem MHz {min(mem):.0f}/"
              f"{statistics.median(mem):.0f}/{max(mem):.0f}; power W median {statistics.median(pw):.0f}; "
              f"pstates {sorted({r[1] for r in sel})}; first at {top:.0f} MHz after "
              f"{'never' if at_top is None else f'{at_top:.2f} s'}; reasons {reasons[:4]}")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "timeline":
        timeline(sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "clocks":
        clocks(sys.argv[2], sys.argv[3])
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
