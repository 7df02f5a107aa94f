#!/usr/bin/env python3
"""tern against peer CPU engines (bitnet.cpp, ik_llama.cpp, llama.cpp) side by side on one machine.

Runs `tern bench` and each peer's llama-bench in alternating rounds (the order rotates every round),
on the same model file unless a peer names its own, for every thread count and test, and prints
each figure (the median over rounds of each round's mean) with tern's ratio to every peer and to
the fastest. The peers are not part of tern: build them yourself and pass their llama-bench.

  tools/bench_cpu_peers.py --tern build/bin/tern -m synth-2b4t.gguf \\
      --peer bitnet.cpp=/path/bitnet.cpp/build/bin/llama-bench \\
      --peer 'ik_llama.cpp IQ2_BN -rtr=/path/ik_llama.cpp/build/bin/llama-bench:synth-iq2bn.gguf:-rtr 1' \\
      --threads 1,2 --tests tg128,pp128,pp512 --rounds 3

A peer is NAME=BENCH[:MODEL[:EXTRA ARGS]] (MODEL empty: the -m file). A peer whose run fails (a
missing instruction, a file it cannot read) is reported and left out of later rounds; the others go
on. --deadline-s stops starting runs after that many seconds and prints what was measured (for the
device tool's 10-minute calls); --run-timeout-s fails a run that takes longer. With --roofline, tern also measures the read bandwidth at each
thread count, and tg rows show tern's share of it. --out PREFIX writes PREFIX.md and PREFIX.json.
"""
import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time


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


class RunFailed(Exception):
    pass


RUN_TIMEOUT_S = None  # --run-timeout-s


