#!/usr/bin/env python3
"""Load benchmark for `tern serve` (issue 53): aggregate decode tokens/s at several numbers of
concurrent streams, with each stream's latency, and the time to first token of a 512-token prompt
while 8 other streams decode. Python's standard library only (it runs on the GPU machine as is).

  tools/serve/serve_bench.py --bin build/bin/tern -m MODEL [--backend cpu] [--streams 1,8,32,64]
        [--duration 20] [--prompt-tokens 16] [--ttft-tokens 512] [--ttft-busy 8] [-c 2048]
        [--json out.json] [-- extra tern serve flags]
  tools/serve/serve_bench.py --url http://127.0.0.1:8080 ...          (a server already running)

For each stream count C: C clients each keep one streaming request running (seeded, ignore_eos,
a prompt of --prompt-tokens token ids; when one reaches the end of its context the client sends the
next). Once every stream has its first token, tokens are counted for --duration seconds, then all
requests are cancelled. Reported: aggregate tokens/s over that window; per stream the mean ms
between its tokens (median over streams, and the worst stream); the median time to first token.
Then the time to first token of a --ttft-tokens prompt alone (twice: the first may pay for kernels
a GPU compiles at their first use) and while --ttft-busy other streams decode (--ttft-tokens 0: not
measured).
A server started here gets --parallel = the largest C (so no request waits for a slot).
"""
import argparse
import http.client
import json
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse


def parse_args():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default="build/bin/tern")
    p.add_argument("-m", "--model", default="")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--url", default="")
    p.add_argument("--streams", default="1,8,32,64")
    p.add_argument("--duration", type=float, default=20)
    p.add_argument("--prompt-tokens", type=int, default=16)
    p.add_argument("--ttft-tokens", type=int, default=512)
    p.add_argument("--ttft-busy", type=int, default=8)
    p.add_argument("-c", "--ctx-size", type=int, default=2048)
    p.add_argument("--json", default="")
    a = p.parse_args(argv)
    a.streams = [int(x) for x in a.streams.split(",")]
    a.extra = extra
    return a


class Server:
    """`tern serve --port 0`, started and stopped here; its log is echoed to stderr."""

    def __init__(self, a):
        parallel = max(a.streams + [a.ttft_busy + 1])
        cmd = [a.bin, "serve", "--port", "0", "--parallel", str(parallel), "-c", str(a.ctx_size), "--backend",
               a.backend, "--queue", "16"] + (["-m", a.model] if a.model else []) + a.extra
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.url = None
        ready = threading.Event()

        def pump():
            for line in self.proc.stderr:
                sys.stderr.write(line)
                m = re.search(r"listening on (http://[\d.]+:\d+)", line)
                if m:
                    self.url = m.group(1)
                if "tern serve: ready" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        ready.wait(900)
        if self.proc.poll() is not None or not self.url:
            raise SystemExit("error: tern serve did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)


class Streams:
    """Streaming completion requests that can all be cancelled at once."""

    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port
        self.lock = threading.Lock()
        self.open = set()
        self.cancelled = False

    def run(self, prompt, seed, max_tokens, on_token):
        body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "stream": True, "seed": seed,
                           "temperature": 0.8, "ignore_eos": True})
        conn = http.client.HTTPConnection(self.host, self.port, timeout=3600)
        with self.lock:
            if self.cancelled:
                return
            self.open.add(conn)
        try:
            conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            res = conn.getresponse()
            if res.status != 200:
                raise RuntimeError(f"HTTP {res.status}: {res.read()[:300]!r}")
            while True:
                line = res.readline()
                if not line:
                    return
                # A chunk with text (the server writes compact JSON: `"text":""` is an empty one). A
                # byte test, not a JSON parse per token: 64 client threads share one interpreter.
                if line.startswith(b"data: {") and b'"text":"' in line and b'"text":""' not in line:
                    on_token(time.perf_counter())
        except (OSError, http.client.HTTPException, ValueError):
            if not self.cancelled:
                raise
        finally:
            with self.lock:
                self.open.discard(conn)
            conn.close()

    def cancel_all(self):
        with self.lock:
            self.cancelled = True
            for c in self.open:
                try:
                    c.sock.shutdown(socket.SHUT_RDWR)
                except (OSError, AttributeError):  # (AttributeError: not connected yet, no socket)
                    pass


