// The WebAssembly build under Node: the same tokens as native `tern run` on the shipped model
// (greedy, seeded sampling, repetition penalty), the same tokenization as `tern tokenize`, clear
// errors for bad models and settings, and generation (TernEngine.generate: `tern run`'s loop) that
// streams each token to a callback and stops when it says so.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { requireWebBuild, nodeEngine, generateAll, nativeRun, nativeTokenize, ternBin, outDir, modelPath,
         bigModel } from "./web_harness.mjs";

requireWebBuild();
let engine;
before(async () => { engine = await nodeEngine(); });

test("model info", () => {
  assert.equal(engine.info.name, "tern-32m-en");
  assert.equal(engine.info.n_vocab, 4096);
});

test("tokenization equals tern tokenize", () => {
  for (const text of ["The ship", "Whale-ships, 1851: \u00e9t\u00e9 \u{1F40B} and\n\nthe  sea's   end."]) {
    assert.deepEqual(engine.tokenize(text), nativeTokenize(text));
  }
});

const cases = [
  { name: "greedy 32 tokens", prompt: "The ship", web: { temp: 0, nPredict: 32 }, cli: ["-n", "32", "--temp", "0"] },
  { name: "greedy, a longer prompt", prompt: "Call me Ishmael. Some years ago, never mind how long precisely,",
    web: { temp: 0, nPredict: 24 }, cli: ["-n", "24", "--temp", "0"] },
  { name: "seeded sampling (temp 0.7, seed 42)", prompt: "The ship", web: { temp: 0.7, seed: 42, nPredict: 32 },
    cli: ["-n", "32", "--temp", "0.7", "--seed", "42"] },
  { name: "repetition penalty, top-k 0, top-p 0.9, min-p 0",
    prompt: "The President said", web: { temp: 0.9, seed: 7, topK: 0, topP: 0.9, minP: 0, repeatPenalty: 1.3, nPredict: 32 },
    cli: ["-n", "32", "--temp", "0.9", "--seed", "7", "--top-k", "0", "--top-p", "0.9", "--min-p", "0", "--repeat-penalty", "1.3"] },
  // RoPE's cos and sin at positions past 130: with libm's cosf / sinf (musl's here, glibc's natively)
  // this text left native's after ~130 tokens (cpu::cos_sin_fixed).
  { name: "seeded sampling, 200 tokens", prompt: "Once upon a time", web: { temp: 0.7, seed: 42, nPredict: 200 },
    cli: ["-n", "200", "--temp", "0.7", "--seed", "42"] },
];
for (const c of cases) {
  test(`${c.name}: same text as tern run`, async () => {
    const web = await generateAll(engine, c.prompt, c.web);
    assert.equal(web.ids.length, c.web.nPredict);
    assert.equal(web.stats.nGenerated, c.web.nPredict);
    assert.equal(web.stats.stopped, false);
    assert.equal(web.text, nativeRun(c.prompt, c.cli));
  });
}

test("stopping early and starting again gives the same tokens", async () => {
  const full = await generateAll(engine, "The ship", { temp: 0.7, seed: 3, nPredict: 20 });
  const first = await generateAll(engine, "The ship", { temp: 0.7, seed: 3, nPredict: 20 }, 3);
  assert.deepEqual(first.ids, full.ids.slice(0, 3));
  assert.equal(first.stats.stopped, true);
  assert.equal(first.stats.nGenerated, 3);
  const greedy = await generateAll(engine, "The ship", { temp: 0, nPredict: 20 });
  assert.deepEqual((await generateAll(engine, "The ship", { temp: 0, nPredict: 20 }, 5)).ids, greedy.ids.slice(0, 5));
  assert.deepEqual((await generateAll(engine, "The ship", { temp: 0.7, seed: 3, nPredict: 20 })).ids, full.ids);
});

