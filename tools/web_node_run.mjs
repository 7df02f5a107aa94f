// Runs the browser build (tern.js + tern.wasm + web/tern-engine.js: the page's engine, WGSL and
// webgpu.h-on-navigator.gpu) under Node, with navigator.gpu from Dawn's Node bindings (dawn.node, the
// npm package `webgpu`), so the browser code's speed can be measured on a GPU machine without a
// browser. Needs a Node with JSPI (WebAssembly.Suspending: Node >= 25 by default; the WebGPU backend
// waits through it). Prints the generated text and one JSON line of figures (load ms, prompt ms,
// decode tokens/s as `tern run` counts them: tokens 2..n over the decode steps; the host's ms per step
// recording and submitting, of which the rest is waiting for the device; each run's wall-clock start
// and end, and its CPU time: the main thread's, the whole process's, and the cgroup's throttled time;
// tools/host_probe.mjs's view of the host around it: a fixed loop's ms, the CPU of each thread,
// context switches, page faults, V8's collections). Between runs a line "# run temp T N begins|ends"
// goes to stdout, where V8's --trace-* flags print (node --trace-deopt tools/web_node_run.mjs ...).
//
// Usage: node tools/web_node_run.mjs --model FILE [--wasm-dir build-web/bin] [--dawn PATH/dawn.node]
//          [--backend webgpu|cpu] [-p PROMPT] [-n N] [--temp T[,T...]] [--seed S] [-c N_CTX] [--repeat N]
//          [--allow-cpu-adapter] [--json-out FILE] [--dawn-flag FLAG ...] [--warm-up-s S] [--profile-dir DIR]
//          [--time-dawn]
// --dawn-flag: a flag for dawn.node's create() (e.g. enable-dawn-features=skip_validation,disable_robustness:
// what native tern asks for on a hardware adapter and a browser never does), to tell the browser's
// validation and robustness costs apart from the rest.
// Each temperature in --temp (0: greedy) is generated --repeat times with the model loaded once; each
// run's figures are printed, and the JSON (line and file) has them all with each setting's text.
// --warm-up-s S: before the timed runs, generate (untimed, the first temperature) until S seconds have
// passed, as `tern bench` warms up (pipelines, the GPU's clocks, and here also V8's optimizing tier
// for the wasm and the JavaScript): steady-state figures, next to the first run's that a page pays.
// --profile-dir DIR: the main thread's CPU profile (node:inspector) of the load and of the timed runs,
// as DIR/load.cpuprofile and DIR/generate.cpuprofile (tools/cpuprofile_summary.mjs sums them up).
// TERN_WEBGPU_TUNE and TERN_WEBGPU_TIMEOUT_MS in the environment reach the engine (the backend's tuning
// keys: src/backend/webgpu/webgpu_tuning.h).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import * as probe from "./host_probe.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
// --time-dawn's totals per dawn.node method (declared before the GPU set-up that fills them).
const dawnMs = {}, dawnCalls = {};

function usage(message) {
  if (message) console.error(`error: ${message}`);
  console.error("usage: node tools/web_node_run.mjs --model FILE [--wasm-dir DIR] [--dawn dawn.node] [--backend webgpu|cpu]\n" +
                "         [-p PROMPT] [-n N] [--temp T[,T...]] [--seed S] [-c N_CTX] [--repeat N] [--allow-cpu-adapter] [--json-out FILE] [--dawn-flag FLAG ...]\n" +
                "         [--warm-up-s S] [--profile-dir DIR] [--time-dawn]");
  process.exit(2);
}

