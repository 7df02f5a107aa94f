// The page's WebGPU backend in headless Chromium: the engine's WGSL kernels run on navigator.gpu
// from WebAssembly (web/webgpu-library.js, waits suspended with JSPI), here on Chromium's SwiftShader
// adapter (--use-webgpu-adapter=swiftshader), which the page accepts only with ?allow-cpu-adapter=1.
// 4 greedy tokens (chosen on the device) and 3 seeded sampled tokens (sampled on the device) must equal
// `tern run`'s (the CPU reference), and "auto" must refuse the software adapter and say so. Slow by nature (SwiftShader runs the GPU's work on the CPU): a short generation.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { requireWebBuild, requireDep, siteDir, outDir, nativeRun } from "./web_harness.mjs";
import { serveStatic } from "./static_server.mjs";

requireWebBuild();
const puppeteer = requireDep("puppeteer-core");
const chromium = process.env.TERN_CHROMIUM || "/usr/bin/chromium";
if (!fs.existsSync(chromium)) {
  console.log(`# SKIP: no Chromium at ${chromium}; run scripts/setup.sh`);
  process.exit(77);
}

let server, browser, page, url;
before(async () => {
  fs.mkdirSync(outDir, { recursive: true });
  server = await serveStatic(siteDir, 0);
  url = `http://127.0.0.1:${server.address().port}/`;
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    protocolTimeout: 900000,
    args: ["--headless", "--no-sandbox", "--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader",
           "--enable-features=Vulkan", "--disable-background-networking", "--disable-component-update", "--no-first-run",
           `--user-data-dir=${fs.mkdtempSync(path.join(outDir, "chromium-gpu-"))}`],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 900 });
  // Evidence for a skip: does this Chromium give a WebGPU adapter at all?
  await page.goto(url + "index.html?backend=cpu");
  const adapter = await page.evaluate(async () => {
    if (!navigator.gpu) return null;
    const a = await navigator.gpu.requestAdapter();
    return a ? `${a.info.vendor} ${a.info.architecture}` : null;
  });
  if (!adapter) {
    console.log("# SKIP: this Chromium gives no WebGPU adapter (navigator.gpu.requestAdapter() is null)");
    process.exit(77);
  }
});
after(async () => {
  await browser?.close();
  server?.close();
});

const loaded = () => page.waitForFunction(() => !document.getElementById("generate").disabled, { timeout: 600000 });
const finished = () => page.waitForFunction(() => document.getElementById("speed").dataset.state, { timeout: 900000 });
const text = (sel) => page.$eval(sel, (el) => el.textContent);

test("auto refuses the software adapter and says why", async () => {
  await page.goto(url + "index.html?backend=auto");
  await loaded();
  assert.match(await text("#backend"), /^engine: cpu \(WebAssembly SIMD128\).*\(CPU: webgpu: the only adapter is '.*swiftshader.*', a CPU implementation/);
});

test("4 greedy tokens on WebGPU equal tern run's", async () => {
  await page.goto(url + "index.html?backend=webgpu&allow-cpu-adapter=1");
  await loaded();
  assert.match(await text("#backend"), /^engine: webgpu: .*swiftshader/);
  await page.$eval("#temp", (el) => { el.value = "0"; });
  await page.$eval("#n-predict", (el) => { el.value = "4"; });
  await page.click("#generate");
  await finished();
  await page.screenshot({ path: path.join(outDir, "web-page-webgpu.png") });
  assert.equal(await text("#output .generated"), nativeRun("The ship", ["-n", "4", "--temp", "0"]));
  assert.match(await text("#speed"), /^done: 4 tokens, \d+\.\d+ tokens\/s/);
  assert.equal(await page.$eval("#speed", (el) => el.dataset.decoding), "greedy on the device");
});

// (Seeded sampling on the device in the page is compared with native on a GPU by tools/device/web_run.sh, which
// runs the page's engine: on Chromium's SwiftShader adapter a 3-token case ran past 900 s on the
// 2-core machine.)
