// The engine's Web Worker: owns the WebAssembly instance so the page never freezes. Messages in:
//   {type: "load", source: Blob | ArrayBuffer, name, backend: "auto" | "webgpu" | "cpu", allowCpuAdapter}
//                                                 -> {type: "progress", done, total}... (WebGPU: weights read),
//                                                    {type: "loaded", info, ms, note} | {type: "error"}
// A Blob (a File from disk, or a download the page keeps in the Cache API) is read where it lies,
// a layer at a time, by the WebGPU backend (TernEngine.loadModel), so it may be larger than memory.
//   {type: "generate", prompt, settings, id}      -> {type: "token", id, text}..., {type: "done", nPrompt,
//                                                     nGenerated, promptMs, generateMs, decodeMs, stoppedByEog, stopped}
//   {type: "stop"}                                 ends a generation at the next token (JSPI only, see below)
// and {type: "ready", jspi, webgpu} once tern.wasm is compiled, {type: "error", message, modelLoaded} on any failure.
// "auto" takes WebGPU where the browser has JSPI and a hardware adapter, else the CPU, and says why.
// A generation is TernEngine.generate (`tern run`'s loop). Under JSPI the engine waits while the
// worker posts each token and yields to its event loop, which is how "stop" gets in; without JSPI
// the whole generation is one call, tokens still stream out, and the page stops it by ending the
// worker (web/app.js).
/* global importScripts, TernEngine */
"use strict";
importScripts("tern.js", "tern-engine.js");

let engine = null;
let generation = 0;  // bumped by "stop" and by each new "generate"
const queue = [];
let busy = false;

// A zero-delay yield (setTimeout is clamped to >= 4 ms once nested).
const channel = new MessageChannel();
const resumers = [];
channel.port1.onmessage = () => resumers.shift()();
const yieldToEvents = () => new Promise((resolve) => { resumers.push(resolve); channel.port2.postMessage(0); });

const ready = TernEngine.create({ locateFile: (file) => file }).then((e) => {
  engine = e;
  postMessage({ type: "ready", jspi: e.jspi, webgpu: typeof navigator !== "undefined" && !!navigator.gpu });
}, (err) => postMessage({ type: "error", message: "cannot start tern.wasm: " + err }));

async function generate(prompt, settings, id) {
  const stats = await engine.generate(prompt, settings, (t) => {
    postMessage({ type: "token", id: t.id, text: t.text });
    if (!engine.jspi) return true;
    return yieldToEvents().then(() => id === generation);
  });
  postMessage({ type: "done", ...stats });
}

async function handle(msg) {
  await ready;
  if (!engine) return;
  try {
    if (msg.type === "load") {
      const t0 = performance.now();
      const source = msg.source;
      const onProgress = (done, total) => postMessage({ type: "progress", done, total });
      let info = null, note = "";
      const wanted = msg.backend || "auto";
      if (wanted === "auto") {
        if (!engine.jspi) note = "CPU: this browser has no JSPI (WebAssembly.Suspending), which WebGPU from WebAssembly needs";
        else if (typeof navigator === "undefined" || !navigator.gpu) note = "CPU: this browser has no WebGPU";
        // (asked here first: a WebGPU load that fails replaces the loaded model with none)
        else if (!(await navigator.gpu.requestAdapter())) note = "CPU: this browser gives no WebGPU adapter";
        else {
          try {
            info = await engine.loadModel(source, msg.name, { backend: "webgpu", allowCpuAdapter: !!msg.allowCpuAdapter,
                                                              onProgress });
          } catch (err) {
            note = "CPU: " + String(err.message || err).split("\n")[0];
          }
        }
      }
      if (!info) info = await engine.loadModel(source, msg.name, { backend: wanted === "auto" ? "cpu" : wanted,
                                                                   allowCpuAdapter: !!msg.allowCpuAdapter, onProgress });
      postMessage({ type: "loaded", info, note, ms: performance.now() - t0 });
    } else if (msg.type === "generate") {
      await generate(msg.prompt, msg.settings, msg.id);
    }
  } catch (err) {
    // modelLoaded: whether the engine still has a model (a file refused before loading leaves the last one).
    postMessage({ type: "error", message: err && err.message ? err.message : String(err), modelLoaded: !!engine.info });
  }
}

onmessage = async (event) => {
  const msg = event.data;
  if (msg.type === "stop") { generation = -1; return; }
  if (msg.type === "generate") generation = msg.id;
  queue.push(msg);
  if (busy) return;
  busy = true;
  while (queue.length) await handle(queue.shift());
  busy = false;
};
