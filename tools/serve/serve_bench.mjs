#!/usr/bin/env node
// Load benchmark for `tern serve` (issue 53): aggregate decode tokens/s at several numbers of
// concurrent streams, with each stream's latency, and time to first token of a 512-token prompt
// while 8 other streams decode. Uses Node's own fetch, no packages.
//
//   node tools/serve/serve_bench.mjs --bin build/bin/tern -m MODEL [--backend cpu] [--streams 1,8,32,64]
//        [--duration 20] [--prompt-tokens 16] [--ttft-tokens 512] [--ttft-busy 8] [--json out.json]
//        [-- extra tern serve flags]
//   node tools/serve/serve_bench.mjs --url http://127.0.0.1:8080 ...      (a server already running)
//
// For each stream count C: C clients each keep one streaming request running (seeded, ignore_eos,
// prompt of --prompt-tokens token ids; when one ends at the context's end the client sends the
// next); once every stream has its first token, tokens are counted for --duration seconds, then
// all are cancelled. Reported: aggregate tokens/s over that window, and
// per stream the mean ms between tokens (median and worst stream) and time to first token (median).
// The server is started with --parallel = the largest C, so no request waits for a slot.
import { spawn } from "node:child_process";
import fs from "node:fs";

function parseArgs(argv) {
  const a = { bin: "build/bin/tern", model: "", backend: "cpu", url: "", streams: [1, 8, 32, 64], duration: 20,
              promptTokens: 16, ttftTokens: 512, ttftBusy: 8, json: "", ctx: 2048, extra: [] };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i], v = () => argv[++i];
    if (k === "--") { a.extra = argv.slice(i + 1); break; }
    else if (k === "--bin") a.bin = v();
    else if (k === "-m" || k === "--model") a.model = v();
    else if (k === "--backend") a.backend = v();
    else if (k === "--url") a.url = v();
    else if (k === "--streams") a.streams = v().split(",").map(Number);
    else if (k === "--duration") a.duration = Number(v());
    else if (k === "--prompt-tokens") a.promptTokens = Number(v());
    else if (k === "--ttft-tokens") a.ttftTokens = Number(v());
    else if (k === "--ttft-busy") a.ttftBusy = Number(v());
    else if (k === "-c" || k === "--ctx-size") a.ctx = Number(v());
    else if (k === "--json") a.json = v();
    else if (k === "-h" || k === "--help") { console.log(fs.readFileSync(new URL(import.meta.url)).toString().split("\n").slice(1, 20).join("\n")); process.exit(0); }
    else { console.error(`error: unknown option '${k}'\nhint: --help lists the options`); process.exit(2); }
  }
  return a;
}

async function startServer(a) {
  const parallel = Math.max(...a.streams, a.ttftBusy + 1);
  const args = ["serve", "--port", "0", "--parallel", String(parallel), "-c", String(a.ctx), "--backend", a.backend,
                "--queue", "16", ...(a.model ? ["-m", a.model] : []), ...a.extra];
  const proc = spawn(a.bin, args, { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  proc.stderr.on("data", (d) => { log += d; process.stderr.write(d); });
  for (let t = 0; !/tern serve: ready/.test(log); t += 100) {
    if (proc.exitCode !== null || t > 600000) throw new Error("tern serve did not start:\n" + log);
    await new Promise((r) => setTimeout(r, 100));
  }
  const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(log);
  return { url: m[1], stop: () => new Promise((r) => { proc.on("exit", r); proc.kill("SIGTERM"); }) };
}

// One stream: resolves when aborted or done; records the time of every chunk that carried text.
function stream(url, prompt, seed, maxTokens, ctl, onToken) {
  const body = { prompt, max_tokens: maxTokens, stream: true, seed, temperature: 0.8, ignore_eos: true };
  return fetch(url + "/v1/completions", { method: "POST", headers: { "Content-Type": "application/json" },
                                          body: JSON.stringify(body), signal: ctl.signal })
    .then(async (res) => {
      if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
      const reader = res.body.getReader();
      let buf = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        buf += Buffer.from(value).toString();
        let cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const ev = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          if (ev.startsWith("data: {")) {
            const j = JSON.parse(ev.slice(6));
            if (j.choices?.[0]?.text || j.choices?.[0]?.logprobs) onToken(performance.now());
          }
        }
      }
    })
    .catch((e) => { if (e.name !== "AbortError") throw e; });
}

