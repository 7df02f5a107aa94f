// Issue 55's figure from the real page: the browser build's site (web/ + tern.js + tern.wasm) served
// here, opened in headless Chromium driven by puppeteer-core, a model loaded by its URL field, then the
// page's own Generate button pressed: one untimed generation (pipelines, the GPU's clocks, V8's tiers),
// then --repeat timed ones, each read from the page's speed line (tokens/s as `tern run` counts it:
// tokens 2..n over the decode steps) with its generated text (for the same-text check against native).
// Greedy (temperature 0; --temp T: seeded sampling, seed 42, the page's default chain), the chat format
// off (the prompt continued as text, as `tern run -p` does, so the texts compare), the page's other
// settings as they are.
// Usage: node tools/device/web_page_run.mjs --chromium PATH --web-bin DIR (tern.js, tern.wasm) --model FILE
//          [--puppeteer DIR (a node_modules with puppeteer-core)] [-p PROMPT] [-n N] [--repeat R]
//          [--temp T (0)] [--allow-cpu-adapter] [--chromium-flag FLAG ...] [--json-out FILE] [--timeout-s S]
//          [--dumpio (Chromium's own stdout/stderr to ours: why a renderer or GPU process died)]
// Prints one line per run and, last, one JSON line {adapter, backend, model, load_ms, runs: [...]}; exits
// non-zero with the page's or Chromium's own error text when there is no WebGPU adapter or the load fails.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { serveStatic } from "../../tests/web/js/static_server.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const opt = { chromium: "/usr/bin/chromium", webBin: path.join(root, "build-web/bin"), model: null, puppeteer: null,
              prompt: "Once upon a time", n: 128, temp: 0, repeat: 3, allowCpu: false, flags: [], jsonOut: null, timeoutS: 600, dumpio: false };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; ++i) {
  const value = () => { if (i + 1 >= argv.length) fail(`${argv[i]} needs a value`); return argv[++i]; };
  switch (argv[i]) {
    case "--chromium": opt.chromium = value(); break;
    case "--web-bin": opt.webBin = value(); break;
    case "--model": opt.model = value(); break;
    case "--puppeteer": opt.puppeteer = value(); break;
    case "-p": opt.prompt = value(); break;
    case "-n": opt.n = Number(value()); break;
    case "--temp": opt.temp = Number(value()); break;
    case "--repeat": opt.repeat = Number(value()); break;
    case "--allow-cpu-adapter": opt.allowCpu = true; break;
    case "--chromium-flag": opt.flags.push(value()); break;
    case "--json-out": opt.jsonOut = value(); break;
    case "--timeout-s": opt.timeoutS = Number(value()); break;
    case "--dumpio": opt.dumpio = true; break;
    default: fail(`unknown argument ${argv[i]}`);
  }
}
function fail(message) {
  console.error(`web_page_run: ${message}`);
  process.exit(2);
}
if (!opt.model || !fs.existsSync(opt.model)) fail(`no model file (--model ${opt.model})`);
if (!fs.existsSync(opt.chromium)) fail(`no Chromium at ${opt.chromium}`);
for (const f of ["tern.js", "tern.wasm"]) if (!fs.existsSync(path.join(opt.webBin, f))) fail(`no ${f} in ${opt.webBin}`);
if (!(opt.n > 1) || !(opt.repeat >= 1)) fail("-n must be > 1 and --repeat >= 1");
if (!(opt.temp >= 0)) fail(`--temp must be a number >= 0 (got ${opt.temp})`);

// The site: web/'s files, the wasm build, and the model linked under models/.
const site = fs.mkdtempSync(path.join(os.tmpdir(), "tern-page-"));
for (const f of fs.readdirSync(path.join(root, "web"))) fs.copyFileSync(path.join(root, "web", f), path.join(site, f));
for (const f of ["tern.js", "tern.wasm"]) fs.copyFileSync(path.join(opt.webBin, f), path.join(site, f));
fs.mkdirSync(path.join(site, "models"));
const modelName = path.basename(opt.model);
fs.symlinkSync(path.resolve(opt.model), path.join(site, "models", modelName));

