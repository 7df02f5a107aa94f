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

// A fresh wasm engine in this Node process (no JSPI in Node 20: the CPU backend), with the shipped
// model loaded.
export async function nodeEngine() {
  const createTernModule = require(path.join(webDir, "bin/tern.js"));
  const { TernEngine } = require(path.join(root, "web/tern-engine.js"));
  const engine = await TernEngine.create({
    createModule: createTernModule,
    wasmBinary: fs.readFileSync(path.join(webDir, "bin/tern.wasm")),
  });
  await engine.loadModel(fs.readFileSync(modelPath), "tern-32m-en.gguf");
  return engine;
}

// Generates to the end with the engine; returns {ids, text}.
export async function generateAll(engine, prompt, settings) {
  await engine.start(prompt, settings);
  const ids = [];
  let text = "";
  for (;;) {
    const t = await engine.next();
    text += t.text;
    if (t.done) return { ids, text, stoppedByEog: t.stoppedByEog };
    ids.push(t.id);
  }
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

export function requireDep(name) {
  for (const dir of ["npm-server"]) {
    const p = path.join(depsDir, dir, "node_modules", name);
    if (fs.existsSync(p)) return require(p);
  }
  console.log(`# SKIP: npm package ${name} is missing from ${depsDir}; run scripts/setup.sh`);
  process.exit(77);
}
