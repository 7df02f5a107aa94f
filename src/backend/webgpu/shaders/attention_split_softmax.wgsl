// attention_split_softmax: the second split attention kernel (webgpu_attention_split.cpp): per
// column, KV head and chunk of CH positions of a row of at most 512 positions (one superblock: the
// host takes no longer rows, which are in issue 52's block order), the row's max m from the scores
// kernel's workgroup maxima (max is exact in any order), e = exp_fixed(s - m) in place of the scores,
// and the sums of each block of 32 positions in order from 0 (the inner level of cpu::sum_positions's
// order):
//   m[j]                        = max of wmax[t][kvh][j][w] over the scores workgroups w of the column
//   e[t][kvh][j][pos]           = exp_fixed(scores[..][pos] - m[j])
//   bsum[t][kvh][j][pos / 32]   = ((0 + e[32 b]) + e[32 b + 1]) + ...   (the block's positions the column sees)
//
// Bindings: 0 cols, 1 pages, 2 wmax (read); 3 scores (read_write: e), 4 bsum (read_write); 5 params
// Dispatch: (ceil(n_max / CH), n_head_kv, T); workgroups past their column's positions return.

// #include "lib/numerics.wgsl"
// #include "lib/kv_pages.wgsl"

override WG: u32 = 256u;     // a power of two >= GROUP * CH / 4 (so >= GROUP * CH / 32)
override CH: u32 = 256u;     // positions per workgroup, a multiple of 32 up to 512
override GROUP: u32 = 4u;    // G = n_head / n_head_kv, at most 16
override GP2: u32 = 4u;      // GROUP rounded up to a power of two

struct Params {
    ld: u32,            // f32 elements between score rows
    wmax_ld: u32,       // f32 elements between rows of wmax
    bsum_ld: u32,       // f32 elements between rows of bsum
    n_head_kv: u32,
    tp: u32,            // positions per workgroup of the scores kernel
    pos0: u32,          // without PAGED: position of column 0
    max_pages: u32,
    cols_offset: u32,
    pages_offset: u32,
    rn_zero: u32,       // 0, filled by the encoder (lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> cols: array<i32>;
@group(0) @binding(1) var<storage, read> pages: array<i32>;
@group(0) @binding(2) var<storage, read> wmax: array<f32>;
@group(0) @binding(3) var<storage, read_write> scores: array<f32>;
@group(0) @binding(4) var<storage, read_write> bsum: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> e_s: array<f32, GROUP * CH>;  // [j][position in the chunk]
var<workgroup> mx_s: array<f32, 16>;         // [j]
var<workgroup> red_s: array<f32, WG>;        // [j][SEG]: the maxima's tree
override SEG: u32 = WG / GP2;                // threads per head's max (GP2: GROUP rounded up to a power of two)

const NEG_MAX: u32 = 0xff7fffffu;  // -FLT_MAX (as attention.wgsl starts its max), as bits

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let t   = wid.z;
    let kvh = wid.y;
    let col = kv_column_uniform(lid, t);
    let n   = col.pos + 1u;
    let c0  = wid.x * CH;
    if (c0 >= n) { return; }
    let n_w  = (n + p.tp - 1u) / p.tp;  // the scores kernel's workgroups of this column
    let row0 = (t * p.n_head_kv + kvh) * GROUP;
    let c_n  = min(CH, n - c0);
    // This thread's scores first (their loads in flight while the maxima are reduced).
    var sv: array<f32, 4>;  // (GROUP CH <= 4 WG: webgpu_attention_split.cpp)
    for (var u = 0u; u < (GROUP * CH + WG - 1u) / WG; u++) {
        let i = lid + u * WG;
        if (i < GROUP * CH && i % CH < c_n) { sv[u] = scores[(row0 + i / CH) * p.ld + c0 + i % CH]; }
    }
    // The G maxima in one tree: thread lid reduces for head lid / SEG (segments of SEG threads).
    {
        let j = lid / SEG;
        let i0 = lid % SEG;
        var m = bitcast<f32>(NEG_MAX);
        if (j < GROUP) {
            for (var i = i0; i < n_w; i += SEG) { m = max(m, wmax[(row0 + j) * p.wmax_ld + i]); }
        }
        red_s[lid] = m;
        workgroupBarrier();
        for (var h = SEG / 2u; h > 0u; h >>= 1u) {
            if (i0 < h) { red_s[lid] = max(red_s[lid], red_s[lid + h]); }
            workgroupBarrier();
        }
        if (lid < GROUP) { mx_s[lid] = red_s[lid * SEG]; }
        workgroupBarrier();
    }
    for (var u = 0u; u < (GROUP * CH + WG - 1u) / WG; u++) {
        let i = lid + u * WG;
        let j = i / CH;
        let k = i % CH;
        if (i < GROUP * CH && k < c_n) {
            let e = exp_fixed(sv[u] - mx_s[j]);
            scores[(row0 + j) * p.ld + c0 + k] = e;
            e_s[i] = e;
        } else if (i < GROUP * CH) {
            e_s[i] = 0.0;  // past the column's positions: +0, which leaves a block sum's bits as they are
        }
    }
    workgroupBarrier();
    let nb = (c_n + 31u) / 32u;
    if (lid < GROUP * (CH / 32u)) {
        let j = lid / (CH / 32u);
        let b = lid % (CH / 32u);
        if (b < nb) {
            var s = 0.0;
            for (var k = 0u; k < 32u; k++) { s = s + e_s[j * CH + 32u * b + k]; }
            bsum[(row0 + j) * p.bsum_ld + c0 / 32u + b] = s;
        }
    }
}
