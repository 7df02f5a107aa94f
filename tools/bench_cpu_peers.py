#!/usr/bin/env python3
"""tern against peer CPU engines (bitnet.cpp, ik_llama.cpp, llama.cpp) side by side on one machine.

Runs `tern bench` and each peer's llama-bench in alternating rounds (the order rotates every round),
on the same model file unless a peer names its own, for every thread count and test, and prints
each figure (the median over rounds of each round's mean) with tern's ratio to every peer and to
the fastest. The peers are not part of tern: build them yourself and pass their llama-bench.

  tools/bench_cpu_peers.py --tern build/bin/tern -m synth-2b4t.gguf \\
      --peer bitnet.cpp=/path/bitnet.cpp/build/bin/llama-bench \\
      --peer 'ik_llama.cpp -rtr=/path/ik_llama.cpp/build/bin/llama-bench::-rtr 1' \\
      --threads 1,2 --tests tg128,pp128,pp512 --rounds 3

A peer is NAME=BENCH[:MODEL[:EXTRA ARGS]] (MODEL empty: the -m file). With --roofline, tern also
measures the read bandwidth at each thread count, and tg rows show tern's share of it.
"""
import argparse
import json
import shlex
import statistics
import subprocess
import sys


def parse_peer(spec):
    name, _, rest = spec.partition("=")
    bench, _, rest = rest.partition(":")
    model, _, extra = rest.partition(":")
    if not name or not bench:
        sys.exit(f"bad --peer '{spec}': expected NAME=BENCH[:MODEL[:EXTRA ARGS]]")
    return {"name": name, "bench": bench, "model": model or None, "extra": shlex.split(extra)}


def test_args(test):
    kind, n = test[:2], int(test[2:])
    if kind == "tg":
        return ["-p", "0", "-n", str(n)]
    if kind == "pp":
        return ["-p", str(n), "-n", "0"]
    sys.exit(f"bad test '{test}': expected tgN or ppN")


def run_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {shlex.join(cmd)}\n{out.stderr[-2000:]}")
    text = out.stdout
    start = text.find("[")
    return json.loads(text[start:])


def run_tern(a, model, threads, test):
    cmd = [a.tern, "bench", "-m", model, "-t", str(threads), "-r", str(a.reps), "--json", *test_args(test)]
    rows = run_json(cmd)
    TERN_BYTES[(threads, test)] = rows[0].get("bytes_per_token", 0.0)
    return rows[0]["avg_ts"]


TERN_BYTES = {}  # (threads, test) -> bytes per generated token, from tern's own tg rows


def run_peer(a, peer, threads, test):
    cmd = [peer["bench"], "-m", peer["model"] or a.model, "-t", str(threads), "-r", str(a.reps), "-o", "json",
           *peer["extra"], *test_args(test)]
    rows = run_json(cmd)
    return rows[0]["avg_ts"]


def read_bandwidth(a, threads):
    rows = run_json([a.tern, "bench", "-m", a.model, "-t", str(threads), "-p", "0", "-n", "4", "-r", "1", "--json",
                     "--roofline"])
    return rows[0].get("read_gbps", 0.0)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tern", required=True, help="the tern executable")
    p.add_argument("-m", "--model", required=True, help="model file (GGUF) every engine runs unless a peer names its own")
    p.add_argument("--peer", action="append", default=[], help="NAME=BENCH[:MODEL[:EXTRA ARGS]], repeatable")
    p.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    p.add_argument("--tests", default="tg128,pp128,pp512", help="tests, comma-separated (tgN, ppN)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    p.add_argument("--reps", type=int, default=3, help="repetitions per run (each engine's -r)")
    p.add_argument("--roofline", action="store_true", help="also measure tern's read bandwidth per thread count")
    a = p.parse_args()
    peers = [parse_peer(s) for s in a.peer]
    threads = [int(t) for t in a.threads.split(",")]
    tests = a.tests.split(",")
    engines = ["tern"] + [q["name"] for q in peers]
    samples = {}  # (engine, threads, test) -> [t/s per round]
    for rnd in range(a.rounds):
        order = engines[rnd % len(engines):] + engines[:rnd % len(engines)]
        for t in threads:
            for test in tests:
                for e in order:
                    ts = run_tern(a, a.model, t, test) if e == "tern" else run_peer(a, peers[engines.index(e) - 1], t, test)
                    samples.setdefault((e, t, test), []).append(ts)
                    print(f"round {rnd + 1}: {e:>16} t={t} {test:>6}: {ts:8.2f} t/s", file=sys.stderr, flush=True)
    bw = {t: read_bandwidth(a, t) for t in threads} if a.roofline else {}

    print(f"\nmodel {a.model}; median over {a.rounds} alternating rounds of each engine's mean of {a.reps} repetitions\n")
    head = "| threads | test | " + " | ".join(engines) + " | " + " | ".join(f"tern / {q['name']}" for q in peers)
    head += " | tern / fastest peer |" + (" tern % of read BW |" if bw else "")
    print(head)
    print("|" + " ---: |" * (head.count("|") - 1))
    for t in threads:
        for test in tests:
            med = {e: statistics.median(samples[(e, t, test)]) for e in engines}
            row = f"| {t} | {test} | " + " | ".join(f"{med[e]:.2f}" for e in engines)
            row += " | " + " | ".join(f"{med['tern'] / med[q['name']]:.2f}x" for q in peers) if peers else ""
            best = max((med[q["name"]] for q in peers), default=0)
            row += f" | {med['tern'] / best:.2f}x |" if best > 0 else " | – |"
            if bw:
                gbps, bytes_per_token = bw[t], TERN_BYTES.get((t, test), 0.0)
                share = 100 * bytes_per_token * med["tern"] / (gbps * 1e9) if test.startswith("tg") and gbps else None
                row += f" {share:.1f}% of {gbps:.1f} GB/s |" if share else " |"
            print(row)


if __name__ == "__main__":
    main()
