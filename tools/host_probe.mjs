// What the host did around one timed run of tools/web_node_run.mjs (issue 55: the page's engine runs
// at ~800 or ~500 tokens/s from one run to the next, and in the slow runs the main thread takes twice as
// long to record the same steps). Each probe is cheap and read before and after a run:
//   - spin: a fixed piece of JavaScript timed on the main thread (a CPU that runs slower, e.g. a
//     neighbour on the same physical core or a lower clock, makes it slower too; a change in V8's code for
//     the engine does not);
//   - threads: every thread of the process (/proc/self/task): its name, the CPU it last ran on and its
//     CPU ticks, so a run says which threads worked during it (V8's compiler threads tiering code up,
//     Dawn's threads) and whether one shared the main thread's CPU;
//   - usage: the process's context switches (involuntary ones: preempted) and page faults;
//   - gc: V8's collections (count and ms) inside the run (a PerformanceObserver);
//   - chase: a dependent walk over a random cycle of 2 MB and of 32 MB (cache and memory latency: what
//     the spin's register-bound loop does not feel, a hyperthread neighbour on the VM host's core or
//     another tenant's cache and memory traffic, slows these);
//   - steal: /proc/stat's steal ticks (the hypervisor running someone else on this vCPU) of the main
//     thread's CPU and of all CPUs, over the run.
import fs from "node:fs";
import { PerformanceObserver, performance } from "node:perf_hooks";

// A fixed integer loop (~2-4 ms): the main thread's speed at plain computation.
function spinOnce(n) {
  let x = 1;
  for (let i = 0; i < n; ++i) x = (Math.imul(x, 1103515245) + 12345) | 0;
  return x;
}
let sink = 0;
export function spinMs(n = 2_000_000) {
  const t0 = performance.now();
  sink ^= spinOnce(n);
  return performance.now() - t0;
}

// A dependent walk of `steps` loads over a random single cycle of `words` u32 (Sattolo's shuffle, made
// once per size with a fixed LCG): ns per load.
const cycles = new Map();
function cycle(words) {
  let c = cycles.get(words);
  if (c) return c;
  c = new Uint32Array(words);
  for (let i = 0; i < words; ++i) c[i] = i;
  let x = 12345;
  for (let i = words - 1; i > 0; --i) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    const j = x % i;
    const t = c[i]; c[i] = c[j]; c[j] = t;
  }
  cycles.set(words, c);
  return c;
}
export function chaseNs(words, steps) {
  const c = cycle(words);
  let k = 0;
  const t0 = performance.now();
  for (let i = 0; i < steps; ++i) k = c[k];
  const ms = performance.now() - t0;
  sink ^= k;
  return (ms * 1e6) / steps;
}
export function chase() {
  return { l2_ns: chaseNs(1 << 19, 1 << 20), mem_ns: chaseNs(1 << 23, 1 << 18) };
}
// The cycles made and the walk compiled by V8's optimizing tier before the first timed chase.
export function warmChase() {
  for (let i = 0; i < 3; ++i) { chaseNs(1 << 19, 1 << 18); chaseNs(1 << 23, 1 << 16); }
}

// Steal ticks (1/100 s) of CPU `cpu` and of all CPUs, from /proc/stat (null where it does not say).
export function steal(cpu) {
  try {
    const lines = fs.readFileSync("/proc/stat", "utf8").split("\n");
    const field = (name) => { const l = lines.find((x) => x.startsWith(name + " ")); return l ? Number(l.trim().split(/\s+/)[8]) : null; };
    return { cpu: field(`cpu${cpu}`), all: field("cpu") };
  } catch (e) {
    return { cpu: null, all: null };
  }
}

// [{ tid, name, cpu, ticks }] of every thread of this process (ticks: user + system, 1/100 s).
export function threads() {
  const out = [];
  let tids = [];
  try { tids = fs.readdirSync("/proc/self/task"); } catch (e) { return out; }
  for (const tid of tids) {
    try {
      const s = fs.readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
      const close = s.lastIndexOf(")");
      const name = s.slice(s.indexOf("(") + 1, close);
      const f = s.slice(close + 2).split(" ");  // f[0] is field 3 (state)
      out.push({ tid: Number(tid), name, cpu: Number(f[36]), ticks: Number(f[11]) + Number(f[12]) });
    } catch (e) {
      // the thread ended
    }
  }
  return out;
}

const gcs = [];
let observer = null;
export function watchGc() {
  if (observer) return;
  warmChase();
  observer = new PerformanceObserver((list) => { for (const e of list.getEntries()) gcs.push([e.startTime, e.duration]); });
  observer.observe({ entryTypes: ["gc"] });
}

export function before() {
  const th = threads(), main = th.find((t) => t.tid === process.pid);
  return { spin_ms: spinMs(), chase: chase(), steal: steal(main?.cpu), t: performance.now(), threads: th,
           usage: process.resourceUsage() };
}

// The probe of one run from its before() (call right after the run).
export function after(b) {
  const t1 = performance.now();
  const threads1 = threads(), usage1 = process.resourceUsage();
  const spin = spinMs(), ch = chase();
  const pid = process.pid;
  const ticks0 = new Map(b.threads.map((t) => [t.tid, t]));
  const mainBefore = ticks0.get(pid), mainAfter = threads1.find((t) => t.tid === pid);
  // threads that worked during the run (ticks rose), busiest first
  const busy = threads1.map((t) => ({ name: t.name, tid: t.tid, cpu: t.cpu,
                                      ticks: t.ticks - (ticks0.get(t.tid)?.ticks ?? 0) }))
    .filter((t) => t.ticks > 0).sort((a, c) => c.ticks - a.ticks);
  const u = (k) => usage1[k] - b.usage[k];
  const st = steal(mainBefore?.cpu), d = (x, y) => (x === null || y === null ? null : x - y);
  return { spin_ms_before: b.spin_ms, spin_ms_after: spin, chase_before: b.chase, chase_after: ch,
           steal_ticks_main_cpu: d(st.cpu, b.steal.cpu), steal_ticks_all: d(st.all, b.steal.all),
           main_cpu_before: mainBefore?.cpu ?? null, main_cpu_after: mainAfter?.cpu ?? null,
           busy_threads: busy,
           involuntary_switches: u("involuntaryContextSwitches"), voluntary_switches: u("voluntaryContextSwitches"),
           minor_faults: u("minorPageFault"), major_faults: u("majorPageFault"),
           gc: (() => { const inside = gcs.filter(([s]) => s >= b.t && s <= t1);
                        return { count: inside.length, ms: inside.reduce((a, [, d]) => a + d, 0) }; })() };
}

// One line of the probe for the log.
export function describe(p) {
  const others = p.busy_threads.filter((t) => t.tid !== process.pid).slice(0, 6)
    .map((t) => `${t.name}@${t.cpu}:${t.ticks}`).join(" ");
  const ch = (c) => `${c.l2_ns.toFixed(1)}/${c.mem_ns.toFixed(1)}`;
  return `spin ${p.spin_ms_before.toFixed(2)}/${p.spin_ms_after.toFixed(2)} ms, chase 2M/32M ns ${ch(p.chase_before)} -> ` +
         `${ch(p.chase_after)}, steal ${p.steal_ticks_main_cpu}/${p.steal_ticks_all} ticks, main on cpu ${p.main_cpu_before}->${p.main_cpu_after}, ` +
         `switches ${p.voluntary_switches}v/${p.involuntary_switches}i, faults ${p.minor_faults}, ` +
         `gc ${p.gc.count} (${p.gc.ms.toFixed(1)} ms), other threads (name@cpu:ticks) ${others || "none"}`;
}