const median = (xs) => { const s = [...xs].sort((p, q) => p - q); return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN; };
// Prompts as token ids (exact lengths), drawn from the middle of the vocabulary.
let nVocab = 0;
const promptIds = (n, salt) => Array.from({ length: n }, (_, i) => 10 + ((i * 7919 + salt * 104729) % (nVocab - 20)));

async function decodeRun(url, a, C) {
  const ctl = new AbortController();
  // Per client, one list of token times per request: a client whose request ends (the context is
  // full) sends the next at once, so that C streams decode for the whole window.
  const segments = Array.from({ length: C }, () => []);
  const t0 = performance.now();
  const maxTokens = a.ctx - a.promptTokens - 1;
  const client = async (i) => {
    for (let k = 0; !ctl.signal.aborted; k++) {
      const seg = [];
      segments[i].push(seg);
      await stream(url, promptIds(a.promptTokens, i + 1000 * k), i + 1, maxTokens, ctl, (ts) => seg.push(ts));
    }
  };
  const runs = segments.map((_, i) => client(i));
  while (segments.some((s) => !s.length || !s[0].length)) await new Promise((r) => setTimeout(r, 20));
  const start = performance.now();
  await new Promise((r) => setTimeout(r, a.duration * 1000));
  const end = performance.now();
  ctl.abort();
  await Promise.all(runs);
  let tokens = 0;
  const perStreamMs = [];
  for (const client of segments) {
    let gaps = 0, span = 0;
    for (const seg of client) {
      const inWin = seg.filter((x) => x >= start && x <= end);
      tokens += inWin.length;
      if (inWin.length > 1) { gaps += inWin.length - 1; span += inWin[inWin.length - 1] - inWin[0]; }
    }
    if (gaps) perStreamMs.push(span / gaps);
  }
  return { streams: C, tokens_per_s: tokens / ((end - start) / 1000), ms_per_token_median: median(perStreamMs),
           ms_per_token_worst: Math.max(...perStreamMs), ttft_ms_median: median(segments.map((s) => s[0][0] - t0)) };
}

async function ttftRun(url, a, busy) {
  const ctl = new AbortController();
  const times = Array.from({ length: busy }, () => []);
  const runs = times.map((t, i) => stream(url, promptIds(a.promptTokens, 50 + i), 50 + i, a.ctx - a.promptTokens - 1, ctl,
                                          (ts) => t.push(ts)));
  while (times.some((t) => t.length === 0)) await new Promise((r) => setTimeout(r, 20));
  const t0 = performance.now();
  let first = 0;
  const probe = new AbortController();
  await stream(url, promptIds(a.ttftTokens, 999), 7, 2, probe, (ts) => { if (!first) first = ts; });
  ctl.abort();
  await Promise.all(runs);
  return { busy_streams: busy, prompt_tokens: a.ttftTokens, ttft_ms: first - t0 };
}

const a = parseArgs(process.argv.slice(2));
const server = a.url ? { url: a.url, stop: async () => {} } : await startServer(a);
nVocab = (await (await fetch(server.url + "/v1/models")).json()).data[0].meta.n_vocab;
const results = { when: new Date().toISOString(), model: a.model || "(server default)", backend: a.backend,
                  duration_s: a.duration, decode: [], ttft: [] };
try {
  for (const C of a.streams) {
    const r = await decodeRun(server.url, a, C);
    results.decode.push(r);
    console.error(`serve_bench: ${C} streams: ${r.tokens_per_s.toFixed(1)} tokens/s`);
  }
  results.ttft.push(await ttftRun(server.url, a, 0));
  results.ttft.push(await ttftRun(server.url, a, a.ttftBusy));
} finally {
  await server.stop();
}
console.log(`| streams | aggregate tokens/s | ms/token per stream (median) | worst stream | TTFT median (ms) |`);
console.log(`| ---: | ---: | ---: | ---: | ---: |`);
for (const r of results.decode) {
  console.log(`| ${r.streams} | ${r.tokens_per_s.toFixed(1)} | ${r.ms_per_token_median.toFixed(1)} | ` +
              `${r.ms_per_token_worst.toFixed(1)} | ${r.ttft_ms_median.toFixed(0)} |`);
}
for (const t of results.ttft) {
  console.log(`\nTime to first token, ${t.prompt_tokens}-token prompt, ${t.busy_streams} other streams decoding: ${t.ttft_ms.toFixed(0)} ms`);
}
if (a.json) fs.writeFileSync(a.json, JSON.stringify(results, null, 2));
