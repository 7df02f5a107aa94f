// Sums up web_node_run.mjs --time-dawn JSON files (tools/device/web_run.sh ... timedawn): per file
// (an arm: one process), the median over its runs of the decode tokens/s, the host's ms per step
// recording and submitting, the part of it inside dawn.node's calls and the rest (wasm, glue); then
// one row per dawn.node call: its median ms per step (and us per call) in each arm, so the calls
// whose time grows in the slow processes stand out.
// Usage: node tools/device/dawn_calls_table.mjs FILE.json...
import fs from "node:fs";
import path from "node:path";

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node tools/device/dawn_calls_table.mjs FILE.json...");
  process.exit(2);
}
const median = (xs) => {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  return v.length ? (v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2) : NaN;
};
const f3 = (x) => (Number.isFinite(x) ? x.toFixed(3) : "-");
const arms = [];
for (const f of files) {
  let j;
  try {
    j = JSON.parse(fs.readFileSync(f, "utf8"));
  } catch (e) {
    console.log(`${f}: unreadable (${e.message})`);
    continue;
  }
  const name = path.basename(f).replace(/^causes\./, "").replace(/\.json$/, "");
  const runs = (j.runs || []).filter((r) => r.n_generated > 1);
  const steps = (r) => r.n_generated - 1;
  arms.push({ name, timed: runs.some((r) => r.dawn),
              tps: median(runs.map((r) => r.decode_tokens_per_second)),
              host: median(runs.map((r) => r.host_ms / steps(r))),
              dawn: median(runs.map((r) => (r.dawn ? r.dawn.ms_per_step : NaN))),
              outside: median(runs.map((r) => (r.dawn ? r.host_ms / steps(r) - r.dawn.ms_per_step : NaN))),
              calls: runs.map((r) => (r.dawn ? r.dawn.by_call : {})), n: runs.length });
}
console.log("arm | runs | tokens/s | host ms/step | in dawn.node | outside (wasm, glue)");
for (const a of arms) console.log(`${a.name} | ${a.n} | ${a.tps.toFixed(1)} | ${f3(a.host)} | ${f3(a.dawn)} | ${f3(a.outside)}`);
const timed = arms.filter((a) => a.timed);
const keys = [...new Set(timed.flatMap((a) => a.calls.flatMap((c) => Object.keys(c))))].sort();
if (keys.length === 0) process.exit(0);
console.log(`\ncall: median ms per step (us per call) | ${timed.map((a) => a.name).join(" | ")}`);
for (const k of keys) {
  const cells = timed.map((a) => {
    const ms = median(a.calls.map((c) => (c[k] ? c[k].ms_per_step : NaN)));
    const us = median(a.calls.map((c) => (c[k] ? c[k].us_per_call : NaN)));
    const n = median(a.calls.map((c) => (c[k] ? c[k].calls_per_step : NaN)));
    return Number.isFinite(ms) ? `${f3(ms)} (${us.toFixed(2)} us x ${n.toFixed(1)})` : "-";
  });
  console.log(`${k} | ${cells.join(" | ")}`);
}
