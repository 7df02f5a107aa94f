// Sums up a V8 CPU profile (.cpuprofile: node --cpu-prof, or tools/web_node_run.mjs --profile-dir) of
// the wasm engine: where the main thread's time went, by kind (wasm, the webgpu.h library's JavaScript
// with the dawn.node / browser calls it makes, other JavaScript, garbage collection, idle: waiting for
// the GPU or the event loop) and the functions with the most self time. tern.wasm carries no names;
// give --symbols build-web/bin/tern.js.symbols (emcc --emit-symbol-map) to name its functions.
// Usage: node tools/cpuprofile_summary.mjs FILE.cpuprofile [--symbols tern.js.symbols] [--top N]
import fs from "node:fs";

const argv = process.argv.slice(2);
let file = null, symbolsFile = null, top = 30;
for (let i = 0; i < argv.length; ++i) {
  if (argv[i] === "--symbols") symbolsFile = argv[++i];
  else if (argv[i] === "--top") top = Number(argv[++i]);
  else file = argv[i];
}
if (!file || !Number.isFinite(top)) {
  console.error("usage: node tools/cpuprofile_summary.mjs FILE.cpuprofile [--symbols tern.js.symbols] [--top N]");
  process.exit(2);
}

// "index:name" lines; names escape bytes as \XX (hex). Argument lists are dropped for brevity.
const symbols = new Map();
if (symbolsFile) {
  for (const line of fs.readFileSync(symbolsFile, "utf8").split("\n")) {
    const at = line.indexOf(":");
    if (at <= 0) continue;
    let name = line.slice(at + 1).replace(/\\([0-9a-fA-F]{2})/g, (_, h) => String.fromCharCode(parseInt(h, 16)));
    const paren = name.indexOf("(");
    if (paren > 0) name = name.slice(0, paren);
    symbols.set(Number(line.slice(0, at)), name);
  }
}

const profile = JSON.parse(fs.readFileSync(file, "utf8"));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parentOf = new Map();
for (const n of profile.nodes) for (const c of n.children || []) parentOf.set(c, n.id);
const selfUs = new Map();  // node id -> microseconds
for (let i = 0; i < profile.samples.length; ++i) {
  const dt = profile.timeDeltas[i + 1] ?? 0;  // a sample's time runs to the next sample
  selfUs.set(profile.samples[i], (selfUs.get(profile.samples[i]) || 0) + dt);
}

// A native function (no script) is named with its JavaScript caller: e.g. dawn.node's event polling
// shows as "(anonymous) (native) <- processImmediate".
function describe(id) {
  const frame = byId.get(id).callFrame;
  const d = describeFrame(frame);
  if (d.kind === "other JavaScript" && !frame.url && parentOf.has(id)) {
    d.name += " <- " + (byId.get(parentOf.get(id)).callFrame.functionName || "(anonymous)");
  }
  return d;
}

function describeFrame(frame) {
  const name = frame.functionName || "(anonymous)";
  const m = /^\$?func(\d+)$/.exec(name) || /wasm-function\[(\d+)\]/.exec(name);
  const wasm = m !== null || frame.url.startsWith("wasm://") || frame.url.endsWith(".wasm");
  if (wasm) return { kind: "wasm", name: m && symbols.has(Number(m[1])) ? symbols.get(Number(m[1])) : name };
  if (name === "(idle)" || name === "(program)" || name === "(garbage collector)") return { kind: name, name };
  if (/^tern_wgpu|^_?tern_wgpu/.test(name) || name.startsWith("TernWGPU")) return { kind: "webgpu.h (JS + dawn.node)", name };
  const where = frame.url ? frame.url.replace(/^.*\//, "") + ":" + (frame.lineNumber + 1) : "native";
  return { kind: "other JavaScript", name: `${name} (${where})` };
}

const kinds = new Map(), names = new Map();
let total = 0;
for (const [id, us] of selfUs) {
  const d = describe(id);
  total += us;
  kinds.set(d.kind, (kinds.get(d.kind) || 0) + us);
  const key = `${d.kind}\t${d.name}`;
  names.set(key, (names.get(key) || 0) + us);
}
const ms = (us) => (us / 1000).toFixed(1).padStart(9);
const pct = (us) => ((100 * us) / Math.max(1, total)).toFixed(1).padStart(5);
console.log(`${file}: ${(total / 1000).toFixed(1)} ms sampled (${profile.samples.length} samples)`);
for (const [k, us] of [...kinds].sort((a, b) => b[1] - a[1])) console.log(`${ms(us)} ms ${pct(us)}%  ${k}`);
console.log(`top ${top} by self time:`);
for (const [key, us] of [...names].sort((a, b) => b[1] - a[1]).slice(0, top)) {
  const [kind, name] = key.split("\t");
  console.log(`${ms(us)} ms ${pct(us)}%  [${kind}] ${name.slice(0, 160)}`);
}
