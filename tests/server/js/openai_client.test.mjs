// tern serve driven by the official openai npm client (openai@7): completions and chat
// completions, non-streaming and streaming; seeds reproduce; stop works; logprobs; and errors
// surface as the client's own exception classes.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { requireDep, startServer, tinyChatModel, waitIdle } from "./harness.mjs";

const { OpenAI, BadRequestError, AuthenticationError, NotFoundError, InternalServerError } = requireDep("openai");

let text;   // the shipped model, no chat format
let chat;   // a synthetic model with BitNet's chat format
let keyed;  // the shipped model behind an API key
const client = (server, apiKey = "none") => new OpenAI({ apiKey, baseURL: server.url + "/v1", maxRetries: 0 });

before(async () => {
  [text, chat, keyed] = await Promise.all([
    startServer(["--parallel", "4"]),
    tinyChatModel().then((m) => startServer(["-m", m, "--parallel", "2"])),
    startServer(["--parallel", "1", "--api-key", "sekrit"]),
  ]);
});
after(async () => {
  for (const s of [text, chat, keyed]) {
    if (!s) continue;
    const r = await s.stop();
    assert.equal(r.code, 0, `server exit ${JSON.stringify(r)}\n${s.log}`);
  }
});

test("completions: text, usage and finish_reason", async () => {
  const r = await client(text).completions.create({ model: "tern", prompt: "The ship", max_tokens: 16, seed: 7 });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices.length, 1);
  assert.ok(r.choices[0].text.length > 0);
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 16);
  assert.ok(r.usage.prompt_tokens >= 2);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 16);
});

test("streaming completions give the same text as non-streaming ones with the same seed", async () => {
  const c = client(text);
  const whole = await c.completions.create({ model: "tern", prompt: "Call me", max_tokens: 24, seed: 11 });
  const stream = await c.completions.create({ model: "tern", prompt: "Call me", max_tokens: 24, seed: 11, stream: true,
                                              stream_options: { include_usage: true } });
  let streamed = "", chunks = 0, finish = null, usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if (!chunk.choices.length) continue;
    streamed += chunk.choices[0].text;
    chunks++;
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.equal(streamed, whole.choices[0].text);
  assert.ok(chunks > 5, `only ${chunks} chunks`);
  assert.equal(finish, "length");
  assert.deepEqual(usage, whole.usage);
});

test("a seeded request gives what `tern run --seed` gives", async () => {
  const { execFileSync } = await import("node:child_process");
  const { ternBin } = await import("./harness.mjs");
  const cli = execFileSync(ternBin, ["run", "-p", "The ship", "-n", "16", "--seed", "21"], { stdio: ["ignore", "pipe", "ignore"] })
    .toString();
  const r = await client(text).completions.create({ model: "tern", prompt: "The ship", max_tokens: 16, seed: 21 });
  assert.equal(cli.replace(/\n$/, ""), "The ship" + r.choices[0].text);
});

test("seeds reproduce, and different seeds differ", async () => {
  const c = client(text);
  const ask = (seed) => c.completions.create({ model: "tern", prompt: "It was", max_tokens: 32, temperature: 1.0, seed })
    .then((r) => r.choices[0].text);
  const [a, b, d] = await Promise.all([ask(1234), ask(1234), ask(99)]);  // concurrently: batched
  assert.equal(a, b);
  assert.notEqual(a, d);
});

test("stop ends the text before the stop string", async () => {
  const c = client(text);
  const full = (await c.completions.create({ model: "tern", prompt: "The whale", max_tokens: 40, temperature: 0 }))
    .choices[0].text;
  const stop = full.slice(10, 14);
  const r = await c.completions.create({ model: "tern", prompt: "The whale", max_tokens: 40, temperature: 0, stop: [stop] });
  assert.equal(r.choices[0].finish_reason, "stop");
  assert.equal(r.choices[0].text, full.slice(0, full.indexOf(stop)));
  // Streaming: the held-back prefix of the stop string never reaches the client.
  let streamed = "";
  for await (const chunk of await c.completions.create({ model: "tern", prompt: "The whale", max_tokens: 40,
                                                         temperature: 0, stop, stream: true })) {
    streamed += chunk.choices[0]?.text ?? "";
  }
  assert.equal(streamed, r.choices[0].text);
});

