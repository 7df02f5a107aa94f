// Shared by the browser-build tests: where things are, the native `tern` to compare with, and the
// wasm engine under Node. Environment (set by ctest): TERN_BIN (native tern), TERN_WEB_DIR (the
// browser build, default build-web), TERN_DEPS_DIR (.deps), TERN_OUT_DIR (screenshots, logs).
// A missing browser build is a skip (exit 77) that says how to make it.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
export const webDir = path.resolve(root, process.env.TERN_WEB_DIR || "build-web");
export const siteDir = path.join(webDir, "site");
export const depsDir = process.env.TERN_DEPS_DIR || path.join(root, ".deps");
export const outDir = process.env.TERN_OUT_DIR || path.join(root, "build/web-test-out");
export const modelPath = path.join(root, "share/models/tern-32m-en.gguf");
export const ternBin = process.env.TERN_BIN || path.join(root, "build/bin/tern");
const require = createRequire(import.meta.url);

export function requireWebBuild() {
  for (const f of [path.join(webDir, "bin/tern.js"), path.join(webDir, "bin/tern.wasm"), path.join(siteDir, "index.html")]) {
    if (!fs.existsSync(f)) {
      console.log(`# SKIP: ${f} is missing; run scripts/build-web.sh`);
      process.exit(77);
    }
  }
}

// A fresh wasm engine in this Node process, with a model loaded on `options.backend` (default cpu;
// webgpu needs a Node with JSPI and navigator.gpu, see useDawnNode): the shipped model's bytes, or
// `source` (TernEngine.loadModel's: e.g. {path} for a host file).
export async function nodeEngine(options = {}, source = null) {
  const createTernModule = require(path.join(webDir, "bin/tern.js"));
  const { TernEngine } = require(path.join(root, "web/tern-engine.js"));
  const engine = await TernEngine.create({
    createModule: createTernModule,
    wasmBinary: fs.readFileSync(path.join(webDir, "bin/tern.wasm")),
  });
  await engine.loadModel(source || fs.readFileSync(modelPath), "tern-32m-en.gguf", options);
  return engine;
}

// Generates with the engine (TernEngine.generate); returns {ids, text, stats}. stopAfter: the
// callback asks to stop after that many tokens.
export async function generateAll(engine, prompt, settings, stopAfter = Infinity) {
  const ids = [];
  let text = "";
  const stats = await engine.generate(prompt, settings, (t) => {
    text += t.text;
    if (t.id < 0) return true;
    ids.push(t.id);
    return ids.length < stopAfter;
  });
  return { ids, text, stats };
}

// The shipped model followed by zeros up to 5 GiB (a sparse file: no disk space): a valid GGUF
// (tern reads the tensors the directory names) larger than the whole wasm32 address space, so it
// can only load if it is read a layer at a time. Made once in $TERN_OUT_DIR.
export const bigModelBytes = 5 * 2 ** 30;
export function bigModel() {
  const file = path.join(outDir, "tern-32m-en-padded-5g.gguf");
  if (!fs.existsSync(file) || fs.statSync(file).size !== bigModelBytes) {
    fs.mkdirSync(outDir, { recursive: true });
    fs.copyFileSync(modelPath, file);
    fs.truncateSync(file, bigModelBytes);
  }
  return file;
}

// `tern run` on the shipped model: the generated text (the prompt not echoed).
export function nativeRun(prompt, args) {
  return execFileSync(ternBin, ["run", "-m", modelPath, "-p", prompt, "--no-display-prompt", ...args],
                      { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).replace(/\n$/, "");
}

export function nativeTokenize(text) {
  return JSON.parse(execFileSync(ternBin, ["tokenize", "-m", modelPath, "-p", text, "--bos", "--parse-special"],
                                 { encoding: "utf8" }));
}

// navigator.gpu from Dawn's Node bindings (npm webgpu in .deps/webgpu), as tools/web_node_run.mjs
// sets it up; exits 77 (skip) saying why where this Node has no JSPI or dawn.node is missing.
export function useDawnNode() {
  if (typeof WebAssembly.Suspending !== "function") {
    console.log(`# SKIP: this Node (${process.version}) has no JSPI; scripts/setup.sh puts one in .deps/node-jspi`);
    process.exit(77);
  }
  const dawn = path.join(depsDir, "webgpu/node_modules/webgpu/dist/linux-x64/dawn.node");
  if (!fs.existsSync(dawn)) {
    console.log(`# SKIP: ${dawn} is missing; run scripts/setup.sh`);
    process.exit(77);
  }
  const { create, globals } = require(dawn);
  Object.assign(globalThis, globals);
  Object.defineProperty(navigator, "gpu", { value: create([]), configurable: true });
}

export function requireDep(name) {
  for (const dir of ["npm-server"]) {
    const p = path.join(depsDir, dir, "node_modules", name);
    if (fs.existsSync(p)) return require(p);
  }
  console.log(`# SKIP: npm package ${name} is missing from ${depsDir}; run scripts/setup.sh`);
  process.exit(77);
}
