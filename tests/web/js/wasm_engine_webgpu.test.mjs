// The WebAssembly build's WebGPU backend under Node: navigator.gpu from Dawn's Node bindings
// (dawn.node) on SwiftShader, waits through JSPI (a Node that has it: .deps/node-jspi), as
// tools/device/web_run.sh measures it on a GPU. Greedy decoding on the device and sampling on the
// device (TernEngine.generate runs `tern run`'s loop) give `tern run`'s tokens. The model comes from
// a 5 GiB file (the shipped model padded with zeros, sparse): larger than the wasm32 address space,
// it loads only because the backend reads it a layer at a time, with progress. Slow by nature
// (SwiftShader): short generations.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { requireWebBuild, useDawnNode, nodeEngine, generateAll, nativeRun, bigModel, bigModelBytes } from "./web_harness.mjs";

requireWebBuild();
useDawnNode();
let engine;
const progress = [];
before(async () => {
  engine = await nodeEngine({ backend: "webgpu", allowCpuAdapter: true,
                              onProgress: (done, total) => progress.push([done, total]) }, { path: bigModel() });
});
// The device and its buffers go before Node exits: dawn.node crashed (SIGSEGV) in its teardown with
// them still alive.
after(async () => { if (engine) await engine.unload(); });

test("a 5 GiB file loads a layer at a time, with progress, on the WebGPU adapter with JSPI", () => {
  assert.equal(engine.jspi, true);
  assert.match(engine.info.backend, /^webgpu: .*swiftshader/);
  assert.equal(engine.info.file_bytes, bigModelBytes);
  assert.ok(engine.module.HEAP8.length < 512 * 2 ** 20, `heap ${engine.module.HEAP8.length} bytes`);
  assert.ok(progress.length > 10, `${progress.length} progress calls`);
  const total = progress[0][1];
  assert.ok(total > 10e6 && total < 13e6, `tensor bytes ${total}`);  // the shipped model's weights
  assert.deepEqual(progress[progress.length - 1], [total, total]);
  for (let i = 1; i < progress.length; ++i) assert.ok(progress[i][0] > progress[i - 1][0]);
});

// Two tokens each: the second is the first decode step (SwiftShader takes seconds per step).
test("greedy on the device: tern run's tokens", async () => {
  const web = await generateAll(engine, "The ship", { temp: 0, nPredict: 2 });
  assert.equal(web.stats.decoding, "greedy on the device");
  assert.equal(web.text, nativeRun("The ship", ["-n", "2", "--temp", "0"]));
});

test("sampled on the device, same seed: tern run's tokens", async () => {
  const web = await generateAll(engine, "The ship", { temp: 0.7, seed: 42, nPredict: 2 });
  assert.equal(web.stats.decoding, "sampled on the device");
  assert.equal(web.text, nativeRun("The ship", ["-n", "2", "--temp", "0.7", "--seed", "42"]));
});