test("logprobs: the chosen token and the top 5", async () => {
  const r = await client(text).completions.create({ model: "tern", prompt: "The sea", max_tokens: 6, logprobs: 5,
                                                    temperature: 0 });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 6);
  assert.equal(lp.tokens.join(""), r.choices[0].text);
  for (let i = 0; i < 6; i++) {
    const top = Object.entries(lp.top_logprobs[i]);
    assert.equal(top.length, 5);
    assert.ok(lp.token_logprobs[i] <= 0);
    // Greedy: the chosen token is the most likely one.
    assert.equal(Math.max(...top.map(([, v]) => v)), lp.token_logprobs[i]);
  }
});

test("chat completions, non-streaming and streaming, on a model with a chat format", async () => {
  const c = client(chat);
  const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello!" }];
  const r = await c.chat.completions.create({ model: "tiny", messages, max_tokens: 12, seed: 5, logprobs: true,
                                              top_logprobs: 5 });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices[0].message.role, "assistant");
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  assert.equal(r.choices[0].logprobs.content.length, r.usage.completion_tokens);
  assert.equal(r.choices[0].logprobs.content[0].top_logprobs.length, 5);
  let streamed = "", role = null;
  for await (const chunk of await c.chat.completions.create({ model: "tiny", messages, max_tokens: 12, seed: 5,
                                                              stream: true })) {
    const d = chunk.choices[0]?.delta;
    if (d?.role) role = d.role;
    streamed += d?.content ?? "";
  }
  assert.equal(role, "assistant");
  assert.equal(streamed, r.choices[0].message.content);
});

test("a model without a chat format answers chat with a 400 that says why", async () => {
  await assert.rejects(
    client(text).chat.completions.create({ model: "tern", messages: [{ role: "user", content: "hi" }] }),
    (e) => e instanceof BadRequestError && e.status === 400 && /no chat format/.test(e.message) && e.param === "messages");
});

test("bad requests map to the client's exceptions", async () => {
  const c = client(text);
  const bad = async (body, param) => {
    await assert.rejects(c.completions.create({ model: "tern", prompt: "x", ...body }),
      (e) => e instanceof BadRequestError && e.status === 400 && e.param === param, JSON.stringify(body));
  };
  await bad({ max_tokens: -5 }, "max_tokens");
  await bad({ max_tokens: 100000000 }, "max_tokens");
  await bad({ temperature: 9 }, "temperature");
  await bad({ n: 3 }, "n");
  await bad({ frobnicate: true }, "frobnicate");
  await bad({ prompt: "word ".repeat(3000) }, "prompt");  // longer than the context
  await assert.rejects(c.chat.completions.create({ model: "tern", messages: [] }),
    (e) => e instanceof BadRequestError && e.param === "messages");
  await assert.rejects(c.get("/nowhere"), (e) => e instanceof NotFoundError);
});

test("the API key is required when set", async () => {
  await assert.rejects(client(keyed, "wrong").completions.create({ model: "t", prompt: "x", max_tokens: 1 }),
    (e) => e instanceof AuthenticationError && e.status === 401);
  // Greedy: a sampled second token may be the end of text (completion_tokens 1), greedy's is not.
  const r = await client(keyed, "sekrit").completions.create({ model: "t", prompt: "x", max_tokens: 2, temperature: 0 });
  assert.equal(r.usage.completion_tokens, 2);
  const models = await client(keyed, "sekrit").models.list();
  assert.equal(models.data.length, 1);
  assert.equal((await fetch(keyed.url + "/health")).status, 200);  // health needs no key
});

test("a full server answers 503 (InternalServerError in the client)", async () => {
  // One slot and one queue place: fill both with long streams, then ask once more.
  const s = await startServer(["--parallel", "1", "--queue", "1"]);
  try {
    const c = client(s);
    const ctl = new AbortController();
    const long = () => c.completions.create({ model: "t", prompt: "a", max_tokens: 900, stream: true },
                                            { signal: ctl.signal }).catch(() => null);
    const held = [await long(), await long()];
    await assert.rejects(c.completions.create({ model: "t", prompt: "a", max_tokens: 2 }),
      (e) => e instanceof InternalServerError && e.status === 503 && /busy/.test(e.message));
    ctl.abort();
    void held;
    const m = await waitIdle(s.url);
    assert.equal(m.tern_slots_busy, 0);
    assert.equal(m['tern_requests_total{outcome="rejected"}'], 1);
  } finally {
    await s.stop();
  }
});

test("no slot or page is left in use", async () => {
  for (const s of [text, chat, keyed]) {
    const m = await waitIdle(s.url, 10000, s === keyed ? { Authorization: "Bearer sekrit" } : {});
    assert.equal(m.tern_slots_busy, 0);
    assert.equal(m.tern_kv_pages_used, 0);
  }
});
