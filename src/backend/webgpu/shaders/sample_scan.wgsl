// sample_scan: the passes over the whole vocabulary that sample.wgsl's top-p / min-p chain without
// top-k needs, spread over many workgroups instead of sample.wgsl's one (H200: its one workgroup
// took ~151 us per token over 2B4T's 128k logits). Two dispatches, then sample.wgsl with p.scan:
//   PHASE 0: each workgroup's slice of the logits, the largest order-preserving key (sample.wgsl's
//            key_of: NaN as -inf, +inf as the largest float) atomicMax'ed into scan[0];
//   PHASE 1: with m = that maximum, each workgroup's slice sum of e^(l - m) (each invocation its rows
//            in order, then the workgroup's halving tree) into scan[4 + w], and every row with
//            e^(l - m) >= p.list_min (min-p, or with min-p off a floor: sample.wgsl then decides from
//            the list where top-p's cut falls inside it, else by its own full pass) listed (key, row) at scan[4 + groups + 2 slot], slot = atomicAdd of
//            scan[1] (only the first CAP are written; sample.wgsl gives the step to the host past that).
//   PHASE 2 (WebGpuTuning sample_scan_fused; the step's LM head has just written its chunk winners,
//            `partial`): PHASE 1 in one dispatch, with m the largest of the winners' keys instead of
//            PHASE 0's pass (a winner is its chunk's largest logit by value, ties to the lowest row).
//            Each workgroup still atomicMax'es its slice's largest key into scan[0] and writes the
//            key it took m from into scan[2]: where the two differ (NaN logits, which a chunk's
//            winner does not order; a maximum of 0 with both signs of zero) sample.wgsl discards the
//            list and makes its own passes, so the id is always PHASE 0 + 1's.
// sample.wgsl adds the slice sums in order (the total for top-p), sorts the list and walks it, and sets
// scan[0] and scan[1] back to 0 for the next step (a new buffer is zero).
//
//   logits: [n_vocab] f32 from p.logits_offset   scan: u32 [max key, count, (PHASE 2) m's key, 0,
//   slice sums [groups], then CAP (key, row) pairs]   partial: (PHASE 2) [n_partials] (value bits,
//   row; row 0xffffffff: none), the head's chunk winners (any buffer otherwise)
// Bindings: 0 logits (read), 1 scan (read_write), 2 partial (read), 3 params (uniform). Dispatch: (groups, 1, 1);
// workgroup w takes rows [w chunk, (w + 1) chunk), chunk = ceil(n_vocab / groups), invocation i its
// rows i, i + WG, ...

const WG: u32 = 256u;
const CAP: u32 = 1024u;  // sample.wgsl's
const NEG_INF_KEY: u32 = 0x007fffffu;
override PHASE: u32 = 0u;

struct Params {
    n_vocab: u32,
    logits_offset: u32,
    groups: u32,
    list_min: f32,
    n_partials: u32,  // (PHASE 2) the head's chunk winners
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> scan: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read> partial: array<vec2<u32>>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> red_u: array<u32, WG>;
var<workgroup> red_f: array<f32, WG>;

// As sample.wgsl's.
fn key_of(l: f32) -> u32 {
    var b = bitcast<u32>(l);
    let e = b & 0x7fffffffu;
    if (e > 0x7f800000u) { b = 0xff800000u; }
    if (b == 0x7f800000u) { b = 0x7f7fffffu; }
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn logit_of(k: u32) -> f32 {
    return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

fn mass(k: u32, m: f32) -> f32 {
    if (k <= NEG_INF_KEY) { return 0.0; }
    return exp((logit_of(k) - m) * 1.0);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let chunk = (p.n_vocab + p.groups - 1u) / p.groups;
    let lo    = min(wid.x * chunk, p.n_vocab);
    let hi    = min(lo + chunk, p.n_vocab);
    if (PHASE == 0u) {
        var mk = 0u;
        for (var v = lo + lid; v < hi; v += WG) { mk = max(mk, key_of(logits[p.logits_offset + v])); }
        red_u[lid] = mk;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if (lid < s) { red_u[lid] = max(red_u[lid], red_u[lid + s]); }
            workgroupBarrier();
        }
        if (lid == 0u) { atomicMax(&scan[0], red_u[0]); }
        return;
    }
    var mk = 0u;
    if (PHASE == 2u) {  // m from the head's chunk winners
        for (var i = lid; i < p.n_partials; i += WG) {
            let w = partial[i];
            if (w.y != 0xffffffffu) { mk = max(mk, key_of(bitcast<f32>(w.x))); }
        }
        mk = wg_max_u(lid, mk);
        if (wid.x == 0u && lid == 0u) { atomicStore(&scan[2], mk); }
    } else {
        mk = atomicLoad(&scan[0]);
    }
    let m  = logit_of(mk);
    var s  = 0.0;
    var sk = 0u;  // (PHASE 2) the slice's largest key
    if (mk > NEG_INF_KEY) {  // (else nothing has mass: sample.wgsl gives id 0)
        for (var v = lo + lid; v < hi; v += WG) {
            let key = key_of(logits[p.logits_offset + v]);
            sk = max(sk, key);
            let e   = mass(key, m);
            s += e;
            if (key > NEG_INF_KEY && e >= p.list_min) {
                let slot = atomicAdd(&scan[1], 1u);
                if (slot < CAP) {
                    atomicStore(&scan[4u + p.groups + 2u * slot], key);
                    atomicStore(&scan[5u + p.groups + 2u * slot], v);
                }
            }
        }
    }
    red_f[lid] = s;
    workgroupBarrier();
    for (var t = WG / 2u; t > 0u; t >>= 1u) {
        if (lid < t) { red_f[lid] = red_f[lid] + red_f[lid + t]; }
        workgroupBarrier();
    }
    if (lid == 0u) { atomicStore(&scan[4u + wid.x], bitcast<u32>(red_f[0])); }
    if (PHASE == 2u) {
        if (mk <= NEG_INF_KEY) {  // (the slice was not read: its largest key now)
            for (var v = lo + lid; v < hi; v += WG) { sk = max(sk, key_of(logits[p.logits_offset + v])); }
        }
        sk = wg_max_u(lid, sk);
        if (lid == 0u) { atomicMax(&scan[0], sk); }
    }
}

// The largest of the workgroup's u32s (every invocation calls it; red_u is free again after it).
fn wg_max_u(lid: u32, v: u32) -> u32 {
    red_u[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { red_u[lid] = max(red_u[lid], red_u[lid + s]); }
        workgroupBarrier();
    }
    let r = red_u[0];
    workgroupBarrier();
    return r;
}