const opt = { wasmDir: path.join(root, "build-web/bin"), backend: "webgpu", prompt: "The ship", n: 128, temps: [0], seed: 42,
              ctx: 0, repeat: 1, allowCpuAdapter: false, model: null, dawn: null, jsonOut: null, dawnFlags: [],
              warmUpS: 0, profileDir: null };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; ++i) {
  const a = argv[i];
  const value = () => {
    if (i + 1 >= argv.length) usage(`${a} needs a value`);
    return argv[++i];
  };
  const number = () => {
    const v = Number(value());
    if (!Number.isFinite(v)) usage(`${a} needs a number (got '${argv[i]}')`);
    return v;
  };
  switch (a) {
    case "--model": case "-m": opt.model = value(); break;
    case "--wasm-dir": opt.wasmDir = value(); break;
    case "--dawn": opt.dawn = value(); break;
    case "--backend": opt.backend = value(); break;
    case "-p": case "--prompt": opt.prompt = value(); break;
    case "-n": case "--n-predict": opt.n = number(); break;
    case "--temp":
      opt.temps = value().split(",").map(Number);
      if (opt.temps.some((t) => !Number.isFinite(t))) usage(`--temp needs numbers (got '${argv[i]}')`);
      break;
    case "--seed": opt.seed = number(); break;
    case "-c": case "--ctx-size": opt.ctx = number(); break;
    case "--repeat": opt.repeat = Math.max(1, number()); break;
    case "--allow-cpu-adapter": opt.allowCpuAdapter = true; break;
    case "--json-out": opt.jsonOut = value(); break;
    case "--dawn-flag": opt.dawnFlags.push(value()); break;
    case "--warm-up-s": opt.warmUpS = number(); break;
    case "--profile-dir": opt.profileDir = value(); break;
    case "--time-dawn": opt.timeDawn = true; break;
    case "-h": case "--help": usage(); break;
    default: usage(`unknown argument '${a}'`);
  }
}
if (!opt.model) usage("--model is required");

if (opt.backend === "webgpu") {
  if (typeof WebAssembly.Suspending !== "function") {
    console.error(`error: this Node (${process.version}) has no JSPI (WebAssembly.Suspending), which the WebGPU backend ` +
                  "needs from WebAssembly\nhint: use Node >= 25 (or Node 24 with --experimental-wasm-jspi)");
    process.exit(1);
  }
  const dawnPath = opt.dawn || path.join(root, ".deps/webgpu/node_modules/webgpu/dist/linux-x64/dawn.node");
  if (!fs.existsSync(dawnPath)) usage(`no dawn.node at ${dawnPath} (give --dawn; scripts/setup.sh installs the npm package webgpu)`);
  const { create, globals } = require(path.resolve(dawnPath));
  Object.assign(globalThis, globals);
  if (opt.timeDawn) timeDawnCalls(globals);
  // Node >= 21 has a navigator of its own; the page's webgpu.h reads navigator.gpu.
  const gpu = create(opt.dawnFlags);
  if (typeof navigator === "object" && navigator) Object.defineProperty(navigator, "gpu", { value: gpu, configurable: true });
  else globalThis.navigator = { gpu };
}

// --time-dawn: the main thread's ms inside dawn.node's calls (each wrapped in two performance.now(),
// ~0.1 us), per method, so a run's host time splits into Dawn's (native: Dawn, the driver) and the
// rest (wasm, the JavaScript glue); and for the calls that answer with a promise (mapAsync,
// onSubmittedWorkDone), also the ms from the call to the promise's settling ("<call> settles"), where
// dawn.node's polling of the device shows.
function timeDawnCalls(globals) {
  const methods = { GPUComputePassEncoder: ["setPipeline", "setBindGroup", "dispatchWorkgroups", "end"],
                    GPUCommandEncoder: ["beginComputePass", "copyBufferToBuffer", "resolveQuerySet", "finish"],
                    GPUQueue: ["submit", "writeBuffer", "onSubmittedWorkDone"],
                    GPUDevice: ["createCommandEncoder", "createBindGroup", "createBuffer"],
                    GPUBuffer: ["mapAsync", "getMappedRange", "unmap", "destroy"] };
  const add = (key, ms) => { dawnMs[key] = (dawnMs[key] || 0) + ms; dawnCalls[key] = (dawnCalls[key] || 0) + 1; };
  for (const [cls, names] of Object.entries(methods)) {
    const proto = globals[cls] && globals[cls].prototype;
    for (const name of names) {
      const orig = proto && proto[name];
      if (typeof orig !== "function") continue;
      const key = `${cls.slice(3)}.${name}`;
      dawnMs[key] = 0; dawnCalls[key] = 0;
      proto[name] = function (...args) {
        const t0 = performance.now();
        let result;
        try {
          result = orig.apply(this, args);
          return result;
        } finally {
          add(key, performance.now() - t0);
          if (result && typeof result.then === "function") {
            const settled = () => add(`${key} settles`, performance.now() - t0);
            result.then(settled, settled);
          }
        }
      };
    }
  }
}
const dawnSnapshot = () => Object.fromEntries(Object.keys(dawnMs).map((k) => [k, [dawnMs[k], dawnCalls[k]]]));
// ms and calls per step of each key since `before`; ms_per_step sums the calls' own time (not the
// "settles" keys: that time is spent waiting, mostly outside the calls).
function dawnSince(before, steps) {
  const out = {};
  let total = 0;
  for (const [k, [ms, n]] of Object.entries(dawnSnapshot())) {
    const [ms0, n0] = before[k] || [0, 0];
    const d = ms - ms0, c = n - n0;
    if (c <= 0) continue;
    out[k] = { ms_per_step: d / steps, calls_per_step: c / steps, us_per_call: (1000 * d) / c };
    if (!k.endsWith(" settles")) total += d;
  }
  return { ms_per_step: total / steps, by_call: out };
}

