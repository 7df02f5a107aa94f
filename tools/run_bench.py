#!/usr/bin/env python3
"""What a user of `tern run` gets, next to what `tern bench` says: alternating rounds of `tern run`
with several sampler settings (each streams its text to a file, as a user's terminal or pipe takes
it) and of `tern bench` tg tests, on one model, reporting each arm's tokens/s per round and, last,
its median and range over the rounds. `tern run`'s figure is its own summary line (tokens/s over
its decode steps, as llama.cpp's eval time: the first token comes from the prompt's logits): the
time from the first decode step to the last token printed, the prompt and the load excluded (the
warm-up too, unless an arm passes --no-warmup).

Usage: tools/run_bench.py --tern PATH -m MODEL [--rounds 3] [--n 512] [--prompt TEXT]
                          [--arm NAME='ARGS'] ... [--bench NAME='BENCH ARGS'] ... [--backend webgpu]
An arm's arguments may start with NAME=VALUE words, set in its environment as a shell would (e.g.
--arm "warm1000=TERN_WEBGPU_TUNE=warm_up_ms=1000 --temp 0").
Without --arm / --bench: greedy (--temp 0), the default sampler (--seed 1), --top-k 0 --top-p 0.9
(--seed 1), and tern bench -p 0 -n N.
Example (CPU, the shipped model): tools/run_bench.py --tern build/bin/tern -m share/models/tern-32m-en.gguf
    --backend cpu --n 64 --rounds 2
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

# tern run's summary: "generated 512 tokens, 511 decode steps in 540.2 ms (1.06 ms/token, 945.9 tok/s)"
GENERATED = re.compile(r"generated (\d+) tokens?, (\d+) decode steps? in ([0-9.]+) ms \([0-9.]+ ms/token, ([0-9.]+) tok/s\)")


ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def split_env(args):
    """Leading NAME=VALUE words of an arm's arguments: (the environment to run it in, the rest)."""
    words = shlex.split(args)
    env = dict(os.environ)
    while words and ENV_WORD.match(words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    return env, words


def run_arm(tern, model, backend, prompt, n, args, out_path):
    env, words = split_env(args)
    cmd = [tern, "run", "--backend", backend, "-m", model, "-p", prompt, "-n", str(n),
           "--no-display-prompt"] + words
    with open(out_path, "w") as out:
        p = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, text=True, timeout=600, env=env)
    m = GENERATED.search(p.stderr)
    if p.returncode != 0 or not m:
        return None, p.stderr.strip().splitlines()[-3:]
    return float(m.group(4)), [f"{m.group(1)} tokens"]


def bench_arm(tern, model, backend, args):
    env, words = split_env(args)
    cmd = [tern, "bench", "--backend", backend, "-m", model, "--json"] + words
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600, env=env)
    try:
        tests = json.loads(p.stdout)
    except ValueError:
        return None, p.stderr.strip().splitlines()[-3:]
    tg = [t for t in tests if t["n_gen"] > 0]
    if not tg:
        return None, ["no tg test"]
    return statistics.median(tg[0]["samples_ts"]), [tg[0]["test"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tern", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--backend", default="webgpu")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=512, help="tokens per tern run (and the default bench's -n)")
    ap.add_argument("--prompt", default="Once upon a time")
    ap.add_argument("--arm", action="append", default=[], help="NAME='tern run arguments'")
    ap.add_argument("--bench", action="append", default=[], help="NAME='tern bench arguments'")
    ap.add_argument("--out", default="/tmp", help="folder for each run's text (NAME.rR.txt)")
    a = ap.parse_args()
    arms = [("run", *x.split("=", 1)) for x in a.arm] + [("bench", *x.split("=", 1)) for x in a.bench]
    if not arms:
        arms = [("run", "greedy", "--temp 0"), ("run", "sampled-default", "--seed 1"),
                ("run", "sampled-topk0-topp0.9", "--top-k 0 --top-p 0.9 --seed 1"),
                ("bench", f"bench-tg{a.n}", f"-p 0 -n {a.n} -r 3")]
    results = {name: [] for _, name, _ in arms}
    for r in range(1, a.rounds + 1):
        order = arms if r % 2 else list(reversed(arms))  # alternate the order: no arm always runs first
        for kind, name, args in order:
            t0 = time.time()
            if kind == "run":
                tps, info = run_arm(a.tern, a.model, a.backend, a.prompt, a.n, args, f"{a.out}/{name}.r{r}.txt")
            else:
                tps, info = bench_arm(a.tern, a.model, a.backend, args)
            if tps is None:
                print(f"round {r} {name:<26} FAILED: {' | '.join(info)}", flush=True)
                continue
            results[name].append(tps)
            print(f"round {r} {name:<26} {tps:9.1f} tok/s  ({info[0]}, {time.time() - t0:.1f} s wall)", flush=True)
    print(f"== {a.backend}, {a.rounds} alternating rounds: median and range of tokens/s")
    for _, name, args in arms:
        v = results[name]
        if v:
            print(f"{name:<26} {statistics.median(v):9.1f}   {min(v):9.1f} - {max(v):9.1f}   [{args}]")
        else:
            print(f"{name:<26} no result   [{args}]")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
