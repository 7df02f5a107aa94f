// attention_long_scores: the first kernel of one query's attention over a long context
// (webgpu_attention_long.cpp), the scaled scores of the G query heads of a KV head against every
// position, with attention_prefill_scores.wgsl's numerics: q rounded to f16 with an f16 K cache
// (products of two f16 values are exact in f32; an f32 cache rounds them, mul_rn), each block of
// 16 dimensions summed in order from 0, the block sums in order from 0 (cpu::dot_blocked16), then
// mul_rn by the scale:
//   s[kvh][j][pos] = (float)(q_(kvh G + j) · k_pos) * scale      for pos < n_pos
//
//   q: [n_head hd] f32   k_cache: [n_head_kv hd, n_ctx] f16 pairs or f32 (u32 words)
//   scores: [n_head_kv][G][ld] f32 (attention_prefill_softmax.wgsl's layout for one token)
// Bindings: 0 q (read), 1 k_cache (read), 2 scores (read_write), 3 params (uniform)
// Dispatch: (ceil(n_pos / TP), n_head_kv). Thread (position t / S, block t % S) loads its block of
// 16 K values straight into registers (the S threads of a position read its row's neighbouring
// words) and sums it against each of the G query rows staged in workgroup memory; the first G
// threads of a position then add its block sums in order. No tile is staged: a workgroup's loads
// are all issued at once, one round trip to memory.

// #include "lib/numerics.wgsl"

override WG: u32 = 256u;
override S: u32 = 8u;          // threads per position: head_dim's blocks of 16, rounded up to a power of two
override TP: u32 = WG / S;     // positions per workgroup
override HD: u32 = 128u;       // head_dim, a multiple of 4
override GROUP: u32 = 4u;      // G = n_head / n_head_kv
override K_F16: bool = true;
override NB: u32 = (HD + 15u) / 16u;  // blocks of 16 dimensions

struct Params {
    n_pos: u32,      // positions the query sees
    n_embd_kv: u32,  // cache elements per position
    q_offset: u32,   // f32 index of q[0]
    k_offset: u32,   // element index of k_cache[0, 0]
    ld: u32,         // f32 elements between score rows
    scale: f32,      // 1 / sqrt(head_dim)
    rn_zero: u32,    // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k_cache: array<u32>;
@group(0) @binding(2) var<storage, read_write> scores: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> q_s: array<f32, GROUP * HD>;   // [j][d], f16-rounded with an f16 cache
var<workgroup> blk_s: array<f32, GROUP * WG>;  // [j][thread]: the block sums

// a * b as the CPU rounds it: exact when both are f16 values (so contraction cannot change it).
fn prod(a: f32, b: f32) -> f32 {
    if (K_F16) { return a * b; }
    return mul_rn(a, b);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let kvh = wid.y;
    let pl  = lid / S;
    let b   = lid % S;
    let pos = wid.x * TP + pl;
    let mine = pos < p.n_pos && b < NB;

    // This thread's block of K first (its loads in flight while q is staged).
    var kb: array<f32, 16>;
    if (mine) {
        let e0 = p.k_offset + pos * p.n_embd_kv + kvh * HD + 16u * b;  // element index
        if (K_F16) {
            for (var w = 0u; w < 8u; w++) {
                if (16u * b + 2u * w < HD) {
                    let v = unpack2x16float(k_cache[e0 / 2u + w]);
                    kb[2u * w] = v.x;
                    kb[2u * w + 1u] = v.y;
                }
            }
        } else {
            for (var w = 0u; w < 16u; w++) {
                if (16u * b + w < HD) { kb[w] = bitcast<f32>(k_cache[e0 + w]); }
            }
        }
    }
    for (var i = lid; i < GROUP * HD; i += WG) {
        let v = q[p.q_offset + kvh * GROUP * HD + i];
        q_s[i] = select(v, round_f16(v), K_F16);
    }
    workgroupBarrier();

    for (var j = 0u; j < GROUP; j++) {
        var s = 0.0;
        if (mine) {
            for (var d = 0u; d < 16u; d++) {
                if (16u * b + d < HD) { s = s + prod(q_s[j * HD + 16u * b + d], kb[d]); }
            }
        }
        blk_s[j * WG + lid] = s;
    }
    workgroupBarrier();

    if (pos < p.n_pos) {
        for (var j = b; j < GROUP; j += S) {
            var acc = 0.0;
            for (var bb = 0u; bb < NB; bb++) { acc = acc + blk_s[j * WG + pl * S + bb]; }
            scores[(kvh * GROUP + j) * p.ld + pos] = mul_rn(acc, p.scale);  // not fused into s - max
        }
    }
}