// The main thread's CPU profile of one phase (--profile-dir), through the inspector (V8's sampler).
let profiler = null;
async function profiled(name, phase) {
  if (!opt.profileDir) return phase();
  if (!profiler) {
    const { Session } = await import("node:inspector/promises");
    profiler = new Session();
    profiler.connect();
    await profiler.post("Profiler.enable");
    await profiler.post("Profiler.setSamplingInterval", { interval: 200 });
    fs.mkdirSync(opt.profileDir, { recursive: true });
  }
  await profiler.post("Profiler.start");
  try {
    return await phase();
  } finally {
    const { profile } = await profiler.post("Profiler.stop");
    fs.writeFileSync(path.join(opt.profileDir, `${name}.cpuprofile`), JSON.stringify(profile));
  }
}

const createTernModule = require(path.resolve(opt.wasmDir, "tern.js"));
const { TernEngine } = require(path.join(root, "web/tern-engine.js"));
const engine = await TernEngine.create({ createModule: createTernModule,
                                         wasmBinary: fs.readFileSync(path.resolve(opt.wasmDir, "tern.wasm")),
                                         env: Object.fromEntries(["TERN_WEBGPU_TUNE", "TERN_WEBGPU_TIMEOUT_MS"]
                                                                   .filter((k) => process.env[k]).map((k) => [k, process.env[k]])) });
const t0 = performance.now();
// A host file (NODEFS): on WebGPU it is read a layer at a time, as a page reads a File.
const info = await profiled("load", () => engine.loadModel({ path: path.resolve(opt.model) }, path.basename(opt.model),
                                                           { backend: opt.backend, allowCpuAdapter: opt.allowCpuAdapter }));
const loadMs = performance.now() - t0;
console.error(`web_node_run: ${info.name} (${info.n_layer} layers, ${(info.file_bytes / 1e6).toFixed(1)} MB) loaded in ` +
              `${loadMs.toFixed(0)} ms (warm-up ${Number(info.warm_up_ms).toFixed(0)} ms) on ${info.backend} (Node ${process.version}, JSPI ${engine.jspi})`);

const settings = (temp) => ({ temp, seed: opt.seed, nPredict: opt.n, nCtx: opt.ctx });
if (opt.warmUpS > 0) {
  const w0 = performance.now();
  let n = 0;
  do {
    await engine.generate(opt.prompt, settings(opt.temps[0]), () => true);
    ++n;
  } while (performance.now() - w0 < 1000 * opt.warmUpS);
  console.error(`web_node_run: warm-up: ${n} untimed runs in ${(performance.now() - w0).toFixed(0)} ms`);
}

// The main thread's CPU microseconds (Node >= 23.9), or null.
const threadCpu = () => (typeof process.threadCpuUsage === "function"
  ? ((u) => u.user + u.system)(process.threadCpuUsage()) : null);
// Microseconds the process's cgroup has been throttled by its CPU quota (cgroup v2's throttled_usec,
// v1's throttled_time in ns), or null.
function cgroupThrottle() {
  for (const [file, key, per_us] of [["/sys/fs/cgroup/cpu.stat", "throttled_usec", 1],
                                     ["/sys/fs/cgroup/cpu/cpu.stat", "throttled_time", 1000],
                                     ["/sys/fs/cgroup/cpu,cpuacct/cpu.stat", "throttled_time", 1000]]) {
    try {
      const m = new RegExp(key + " (\\d+)").exec(fs.readFileSync(file, "utf8"));
      if (m) return Number(m[1]) / per_us;
    } catch (e) {
      // next
    }
  }
  return null;
}