test("bad settings and bad models are clear errors", async () => {
  await assert.rejects(engine.generate("The ship", { temp: -1 }), /--temp must be a finite number >= 0 \(got -1\)/);
  await assert.rejects(engine.generate("The ship", { topK: "x" }), /setting topK must be a number/);
  await assert.rejects(engine.generate("The ship ".repeat(400), { nCtx: 64 }), /the prompt is \d+ tokens, but the context holds 64/);
  await assert.rejects(engine.generate("The ship", { nPredict: 4 }, () => { throw new Error("callback broke"); }), /callback broke/);
  assert.equal((await generateAll(engine, "The ship", { temp: 0, nPredict: 4 })).ids.length, 4);  // still usable
  const other = await nodeEngine();
  await assert.rejects(other.loadModel(new Uint8Array([71, 71, 85, 70, 3, 0, 0, 0]), "short.gguf"),
                       /cannot load model '\/models\d+\/short.gguf'.*smaller than the 24-byte GGUF header/s);
  await assert.rejects(other.generate("The ship"), /no model is loaded/);
  // Node 20 has no JSPI; Node with JSPI (the wasm_engine_jspi run) has no navigator.gpu here, so
  // web/webgpu-library.js gives no instance.
  await assert.rejects(other.loadModel(new Uint8Array(8), "x.gguf", { backend: "webgpu" }),
                       other.jspi ? /wgpuCreateInstance returned null/ : /needs JSPI/);
  await assert.rejects(other.loadModel(new Uint8Array(8), "x.gguf", { backend: "metal" }), /unknown backend 'metal'/);
});

test("a host file (NODEFS) loads as its bytes do; a 5 GiB file is a clear error on the CPU backend", async () => {
  const other = await nodeEngine();
  const info = await other.loadModel({ path: modelPath }, "tern-32m-en.gguf");
  assert.equal(info.name, "tern-32m-en");
  assert.equal((await generateAll(other, "The ship", { temp: 0, nPredict: 8 })).text,
               nativeRun("The ship", ["-n", "8", "--temp", "0"]));
  await assert.rejects(other.loadModel({ path: bigModel() }, "big.gguf"),
                       /cannot load model '.*': the file is 5\.37 GB; the CPU backend holds the whole file in WebAssembly memory, which is at most 4\.\d\d GB.*\nhint: use the WebGPU backend/s);
  await assert.rejects(other.generate("The ship"), /no model is loaded/);  // the old model was dropped first
  assert.equal(fs.statSync(modelPath).size, 12015392);  // the host files are only unmounted, never touched
  assert.ok(fs.existsSync(bigModel()));
});

test("unload drops the model; the engine loads again", async () => {
  const other = await nodeEngine();
  await other.unload();
  assert.equal(other.info, null);
  await assert.rejects(other.generate("The ship"), /no model is loaded/);
  await other.unload();  // nothing loaded: nothing to do
  await other.loadModel(fs.readFileSync(modelPath), "tern-32m-en.gguf");
  assert.equal((await generateAll(other, "The ship", { temp: 0, nPredict: 4 })).text,
               nativeRun("The ship", ["-n", "4", "--temp", "0"]));
});

test("chat format: the first turn's reply equals tern chat's", async () => {
  fs.mkdirSync(outDir, { recursive: true });
  const file = path.join(outDir, "web-synth-tiny.gguf");  // random weights, a vocabulary with <|eot_id|>
  execFileSync(ternBin, ["synth", "tiny", "-o", file], { stdio: "ignore" });
  const chat = await nodeEngine();
  const info = await chat.loadModel(fs.readFileSync(file), "synth-tiny.gguf");
  assert.equal(info.chat_template, "bitnet");
  const web = await generateAll(chat, "Hello there", { temp: 0, nPredict: 8, chat: true });
  const native = execFileSync(ternBin, ["chat", "-m", file, "--temp", "0", "-n", "8"],
                              { input: "Hello there\n", encoding: "utf8", stdio: ["pipe", "pipe", "ignore"] });
  assert.equal(web.text, native.replace(/\n$/, ""));
  assert.equal(engine.info.chat_template, "none");
  await assert.rejects(engine.generate("Hello", { chat: true }), /'tern-32m-en' has no chat format tern recognises/);
});