def metrics(url):
    """/metrics as {name or name{labels}: value}."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


PHASES = ("record", "release", "wait", "unpack", "sample", "deliver", "record_ahead")


def step_breakdown(m0, m1):
    """The scheduler's ms per batched step by phase between two /metrics reads (tern serve's
    tern_step_seconds_total), the steps, and the steps that read every logit back."""
    steps = m1.get("tern_decode_steps_total", 0) - m0.get("tern_decode_steps_total", 0)
    out = {"steps": int(steps), "steps_ahead": int(m1.get("tern_decode_steps_ahead_total", 0) -
                                                   m0.get("tern_decode_steps_ahead_total", 0)),
           "full_logit_reads": int(m1.get("tern_full_logit_reads_total", 0) -
                                                         m0.get("tern_full_logit_reads_total", 0)),
           "generated": int(m1.get("tern_generated_tokens_total", 0) - m0.get("tern_generated_tokens_total", 0))}
    # The device's top-k lists: candidate rows per listed column (what unpacking and sampling walk).
    cols = m1.get("tern_listed_columns_total", 0) - m0.get("tern_listed_columns_total", 0)
    rows = m1.get("tern_listed_rows_total", 0) - m0.get("tern_listed_rows_total", 0)
    out["listed_rows_per_column"] = rows / cols if cols else None
    for ph in PHASES:
        key = f'tern_step_seconds_total{{phase="{ph}"}}'
        out[f"{ph}_ms_per_step"] = 1000 * (m1.get(key, 0) - m0.get(key, 0)) / steps if steps else None
    return out


def wait_idle(url, timeout_s=300):
    """Until the server has no busy slot: cancelled requests leave their slots at the next step."""
    u = urllib.parse.urlparse(url)
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        busy = re.search(r"^tern_slots_busy (\S+)$", text, re.M)
        if busy and float(busy.group(1)) == 0:
            return
        time.sleep(0.1)
    raise SystemExit("error: the server's slots did not become idle")


def prompt_ids(n, salt, n_vocab):
    return [10 + ((i * 7919 + salt * 104729) % (n_vocab - 20)) for i in range(n)]


def decode_run(url, a, n_vocab, C):
    s = Streams(url)
    segments = [[] for _ in range(C)]  # per client, one list of token times per request
    t0 = time.perf_counter()
    errors = []

    def client(i):
        k = 0
        try:
            while not s.cancelled:
                seg = []
                segments[i].append(seg)
                s.run(prompt_ids(a.prompt_tokens, i + 1000 * k, n_vocab), i + 1, a.ctx_size - a.prompt_tokens - 1,
                      seg.append)
                k += 1
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append((time.perf_counter(), i, e))

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(C)]
    for t in threads:
        t.start()
    while any(not seg or not seg[0] for seg in segments) and not errors:
        time.sleep(0.02)
    start = time.perf_counter()
    m0 = metrics(url)
    time.sleep(a.duration)
    m1 = metrics(url)
    end = time.perf_counter()
    s.cancel_all()
    for t in threads:
        t.join()
    # A client whose connection failed after the window (the server stopping, e.g. a profiling run's
    # at its end) does not spoil the figures; one that failed inside it stopped sending requests, so
    # the window undercounts: say so, and fail only when no client got through the window.
    inside = [(t, i, e) for t, i, e in errors if t <= end]
    for t, i, e in inside:
        print(f"serve_bench: warning: client {i} failed {t - start:.2f} s into the window: {e!r}", file=sys.stderr)
    if inside and len({i for _, i, _ in inside}) == C:
        raise inside[0][2]
    tokens, per_stream, positions = 0, [], []
    for client_segments in segments:
        gaps, span = 0, 0.0
        for seg in client_segments:
            win = [x for x in seg if start <= x <= end]
            tokens += len(win)
            # (the context position each windowed token was decoded at: its request's prompt, then
            # one per token before it; the engine costs a step by its streams' depths)
            positions += [a.prompt_tokens + j for j, x in enumerate(seg) if start <= x <= end]
            if len(win) > 1:
                gaps += len(win) - 1
                span += win[-1] - win[0]
        if gaps:
            per_stream.append(1000 * span / gaps)
    return {"streams": C, "tokens_per_s": tokens / (end - start), "ms_per_token_median": statistics.median(per_stream),
            "ms_per_token_worst": max(per_stream),
            "position_mean": statistics.fmean(positions), "position_min": min(positions),
            "position_max": max(positions),
            "ttft_ms_median": statistics.median(1000 * (seg[0][0] - t0) for seg in segments if seg and seg[0]),
            "server_steps": step_breakdown(m0, m1),
            # What the server generated in the window (its /metrics), against what the clients
            # received: where the clients fall behind, they are the bottleneck, not the server.
            "server_tokens_per_s": step_breakdown(m0, m1)["generated"] / (end - start)}


def ttft_run(url, a, n_vocab, busy):
    s = Streams(url)
    times = [[] for _ in range(busy)]
    threads = [threading.Thread(target=s.run, args=(prompt_ids(a.prompt_tokens, 50 + i, n_vocab), 50 + i,
                                                     a.ctx_size - a.prompt_tokens - 1, times[i].append), daemon=True)
               for i in range(busy)]
    for t in threads:
        t.start()
    while any(not t for t in times):
        time.sleep(0.02)
    first = []
    t0 = time.perf_counter()
    Streams(url).run(prompt_ids(a.ttft_tokens, 999, n_vocab), 7, 2, first.append)
    s.cancel_all()
    for t in threads:
        t.join()
    # How long the other streams waited for a token while the prompt was read (chunked prefill keeps
    # this near one step's time; reading the prompt in one piece makes it the whole prompt's).
    stall = 0.0
    for ts in times:
        ts = [t0] + [x for x in ts if t0 <= x <= first[0]] + [first[0]]
        stall = max([stall] + [ts[i + 1] - ts[i] for i in range(len(ts) - 1)])
    return {"busy_streams": busy, "prompt_tokens": a.ttft_tokens, "ttft_ms": 1000 * (first[0] - t0),
            "longest_gap_of_others_ms": 1000 * stall if busy else None}


def main():
    a = parse_args()
    server = None if a.url else Server(a)
    url = a.url or server.url
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port)
    conn.request("GET", "/v1/models")
    n_vocab = json.loads(conn.getresponse().read())["data"][0]["meta"]["n_vocab"]
    results = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "model": a.model or "(server default)",
               "backend": a.backend, "duration_s": a.duration, "decode": [], "ttft": []}
    try:
        for C in a.streams:
            wait_idle(url)
            r = decode_run(url, a, n_vocab, C)
            results["decode"].append(r)
            print(f"serve_bench: {C} streams: {r['tokens_per_s']:.1f} tokens/s", file=sys.stderr, flush=True)
        # The lone prompt twice: the first may include kernels compiled at their first use (a prompt
        # chunk at positions the decode runs above never reached); the second shows the warm figure.
        for i, busy in enumerate((0, 0, a.ttft_busy) if a.ttft_tokens > 0 else ()):
            wait_idle(url)
            r = ttft_run(url, a, n_vocab, busy)
            r["attempt"] = 2 if i == 1 else 1
            results["ttft"].append(r)
    finally:
        if server:
            server.stop()
    print("| streams | aggregate tokens/s | ms/token per stream (median) | worst stream | TTFT median (ms) |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for r in results["decode"]:
        print(f"| {r['streams']} | {r['tokens_per_s']:.1f} | {r['ms_per_token_median']:.1f} | "
              f"{r['ms_per_token_worst']:.1f} | {r['ttft_ms_median']:.0f} |")
    print("\nThe server in those windows: tokens/s it generated (/metrics; above the clients' figure: the clients "
          "are the bottleneck), its batched steps, those recorded ahead, and ms per step of its scheduler thread "
          "(recording, releasing a step recorded ahead, which submits it; waiting for the device; unpacking results; "
          "sampling, with each slot's unpacking under --sampling-form 1; handing tokens out; and recording steps "
          "ahead while the device ran the step before), steps that read every logit back (a lone stream decodes "
          "without steps):")
    print("| streams | server tokens/s | steps | ahead | " + " | ".join(PHASES) + " | full-logit steps |")
    print("| ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in PHASES) + " | ---: |")
    for r in results["decode"]:
        b = r["server_steps"]
        cells = " | ".join("-" if b[f"{ph}_ms_per_step"] is None else f"{b[f'{ph}_ms_per_step']:.2f}" for ph in PHASES)
        print(f"| {r['streams']} | {r['server_tokens_per_s']:.1f} | {b['steps']} | {b['steps_ahead']} | {cells} | "
              f"{b['full_logit_reads']} |")
    for r in results["decode"]:
        lr = r["server_steps"]["listed_rows_per_column"]
        if lr is not None:
            print(f"\n{r['streams']} streams: the device listed {lr:.0f} candidate rows per stream and step on average")
        print(f"\n{r['streams']} streams: the window's tokens were decoded at context positions {r['position_min']} to "
              f"{r['position_max']}, {r['position_mean']:.0f} on average (compare `tern bench --parallel` at that depth)")
    for t in results["ttft"]:
        gap = t["longest_gap_of_others_ms"]
        again = " (again)" if t["attempt"] == 2 else ""
        print(f"\nTime to first token, {t['prompt_tokens']}-token prompt, {t['busy_streams']} other streams decoding"
              f"{again}: {t['ttft_ms']:.0f} ms" +
              (f" (their longest wait for a token meanwhile: {gap:.0f} ms)" if gap else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
