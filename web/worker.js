// The engine's Web Worker: owns the WebAssembly instance so the page never freezes. Messages in:
//   {type: "load", bytes: ArrayBuffer, name}      -> {type: "loaded", info, ms} | {type: "error"}
//   {type: "generate", prompt, settings}          -> {type: "started", nPrompt, ms}, {type: "token", id, text}...,
//                                                     {type: "done", nGenerated, promptMs, generateMs, stoppedByEog, stopped}
//   {type: "stop"}                                 ends a generation at the next token
// and {type: "ready", backend} once tern.wasm is compiled, {type: "error", message} on any failure.
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
  postMessage({ type: "ready", backend: "cpu (WebAssembly SIMD128, 1 thread)" });
}, (err) => postMessage({ type: "error", message: "cannot start tern.wasm: " + err }));

async function generate(prompt, settings, id) {
  const t0 = performance.now();
  const nPrompt = engine.start(prompt, settings);
  const t1 = performance.now();
  postMessage({ type: "started", nPrompt, ms: t1 - t0 });
  let n = 0;
  for (;;) {
    if (id !== generation) {  // stopped
      postMessage({ type: "done", nGenerated: n, promptMs: t1 - t0, generateMs: performance.now() - t1, stopped: true });
      return;
    }
    const t = engine.next();
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
      const info = engine.loadModel(new Uint8Array(msg.bytes), msg.name);
      postMessage({ type: "loaded", info, ms: performance.now() - t0 });
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
