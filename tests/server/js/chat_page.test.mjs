// The chat page at / in headless Chromium (Debian's chromium, driven by puppeteer-core): it loads,
// a message gets a streamed reply from the shipped model, the stop button ends a reply early and
// frees the server's slot, and HTML in messages is shown as text. Screenshots go to $TERN_OUT_DIR.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { requireDep, startServer, waitIdle, metrics, outDir } from "./harness.mjs";

const puppeteer = requireDep("puppeteer-core");
const chromium = process.env.TERN_CHROMIUM || "/usr/bin/chromium";
if (!fs.existsSync(chromium)) {
  console.log(`# SKIP: no Chromium at ${chromium}; run scripts/setup.sh`);
  process.exit(77);
}

let server, browser, page;
before(async () => {
  fs.mkdirSync(outDir, { recursive: true });
  server = await startServer(["--parallel", "2"]);
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 760 });
  page.on("pageerror", (e) => { throw new Error("page error: " + e.message); });
});
after(async () => {
  if (browser) await browser.close();
  if (server) assert.equal((await server.stop()).code, 0, server.log);
});

const shot = (name) => page.screenshot({ path: path.join(outDir, `chat_page_${name}.png`) });
const bubbles = () => page.$$eval(".msg.assistant .content", (els) => els.map((e) => e.textContent));
const finishes = () => page.$$eval(".stats", (els) => els.map((e) => e.dataset.finish));

async function send(text) {
  await page.click("#input");
  await page.type("#input", text);
  await page.keyboard.press("Enter");
}

test("the page loads and names the model", async () => {
  await page.goto(server.url + "/", { waitUntil: "load" });
  await page.waitForFunction(() => document.querySelector("#model").textContent.includes("tern-32m-en"), { timeout: 10000 });
  assert.match(await page.$eval("#model", (e) => e.textContent), /text continuation/);  // no chat format
  await shot("loaded");
});

test("a message gets a streamed reply", async () => {
  await page.$eval("#max_tokens", (e) => { e.value = "48"; });
  await page.$eval("#seed", (e) => { e.value = "3"; });
  // Record how the reply grows while it streams.
  await page.evaluate(() => {
    window.__lengths = [];
    new MutationObserver(() => {
      const b = document.querySelectorAll(".msg.assistant .content");
      if (b.length) window.__lengths.push(b[b.length - 1].textContent.length);
    }).observe(document.querySelector("#log"), { subtree: true, childList: true, characterData: true });
  });
  await send("The ship");
  await page.waitForFunction(() => document.querySelectorAll(".stats").length === 1, { timeout: 60000 });
  const [reply] = await bubbles();
  assert.ok(reply.length > 20, `reply: ${JSON.stringify(reply)}`);
  assert.deepEqual(await finishes(), ["length"]);
  const lengths = await page.evaluate(() => window.__lengths);
  const distinct = new Set(lengths.filter((n) => n > 0 && n < reply.length));
  assert.ok(distinct.size >= 3, `the reply arrived in ${distinct.size + 1} pieces, not streamed`);
  // The same request through the API gives the same text (the page sends what it shows).
  const r = await fetch(server.url + "/v1/completions", { method: "POST", body: JSON.stringify({
    prompt: "The ship", max_tokens: 48, seed: 3, temperature: 0.8, top_p: 0.95, top_k: 40, min_p: 0.05 }) });
  assert.equal((await r.json()).choices[0].text, reply);
  await shot("reply");
});

test("stop ends the reply and frees the slot", async () => {
  await page.$eval("#max_tokens", (e) => { e.value = "900"; });
  await page.$eval("#seed", (e) => { e.value = ""; });
  await send(" and then");
  await page.waitForFunction(() => {
    const b = document.querySelectorAll(".msg.assistant .content");
    return b.length === 2 && b[1].textContent.length > 10;
  }, { timeout: 60000 });
  assert.equal((await metrics(server.url)).tern_slots_busy, 1);
  await page.click("#stop");
  await page.waitForFunction(() => document.querySelectorAll(".stats").length === 2, { timeout: 10000 });
  assert.deepEqual(await finishes(), ["length", "stopped"]);
  const m = await waitIdle(server.url, 5000);
  assert.equal(m.tern_slots_busy, 0);
  assert.equal(m.tern_kv_pages_used, 0);
  assert.equal(m['tern_requests_total{outcome="cancelled"}'], 1);
  assert.ok((await bubbles())[1].length < 900 * 3);
  await shot("stopped");
});

test("HTML in a message is shown as text, never run", async () => {
  await page.$eval("#max_tokens", (e) => { e.value = "2"; });
  await send('<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> **bold** `code`');
  await page.waitForFunction(() => document.querySelectorAll(".stats").length === 3, { timeout: 60000 });
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.$$eval("#log img, #log script", (e) => e.length), 0);
  const user = await page.$$eval(".msg.user .content", (els) => els.map((e) => e.innerHTML));
  assert.match(user[2], /&lt;img src=x/);
  assert.match(user[2], /<strong>bold<\/strong>/);
  assert.match(user[2], /<code>code<\/code>/);
  await shot("escaped");
});
