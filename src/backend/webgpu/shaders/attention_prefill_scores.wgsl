// attention_prefill_scores: the first of the prompt-attention kernels (webgpu_attention_prefill.cpp),
// the scaled scores of every query row against every cache position it may see:
//   s[kvh][r][pos] = (float)(q_r · k_pos) * scale    for pos <= pos0 + t,   r = t G + j
// where query row r is token t and head h = kvh G + j (the G = n_head / n_head_kv query heads of
// KV head kvh are neighbouring rows, so the causal edge moves by one position per G rows). The
// numerics are attention.wgsl's score(): q rounded to f16 first with an f16 K cache (products of two
// f16 values are exact in f32; an f32 cache rounds them, mul_rn), summed in cpu::dot_blocked16's
// order (each block of 16 dimensions in order, the block sums in order), then mul_rn by the scale.
//
//   q: [n_head hd, T] f32   k_cache: [n_head_kv hd, n_ctx] f16 pairs or f32 (u32 words)
//   scores: [n_head_kv][T G][ld] f32 (positions past a row's causal edge are not written)
// Bindings: 0 q (read), 1 k_cache (read), 2 scores (read_write), 3 params (uniform)
// Dispatch: (ceil((pos0 + T) / BP), ceil(T G / BR), n_head_kv). A workgroup owns BR rows x BP
// positions of one KV head (workgroups wholly past the causal edge return at once) and walks the
// head dimension in chunks of DC:
//   1. the chunk's BR x DC query values and BP x DC key values are loaded coalesced (neighbouring
//      threads on neighbouring elements), converted to f32 (q rounded to f16 with an f16 cache) and
//      stored as vec4s of 4 dimensions, rows padded to DC + 4 floats so that the 8 vec4 loads of a
//      quarter warp (rows r .. r + 7) fall on 8 different 16-byte bank groups;
//   2. thread (tr, tp) keeps the sums of rows tr + NR i x positions tp + NP j (i, j < 4), a block
//      sum and a total each: per 4 dimensions, 4 + 4 vec4 loads feed 64 products and sums.
// So each K row is read from global memory once per BR query rows (the K/V traffic of attention.wgsl,
// one workgroup per query, falls by that factor) and every loaded value serves 4 sums.

// #include "lib/numerics.wgsl"

const TI = 4u;  // rows per thread
const TJ = 4u;  // positions per thread

override K_F16: bool = true;
override BR: u32 = 64u;              // query rows per workgroup (a multiple of TI)
override BP: u32 = 64u;              // positions per workgroup (a multiple of TJ)
override DC: u32 = 32u;              // head dimensions per staged chunk (a multiple of 16)
override NR: u32 = BR / TI;          // threads along rows
override NP: u32 = BP / TJ;          // threads along positions
override WG: u32 = NR * NP;
override LDV: u32 = DC / 4u + 1u;    // vec4s per staged row (one of padding)
override GROUP: u32 = 1u;  // G = n_head / n_head_kv (= Params.group; a constant, for the divisions by it)

