// The host cost of recording a step's dispatches through dawn.node (Dawn's Node bindings, what
// tools/web_node_run.mjs gives the page's engine as navigator.gpu), per form of setBindGroup that
// web/webgpu-library.js could use: the uniform slot's dynamic offset from the wasm heap as a
// Uint32Array with start and length (0), as a JavaScript array (1, what its command-list replay
// uses), or a static bind group per slot (2: session 9's trial, which the glue no longer has). Each form records 154 dispatches (a 2B4T step) of a one-thread
// kernel into a compute pass, ROUNDS x REPS times; the best step's us per dispatch (setPipeline +
// setBindGroup + dispatchWorkgroups) is printed, as no device time is in it (SwiftShader will do).
// Usage: node tools/dawn_call_cost.mjs [--dawn PATH/dawn.node] [--reps N]
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const args = process.argv.slice(2);
const arg = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
const dawnPath = arg("--dawn", path.join(root, ".deps/webgpu/node_modules/webgpu/dist/linux-x64/dawn.node"));
const REPS = Number(arg("--reps", 300)), ROUNDS = 3, N = 154;
const { create, globals } = require(path.resolve(dawnPath));
Object.assign(globalThis, globals);
const keepAlive = setInterval(() => {}, 1000);  // (dawn.node's promises do not hold Node's event loop)
const adapter = await create([]).requestAdapter();
const device = await adapter.requestDevice();
const module = device.createShaderModule({ code: `@group(0) @binding(0) var<storage, read_write> a: array<u32>;
struct P { x: u32 } @group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(1) fn main() { a[0] = p.x; }` });
const layout = (dynamic) => device.createBindGroupLayout({ entries: [
  { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: "storage" } },
  { binding: 1, visibility: GPUShaderStage.COMPUTE, buffer: { type: "uniform", hasDynamicOffset: dynamic } }] });
const dynLayout = layout(true), staticLayout = layout(false);
const pipeline = (l) => device.createComputePipeline({ layout: device.createPipelineLayout({ bindGroupLayouts: [l] }),
                                                       compute: { module } });
const dynPipeline = pipeline(dynLayout), staticPipeline = pipeline(staticLayout);
const out = device.createBuffer({ size: 256, usage: GPUBufferUsage.STORAGE });
const slots = device.createBuffer({ size: N * 256, usage: GPUBufferUsage.UNIFORM });
const group = (l, offset) => device.createBindGroup({ layout: l, entries: [
  { binding: 0, resource: { buffer: out } }, { binding: 1, resource: { buffer: slots, offset, size: 256 } }] });
const dynGroup = group(dynLayout, 0);
const staticGroups = Array.from({ length: N }, (_, i) => group(staticLayout, 256 * i));
const HEAPU32 = new Uint32Array(new WebAssembly.Memory({ initial: 16384 }).buffer);  // a 1 GiB wasm heap
const forms = [
  ["0 heap Uint32Array", dynPipeline, (pass, i) => { HEAPU32[1000] = 256 * i; pass.setBindGroup(0, dynGroup, HEAPU32, 1000, 1); }],
  ["1 JavaScript array", dynPipeline, (pass, i) => { pass.setBindGroup(0, dynGroup, [256 * i]); }],
  ["2 static groups", staticPipeline, (pass, i) => { pass.setBindGroup(0, staticGroups[i]); }],
];
for (let round = 0; round < ROUNDS; ++round) {
  const line = [];
  for (const [name, p, bind] of forms) {
    let best = Infinity;
    for (let r = 0; r < REPS; ++r) {
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      const t0 = performance.now();
      for (let i = 0; i < N; ++i) {
        pass.setPipeline(p);
        bind(pass, i);
        pass.dispatchWorkgroups(1);
      }
      best = Math.min(best, performance.now() - t0);
      pass.end();
      encoder.finish();  // (never submitted: only the recording is timed)
    }
    line.push(`${name} ${(1e3 * best / N).toFixed(2)}`);
  }
  console.log(`round ${round + 1}, us per dispatch (best of ${REPS} steps of ${N}): ${line.join(", ")}`);
}
clearInterval(keepAlive);
process.exit(0);  // (without tearing the device down: dawn.node has crashed in that here)
