// tern's page: picks a model (a URL, cached with the Cache API so a reload does not download it
// again, or a file from disk), hands it to the engine's Web Worker (worker.js), and streams the
// generated text with the sampler settings, a stop button and tokens/s. Text is shown as text.
"use strict";

const $ = (id) => document.getElementById(id);
let worker = null;  // startWorker()
let workerJspi = false;  // whether the worker's engine can stop at a token (else "stop" ends the worker)
let generationId = 0;
let generating = false;
let modelLoaded = false;
let engineReady = false;
let outText = null;
let live = { n: 0, t0: 0 };  // tokens so far and when the first came, for the live tokens/s
let lastSource = null;  // what to load again when the backend changes: {url} or {file}
// ?backend=webgpu|cpu|auto picks the backend; ?allow-cpu-adapter=1 accepts a software WebGPU adapter
// (SwiftShader: correct but slow; the tests use it).
const params = new URLSearchParams(location.search);
if (params.get("backend")) $("backend-choice").value = params.get("backend");
const allowCpuAdapter = params.get("allow-cpu-adapter") === "1";

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

function updateButtons() {
  $("generate").disabled = !engineReady || !modelLoaded || generating;
  $("stop").disabled = !generating;
  $("load-url").disabled = !engineReady || generating;
  $("model-file").disabled = !engineReady || generating;
}

function settings() {
  const num = (id) => Number($(id).value);
  return { temp: num("temp"), topK: num("top-k"), topP: num("top-p"), minP: num("min-p"),
           repeatPenalty: num("repeat-penalty"), seed: num("seed"), nPredict: num("n-predict"),
           chat: $("chat").checked };
}

// Reads a response body with a progress bar; returns its bytes.
async function readWithProgress(response, label) {
  const total = Number(response.headers.get("content-length")) || 0;
  const bar = $("load-progress");
  bar.hidden = false;
  bar.value = 0;
  const reader = response.body.getReader();
  const parts = [];
  let got = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    got += value.length;
    if (total) bar.value = got / total;
    $("model-status").textContent = `${label}: ${(got / 1e6).toFixed(1)}${total ? " of " + (total / 1e6).toFixed(1) : ""} MB`;
  }
  const bytes = new Uint8Array(got);
  let at = 0;
  for (const p of parts) { bytes.set(p, at); at += p.length; }
  bar.hidden = true;
  return bytes;
}

function showProgress(label, got, total) {
  const bar = $("load-progress");
  bar.hidden = false;
  bar.value = total ? got / total : 0;
  $("model-status").textContent = `${label}: ${(got / 1e6).toFixed(1)}${total ? " of " + (total / 1e6).toFixed(1) : ""} MB`;
}

// Downloads a model into the Cache API (a reload then does not download it again) with a progress
// bar, and gives it to the engine as a Blob from the cache, which the browser keeps on disk: a
// model larger than memory never has to be in memory whole. Without the Cache API the bytes are
// read into memory.
async function loadFromUrl(url) {
  showError("");
  const absolute = new URL(url, location.href).href;
  const name = absolute.split("/").pop();
  const cache = "caches" in self ? await caches.open("tern-models") : null;
  let response = cache ? await cache.match(absolute) : null;
  const cached = !!response;
  if (!response) {
    response = await fetch(absolute);
    if (!response.ok) throw new Error(`cannot download ${url}: HTTP ${response.status} ${response.statusText}`);
  }
  // Only a URL that answered is what a change of backend loads again.
  lastSource = { url };
  let blob;
  if (cached) {
    blob = await response.blob();
  } else if (cache) {
    const total = Number(response.headers.get("content-length")) || 0;
    let got = 0;
    const counted = response.body.pipeThrough(new TransformStream({
      transform(chunk, controller) {
        got += chunk.length;
        showProgress("downloading", got, total);
        controller.enqueue(chunk);
      },
    }));
    const headers = total ? { "content-length": String(total) } : {};
    await cache.put(absolute, new Response(counted, { headers }));
    blob = await (await cache.match(absolute)).blob();
  } else {
    blob = new Blob([await readWithProgress(response, "downloading")]);
  }
  $("load-progress").hidden = true;
  sendModel(blob, name, cached ? " (from the browser's cache)" : "");
}

let loadNote = "";
function sendModel(blob, name, note) {
  showError("");  // an earlier load's error is not this one's
  modelLoaded = false;
  loadNote = note;
  updateButtons();
  $("model-status").textContent = `loading ${name} (${(blob.size / 1e6).toFixed(1)} MB) into the engine…`;
  worker.postMessage({ type: "load", source: blob, name, backend: $("backend-choice").value, allowCpuAdapter });
}

// Loads what was loaded last (a URL or a file), or the URL in the box.
function reloadModel() {
  if (lastSource && lastSource.file) return Promise.resolve(sendModel(lastSource.file, lastSource.file.name, " (from disk)"));
  return loadFromUrl(lastSource ? lastSource.url : $("model-url").value);
}

