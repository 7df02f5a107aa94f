// One CPU's speed at tools/host_probe.mjs's probes, for tools/device/web_run.sh's `pin` mode (issue 55:
// is the page's slow host mode a slow CPU of the VM?): run pinned (taskset -c N node cpu_scan.mjs), it
// prints one JSON line {cpu, spin_ms, l2_ns, mem_ns, steal_ticks}: the fixed integer loop's ms, and ns
// per load of a dependent walk over 2 MB and 32 MB (best of 3 each), and the CPU's steal ticks meanwhile.
// Usage: taskset -c N node tools/device/cpu_scan.mjs
import fs from "node:fs";
import * as probe from "../host_probe.mjs";

const cpu = Number(fs.readFileSync("/proc/self/stat", "utf8").split(") ")[1].split(" ")[36]);
probe.warmChase();
const s0 = probe.steal(cpu);
let spin = Infinity, l2 = Infinity, mem = Infinity;
for (let i = 0; i < 3; ++i) {
  spin = Math.min(spin, probe.spinMs());
  const c = probe.chase();
  l2 = Math.min(l2, c.l2_ns);
  mem = Math.min(mem, c.mem_ns);
}
const s1 = probe.steal(cpu);
console.log(JSON.stringify({ cpu, spin_ms: +spin.toFixed(3), l2_ns: +l2.toFixed(2), mem_ns: +mem.toFixed(2),
                             steal_ticks: s0.cpu === null || s1.cpu === null ? null : s1.cpu - s0.cpu }));