def run_json(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RunFailed(f"no result after {RUN_TIMEOUT_S:.0f} s: {shlex.join(cmd)}")
    if out.returncode != 0:
        raise RunFailed(f"failed ({out.returncode}): {shlex.join(cmd)}\n{out.stderr[-1500:]}")
    text = out.stdout
    start = text.find("[")
    if start < 0:
        raise RunFailed(f"no JSON from {shlex.join(cmd)}\n{text[-500:]}{out.stderr[-1000:]}")
    return json.loads(text[start:])


TERN_BYTES = {}  # (threads, test) -> bytes per generated token, from tern's own tg rows


def run_tern(a, threads, test):
    cmd = [a.tern, "bench", "--backend", "cpu", "-m", a.model, "-t", str(threads), "-r", str(a.reps), "--json",
           *test_args(test)]
    rows = run_json(cmd)
    TERN_BYTES[(threads, test)] = rows[0].get("bytes_per_token", 0.0)
    return rows[0]["avg_ts"]


def run_peer(a, peer, threads, test):
    cmd = [peer["bench"], "-m", peer["model"] or a.model, "-t", str(threads), "-r", str(a.reps), "-o", "json",
           *peer["extra"], *test_args(test)]
    rows = run_json(cmd)
    return rows[0]["avg_ts"]


def read_bandwidth(a, threads):
    rows = run_json([a.tern, "bench", "--backend", "cpu", "-m", a.model, "-t", str(threads), "-p", "0", "-n", "4",
                     "-r", "1", "--json", "--roofline"])
    return rows[0].get("read_gbps", 0.0)


def table(a, engines, peers, threads, tests, samples, failed, bw):
    lines = [f"model {a.model}; median over up to {a.rounds} alternating rounds of each engine's mean of "
             f"{a.reps} repetitions (rounds measured in brackets where fewer)", ""]
    head = "| threads | test | " + " | ".join(engines) + " | " + " | ".join(f"tern / {q['name']}" for q in peers)
    head += " | tern / fastest peer |" + (" tern % of read BW |" if bw else "")
    lines += [head, "|" + " ---: |" * (head.count("|") - 1)]
    rows = []
    for t in threads:
        for test in tests:
            med, cells = {}, []
            for e in engines:
                s = samples.get((e, t, test), [])
                if s:
                    med[e] = statistics.median(s)
                    cells.append(f"{med[e]:.2f}" + (f" [{len(s)}]" if len(s) < a.rounds else ""))
                else:
                    cells.append("failed" if e in failed else "–")
            if not med:
                continue
            row = f"| {t} | {test} | " + " | ".join(cells)
            ratio = lambda p: f"{med['tern'] / med[p]:.2f}x" if "tern" in med and p in med else "–"
            row += (" | " + " | ".join(ratio(q["name"]) for q in peers)) if peers else ""
            best = max((med[q["name"]] for q in peers if q["name"] in med), default=0)
            row += f" | {med['tern'] / best:.2f}x |" if best > 0 and "tern" in med else " | – |"
            share = None
            if bw and "tern" in med:
                gbps, bytes_per_token = bw.get(t, 0.0), TERN_BYTES.get((t, test), 0.0)
                share = 100 * bytes_per_token * med["tern"] / (gbps * 1e9) if test.startswith("tg") and gbps else None
                row += f" {share:.1f}% of {gbps:.1f} GB/s |" if share else " |"
            lines.append(row)
            rows.append({"threads": t, "test": test, "tokens_per_s": med,
                         "rounds": {e: len(samples.get((e, t, test), [])) for e in engines},
                         "read_gbps": bw.get(t) if bw else None, "pct_read_bw": share})
    for e, why in failed.items():
        lines += ["", f"{e}: {why.splitlines()[0]}"]
    return "\n".join(lines), rows


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
    p.add_argument("--deadline-s", type=float, default=0, help="start no run after this many seconds (0: no limit)")
    p.add_argument("--out", help="write the table to OUT.md and the medians and samples to OUT.json")
    p.add_argument("--run-timeout-s", type=float, default=0, help="a run taking longer fails (0: no limit)")
    a = p.parse_args()
    global RUN_TIMEOUT_S
    RUN_TIMEOUT_S = a.run_timeout_s or None
    t0 = time.monotonic()
    peers = [parse_peer(s) for s in a.peer]
    threads = [int(t) for t in a.threads.split(",")]
    tests = a.tests.split(",")
    engines = ["tern"] + [q["name"] for q in peers]
    samples, failed = {}, {}  # (engine, threads, test) -> [t/s per round]; engine -> why
    late = lambda: a.deadline_s > 0 and time.monotonic() - t0 > a.deadline_s
    bw = {}
    if a.roofline:  # first: a few seconds, and a deadline never leaves it out
        for t in threads:
            try:
                bw[t] = read_bandwidth(a, t)
                print(f"tern read bandwidth t={t}: {bw[t]:.1f} GB/s", file=sys.stderr, flush=True)
            except RunFailed as err:
                print(err, file=sys.stderr)
    for rnd in range(a.rounds):
        order = engines[rnd % len(engines):] + engines[:rnd % len(engines)]
        for t in threads:
            for test in tests:
                for e in order:
                    if e in failed or late():
                        continue
                    try:
                        ts = run_tern(a, t, test) if e == "tern" else run_peer(a, peers[engines.index(e) - 1], t, test)
                    except RunFailed as err:
                        failed[e] = str(err)
                        print(f"{e}: {err}", file=sys.stderr, flush=True)
                        continue
                    samples.setdefault((e, t, test), []).append(ts)
                    print(f"round {rnd + 1}: {e:>24} t={t} {test:>6}: {ts:8.2f} t/s", file=sys.stderr, flush=True)
    if late():
        print(f"deadline: stopped starting runs after {a.deadline_s:.0f} s", file=sys.stderr)
    text, rows = table(a, engines, peers, threads, tests, samples, failed, bw)
    print("\n" + text)
    if a.out:
        with open(a.out + ".md", "w") as f:
            f.write(text + "\n")
        with open(a.out + ".json", "w") as f:
            json.dump({"model": a.model, "rounds": a.rounds, "reps": a.reps, "rows": rows, "failed": failed,
                       "samples": [{"engine": e, "threads": t, "test": s, "tokens_per_s": v}
                                   for (e, t, s), v in samples.items()]}, f, indent=1)


if __name__ == "__main__":
    main()
