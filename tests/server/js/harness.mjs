// Shared pieces of the server's Node tests: start `tern serve` on a free port and wait until it is
// ready, load the npm packages scripts/setup.sh put in .deps/npm-server, read /metrics.
// Environment (set by ctest): TERN_BIN (the tern binary), TERN_DEPS_DIR (.deps), TERN_OUT_DIR
// (screenshots and reports).
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

export const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../..");
export const ternBin = process.env.TERN_BIN || path.join(root, "build/bin/tern");
export const depsDir = process.env.TERN_DEPS_DIR || path.join(root, ".deps");
export const outDir = process.env.TERN_OUT_DIR || path.join(root, "build/server-test-out");

// require() for the test-only npm packages; exits with 77 (ctest: skipped) when they are missing.
export function requireDep(name) {
  const dir = path.join(depsDir, "npm-server/node_modules", name);
  if (!fs.existsSync(dir)) {
    console.log(`# SKIP: ${name} is not installed in ${path.dirname(dir)}; run scripts/setup.sh`);
    process.exit(77);
  }
  return createRequire(path.join(depsDir, "npm-server/node_modules/"))(name);
}

// Starts `tern serve --port 0 ...args` and resolves once it answers; stop() ends it (SIGTERM) and
// resolves with its exit code. Its stderr is kept in server.log (printed when a test fails).
export async function startServer(args = [], { readyTimeoutMs = 60000 } = {}) {
  const proc = spawn(ternBin, ["serve", "--port", "0", ...args], { stdio: ["ignore", "ignore", "pipe"] });
  const server = { proc, log: "", port: 0, url: "", exited: null };
  proc.stderr.on("data", (d) => { server.log += d.toString(); });
  const exited = new Promise((resolve) => proc.on("exit", (code, signal) => { server.exited = { code, signal }; resolve(server.exited); }));
  const deadline = Date.now() + readyTimeoutMs;
  while (!/tern serve: ready/.test(server.log)) {
    if (server.exited) throw new Error(`tern serve exited (${JSON.stringify(server.exited)}):\n${server.log}`);
    if (Date.now() > deadline) { proc.kill("SIGKILL"); throw new Error(`tern serve not ready in time:\n${server.log}`); }
    await new Promise((r) => setTimeout(r, 50));
  }
  const m = /listening on http:\/\/([\d.]+):(\d+)/.exec(server.log);
  server.port = Number(m[2]);
  server.url = `http://${m[1]}:${m[2]}`;
  server.stop = async () => {
    if (!server.exited) proc.kill("SIGTERM");
    const timer = setTimeout(() => proc.kill("SIGKILL"), 20000);
    const result = await exited;
    clearTimeout(timer);
    return result;
  };
  return server;
}

// /metrics as {name or name{labels}: value}.
export async function metrics(url, headers = {}) {
  const r = await fetch(url + "/metrics", { headers });
  const out = {};
  for (const line of (await r.text()).split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}

// Polls until the server has no busy slot, no queued request and no KV page in use (or times out).
export async function waitIdle(url, timeoutMs = 10000, headers = {}) {
  const deadline = Date.now() + timeoutMs;
  let m = {};
  while (Date.now() < deadline) {
    m = await metrics(url, headers);
    if (m.tern_slots_busy === 0 && m.tern_queue_depth === 0 && m.tern_kv_pages_used === 0) return m;
    await new Promise((r) => setTimeout(r, 50));
  }
  return m;
}

// Resident memory of a process in kB (Linux /proc).
export function rssKb(pid) {
  const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) : 0;
}

// A chat-capable model for tests: `tern synth tiny` (random weights, byte vocabulary with
// <|eot_id|>, so the server picks BitNet's chat format), made once per output folder.
export async function tinyChatModel() {
  fs.mkdirSync(outDir, { recursive: true });
  const file = path.join(outDir, "synth-tiny.gguf");
  if (!fs.existsSync(file)) {
    await new Promise((resolve, reject) => {
      const p = spawn(ternBin, ["synth", "tiny", "-o", file, "--seed", "3"], { stdio: "inherit" });
      p.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`tern synth exited ${code}`))));
    });
  }
  return file;
}