const require = createRequire(opt.puppeteer ? path.join(path.resolve(opt.puppeteer), "x.js") : import.meta.url);
const puppeteer = require("puppeteer-core");
const server = await serveStatic(site, 0);
const url = `http://127.0.0.1:${server.address().port}/`;
const ms = opt.timeoutS * 1000;
let browser = null;
let code = 0;
try {
  browser = await puppeteer.launch({
    executablePath: opt.chromium, headless: true, protocolTimeout: ms, dumpio: opt.dumpio,
    args: ["--no-sandbox", "--enable-unsafe-webgpu", "--enable-features=Vulkan", "--ignore-gpu-blocklist",
           "--disable-background-networking", "--disable-component-update", "--no-first-run",
           "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
           `--user-data-dir=${fs.mkdtempSync(path.join(os.tmpdir(), "tern-chromium-"))}`, ...opt.flags],
  });
  console.error(`web_page_run: ${await browser.version()}`);
  const page = await browser.newPage();
  page.on("console", (m) => console.error(`web_page_run: page console: ${m.text()}`));
  page.on("pageerror", (e) => console.error(`web_page_run: page error: ${e.message}`));
  await page.goto(url + "index.html?backend=webgpu" + (opt.allowCpu ? "&allow-cpu-adapter=1" : ""));
  const adapter = await page.evaluate(async () => {
    if (!navigator.gpu) return { error: "navigator.gpu is undefined" };
    try {
      const a = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
      return a ? { vendor: a.info.vendor, architecture: a.info.architecture, device: a.info.device, description: a.info.description }
               : { error: "navigator.gpu.requestAdapter() gave null" };
    } catch (e) { return { error: String(e) }; }
  });
  console.error(`web_page_run: adapter ${JSON.stringify(adapter)}`);
  if (adapter.error) throw new Error(`no WebGPU adapter: ${adapter.error}`);
  const text = (sel) => page.$eval(sel, (el) => el.textContent);
  const setValue = (sel, v) => page.$eval(sel, (el, x) => { el.value = x; }, String(v));
  // The engine started (the URL field's Load button works once the worker is up).
  await page.waitForFunction(() => !/starting/.test(document.getElementById("backend").textContent), { timeout: ms });
  const loadBegan = Date.now();
  await setValue("#model-url", "models/" + modelName);
  await page.click("#load-url");
  await page.waitForFunction(() => !document.getElementById("generate").disabled ||
                                   !document.getElementById("error").hidden, { timeout: ms, polling: 200 });
  const loadError = await page.$eval("#error", (el) => (el.hidden ? "" : el.textContent));
  if (loadError) throw new Error(`the page could not load the model: ${loadError}`);
  const loadMs = Date.now() - loadBegan;
  const backend = await text("#backend"), status = await text("#model-status");
  console.error(`web_page_run: ${backend}; ${status}; loaded in ${loadMs} ms`);
  await setValue("#prompt", opt.prompt);
  await setValue("#temp", opt.temp);
  await page.$eval("#chat", (el) => { el.checked = false; });
  await setValue("#seed", 42);
  await setValue("#n-predict", opt.n);
  const generate = async () => {
    await page.click("#generate");
    await page.waitForFunction(() => document.getElementById("speed").dataset.state ||
                                     !document.getElementById("error").hidden, { timeout: ms, polling: 100 });
    const error = await page.$eval("#error", (el) => (el.hidden ? "" : el.textContent));
    if (error) throw new Error(`generation failed: ${error}`);
    const speed = await text("#speed");
    const m = /: (\d+) tokens, ([\d.]+) tokens\/s/.exec(speed);
    return { speed, n_generated: m ? Number(m[1]) : null, decode_tokens_per_second: m ? Number(m[2]) : null,
             decoding: await page.$eval("#speed", (el) => el.dataset.decoding || ""),
             text: await page.$eval("#output .generated", (el) => el.textContent) };
  };
  const warm = await generate();
  console.error(`web_page_run: warm-up: ${warm.speed}`);
  const runs = [];
  for (let r = 0; r < opt.repeat; ++r) {
    const run = await generate();
    runs.push(run);
    console.error(`web_page_run: run ${r + 1}: ${run.speed}, ${run.decoding}`);
  }
  const summary = { chromium: await browser.version(), adapter, backend, model: modelName, load_ms: loadMs, warm_up: warm, runs };
  console.log(JSON.stringify(summary));
  if (opt.jsonOut) fs.writeFileSync(opt.jsonOut, JSON.stringify(summary) + "\n");
} catch (e) {
  console.error(`web_page_run: ${e.message}`);
  code = 1;
} finally {
  await browser?.close().catch(() => {});
  server.close();
  fs.rmSync(site, { recursive: true, force: true });
}
process.exit(code);