const runs = [];
const texts = {};
probe.watchGc();
await profiled("generate", async () => {
  for (const temp of opt.temps) {
    for (let r = 0; r < opt.repeat; ++r) {
      let text = "";
      const ids = [];
      const began = Date.now();
      const host0 = probe.before();
      const dawn0 = opt.timeDawn ? dawnSnapshot() : null;
      // (a mark in stdout, where V8's --trace-* flags print, to tell their lines by run)
      process.stdout.write(`# run temp ${temp} ${r + 1} begins\n`);
      const cpu0 = threadCpu(), all0 = process.cpuUsage(), thr0 = cgroupThrottle();
      const s = await engine.generate(opt.prompt, settings(temp), (t) => { text += t.text; if (t.id >= 0) ids.push(t.id); return true; });
      const tps = s.nGenerated > 1 && s.decodeMs > 0 ? (1000 * (s.nGenerated - 1)) / s.decodeMs : 0;
      // (began_ms, ended_ms: wall-clock times, to match the run with samples of the GPU's clocks)
      const ended = Date.now(), cpu1 = threadCpu(), all1 = process.cpuUsage(), thr1 = cgroupThrottle();
      process.stdout.write(`# run temp ${temp} ${r + 1} ends\n`);
      const host = probe.after(host0);
      // (all the generate's calls, prompt included, over its decode steps: the prompt is one step)
      const dawn = dawn0 ? dawnSince(dawn0, Math.max(1, s.nGenerated - 1)) : null;
      // The main thread's CPU time and the whole process's (every thread: V8's, Dawn's, the driver's)
      // over the run's wall time, and how long the cgroup was throttled meanwhile (if it says).
      const cpu = { wall_ms: ended - began, main_thread_cpu_ms: cpu1 === null ? null : (cpu1 - cpu0) / 1000,
                    process_cpu_ms: (all1.user + all1.system - all0.user - all0.system) / 1000,
                    throttled_ms: thr0 === null || thr1 === null ? null : (thr1 - thr0) / 1000 };
      runs.push({ temp, n_prompt: s.nPrompt, n_generated: s.nGenerated, prompt_ms: s.promptMs, decode_ms: s.decodeMs,
                  host_ms: s.hostMs, decode_tokens_per_second: tps, decoding: s.decoding, began_ms: began, ended_ms: ended, cpu, host, dawn });
      console.error(`web_node_run: temp ${temp} run ${r + 1}: ${s.nGenerated} tokens, prompt ${s.nPrompt} tokens in ` +
                    `${s.promptMs.toFixed(1)} ms, ${tps.toFixed(1)} tokens/s over ${Math.max(0, s.nGenerated - 1)} decode steps ` +
                    `(${s.decoding}); host ${(s.hostMs / Math.max(1, s.nGenerated - 1)).toFixed(3)} ms/step recording` +
                    (dawn ? ` (in dawn.node ${dawn.ms_per_step.toFixed(3)}, outside ${(s.hostMs / Math.max(1, s.nGenerated - 1) - dawn.ms_per_step).toFixed(3)};` +
                      ` ms/calls per step: ${Object.entries(dawn.by_call).sort((a, b) => b[1].ms_per_step - a[1].ms_per_step)
                      .map(([k, v]) => `${k} ${v.ms_per_step.toFixed(3)}/${v.calls_per_step.toFixed(1)}`).join(", ")})` : "") +
                    `; ${probe.describe(host)}`);
      texts[temp] = text;
    }
    process.stdout.write(`--- temp ${temp}\n${texts[temp]}\n`);
  }
});
const summary = { model: info.name, backend: info.backend, node: process.version, load_ms: loadMs, seed: opt.seed,
                  n_predict: opt.n, prompt: opt.prompt, runs };
console.error("web_node_run: " + JSON.stringify(summary));
if (opt.jsonOut) fs.writeFileSync(opt.jsonOut, JSON.stringify({ ...summary, texts }) + "\n");
process.exit(0);  // (dawn.node keeps the event loop alive)
