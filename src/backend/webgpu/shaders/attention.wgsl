// attention: causal GQA attention of T queries at positions pos0 + t over the KV cache positions
// [0, pos0 + t], in the CPU reference's order of operations (CpuBackend::attention): scores
// q·k (double-float) * scale, max, exp, sum (double-float), p = e * (1 / sum), p rounded to f16 when
// V is f16, out = sum_p p v (double-float). q is rounded to f16 first when K is f16. Only exp differs
// from the CPU's std::exp by an ulp here and there.
//
//   q: [n_head hd, T] f32   k_cache, v_cache: [n_head_kv hd, n_ctx] f16 pairs or f32 (u32 words)
//   out: [n_head hd, T] f32
// Bindings: 0 q (read), 1 k_cache (read), 2 v_cache (read), 3 out (read_write), 4 params (uniform)
// Dispatch: (n_head, T, 1). One workgroup per (head, token), three passes (max, sum, weighted sum).
// Up to SC_MAX positions the scores, then exp(score - max), stay in workgroup memory; beyond that
// they are recomputed in each pass, so any context length works. The last pass stages CHUNK
// probabilities at a time. With f16 K (V) the products q·k (p·v) are exact in f32 (11-bit
// significands), so only the f32 cache needs the error-free two_prod.

// #include "lib/numerics.wgsl"

override WG: u32 = 64u;       // a power of two, >= head_dim / 4
override K_F16: bool = true;
override V_F16: bool = true;
override CHUNK: u32 = 256u;
override HD_MAX: u32 = 256u;
override SC_MAX: u32 = 2048u;

struct Params {
    head_dim: u32,
    n_head: u32,
    n_head_kv: u32,
    n_tokens: u32,
    pos0: u32,
    n_embd_kv: u32,   // cache elements per position
    q_offset: u32,    // f32 index of q[0, 0]
    q_stride: u32,
    out_offset: u32,  // f32 index of out[0, 0]
    out_stride: u32,
    k_offset: u32,    // element index of k_cache[0, 0]
    v_offset: u32,    // element index of v_cache[0, 0]
    scale: f32,       // 1 / sqrt(head_dim)
    rn_zero: u32,     // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k_cache: array<u32>;
@group(0) @binding(2) var<storage, read> v_cache: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> qh: array<f32, HD_MAX>;
var<workgroup> probs: array<f32, CHUNK>;
var<workgroup> sc: array<f32, SC_MAX>;  // scores, then exp(score - max), when n <= SC_MAX
var<workgroup> red_sum: array<vec2<f32>, WG>;
var<workgroup> red_max: array<f32, WG>;

fn k_at(e: u32) -> f32 {
    if (K_F16) {
        let i = p.k_offset + e;
        return unpack2x16float(k_cache[i / 2u])[i & 1u];
    }
    return bitcast<f32>(k_cache[p.k_offset + e]);
}

fn v_at(e: u32) -> f32 {
    if (V_F16) {
        let i = p.v_offset + e;
        return unpack2x16float(v_cache[i / 2u])[i & 1u];
    }
    return bitcast<f32>(v_cache[p.v_offset + e]);
}

// (float)(q · k[pos]) * scale, the dot in double-float.
fn score(pos: u32, kv_base: u32) -> f32 {
    var acc = vec2<f32>(0.0, 0.0);
    let e0  = pos * p.n_embd_kv + kv_base;
    for (var d = 0u; d < p.head_dim; d++) {
        if (K_F16) {
            acc = df_add_f(acc, qh[d] * k_at(e0 + d));  // exact product of two f16 values
        } else {
            acc = df_fma(acc, qh[d], k_at(e0 + d));
        }
    }
    return mul_rn(df_to_f32(acc), p.scale);  // not fused into score - max
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let h       = wid.x;
    let t       = wid.y;
    let hd      = p.head_dim;
    let kvh     = h / (p.n_head / p.n_head_kv);
    let kv_base = kvh * hd;
    let n       = p.pos0 + t + 1u;  // causal: positions 0 ..= pos0 + t
    let qo      = p.q_offset + t * p.q_stride + h * hd;
    for (var d = lid; d < hd; d += WG) {
        let v = q[qo + d];
        qh[d] = select(v, round_f16(v), K_F16);
    }
    workgroupBarrier();

    let cached = n <= SC_MAX;

    // Pass 1: the largest score.
    var m = bitcast<f32>(0xff7fffffu);
    var any = false;
    for (var i = lid; i < n; i += WG) {
        let sv = score(i, kv_base);
        if (cached) { sc[i] = sv; }
        m = max(m, sv);
        any = true;
    }
    red_max[lid] = select(bitcast<f32>(0xff7fffffu), m, any);
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { red_max[lid] = max(red_max[lid], red_max[lid + s]); }
        workgroupBarrier();
    }
    let mx = red_max[0];

    // Pass 2: sum of exp(score - max) in double-float.
    var acc = vec2<f32>(0.0, 0.0);
    for (var i = lid; i < n; i += WG) {
        var sv: f32;
        if (cached) { sv = sc[i]; } else { sv = score(i, kv_base); }
        let e = exp_rn(sv - mx);
        if (cached) { sc[i] = e; }
        acc = df_add_f(acc, e);
    }
    red_sum[lid] = acc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { red_sum[lid] = df_add(red_sum[lid], red_sum[lid + s]); }
        workgroupBarrier();
    }
    let inv = df_recip(red_sum[0]);

    // Pass 3: out[d] = sum_p prob(p) v[p][d]; thread lid owns dimensions lid, lid + WG, ... (<= 4).
    var o: array<vec2<f32>, 4>;
    for (var c0 = 0u; c0 < n; c0 += CHUNK) {
        let c_n = min(CHUNK, n - c0);
        workgroupBarrier();
        for (var i = lid; i < c_n; i += WG) {
            var e: f32;
            if (cached) { e = sc[c0 + i]; } else { e = exp_rn(score(c0 + i, kv_base) - mx); }
            let pr = e * inv;
            probs[i] = select(pr, round_f16(pr), V_F16);
        }
        workgroupBarrier();
        for (var k = 0u; k < 4u; k++) {
            let d = lid + k * WG;
            if (d < hd) {
                var a = o[k];
                for (var i = 0u; i < c_n; i++) {
                    let v = v_at((c0 + i) * p.n_embd_kv + kv_base + d);
                    if (V_F16) {
                        a = df_add_f(a, probs[i] * v);  // exact: both are f16 values
                    } else {
                        a = df_fma(a, probs[i], v);
                    }
                }
                o[k] = a;
            }
        }
    }
    let oo = p.out_offset + t * p.out_stride + h * hd;
    for (var k = 0u; k < 4u; k++) {
        let d = lid + k * WG;
        if (d < hd) { out[oo + d] = df_to_f32(o[k]); }
    }
}
