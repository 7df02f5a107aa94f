#!/usr/bin/env python3
"""Per-batch timelines for tools/device/gen_run.sh (is any part of `tern run`'s generation slower
than the rest, e.g. a pipeline compiled mid-generation?):

  timeline FILE...   each `tern -vv run` log's device read-backs ("webgpu: decode steps A-B read back
                     T ms after the stream began", greedy or sampled on the device) as ms per step of
                     each batch, first to last, for the warm-up's streams and the generation; then the
                     streams' own summaries of 32 steps or more (the host's record and wait ms per
                     step) and how many steps were drawn on the host (each ends a stream).
"""
import re
import sys

READ = re.compile(r"decode steps (\d+)-(\d+) read back ([0-9.]+) ms after the stream began")
SUMMARY = re.compile(r"webgpu: (\w+) decoding: (\d+) steps read back.*")
HOST_STEP = "is drawn on the host"


def timeline(paths):
    for path in paths:
        streams, cur, summaries, host_steps = [], [], [], 0
        with open(path, errors="replace") as f:
            for line in f:
                host_steps += HOST_STEP in line
                m = SUMMARY.search(line)
                if m and int(m.group(2)) >= 32:
                    summaries.append(m.group(0))
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
        # The warm-up's streams come first (4 steps or fewer each); then the generation's (more than one
        # where steps were drawn on the host).
        for i, s in enumerate(streams):
            per, prev_b, prev_t = [], -1, 0.0
            for a, b, t in s:
                per.append((t - prev_t) / (b - prev_b))
                prev_b, prev_t = b, t
            kind = "generation" if i == len(streams) - 1 or s[-1][1] >= 4 else f"warm-up stream {i + 1}"
            shown = " ".join(f"{x:.2f}" for x in per[:24]) + (" ..." if len(per) > 24 else "")
            print(f"{path}: {kind}: {s[-1][1] + 1} steps in {s[-1][2]:.1f} ms; ms/step by batch: {shown}")
        for line in summaries:
            print(f"{path}: {line}")
        if host_steps:
            print(f"{path}: {host_steps} steps drawn on the host (each ended a device stream)")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "timeline":
        timeline(sys.argv[2:])
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
