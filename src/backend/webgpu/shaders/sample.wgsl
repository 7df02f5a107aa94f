// sample: the sampler chain after the penalties (sampler_stages.h: top-k -> top-p -> min-p ->
// temperature -> draw) on one token's logits, in one workgroup, so that sampled decoding keeps its
// tokens on the device as greedy decoding does (Backend::sample). The random number comes from the
// host (the CPU sampler's own stream), so the CPU and the device draw with the same u.
//
//   logits: [n_vocab] f32 from p.logits_offset      u: [..] f32, u[p.u_offset] in [0, 1)
//   ids:    ids[p.id_offset] = the chosen id, or -1 when the candidates do not fit CAP (the caller
//           picks that step on the host)
// Bindings: 0 logits (read), 1 u (read), 2 ids (read_write), 3 list (read_write), 4 params (uniform).
// Dispatch: (1, 1, 1).
//
// Logits are read as the CPU sampler reads them: NaN as -inf, +inf as the largest finite float.
// Candidate order: higher logit first, lower id first on ties (candidate_before). Two forms:
//   * sorted (top_k > 0 or top_p < 1): the candidates that can survive the cuts - the top_k largest
//     (radix select on the order-preserving key), or with top-k off the rows that digit_pass min-p (or,
//     with min-p off too, the CAP largest) - are compacted into workgroup memory, sorted (bitonic),
//     and invocation 0 walks them as the CPU does: top-p's cumulative mass, min-p's prefix, the draw;
//   * id order (no top-k, no top-p): the draw walks the whole vocabulary in id order (min-p as a
//     weight of 0), each invocation one contiguous chunk, the chunks' sums added in order.
// With p.list != 0 (a top-k chain after argmax_exact.wgsl's TOP_K head) the candidates come from
// that head's list instead: list[0] rows (row, value bits) at list[2 + 2 i], every row that can be
// among the top k (the others are -inf in `logits`), so no pass over the vocabulary is needed; the
// sorted form then runs on them as on the rows the radix select would have found (the same keys,
// the same order, the same walk). More rows than CAP, or none: the scan below. The kernel sets
// list[0] back to 0 for the next step's head.
// Arithmetic is f32 (the CPU's is f64, with its own exp): the choices agree except where a decision
// of the CPU is within ~1e-4 (relative) of flipping; tests/backend/webgpu_sample_test.cpp bounds it.

const WG: u32 = 256u;
const CAP: u32 = 1024u;  // candidates the sorted form holds (8 KiB)
const NEG_INF_KEY: u32 = 0x007fffffu;  // key(-inf)

