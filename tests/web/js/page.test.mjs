// The page (web/, built into build-web/site) in headless Chromium, driven by puppeteer-core: it loads
// the shipped model with a progress line, generates 32 greedy tokens that equal `tern run`'s, shows
// tokens/s, the stop button ends a long generation early, a reload reads the model from the browser's
// cache, and a bad model URL is a visible error. The engine runs on the wasm CPU backend (Chromium is
// started with its GPU off). Screenshots (idle, generating) go to $TERN_OUT_DIR.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { requireWebBuild, requireDep, siteDir, outDir, nativeRun, bigModel } from "./web_harness.mjs";
import { serveStatic } from "./static_server.mjs";

requireWebBuild();
const puppeteer = requireDep("puppeteer-core");
const chromium = process.env.TERN_CHROMIUM || "/usr/bin/chromium";
if (!fs.existsSync(chromium)) {
  console.log(`# SKIP: no Chromium at ${chromium}; run scripts/setup.sh`);
  process.exit(77);
}

let server, browser, page, url;
const pageErrors = [];
before(async () => {
  fs.mkdirSync(outDir, { recursive: true });
  server = await serveStatic(siteDir, 0);
  url = `http://127.0.0.1:${server.address().port}/`;
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
           "--no-first-run", `--user-data-dir=${fs.mkdtempSync(path.join(outDir, "chromium-"))}`],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 900 });
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  await page.goto(url);
});
after(async () => {
  await browser?.close();
  server?.close();
});

const modelLoaded = () => page.waitForFunction(() => !document.getElementById("generate").disabled, { timeout: 60000 });
const finished = () => page.waitForFunction(() => document.getElementById("speed").dataset.state, { timeout: 120000 });
async function setField(id, value) {
  await page.$eval(`#${id}`, (el, v) => { el.value = v; }, String(value));
}

test("the page loads the shipped model in its worker", async () => {
  await modelLoaded();
  const status = await page.$eval("#model-status", (el) => el.textContent);
  assert.match(status, /tern-32m-en \(bitnet-b1\.58, 10 layers, n_embd 512, 12\.0 MB\) loaded in \d+ ms/);
  assert.match(await page.$eval("#backend", (el) => el.textContent), /^engine: cpu \(WebAssembly SIMD128\): scalar reference kernels, 1 threads \(CPU: /);
  await page.screenshot({ path: path.join(outDir, "web-page-idle.png") });
});

test("32 greedy tokens equal tern run's, with tokens/s shown", async () => {
  await setField("prompt", "The ship");
  await setField("temp", 0);
  await setField("n-predict", 32);
  await page.click("#generate");
  await finished();
  const text = await page.$eval("#output .generated", (el) => el.textContent);
  assert.equal(text, nativeRun("The ship", ["-n", "32", "--temp", "0"]));
  const speed = await page.$eval("#speed", (el) => el.textContent);
  assert.match(speed, /^done: 32 tokens, \d+\.\d+ tokens\/s \(prompt \d+ tokens in \d+ ms\)$/);
  assert.ok(Number(speed.match(/([\d.]+) tokens\/s/)[1]) > 0, speed);
});

test("seeded sampling from the page equals tern run --seed", async () => {
  await setField("temp", 0.7);
  await setField("seed", 42);
  await setField("n-predict", 24);
  await page.click("#generate");
  await finished();
  const text = await page.$eval("#output .generated", (el) => el.textContent);
  assert.equal(text, nativeRun("The ship", ["-n", "24", "--temp", "0.7", "--seed", "42"]));
});

test("the stop button ends a long generation early", async () => {
  await setField("temp", 0.8);
  await setField("seed", 1);
  await setField("n-predict", 900);
  await page.click("#generate");
  await page.waitForFunction(() => document.querySelector("#output .generated").textContent.length > 40, { timeout: 60000 });
  await page.screenshot({ path: path.join(outDir, "web-page-generating.png") });
  assert.equal(await page.$eval("#stop", (el) => el.disabled), false);
  await page.click("#stop");
  await finished();
  const speed = await page.$eval("#speed", (el) => el.textContent);
  const m = speed.match(/^stopped: (\d+) tokens/);
  assert.ok(m, speed);
  assert.ok(Number(m[1]) > 0 && Number(m[1]) < 900, speed);
  assert.equal(await page.$eval("#generate", (el) => el.disabled), false);
});

test("a reload reads the model from the browser's cache", async () => {
  await page.reload();
  await modelLoaded();
  assert.match(await page.$eval("#model-status", (el) => el.textContent), /loaded in \d+ ms \(from the browser's cache\)/);
});

test("a bad model URL is a visible error, and the loaded model stays usable", async () => {
  await setField("model-url", "models/missing.gguf");
  await page.click("#load-url");
  await page.waitForFunction(() => !document.getElementById("error").hidden, { timeout: 30000 });
  assert.match(await page.$eval("#error", (el) => el.textContent), /cannot download models\/missing\.gguf: HTTP 404/);
  assert.deepEqual(pageErrors, []);
});

test("a 5 GiB file from disk is a clear error on the CPU backend, and the loaded model stays usable", async () => {
  const input = await page.$("#model-file");
  await input.uploadFile(bigModel());
  // The bad URL's error is still shown until the file's load starts: wait for this load's own error.
  await page.waitForFunction(() => !document.getElementById("error").hidden &&
                                   document.getElementById("error").textContent.startsWith("cannot load model"),
                             { timeout: 30000 });
  assert.match(await page.$eval("#error", (el) => el.textContent),
               /cannot load model 'tern-32m-en-padded-5g\.gguf': the file is 5\.37 GB; the CPU backend holds the whole file in WebAssembly memory.*hint: use the WebGPU backend/s);
  assert.equal(await page.$eval("#generate", (el) => el.disabled), false);
  await setField("temp", 0);
  await setField("n-predict", 4);
  await page.click("#generate");
  await finished();
  assert.equal(await page.$eval("#output .generated", (el) => el.textContent), nativeRun("The ship", ["-n", "4", "--temp", "0"]));
  assert.deepEqual(pageErrors, []);
});
