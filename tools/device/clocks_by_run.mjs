// The GPU's clocks during each timed run of tools/web_node_run.mjs (issue 55: do the page's ~500 and
// ~800 tokens/s modes go with the GPU's clocks?). Reads nvidia-smi samples, as web_run.sh takes them:
//   nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,utilization.gpu,power.draw
//              --format=csv,noheader,nounits -lms 50
// and web_node_run.mjs --json-out files (each run's began_ms / ended_ms, wall-clock), and prints one
// line per run: tokens/s, the host's ms per step recording, the main thread's and the process's CPU
// time and the cgroup's throttled time over the run (web_node_run.mjs), and the samples inside the run (SM clock
// median and range, memory clock, utilization, power, performance state). A file ending in .phases
// holds lines "NAME BEGAN_MS ENDED_MS" (e.g. native `tern bench`, timed by the script): one line each.
// Usage: node tools/device/clocks_by_run.mjs SAMPLES.csv RUNS.json|PHASES.phases [...]
import fs from "node:fs";
import path from "node:path";

const [samplesFile, ...runFiles] = process.argv.slice(2);
if (!samplesFile || runFiles.length === 0) {
  console.error("usage: node tools/device/clocks_by_run.mjs SAMPLES.csv RUNS.json [RUNS.json ...]");
  process.exit(2);
}
const samples = [];
for (const line of fs.readFileSync(samplesFile, "utf8").split("\n")) {
  const f = line.split(",").map((s) => s.trim());
  if (f.length < 6) continue;
  // "2026/11/27 22:05:01.123" is the machine's local time, as Date() reads a string without a zone.
  const t = new Date(f[0].replace(/\//g, "-").replace(" ", "T")).getTime();
  if (!Number.isFinite(t)) continue;
  samples.push({ t, pstate: f[1], sm: Number(f[2]), mem: Number(f[3]), util: Number(f[4]), power: Number(f[5]) });
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[s.length >> 1] : NaN; };
const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
function describe(inside) {
  if (!inside.length) return "no samples inside";
  const sm = inside.map((s) => s.sm);
  return `${inside.length} samples: SM ${median(sm)} MHz (${Math.min(...sm)}-${Math.max(...sm)}), ` +
         `mem ${median(inside.map((s) => s.mem))} MHz, util ${mean(inside.map((s) => s.util)).toFixed(0)}%, ` +
         `${mean(inside.map((s) => s.power)).toFixed(0)} W, ${[...new Set(inside.map((s) => s.pstate))].join("/")}`;
}
console.log(`${samples.length} samples of the GPU's clocks`);
for (const file of runFiles) {
  if (file.endsWith(".phases")) {
    for (const line of fs.readFileSync(file, "utf8").split("\n")) {
      const [name, began, ended] = line.trim().split(/\s+/);
      if (!name || !ended) continue;
      console.log(`${name}: ${describe(samples.filter((s) => s.t >= Number(began) && s.t <= Number(ended)))}`);
    }
    continue;
  }
  let j;
  try { j = JSON.parse(fs.readFileSync(file, "utf8")); } catch (e) { console.log(`${path.basename(file)}: unreadable (${e.message})`); continue; }
  (j.runs || []).forEach((r, i) => {
    const inside = samples.filter((s) => s.t >= r.began_ms && s.t <= r.ended_ms);
    const steps = Math.max(1, r.n_generated - 1);
    console.log(`${path.basename(file, ".json")} run ${i + 1} temp ${r.temp}: ${r.decode_tokens_per_second.toFixed(1)} tok/s, ` +
                `host ${(r.host_ms / steps).toFixed(3)} of ${(r.decode_ms / steps).toFixed(3)} ms/step; ` +
                (r.cpu ? `CPU over ${r.cpu.wall_ms} ms: main thread ${r.cpu.main_thread_cpu_ms === null ? "?" : r.cpu.main_thread_cpu_ms.toFixed(0)}, ` +
                 `process ${r.cpu.process_cpu_ms.toFixed(0)} ms, throttled ${r.cpu.throttled_ms === null ? "?" : r.cpu.throttled_ms.toFixed(0)} ms; ` : "") +
                describe(inside));
  });
}
