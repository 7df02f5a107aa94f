// The WebAssembly build's WebGPU backend under Node: navigator.gpu from Dawn's Node bindings
// (dawn.node) on SwiftShader, waits through JSPI (a Node that has it: .deps/node-jspi), as
// tools/device/web_run.sh measures it on a GPU. Greedy decoding on the device and sampling on the
// device (TernEngine.generate runs `tern run`'s loop) give `tern run`'s tokens. Slow by nature
// (SwiftShader): short generations.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { requireWebBuild, useDawnNode, nodeEngine, generateAll, nativeRun } from "./web_harness.mjs";

requireWebBuild();
useDawnNode();
let engine;
before(async () => { engine = await nodeEngine({ backend: "webgpu", allowCpuAdapter: true }); });

test("the engine runs on the WebGPU adapter with JSPI", () => {
  assert.equal(engine.jspi, true);
  assert.match(engine.info.backend, /^webgpu: .*swiftshader/);
});

test("greedy on the device: tern run's tokens", async () => {
  const web = await generateAll(engine, "The ship", { temp: 0, nPredict: 4 });
  assert.equal(web.stats.decoding, "greedy on the device");
  assert.equal(web.text, nativeRun("The ship", ["-n", "4", "--temp", "0"]));
});

test("sampled on the device, same seed: tern run's tokens; stop after 2", async () => {
  const web = await generateAll(engine, "The ship", { temp: 0.7, seed: 42, nPredict: 4 });
  assert.equal(web.stats.decoding, "sampled on the device");
  assert.equal(web.text, nativeRun("The ship", ["-n", "4", "--temp", "0.7", "--seed", "42"]));
  const stopped = await generateAll(engine, "The ship", { temp: 0.7, seed: 42, nPredict: 4 }, 2);
  assert.deepEqual(stopped.ids, web.ids.slice(0, 2));
  assert.equal(stopped.stats.stopped, true);
});
