// Issue 55: the host cost of a 2B4T-shaped decode step through dawn.node (what tools/web_node_run.mjs
// gives the page's engine as navigator.gpu), recording and submitting, for the bind-group layouts the
// WebGPU backend could use. A step is LAYERS x 5 dispatches + 4 (154, the engine's count), each its own
// pipeline (slot j of a layer: pipeline j, as in the engine, where no dispatch reuses the one before),
// a one-thread kernel that reads a weight word and two activation words and writes one (no device time
// to speak of), bound as the engine binds: group 0 = weight (read-only storage), activations in
// (read-only storage) and out (storage), and the dispatch's uniform slot (dynamic offset). Forms:
//   layer:  a weight buffer and a bind group per (layer, slot): 154 bind groups and 154 weight buffers
//           touched per step (the engine's today: every layer's weights are their own buffers);
//   shared: a weight buffer per slot holding every layer's weights, bound with a second dynamic offset
//           (the layer's): 9 bind groups and 9 weight buffers touched per step, the same calls;
//   layer-x / shared-x: the same with dispatchWorkgroups(x) instead of (x, 1, 1) (fewer arguments for
//           dawn.node to convert).
// Per rep, STEPS steps: 4 steps per command encoder and submit (the engine's steps_per_submit), and
// the queue drained every 8 submits (the engine reads its ids back every 32 steps); the host's ms per
// step (recording + submit, without the waits) is timed. The forms alternate in ROUNDS rounds, each
// with the main thread's 2 MB dependent walk (tools/host_probe.mjs) before it: a process in issue 55's
// slow host mode shows it there (~30 vs ~17 ns on the H200's host).
// Usage: node tools/dawn_step_cost.mjs [--dawn PATH/dawn.node] [--rounds N] [--steps N] [--reps N]
//          [--allow-cpu-adapter]
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import * as probe from "./host_probe.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const args = process.argv.slice(2);
const arg = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
const dawnPath = arg("--dawn", path.join(root, ".deps/webgpu/node_modules/webgpu/dist/linux-x64/dawn.node"));
const ROUNDS = Number(arg("--rounds", 4)), STEPS = Number(arg("--steps", 128)), REPS = Number(arg("--reps", 3));
if (![ROUNDS, STEPS, REPS].every((v) => Number.isInteger(v) && v > 0) || STEPS % 4 !== 0) {
  console.error("usage: node tools/dawn_step_cost.mjs [--dawn dawn.node] [--rounds N] [--steps N (a multiple of 4)] [--reps N]" +
                " [--allow-cpu-adapter]");
  process.exit(2);
}
const LAYERS = 30, PER_LAYER = 5, TAIL = 4, N = LAYERS * PER_LAYER + TAIL, SLOTS = PER_LAYER + TAIL;
const WEIGHT_BYTES = 4096;  // per (layer, slot); a multiple of minStorageBufferOffsetAlignment (256)
const STEPS_PER_SUBMIT = 4, SUBMITS_PER_DRAIN = 8;

const { create, globals } = require(path.resolve(dawnPath));
Object.assign(globalThis, globals);
const keepAlive = setInterval(() => {}, 1000);  // (dawn.node's promises do not hold Node's event loop)
const gpu = create([]);  // (kept: dawn.node tears the instance down when this object is collected)
const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
if (!adapter) { console.error("error: no WebGPU adapter"); process.exit(1); }
const info = adapter.info || {};
if ((info.isFallbackAdapter || info.architecture === "swiftshader") && !args.includes("--allow-cpu-adapter")) {
  console.error("error: the adapter is a CPU one (SwiftShader); pass --allow-cpu-adapter to time it anyway");
  process.exit(1);
}
const device = await adapter.requestDevice();
console.log(`adapter: ${info.vendor || "?"} ${info.architecture || ""} ${info.device || ""}; ${N} dispatches per step, ` +
            `${STEPS} steps per rep, ${REPS} reps per form and round`);

const S = GPUBufferUsage.STORAGE, U = GPUBufferUsage.UNIFORM;
const acts = Array.from({ length: SLOTS + 1 }, () => device.createBuffer({ size: 256, usage: S }));
const uniforms = device.createBuffer({ size: N * STEPS_PER_SUBMIT * 256, usage: U | GPUBufferUsage.COPY_DST });
const layout = (weightDynamic) => device.createBindGroupLayout({ entries: [
  { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: "read-only-storage", hasDynamicOffset: weightDynamic } },
  { binding: 1, visibility: GPUShaderStage.COMPUTE, buffer: { type: "read-only-storage" } },
  { binding: 2, visibility: GPUShaderStage.COMPUTE, buffer: { type: "storage" } },
  { binding: 3, visibility: GPUShaderStage.COMPUTE, buffer: { type: "uniform", hasDynamicOffset: true } }] });
