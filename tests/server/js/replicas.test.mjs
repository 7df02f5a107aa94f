// Scale-out: tern serve keeps nothing between requests, so N replicas behind any OpenAI-compatible
// router answer alike. Two servers on loopback, requests round-robined between them by a tiny
// router written here (what LiteLLM, llama-swap or a Kubernetes Service does): each replica serves
// half, and a seeded request gives the same text whichever replica answers it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, metrics, waitIdle } from "./harness.mjs";

let replicas = [];
before(async () => { replicas = await Promise.all([startServer(["--parallel", "2"]), startServer(["--parallel", "2"])]); });
after(async () => {
  for (const r of replicas) assert.equal((await r.stop()).code, 0, r.log);
});

let next = 0;
function roundRobin(path, body) {
  const r = replicas[next++ % replicas.length];
  return fetch(r.url + path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })
    .then(async (res) => ({ replica: r, status: res.status, body: await res.json() }));
}

test("round-robined requests are served by both replicas, seeded ones identically", async () => {
  const n = 12;
  const results = await Promise.all(Array.from({ length: n }, (_, i) =>
    roundRobin("/v1/completions", { prompt: "The captain", max_tokens: 12, seed: i % 3, temperature: 0.9 })));
  for (const r of results) assert.equal(r.status, 200, JSON.stringify(r.body));
  for (let seed = 0; seed < 3; seed++) {
    const texts = results.filter((_, i) => i % 3 === seed).map((r) => r.body.choices[0].text);
    const served = new Set(results.filter((_, i) => i % 3 === seed).map((r) => r.replica.port));
    assert.equal(served.size, 2, "each seed went to both replicas");
    assert.equal(new Set(texts).size, 1, `seed ${seed}: ${JSON.stringify(texts)}`);
  }
  for (const r of replicas) {
    const m = await waitIdle(r.url);
    assert.equal(m['tern_requests_total{outcome="finished"}'], n / 2);
    assert.equal(m.tern_slots_busy, 0);
  }
});

test("both replicas list the same model", async () => {
  const ids = await Promise.all(replicas.map((r) => fetch(r.url + "/v1/models").then((x) => x.json()).then((j) => j.data[0].id)));
  assert.equal(ids[0], ids[1]);
  const m = await metrics(replicas[0].url);
  assert.equal(m.tern_model_loaded, 1);
});