struct Params {
    head_dim: u32,
    group: u32,       // G = n_head / n_head_kv (the kernel divides by the override GROUP)
    n_rows: u32,      // T G
    pos0: u32,        // position of token 0
    n_pos: u32,       // pos0 + T: positions in the cache that this step may see
    n_embd_kv: u32,   // cache elements per position
    q_offset: u32,    // f32 index of q[0, 0]
    q_stride: u32,    // f32 elements between tokens of q
    k_offset: u32,    // element index of k_cache[0, 0]
    ld: u32,          // f32 elements between score rows (>= n_pos)
    scale: f32,       // 1 / sqrt(head_dim)
    rn_zero: u32,     // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k_cache: array<u32>;
@group(0) @binding(2) var<storage, read_write> scores: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> q_tile: array<vec4<f32>, BR * LDV>;  // [row][dimension / 4], padded
var<workgroup> k_tile: array<vec4<f32>, BP * LDV>;  // [position][dimension / 4], padded

// a * b as the CPU rounds it: exact when both are f16 values (so contraction cannot change it).
fn prod(a: f32, b: f32) -> f32 {
    if (K_F16) { return a * b; }
    return mul_rn(a, b);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let p0  = wid.x * BP;
    let r0  = wid.y * BR;
    let kvh = wid.z;
    let hd  = p.head_dim;
    // The last token of the row block sees positions up to pos0 + t_last.
    let t_last = (min(r0 + BR, p.n_rows) - 1u) / GROUP;
    if (p0 > p.pos0 + t_last) { return; }  // the whole tile is past the causal edge (uniform)

    let tr = lid / NP;
    let tp = lid % NP;
    var acc: array<f32, 16>;  // [i * TJ + j]: the sums of the finished blocks of 16 dimensions
    var blk: array<f32, 16>;  // the current block's

    let kv_base = kvh * hd;
    for (var d0 = 0u; d0 < hd; d0 += DC) {
        workgroupBarrier();  // the previous chunk is consumed
        // Query rows: vec4 c of row r holds dimensions d0 + 4c .. + 3 (zeros past head_dim / T G).
        for (var e = lid; e < BR * (DC / 4u); e += WG) {
            let r = e / (DC / 4u);
            let c = e % (DC / 4u);
            let d = d0 + 4u * c;
            var v = vec4<f32>(0.0);
            if (r0 + r < p.n_rows && d < hd) {
                let t  = (r0 + r) / GROUP;
                let h  = kvh * GROUP + (r0 + r) % GROUP;
                let qi = p.q_offset + t * p.q_stride + h * hd + d;
                v = vec4<f32>(q[qi], q[qi + 1u], q[qi + 2u], q[qi + 3u]);
                if (K_F16) { v = vec4<f32>(round_f16(v.x), round_f16(v.y), round_f16(v.z), round_f16(v.w)); }
            }
            q_tile[r * LDV + c] = v;
        }
        // Key rows: the same layout, from f16 pairs or f32 words (zeros past n_pos / head_dim).
        for (var e = lid; e < BP * (DC / 4u); e += WG) {
            let r = e / (DC / 4u);
            let c = e % (DC / 4u);
            let d = d0 + 4u * c;
            var v = vec4<f32>(0.0);
            if (p0 + r < p.n_pos && d < hd) {
                let ki = p.k_offset + (p0 + r) * p.n_embd_kv + kv_base + d;  // element index
                if (K_F16) {
                    v = vec4<f32>(unpack2x16float(k_cache[ki / 2u]), unpack2x16float(k_cache[ki / 2u + 1u]));
                } else {
                    v = vec4<f32>(bitcast<f32>(k_cache[ki]), bitcast<f32>(k_cache[ki + 1u]),
                                  bitcast<f32>(k_cache[ki + 2u]), bitcast<f32>(k_cache[ki + 3u]));
                }
            }
            k_tile[r * LDV + c] = v;
        }
        workgroupBarrier();
        // Dimensions in order, a block of 16 (4 vec4s) at a time (zero products past head_dim add
        // nothing): the block's sums start at 0 and end added onto the totals.
        for (var c = 0u; c < DC / 4u; c++) {
            var qv: array<vec4<f32>, 4>;
            var kv: array<vec4<f32>, 4>;
            for (var i = 0u; i < TI; i++) { qv[i] = q_tile[(tr + NR * i) * LDV + c]; }
            for (var j = 0u; j < TJ; j++) { kv[j] = k_tile[(tp + NP * j) * LDV + c]; }
            if (c % 4u == 0u) {
                for (var e = 0u; e < TI * TJ; e++) { blk[e] = 0.0; }
            }
            for (var x = 0u; x < 4u; x++) {
                for (var i = 0u; i < TI; i++) {
                    for (var j = 0u; j < TJ; j++) {
                        blk[i * TJ + j] = blk[i * TJ + j] + prod(qv[i][x], kv[j][x]);
                    }
                }
            }
            if (c % 4u == 3u) {
                for (var e = 0u; e < TI * TJ; e++) { acc[e] = acc[e] + blk[e]; }
            }
        }
    }

    for (var i = 0u; i < TI; i++) {
        let r = r0 + tr + NR * i;
        if (r >= p.n_rows) { continue; }
        let n_see = p.pos0 + r / GROUP + 1u;  // positions 0 .. pos0 + t
        let row   = (kvh * p.n_rows + r) * p.ld;
        for (var j = 0u; j < TJ; j++) {
            let pos = p0 + tp + NP * j;
            if (pos < n_see) {
                scores[row + pos] = mul_rn(acc[i * TJ + j], p.scale);  // not fused into s - max
            }
        }
    }
}