struct Params {
    n_vocab: u32,
    logits_offset: u32,
    id_offset: u32,
    u_offset: u32,
    top_k: u32,     // 0: off (also when >= n_vocab)
    top_p: f32,     // >= 1: off
    min_p: f32,     // 0: off
    inv_temp: f32,  // 1 / temp (temp > 0)
    list: u32,      // 1: the candidates are argmax_exact.wgsl's TOP_K list (top_k > 0)
    scan: u32,      // 1: sample_scan.wgsl's maximum, slice sums and list are in `list` (top-k off,
                    //    top-p on); 2: the same from its PHASE 2, whose m must be the maximum
    groups: u32,    // sample_scan.wgsl's workgroups (its slice sums; at most CAP)
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read> uni: array<f32>;
@group(0) @binding(2) var<storage, read_write> ids: array<i32>;
@group(0) @binding(3) var<storage, read_write> list: array<u32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> cand_key: array<u32, CAP>;
var<workgroup> cand_id: array<u32, CAP>;
var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> red_u: array<u32, WG>;
var<workgroup> red_f: array<f32, WG>;
var<workgroup> n_cand: atomic<u32>;
var<workgroup> shared_u: u32;   // broadcast slot (keys, counts)
var<workgroup> shared_f: f32;   // broadcast slot (sums)
var<workgroup> cand_w: array<f32, CAP>;  // the sorted candidates' weights (walk_sorted)

// Order-preserving key of a logit as the CPU reads it (NaN -> -inf, +inf -> FLT_MAX).
fn key_of(l: f32) -> u32 {
    var b = bitcast<u32>(l);
    let e = b & 0x7fffffffu;
    if (e > 0x7f800000u) { b = 0xff800000u; }                      // NaN -> -inf
    if (b == 0x7f800000u) { b = 0x7f7fffffu; }                     // +inf -> FLT_MAX
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn logit_of(k: u32) -> f32 {
    return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

fn key_at(v: u32) -> u32 { return key_of(logits[p.logits_offset + v]); }

// e^(l - m) for a finite m; 0 for -inf rows.
fn mass(k: u32, m: f32, scale: f32) -> f32 {
    if (k <= NEG_INF_KEY) { return 0.0; }
    return exp((logit_of(k) - m) * scale);
}

fn reduce_max_u(lid: u32, v: u32) -> u32 {
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

fn reduce_sum_f(lid: u32, v: f32) -> f32 {
    red_f[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { red_f[lid] = red_f[lid] + red_f[lid + s]; }
        workgroupBarrier();
    }
    let r = red_f[0];
    workgroupBarrier();
    return r;
}

// The key of the k-th largest of all keys (1 <= k <= n_vocab): four passes of 8-bit digits.
fn select_kth(lid: u32, k: u32) -> u32 {
    var prefix = 0u;
    var left   = k;  // rank still to find among keys matching prefix in the digits done
    for (var digit_pass = 0u; digit_pass < 4u; digit_pass++) {
        let shift = 24u - 8u * digit_pass;
        let hi_mask = select(0xffffffffu << (shift + 8u), 0u, digit_pass == 0u);
        atomicStore(&hist[lid], 0u);
        workgroupBarrier();
        // Runs of one digit are counted in a register and added once: most keys share their top
        // digits (one exponent), and an add per key to one bin serialized the workgroup (~450 us
        // for a top-k 40 over 128k rows on an H200).
        var run_digit = 0u;
        var run_n     = 0u;
        for (var v = lid; v < p.n_vocab; v += WG) {
            let key = key_at(v);
            if ((key & hi_mask) == prefix) {
                let d = (key >> shift) & 0xffu;
                if (d != run_digit && run_n > 0u) {
                    atomicAdd(&hist[run_digit], run_n);
                    run_n = 0u;
                }
                run_digit = d;
                run_n += 1u;
            }
        }
        if (run_n > 0u) { atomicAdd(&hist[run_digit], run_n); }
        workgroupBarrier();
        if (lid == 0u) {
            var d = 255i;
            loop {
                let c = atomicLoad(&hist[u32(d)]);
                if (c >= left || d == 0i) { break; }
                left -= c;
                d -= 1i;
            }
            shared_u = prefix | (u32(d) << shift);
            red_u[0] = left;
        }
        workgroupBarrier();
        prefix = shared_u;
        left   = red_u[0];
        workgroupBarrier();
    }
    return prefix;
}

fn before(ka: u32, ia: u32, kb: u32, ib: u32) -> bool { return ka > kb || (ka == kb && ia < ib); }

// Sorts cand_* [0, n2) best first (n2 a power of two; unused slots hold key 0, which sorts last).
fn sort_candidates(lid: u32, n2: u32) {
    for (var k = 2u; k <= n2; k <<= 1u) {
        for (var j = k >> 1u; j > 0u; j >>= 1u) {
            for (var i = lid; i < n2; i += WG) {
                let o = i ^ j;
                if (o > i) {
                    let a_first = (i & k) == 0u;  // this block sorts best first, else best last
                    let ka = cand_key[i];
                    let kb = cand_key[o];
                    let ia = cand_id[i];
                    let ib = cand_id[o];
                    if (before(kb, ib, ka, ia) == a_first) {
                        cand_key[i] = kb;
                        cand_key[o] = ka;
                        cand_id[i]  = ib;
                        cand_id[o]  = ia;
                    }
                }
            }
            workgroupBarrier();
        }
    }
}

// The walk over the sorted candidates [0, n), as the CPU walks them: top-p's cumulative mass,
// min-p's prefix, the draw. total_all: the whole vocabulary's mass (top-p with top-k off). Every
// invocation calls it (the weights are computed in parallel into cand_w, the same values a serial
// walk computes; the sums and cuts are invocation 0's, in order). Returns (in invocation 0) the index
// picked, or -1 when the cut lies past the list.
fn walk_sorted(lid: u32, n_in: u32, m: f32, total_all: f32, complete: bool) -> i32 {
    var n = n_in;
    if (p.top_k > 0u) { n = min(n, p.top_k); }
    for (var i = lid; i < n; i += WG) { cand_w[i] = mass(cand_key[i], m, 1.0); }
    workgroupBarrier();
    if (lid == 0u) {
        var cut = n;  // 0xffffffff: past the list
        if (p.top_p < 1.0 && n > 1u) {
            var total = total_all;
            if (p.top_k > 0u) {
                total = 0.0;
                for (var i = 0u; i < n; i++) { total += cand_w[i]; }
            }
            let goal  = p.top_p * total;
            var cum   = 0.0;
            var found = false;
            for (var i = 0u; i < n; i++) {
                cum += cand_w[i];
                if (cum >= goal) {
                    cut   = i + 1u;
                    found = true;
                    break;
                }
            }
            // Past the list: the CPU's cut is further down. That is the whole list when the list is
            // the top-k, or every row min-p keeps (min-p then cuts at the list's end), or every row.
            if (!found && p.top_k == 0u && p.min_p <= 0.0 && !complete) { cut = 0xffffffffu; }
        }
        if (cut != 0xffffffffu && p.min_p > 0.0) {
            var kept = 0u;
            for (var i = 0u; i < cut; i++) {
                if (cand_w[i] >= p.min_p) { kept = i + 1u; } else { break; }
            }
            cut = max(kept, 1u);
        }
        shared_u = cut;
    }
    n = workgroupUniformLoad(&shared_u);
    if (n == 0xffffffffu) { return -1i; }
    if (n <= 1u) { return 0i; }
    for (var i = lid; i < n; i += WG) { cand_w[i] = mass(cand_key[i], m, p.inv_temp); }
    workgroupBarrier();
    if (lid != 0u) { return 0i; }
    var total = 0.0;
    for (var i = 0u; i < n; i++) { total += cand_w[i]; }
    let goal = uni[p.u_offset] * total;
    var cum  = 0.0;
    var last = 0u;
    for (var i = 0u; i < n; i++) {
        let w = cand_w[i];
        if (w == 0.0) { continue; }
        cum += w;
        last = i;
        if (cum > goal) { return i32(i); }
    }
    return i32(last);
}

// Loads n_cand (key, row) pairs from list[at + 2 i] into cand_*, pads them to a power of two and
// sorts them best first. Every invocation calls it.
fn load_and_sort(lid: u32, nl: u32, at: u32) {
    for (var i = lid; i < nl; i += WG) {
        cand_key[i] = list[at + 2u * i];
        cand_id[i]  = list[at + 2u * i + 1u];
    }
    pad_and_sort(lid, nl);
}

// Pads the nl candidates in cand_* to a power of two (keys 0, rows none) and sorts them best first.
// Every invocation calls it.
fn pad_and_sort(lid: u32, nl: u32) {
    var n2 = 1u;
    while (n2 < nl) { n2 <<= 1u; }
    for (var i = nl + lid; i < n2; i += WG) {
        cand_key[i] = 0u;
        cand_id[i]  = 0xffffffffu;
    }
    workgroupBarrier();
    sort_candidates(lid, n2);
}

// The id from sample_scan.wgsl's maximum, slice sums and list (the rows with mass >= min-p, or with
// min-p off >= its floor): >= 0, -1 (the host picks the step), or -2 where the list cannot decide
// (min-p off, and the top-p cut past the rows listed, or more of them than CAP): then the full pass
// decides. Resets the scan's maximum and count for the next step. Uniform; every invocation calls it.
fn scan_pick(lid: u32) -> i32 {
    if (lid == 0u) {
        red_u[0] = list[0];
        red_u[1] = list[1];
        red_u[2] = list[2];
    }
    workgroupBarrier();
    let sk = red_u[0];
    let sn = red_u[1];
    // (scan 2: the key m was taken from, which must be the maximum, else the full pass decides)
    let same = p.scan != 2u || red_u[2] == sk;
    workgroupBarrier();
    if (lid == 0u) {
        list[0]  = 0u;  // (for the next step's scan)
        list[1]  = 0u;
        shared_u = select(1u, 0u, same);
    }
    if (workgroupUniformLoad(&shared_u) != 0u) { return -2i; }
    if (lid == 0u) { shared_u = sk; }
    let mk = workgroupUniformLoad(&shared_u);
    if (lid == 0u) { shared_u = sn; }
    let n = workgroupUniformLoad(&shared_u);
    if (mk <= NEG_INF_KEY) { return 0i; }  // no mass: id 0, as the CPU
    let fallback = select(-1i, -2i, p.min_p <= 0.0);
    if (n > CAP) { return fallback; }
    // The slice sums (p.groups <= CAP) staged in cand_w by every invocation (free until walk_sorted),
    // then added in order by invocation 0 from workgroup memory: H200 `sample` 16.7 vs 22.2 us per token
    // with invocation 0 reading each from `list` (the same sum).
    for (var w = lid; w < p.groups; w += WG) { cand_w[w] = bitcast<f32>(list[4u + w]); }
    workgroupBarrier();
    if (lid == 0u) {
        var total = 0.0;  // the slices in order
        for (var w = 0u; w < p.groups; w++) { total += cand_w[w]; }
        shared_f = total;
    }
    let total_all = workgroupUniformLoad(&shared_f);
    load_and_sort(lid, n, 4u + p.groups);
    let at = walk_sorted(lid, n, logit_of(mk), total_all, false);
    if (lid == 0u) { shared_u = bitcast<u32>(select(fallback, i32(cand_id[u32(max(at, 0i))]), at >= 0i)); }
    return bitcast<i32>(workgroupUniformLoad(&shared_u));
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    let nv = p.n_vocab;
    if (p.list != 0u) {
        if (lid == 0u) { shared_u = list[0]; }
        let nl = workgroupUniformLoad(&shared_u);
        if (lid == 0u) { list[0] = 0u; }  // (every invocation has nl)
        if (nl >= 1u && nl <= CAP) {
            var lk = 0u;
            for (var i = lid; i < nl; i += WG) {
                let key = key_of(bitcast<f32>(list[3u + 2u * i]));
                cand_key[i] = key;
                cand_id[i]  = list[2u + 2u * i];
                lk = max(lk, key);
            }
            lk = reduce_max_u(lid, lk);  // (its barriers publish cand_*)
            if (lid == 0u) { shared_u = lk; }
            lk = workgroupUniformLoad(&shared_u);  // (uniform: the return below skips barriers)
            if (lk <= NEG_INF_KEY) {
                if (lid == 0u) { ids[p.id_offset] = 0i; }
                return;
            }
            pad_and_sort(lid, nl);
            let at = walk_sorted(lid, nl, logit_of(lk), 0.0, false);
            if (lid == 0u) { ids[p.id_offset] = select(-1i, i32(cand_id[u32(max(at, 0i))]), at >= 0i); }
            return;
        }
    }
    if (p.scan != 0u) {
        let r = scan_pick(lid);
        if (r != -2i) {
            if (lid == 0u) { ids[p.id_offset] = r; }
            return;
        }
    }
    var mk = 0u;
    for (var v = lid; v < nv; v += WG) { mk = max(mk, key_at(v)); }
    mk = reduce_max_u(lid, mk);
    if (lid == 0u) { shared_u = mk; }
    mk = workgroupUniformLoad(&shared_u);  // (uniform: the returns below skip barriers)
    if (mk <= NEG_INF_KEY) {  // every logit is -inf (or NaN): nothing has mass; the CPU gives id 0
        if (lid == 0u) { ids[p.id_offset] = 0i; }
        return;
    }
    let m = logit_of(mk);

    if (p.top_k == 0u && p.top_p >= 1.0) {
        // Id order: invocation lid owns ids [lo, hi); weights e^((l - m) / temp), 0 below min-p.
        let chunk = (nv + WG - 1u) / WG;
        let lo    = min(lid * chunk, nv);
        let hi    = min(lo + chunk, nv);
        var s     = 0.0;
        for (var v = lo; v < hi; v++) {
            let key = key_at(v);
            if (p.min_p > 0.0 && mass(key, m, 1.0) < p.min_p) { continue; }
            s += mass(key, m, p.inv_temp);
        }
        red_f[lid] = s;
        workgroupBarrier();
        if (lid == 0u) {
            var total = 0.0;
            for (var t = 0u; t < WG; t++) { total += red_f[t]; }
            let goal = uni[p.u_offset] * total;
            var cum    = 0.0;
            var owner  = 0u;
            var found  = false;
            for (var t = 0u; t < WG; t++) {
                if (red_f[t] == 0.0) { continue; }
                owner = t;  // the last chunk with mass, if rounding never crosses
                if (cum + red_f[t] > goal) {
                    found = true;
                    break;
                }
                cum += red_f[t];
            }
            shared_u = owner;
            shared_f = select(-1.0, goal - cum, found);  // what is left to cross in the owner's chunk
        }
        workgroupBarrier();
        if (lid == shared_u) {
            let left = shared_f;
            var cum  = 0.0;
            var last = lo;
            var pick = 0xffffffffu;
            for (var v = lo; v < hi; v++) {
                let key = key_at(v);
                if (p.min_p > 0.0 && mass(key, m, 1.0) < p.min_p) { continue; }
                let w = mass(key, m, p.inv_temp);
                if (w == 0.0) { continue; }
                cum += w;
                last = v;
                if (left >= 0.0 && cum > left) {
                    pick = v;
                    break;
                }
            }
            ids[p.id_offset] = i32(select(last, pick, pick != 0xffffffffu));
        }
        return;
    }

    // Sorted: which rows are candidates.
    var thr = 0u;              // key threshold: rows with key >= thr
    var use_min_p = false;     // rows must also digit_pass min-p
    if (p.top_k > 0u) {
        thr = select_kth(lid, p.top_k);
    } else if (p.min_p > 0.0) {
        use_min_p = true;
    } else {
        thr = select_kth(lid, min(CAP, nv));
    }
    // One pass lists the candidates and, with top-k off, sums every row's mass for top-p (each
    // invocation's rows in the same order as a pass of its own would add them).
    if (lid == 0u) { atomicStore(&n_cand, 0u); }
    workgroupBarrier();
    var s = 0.0;
    for (var v = lid; v < nv; v += WG) {
        let key = key_at(v);
        var e   = 0.0;  // mass at temperature 1 (needed with top-k off only)
        if (p.top_k == 0u) {
            e = mass(key, m, 1.0);
            s += e;
        }
        if (key < thr || key <= NEG_INF_KEY) { continue; }
        if (use_min_p && e < p.min_p) { continue; }
        let slot = atomicAdd(&n_cand, 1u);
        if (slot < CAP) {
            cand_key[slot] = key;
            cand_id[slot]  = v;
        }
    }
    var total_all = 0.0;
    if (p.top_k == 0u) { total_all = reduce_sum_f(lid, s); }  // (uniform: p is)
    workgroupBarrier();
    if (lid == 0u) { shared_u = atomicLoad(&n_cand); }
    let n = workgroupUniformLoad(&shared_u);
    if (n > CAP) {  // more than the list holds: the host picks this step
        if (lid == 0u) { ids[p.id_offset] = -1i; }
        return;
    }
    var n2 = 1u;
    while (n2 < n) { n2 <<= 1u; }
    for (var i = n + lid; i < n2; i += WG) {
        cand_key[i] = 0u;
        cand_id[i]  = 0xffffffffu;
    }
    workgroupBarrier();
    sort_candidates(lid, n2);
    // complete: the list holds every finite row (with top-k and min-p off).
    let complete = p.top_k == 0u && !use_min_p && (nv <= CAP || n < CAP);
    let at       = walk_sorted(lid, n, m, total_all, complete);
    if (lid == 0u) { ids[p.id_offset] = select(-1i, i32(cand_id[u32(max(at, 0i))]), at >= 0i); }
}