function onWorkerMessage(event) {
  const m = event.data;
  switch (m.type) {
    case "ready":
      engineReady = true;
      workerJspi = m.jspi;
      $("backend").textContent = `engine ready (WebGPU ${m.webgpu ? "present" : "absent"}, JSPI ${m.jspi ? "present" : "absent"})`;
      updateButtons();
      reloadModel().catch((e) => showError(e.message));
      break;
    case "progress":
      showProgress("reading the weights into the engine", m.done, m.total);
      // Then, on a GPU, the engine compiles its kernels and runs a few steps before it answers.
      if (m.total > 0 && m.done >= m.total) $("model-status").textContent += "; compiling the GPU kernels…";
      break;
    case "loaded": {
      $("load-progress").hidden = true;
      modelLoaded = true;
      const i = m.info;
      $("model-status").textContent = `${i.name} (${i.arch}, ${i.n_layer} layers, n_embd ${i.n_embd}, ` +
        `${(i.file_bytes / 1e6).toFixed(1)} MB) loaded in ${m.ms.toFixed(0)} ms${loadNote}` +
        (i.warm_up_ms > 0 ? `, of which ${i.warm_up_ms.toFixed(0)} ms compiling and warming up the GPU kernels` : "");
      $("backend").textContent = `engine: ${i.backend}` + (m.note ? ` (${m.note})` : "");
      // A chat model's prompt is a user message in its format (on by default); others continue text.
      $("chat-name").textContent = i.chat_template;
      $("chat").disabled = i.chat_template === "none";
      $("chat").checked = i.chat_template !== "none";
      updateButtons();
      break;
    }
    case "token": {
      outText.textContent += m.text;
      if (m.id < 0) break;
      live.n += 1;
      if (live.n === 1) {
        live.t0 = performance.now();
        $("speed").textContent = "generating…";
      }
      // Tokens/s over the decode steps, from the first token on (the first comes from the prompt).
      const s = (performance.now() - live.t0) / 1000;
      if (live.n % 4 === 0 && s > 0) $("speed").textContent = `generating: ${live.n} tokens, ${((live.n - 1) / s).toFixed(1)} tokens/s`;
      break;
    }
    case "done":
      $("speed").dataset.decoding = m.decoding;
      finishGeneration(m.stopped ? "stopped" : m.stoppedByEog ? "end of text" : "done", m.nGenerated,
                       m.nGenerated > 1 && m.decodeMs > 0 ? (1000 * (m.nGenerated - 1)) / m.decodeMs : m.generateMs > 0 ? (1000 * m.nGenerated) / m.generateMs : 0,
                       `prompt ${m.nPrompt} tokens in ${m.promptMs.toFixed(0)} ms`);
      break;
    case "error":
      $("load-progress").hidden = true;
      generating = false;
      modelLoaded = m.modelLoaded;
      showError(m.message);
      updateButtons();
      break;
  }
}

// Shows how a generation ended: tokens/s as `tern run` counts it (tokens 2..n over the decode steps).
function finishGeneration(why, n, rate, note) {
  generating = false;
  $("speed").textContent = `${why}: ${n} tokens, ${rate.toFixed(rate < 1 ? 3 : 1)} tokens/s` + (note ? ` (${note})` : "");
  $("speed").dataset.state = why;
  updateButtons();
}

function startWorker() {
  engineReady = false;
  modelLoaded = false;
  worker = new Worker("worker.js");
  worker.onmessage = onWorkerMessage;
  }
startWorker();

$("generate").onclick = () => {
  showError("");
  const prompt = $("prompt").value;
  const out = $("output");
  out.textContent = "";
  const p = document.createElement("span");
  p.className = "prompt";
  p.textContent = prompt;
  outText = document.createElement("span");
  outText.className = "generated";
  out.append(p, outText);
  generating = true;
  live = { n: 0, t0: 0 };
  $("speed").textContent = "reading the prompt…";
  delete $("speed").dataset.state;
  updateButtons();
  worker.postMessage({ type: "generate", prompt, settings: settings(), id: ++generationId });
};
$("stop").onclick = () => {
  if (workerJspi) {
    worker.postMessage({ type: "stop" });
    return;
  }
  // Without JSPI a generation is one call the worker cannot leave: end the worker, start another and
  // load the model again (from the browser's cache).
  worker.terminate();
  const rate = live.n > 1 ? (1000 * (live.n - 1)) / (performance.now() - live.t0) : 0;
  finishGeneration("stopped", live.n, rate, "the engine restarts: this browser has no JSPI");
  startWorker();
};
$("load-url").onclick = () => loadFromUrl($("model-url").value).catch((e) => showError(e.message));
$("model-file").onchange = async (event) => {
  const file = event.target.files[0];
  if (file) {
    lastSource = { file };
    sendModel(file, file.name, " (from disk)");
  }
};
$("backend-choice").onchange = async () => {
  if (!lastSource || generating) return;
  try {
    if (lastSource.url) await loadFromUrl(lastSource.url);
    else sendModel(lastSource.file, lastSource.file.name, " (from disk)");
  } catch (e) { showError(e.message); }
};
