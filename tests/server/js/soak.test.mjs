// A bounded soak: REQUESTS requests (default 2000) from CONCURRENCY clients (default 16), mixed
// streaming and non-streaming, CANCEL of them (default 10%) abandoned mid-stream, against a small
// model. Passes when nothing crashed, every request that was not abandoned got a complete answer,
// no slot, queue place or KV page is left in use, and resident memory is flat (the last reading
// within 10% + 8 MB of the one after the first tenth of the run). The server must then exit 0 on
// SIGTERM (under AddressSanitizer that includes LeakSanitizer finding nothing).
// Environment: SOAK_REQUESTS, SOAK_CONCURRENCY, SOAK_CANCEL, SOAK_MODEL (default: tern synth tiny),
// TERN_BIN (an ASan build for the short run in scripts/test.sh), SOAK_RSS_CHECK=0 to skip the memory
// check (under ASan, whose quarantine holds freed memory; LeakSanitizer checks at exit instead).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, waitIdle, metrics, rssKb, tinyChatModel } from "./harness.mjs";

const REQUESTS = Number(process.env.SOAK_REQUESTS || 2000);
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY || 16);
const CANCEL = Number(process.env.SOAK_CANCEL || 0.1);
const words = ["the", "ship", "whale", "sea", "captain", "and", "of", "a", "white", "storm", "harpoon", "deck", "ü", "日本"];

// A deterministic random stream, so that a failure can be replayed.
let state = 12345;
const rand = () => ((state = (state * 1103515245 + 12345) >>> 0) / 2 ** 32);
const pick = (a) => a[Math.floor(rand() * a.length)];

let server;
before(async () => {
  const model = process.env.SOAK_MODEL || (await tinyChatModel());
  server = await startServer(["-m", model, "--parallel", "4", "--queue", String(CONCURRENCY * 2), "-c", "256"],
                             { readyTimeoutMs: 120000 });
});
after(async () => {
  if (!server) return;
  const r = await server.stop();
  assert.deepEqual(r, { code: 0, signal: null }, server.log.slice(-4000));
});

async function one(i, tally) {
  const stream = rand() < 0.5;
  const cancel = stream && rand() < CANCEL * 2;  // half the requests stream: 2 x CANCEL of those
  const chat = rand() < 0.3;
  const prompt = Array.from({ length: 1 + Math.floor(rand() * 12) }, () => pick(words)).join(" ");
  const body = { max_tokens: 1 + Math.floor(rand() * (cancel ? 60 : 12)), stream, seed: i, temperature: rand() };
  if (chat) body.messages = [{ role: "user", content: prompt }];
  else body.prompt = prompt;
  const ctl = new AbortController();
  const res = await fetch(server.url + (chat ? "/v1/chat/completions" : "/v1/completions"), {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body), signal: ctl.signal });
  if (res.status !== 200) assert.fail(`request ${i}: HTTP ${res.status}: ${await res.text()}`);
  if (!stream) {
    const j = await res.json();
    assert.ok(["stop", "length"].includes(j.choices[0].finish_reason), JSON.stringify(j));
    tally.done++;
    return;
  }
  const reader = res.body.getReader();
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
    if (cancel && text.includes("data: ")) {
      ctl.abort();
      await reader.cancel().catch(() => {});
      tally.cancelled++;
      return;
    }
  }
  assert.ok(text.endsWith("data: [DONE]\n\n"), `request ${i}: stream ended without [DONE]: ${text.slice(-200)}`);
  tally.done++;
}

test(`soak: ${REQUESTS} requests, ${CONCURRENCY} clients, ${CANCEL * 100}% cancelled mid-stream`, async () => {
  const tally = { done: 0, cancelled: 0 };
  let issued = 0, rssWarm = 0;
  const t0 = Date.now();
  const worker = async () => {
    while (issued < REQUESTS) {
      const i = issued++;
      if (i === Math.floor(REQUESTS / 10)) rssWarm = rssKb(server.proc.pid);
      await one(i, tally).catch((e) => { if (e.name !== "AbortError") throw e; });
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const seconds = (Date.now() - t0) / 1000;
  const m = await waitIdle(server.url, 10000);
  const rssEnd = rssKb(server.proc.pid);
  console.log(`# soak: ${REQUESTS} requests in ${seconds.toFixed(1)} s; ${tally.done} answered, ${tally.cancelled} abandoned; ` +
              `server: ${m['tern_requests_total{outcome="finished"}']} finished, ${m['tern_requests_total{outcome="cancelled"}']} ` +
              `cancelled, ${m.tern_generated_tokens_total} tokens; RSS ${rssWarm} kB after the first tenth, ${rssEnd} kB at the end`);
  assert.equal(server.exited, null, "the server died");
  assert.equal(tally.done + tally.cancelled, REQUESTS);
  assert.ok(tally.cancelled >= REQUESTS * CANCEL * 0.5, `only ${tally.cancelled} cancelled`);
  assert.equal(m.tern_slots_busy, 0);
  assert.equal(m.tern_queue_depth, 0);
  assert.equal(m.tern_kv_pages_used, 0);
  assert.equal(m['tern_requests_total{outcome="started"}'], REQUESTS);
  assert.equal(m['tern_requests_total{outcome="finished"}'] + m['tern_requests_total{outcome="cancelled"}'], REQUESTS);
  assert.equal(m['tern_requests_total{outcome="failed"}'], 0);
  assert.equal(m['tern_requests_total{outcome="rejected"}'], 0);
  if (process.env.SOAK_RSS_CHECK !== "0") {
    assert.ok(rssEnd <= rssWarm * 1.1 + 8192, `memory grew from ${rssWarm} kB to ${rssEnd} kB`);
  }
  const h = await (await fetch(server.url + "/health")).json();
  assert.equal(h.status, "ok");
  void metrics;
});
