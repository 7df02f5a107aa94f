// Batched = alone: 8 concurrent requests with fixed seeds give exactly the text each gives alone,
// on the CPU backend and on the WebGPU backend (SwiftShader where there is no GPU), with each
// request's KV cache in its own pages of the shared pool. "Alone" is a one-slot CPU server taking
// the requests one at a time. (The scheduler runs each step as one batched forward pass over all
// slots: BatchEngine, BitnetModel::forward_batch.)
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { startServer, waitIdle, depsDir } from "./harness.mjs";

// Each slot its own sampler settings (top-k chains of different k, top-p and min-p, a greedy one):
// a batched step mixes them, and each must still give its own tokens.
const settings = [
  {}, { top_k: 5 }, { top_k: 100, top_p: 0.8 }, { top_k: 20, min_p: 0.1, temperature: 1.3 },
  { temperature: 0 }, { top_k: 2 }, { top_p: 0.5 }, { top_k: 60, min_p: 0 },
];
const requests = Array.from({ length: 8 }, (_, i) => ({
  prompt: ["The ship", "Call me Ishmael.", "The whale", "It was a dark", "Mr. Speaker", "The sea", "Our nation", "A"][i],
  max_tokens: 12 + i, seed: 1000 + i, temperature: 0.9, ...settings[i],
}));

// SwiftShader runs tern-32m at a fraction of a token per second on a busy 2-core machine: the
// WebGPU requests are short. Of different lengths (2 to 4 tokens), so that slots end while the
// others go on: on WebGPU the step after a slot's last token was recorded ahead with it, and its
// column there is discarded (BatchEngine::record_ahead).
const short = requests.map((b, i) => ({ ...b, max_tokens: 2 + (i % 3) }));

// The text of one request, streamed (a slow device never trips the client's wait for headers).
async function ask(server, body) {
  const r = await fetch(server.url + "/v1/completions", { method: "POST", body: JSON.stringify({ ...body, stream: true }) });
  assert.equal(r.status, 200, await r.clone().text());
  let text = "";
  for (const line of (await r.text()).split("\n")) {
    if (line.startsWith("data: {")) text += JSON.parse(line.slice(6)).choices[0]?.text ?? "";
  }
  return text;
}

let alone, aloneShort;
test("alone: one slot, one request at a time", async () => {
  const s = await startServer(["--parallel", "1"]);
  try {
    alone = [];
    aloneShort = [];
    for (const body of requests) alone.push(await ask(s, body));
    for (const body of short) aloneShort.push(await ask(s, body));
  } finally {
    await s.stop();
  }
  assert.equal(new Set(alone).size, requests.length);
});

async function together(args, bodies) {
  const s = await startServer(["--parallel", "8", ...args], { readyTimeoutMs: 180000 });
  try {
    const got = await Promise.all(bodies.map((b) => ask(s, b)));
    const m = await waitIdle(s.url);
    assert.equal(m.tern_kv_pages_used, 0);
    return got;
  } finally {
    await s.stop();
  }
}

test("CPU: 8 concurrent requests give what each gives alone", async () => {
  assert.deepEqual(await together(["--backend", "cpu"], requests), alone);
});

test("WebGPU: 8 concurrent requests give what each gives alone on the CPU", async (t) => {
  const icd = path.join(depsDir, "swiftshader/usr/lib/chromium/vk_swiftshader_icd.json");
  if (!process.env.VK_ICD_FILENAMES && fs.existsSync(icd)) process.env.VK_ICD_FILENAMES = icd;
  process.env.TERN_WEBGPU_ALLOW_CPU = "1";
  process.env.XDG_RUNTIME_DIR ||= "/tmp";
  let got;
  try {
    // Each way of turning a step's results into tokens (--sampling-form; 1 is the default).
    got = await together(["--backend", "webgpu", "--no-warmup"], short);
    for (const form of ["0"]) {
      assert.deepEqual(await together(["--backend", "webgpu", "--no-warmup", "--sampling-form", form], short), aloneShort,
                       `--sampling-form ${form}`);
    }
  } catch (e) {
    if (/webgpu|adapter|Dawn/i.test(e.message) && /exited/.test(e.message)) {
      t.skip("no WebGPU adapter: " + e.message.split("\n").find((l) => l.startsWith("error:")));
      return;
    }
    throw e;
  }
  assert.deepEqual(got, aloneShort);
});
