// Bad input over raw sockets, where an HTTP client library would not go: invalid UTF-8, a 100 MB
// body, a request sent halfway and left hanging, garbage instead of HTTP, a client that vanishes
// mid-stream. Every case ends in a 4xx with an OpenAI error body (or a closed connection for a
// request that never arrives); the server stays up and no slot stays busy.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { startServer, waitIdle, metrics } from "./harness.mjs";

let s;
before(async () => { s = await startServer(["--parallel", "2", "--timeout", "2", "--max-body-size", "1048576"]); });
after(async () => {
  const r = await s.stop();
  assert.equal(r.code, 0, s.log);
});

// Sends raw bytes and resolves with everything the server answers until it closes (or timeoutMs).
// (The socket is never half-closed: cpp-httplib drops a request whose client shut its sending side.)
function raw(bytes, { timeoutMs = 10000 } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(s.port, "127.0.0.1");
    const chunks = [];
    const started = Date.now();
    const timer = setTimeout(() => { sock.destroy(); resolve({ text: Buffer.concat(chunks).toString("latin1"), closed: false, ms: Date.now() - started }); }, timeoutMs);
    sock.on("data", (d) => chunks.push(d));
    sock.on("error", () => {});
    sock.on("close", () => { clearTimeout(timer); resolve({ text: Buffer.concat(chunks).toString("latin1"), closed: true, ms: Date.now() - started }); });
    sock.on("connect", () => sock.write(bytes));
    sock.on("timeout", reject);
  });
}

function post(path, body, extraHeaders = "") {
  const b = Buffer.isBuffer(body) ? body : Buffer.from(body);
  return Buffer.concat([Buffer.from(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                                    `Content-Length: ${b.length}\r\nConnection: close\r\n${extraHeaders}\r\n`), b]);
}

function status(text) { return Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1]); }
function errorOf(text) { return JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)).error; }

test("malformed JSON, wrong types and invalid UTF-8 are 400s with an OpenAI error", async () => {
  const cases = [
    ["{\"prompt\": ", ""],
    ["{\"prompt\": 5}", "prompt"],
    [Buffer.concat([Buffer.from('{"prompt":"'), Buffer.from([0xff, 0xc3, 0x28]), Buffer.from('"}')]), ""],
    ["{\"prompt\":\"a\",\"max_tokens\":-1}", "max_tokens"],
    ["{\"prompt\":\"a\",\"max_tokens\":1e300}", "max_tokens"],
    ["{\"prompt\":\"a\",\"stop\":[\"\"]}", "stop"],
  ];
  for (const [body, param] of cases) {
    const r = await raw(post("/v1/completions", body));
    assert.equal(status(r.text), 400, `${body}: ${r.text}`);
    const e = errorOf(r.text);
    assert.equal(e.type, "invalid_request_error");
    assert.equal(e.param ?? "", param, r.text);
    assert.ok(e.message.length > 0);
  }
  const chat = await raw(post("/v1/chat/completions", Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'),
                                                                     Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}]}')])));
  assert.equal(status(chat.text), 400);
});

test("a 100 MB body gets 413 without the server reading it all", async () => {
  const header = Buffer.from(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
                             `Content-Length: ${100 * 1024 * 1024}\r\n\r\n{"prompt":"`);
  const r = await raw(header, { timeoutMs: 10000 });
  assert.equal(status(r.text), 413, r.text);
  assert.equal(errorOf(r.text).code, "request_too_large");
});

test("a request sent halfway is dropped after --timeout, and the server goes on", async () => {
  const half = Buffer.from(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"prompt":`);
  const r = await raw(half, { timeoutMs: 15000 });
  assert.ok(r.closed, "the server must close the connection");
  assert.ok(r.ms >= 1500 && r.ms < 12000, `closed after ${r.ms} ms`);
  const headersOnly = await raw(Buffer.from("GET /health HTTP/1.1\r\nHost: x\r\n"), { timeoutMs: 15000 });
  assert.ok(headersOnly.closed);
  assert.equal((await fetch(s.url + "/health")).status, 200);
});

test("garbage instead of HTTP is a 400 or a closed connection, never a crash", async () => {
  for (const junk of ["\x00\x01\x02garbage\r\n\r\n", "GET\r\n\r\n", "POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                      "POST /v1/completions HTTP/9.9\r\n" + "X: y\r\n".repeat(5000) + "\r\n"]) {
    const r = await raw(Buffer.from(junk, "latin1"));
    const code = status(r.text);
    assert.ok(r.closed && (Number.isNaN(code) || (code >= 400 && code < 500)), `${JSON.stringify(junk.slice(0, 40))}: ${r.text.slice(0, 200)}`);
  }
  assert.equal((await fetch(s.url + "/health")).status, 200);
});

test("unknown paths and methods get OpenAI-style errors; CORS preflight works", async () => {
  const r = await fetch(s.url + "/v2/nothing");
  assert.equal(r.status, 404);
  assert.equal((await r.json()).error.type, "not_found_error");
  const pre = await fetch(s.url + "/v1/chat/completions", { method: "OPTIONS", headers: { Origin: "http://example.com",
                                                             "Access-Control-Request-Method": "POST" } });
  assert.equal(pre.status, 204);
  assert.equal(pre.headers.get("access-control-allow-origin"), "*");
  assert.match(pre.headers.get("access-control-allow-headers"), /Authorization/);
});

test("/tokenize and /detokenize round-trip and reject bad ids", async () => {
  const t = await (await fetch(s.url + "/tokenize", { method: "POST", body: JSON.stringify({ content: "The ship sailed" }) })).json();
  assert.ok(t.tokens.length > 0);
  const d = await (await fetch(s.url + "/detokenize", { method: "POST", body: JSON.stringify({ tokens: t.tokens }) })).json();
  assert.equal(d.content, "The ship sailed");
  const bad = await fetch(s.url + "/detokenize", { method: "POST", body: JSON.stringify({ tokens: [1, 99999999] }) });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).error.param, "tokens");
});

test("a client that disconnects mid-stream or mid-wait frees its slot at once", async () => {
  const body = JSON.stringify({ prompt: "The ship", max_tokens: 1000 - 8, stream: true });
  const sock = net.connect(s.port, "127.0.0.1");
  await new Promise((r) => sock.on("connect", r));
  sock.write(post("/v1/completions", body));
  await new Promise((r) => sock.once("data", r));  // the stream has started
  sock.destroy();
  // A non-streaming request abandoned while it runs.
  const sock2 = net.connect(s.port, "127.0.0.1");
  await new Promise((r) => sock2.on("connect", r));
  sock2.write(post("/v1/completions", JSON.stringify({ prompt: "The ship", max_tokens: 1000 - 8 })));
  await new Promise((r) => setTimeout(r, 300));
  sock2.destroy();
  const t0 = Date.now();
  const m = await waitIdle(s.url, 5000);
  assert.equal(m.tern_slots_busy, 0, `slots still busy after ${Date.now() - t0} ms`);
  assert.equal(m.tern_kv_pages_used, 0);
  assert.equal(m['tern_requests_total{outcome="cancelled"}'], 2);
  assert.ok(Date.now() - t0 < 3000, `took ${Date.now() - t0} ms`);
});

test("health and metrics after all that", async () => {
  const h = await (await fetch(s.url + "/health")).json();
  assert.equal(h.status, "ok");
  const m = await metrics(s.url);
  assert.equal(m.tern_model_loaded, 1);
  assert.equal(m['tern_requests_total{outcome="failed"}'], 0);
});
