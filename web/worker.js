// The engine's Web Worker: owns the WebAssembly instance so the page never freezes. Messages in:
//   {type: "load", bytes: ArrayBuffer, name, backend: "auto" | "webgpu" | "cpu", allowCpuAdapter}
//                                                 -> {type: "loaded", info, ms, note} | {type: "error"}
//   {type: "generate", prompt, settings}          -> {type: "started", nPrompt, ms}, {type: "token", id, text}...,
//                                                     {type: "done", nGenerated, promptMs, generateMs, stoppedByEog, stopped}
//   {type: "stop"}                                 ends a generation at the next token
// and {type: "ready", jspi, webgpu} once tern.wasm is compiled, {type: "error", message} on any failure.
// "auto" takes WebGPU where the browser has JSPI and a hardware adapter, else the CPU, and says why.
// A generation yields to the event loop after every token, which is how "stop" gets in.
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
  const t0 = performance.now();
  const nPrompt = await engine.start(prompt, settings);
  const t1 = performance.now();
  postMessage({ type: "started", nPrompt, ms: t1 - t0 });
  let n = 0;
  for (;;) {
    if (id !== generation) {  // stopped
      postMessage({ type: "done", nGenerated: n, promptMs: t1 - t0, generateMs: performance.now() - t1, stopped: true });
      return;
    }
    const t = await engine.next();
    if (t.done) {
      if (t.text) postMessage({ type: "token", id: -1, text: t.text });
      postMessage({ type: "done", nGenerated: n, promptMs: t1 - t0, generateMs: performance.now() - t1,
                    stoppedByEog: t.stoppedByEog, stopped: false });
      return;
    }
    ++n;
    postMessage({ type: "token", id: t.id, text: t.text });
    await yieldToEvents();
  }
}

async function handle(msg) {
  await ready;
  if (!engine) return;
  try {
    if (msg.type === "load") {
      const t0 = performance.now();
      const bytes = new Uint8Array(msg.bytes);
      let info = null, note = "";
      const wanted = msg.backend || "auto";
      if (wanted === "auto") {
        if (!engine.jspi) note = "CPU: this browser has no JSPI (WebAssembly.Suspending), which WebGPU from WebAssembly needs";
        else if (typeof navigator === "undefined" || !navigator.gpu) note = "CPU: this browser has no WebGPU";
        else {
          try {
            info = await engine.loadModel(bytes, msg.name, { backend: "webgpu", allowCpuAdapter: !!msg.allowCpuAdapter });
          } catch (err) {
            note = "CPU: " + String(err.message || err).split("\n")[0];
          }
        }
      }
      if (!info) info = await engine.loadModel(bytes, msg.name, { backend: wanted === "auto" ? "cpu" : wanted,
                                                                  allowCpuAdapter: !!msg.allowCpuAdapter });
      postMessage({ type: "loaded", info, note, ms: performance.now() - t0 });
    } else if (msg.type === "generate") {
      await generate(msg.prompt, msg.settings, msg.id);
    }
  } catch (err) {
    postMessage({ type: "error", message: err && err.message ? err.message : String(err) });
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