// One shader module per slot (distinct pipelines, as the engine's kernels are).
const pipelinesFor = (l) => Array.from({ length: SLOTS }, (_, j) => device.createComputePipeline({
  layout: device.createPipelineLayout({ bindGroupLayouts: [l] }),
  compute: { module: device.createShaderModule({ code: `
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read_write> b: array<u32>;
struct P { x: u32 } @group(0) @binding(3) var<uniform> p: P;
@compute @workgroup_size(1) fn main() { b[${j}] = w[0] + a[0] + p.x; }` }) } }));
const slotOf = (i) => (i < LAYERS * PER_LAYER ? i % PER_LAYER : PER_LAYER + (i - LAYERS * PER_LAYER));
const layerOf = (i) => (i < LAYERS * PER_LAYER ? Math.floor(i / PER_LAYER) : 0);
const entries = (w, size, j) => [
  { binding: 0, resource: { buffer: w, offset: 0, size } }, { binding: 1, resource: { buffer: acts[j] } },
  { binding: 2, resource: { buffer: acts[j + 1] } }, { binding: 3, resource: { buffer: uniforms, offset: 0, size: 256 } }];

// layer: a buffer and a group per dispatch of the step (the tail's 4 too).
const layerLayout = layout(false), layerPipelines = pipelinesFor(layerLayout);
const layerGroups = Array.from({ length: N }, (_, i) => {
  const w = device.createBuffer({ size: WEIGHT_BYTES, usage: S });
  return device.createBindGroup({ layout: layerLayout, entries: entries(w, WEIGHT_BYTES, slotOf(i)) });
});
// shared: a buffer and a group per slot; the layer's weights at a dynamic offset.
const sharedLayout = layout(true), sharedPipelines = pipelinesFor(sharedLayout);
const sharedGroups = Array.from({ length: SLOTS }, (_, j) => {
  const w = device.createBuffer({ size: WEIGHT_BYTES * LAYERS, usage: S });
  return device.createBindGroup({ layout: sharedLayout, entries: entries(w, WEIGHT_BYTES, j) });
});

const offs1 = [0], offs2 = [0, 0];  // reused arrays, as web/webgpu-library.js's replay does
// One dispatch in each form: a group per layer (today) or per slot with the layer's weights at a dynamic
// offset (shared); "-x" leaves the trailing workgroup counts of 1 off, as the browser build's replay does.
const dispatcher = (shared, trimmed) => (pass, i, slot) => {
  const j = slotOf(i);
  if (shared) {
    pass.setPipeline(sharedPipelines[j]);
    offs2[0] = layerOf(i) * WEIGHT_BYTES;
    offs2[1] = slot * 256;
    pass.setBindGroup(0, sharedGroups[j], offs2);
  } else {
    pass.setPipeline(layerPipelines[j]);
    offs1[0] = slot * 256;
    pass.setBindGroup(0, layerGroups[i], offs1);
  }
  if (trimmed) pass.dispatchWorkgroups(1); else pass.dispatchWorkgroups(1, 1, 1);
};
const forms = {
  "layer": dispatcher(false, false),
  "shared": dispatcher(true, false),
  "layer-x": dispatcher(false, true),
  "shared-x": dispatcher(true, true),
};

// One rep: STEPS steps; returns [host ms per step, of which recording, of which submit].
async function rep(form) {
  const record = forms[form];
  let recordMs = 0, submitMs = 0;
  for (let s = 0, submits = 0; s < STEPS; s += STEPS_PER_SUBMIT) {
    const t0 = performance.now();
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    for (let k = 0; k < STEPS_PER_SUBMIT; ++k) {
      for (let i = 0; i < N; ++i) record(pass, i, k * N + i);
    }
    pass.end();
    const commands = encoder.finish();
    const t1 = performance.now();
    device.queue.submit([commands]);
    const t2 = performance.now();
    recordMs += t1 - t0;
    submitMs += t2 - t1;
    if (++submits % SUBMITS_PER_DRAIN === 0) await device.queue.onSubmittedWorkDone();
  }
  await device.queue.onSubmittedWorkDone();
  return [(recordMs + submitMs) / STEPS, recordMs / STEPS, submitMs / STEPS];
}

probe.warmChase();
for (const form of Object.keys(forms)) await rep(form);  // warm-up: V8's tiers, Dawn's caches
const best = {};
for (let round = 1; round <= ROUNDS; ++round) {
  const walk = probe.chase();
  const line = [];
  const order = Object.keys(forms);
  if (round % 2 === 0) order.reverse();  // (each form early and late in a round)
  for (const form of order) {
    let b = null;
    for (let r = 0; r < REPS; ++r) {
      const t = await rep(form);
      if (!b || t[0] < b[0]) b = t;
    }
    (best[form] = best[form] || []).push(b[0]);
    line.push(`${form} ${b[0].toFixed(3)} (rec ${b[1].toFixed(3)} + submit ${b[2].toFixed(3)})`);
  }
  console.log(`round ${round} (2 MB walk ${walk.l2_ns.toFixed(1)} ns, 32 MB ${walk.mem_ns.toFixed(1)} ns), ` +
              `host ms per step, best of ${REPS}: ${line.join(", ")}`);
}
console.log("per form, host ms per step by round: " +
            Object.entries(best).map(([f, v]) => `${f} ${v.map((x) => x.toFixed(3)).join("/")}`).join("; "));
clearInterval(keepAlive);
void gpu;
process.exit(0);  // (without tearing the device down: dawn.node has crashed in that here)
