requires packed_4x8_integer_dot_product;

// ternary_gemm: the prefill (many-token) form of bitlinear.wgsl and gate_up.wgsl, as a tiled GEMM
//   y[N, T] = W[N, K] a[K, T]   (ternary W in the GPU layout, int8 a, per-token scale)
// with bitlinear's epilogue (y = v or y += v) or, with GATE_UP, gate_up's (f = act(gate) * up).
// Bit-exact with the CPU backend: integer dots per scale group (exact), then the float epilogue in
// the CPU's order: v = sum over groups g = 0, 1, .. of (f32(dot_g) / act_scale) * group_scale[g],
// v *= output_scale (one group: v = (f32(dot) / act_scale) * scale, no 0.0 + first term).
//
//   weights: codes [N][K/16] u32 | group scales [N][n_groups] f32 | output scales [N] f32
//   act_q: [K, T] int8 (u32 words)   act_scale: [T] f32   y: [n_out, T] f32
// Bindings: 0 weights (read), 1 act_q (read), 2 act_scale (read), 3 y (read_write), 4 params (uniform)
// Dispatch: (ceil(n_out / OUTS), ceil(T / BN), 1), OUTS = BM (BM / 2 with GATE_UP).
//
// Tiling. A workgroup of TR x TC threads owns BM = TR TM weight rows x BN = TC TN tokens and walks K
// in chunks of 64 elements (KW = 4 code words per row, 16 activation words per token):
//   1. the chunk's BM x KW code words and BN x 16 activation words are loaded with neighbouring
//      threads on neighbouring words (coalesced), into registers one chunk ahead of their use;
//   2. they are stored to workgroup memory, each code word already unpacked into four signed-byte
//      words (so the unpacking is done once per workgroup, not once per thread that uses it):
//        w_tile[row][word] : vec4<u32>, rows padded to KW + 1 vec4 (20 u32) so that 8 neighbouring rows
//                        fall in 8 different 16-byte bank groups;
//        a_tile[token][word]: vec4<u32>, activation words 4 word .. 4 word + 3 of the token;
//   3. thread (tr, tc) accumulates rows tr + TR i (i < TM) x tokens tc + TC j (j < TN) in TM x TN
//      i32 registers: per word, TM + TN vec4 loads from workgroup memory feed 4 TM TN dot4s.
// A row's scale groups are a whole number of chunks (the host checks it), so when a chunk ends a
// group the integer sums are folded into f32 accumulators in group order and reset. No atomics.
// With GATE_UP, weight row tile lr < BM / 2 is gate row out0 + lr and lr >= BM / 2 is up row
// n_out + out0 + lr - BM / 2: a thread's rows i and i + TM / 2 are the gate and up of one output.
// 9 KiB of workgroup memory with the defaults (TM 4, TN 8, TR 16, TC 8: 64 x 64 tiles, 128 threads).

// #include "lib/ternary.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/gemm_tile.wgsl"

const KW = 4u;    // code words per row per K chunk (64 elements)
const MAXT = 8u;  // largest TM and TN (register arrays are sized for it)

override TM: u32 = 4u;        // weight rows per thread: 2, 4 or 8 (even: gate/up pairs)
override TN: u32 = 8u;        // tokens per thread: 1 .. 8
override TR: u32 = 16u;       // threads along rows
override TC: u32 = 8u;        // threads along tokens; TR TC <= 256, W_ITEMS and A_ITEMS <= 8
override N_GROUPS: u32 = 1u;  // scale groups per row
override GATE_UP: bool = false;
// Workgroups along K (dispatch z; N_GROUPS 1 only): each sums its share of the chunks and writes
// the raw integer sums to y as [SPLIT][T][N] i32 (y_offset, y_stride = N: every weight row, gate
// and up), for gemm_split_sum.wgsl, which adds them (exact in any order) and applies the epilogue.
override SPLIT: u32 = 1u;

override BM: u32 = TR * TM;   // weight rows per workgroup
override BN: u32 = TC * TN;   // tokens per workgroup
override WG: u32 = TR * TC;
override W_ITEMS: u32 = (BM * KW + WG - 1u) / WG;  // code words each thread stages per chunk
override A_ITEMS: u32 = (BN * KW + WG - 1u) / WG;  // activation vec4s each thread stages per chunk

@group(0) @binding(0) var<storage, read> weights: array<u32>;
@group(0) @binding(1) var<storage, read> act_q: array<u32>;
@group(0) @binding(2) var<storage, read> act_scale: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> w_tile: array<vec4<u32>, BM * (KW + 1u)>;  // signed weight bytes [row][word], padded
var<workgroup> a_tile: array<vec4<u32>, BN * KW>;         // activation words [token][word]

// Code word `item` (row-major over BM x KW) of chunk c, 0 past the matrix (or the tile).
fn load_weight_word(out0: u32, item: u32, c: u32) -> u32 {
    let row = tile_row(out0, item / KW);
    let kw  = c * KW + item % KW;
    if (item >= BM * KW || row == 0xffffffffu || kw >= p.k_words) { return 0x55555555u; }  // value 0
    return weights[row * p.k_words + kw];
}

// Activation words of `item` (token-major over BN x KW) of chunk c, 0 past the matrix (or the tile).
fn load_act_words(tok0: u32, item: u32, c: u32) -> vec4<u32> {
    let t  = tok0 + item / KW;
    let kw = c * KW + item % KW;
    if (item >= BN * KW || t >= p.n_tokens || kw >= p.k_words) { return vec4<u32>(0u); }
    let a = p.act_offset + t * p.act_stride + 4u * kw;
    return vec4<u32>(act_q[a], act_q[a + 1u], act_q[a + 2u], act_q[a + 3u]);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let tr   = lid % TR;
    let tc   = lid / TR;
    let out0 = wid.x * outs_per_tile();
    let tok0 = wid.y * BN;
    let n_chunks = (p.k_words + KW - 1u) / KW;
    let per      = (n_chunks + SPLIT - 1u) / SPLIT;  // this workgroup's chunks [c_begin, c_end)
    let c_begin  = min(n_chunks, wid.z * per);
    let c_end    = min(n_chunks, c_begin + per);

    // Per token: scale and its reciprocal part (1 past the last token, never stored).
    var a_s: array<f32, MAXT>;
    var a_r: array<f32, MAXT>;
    for (var j = 0u; j < TN; j++) {
        let t = tok0 + tc + TC * j;
        a_s[j] = select(1.0, act_scale[p.ascale_offset + min(t, p.n_tokens - 1u)], t < p.n_tokens);
        a_r[j] = recip_part(a_s[j]);
    }
    var rows: array<u32, MAXT>;
    for (var i = 0u; i < TM; i++) { rows[i] = tile_row(out0, tr + TR * i); }

    var acc: array<i32, MAXT * MAXT>;   // [i][j] (TM x TN used) integer dot of the current scale group
    var facc: array<f32, MAXT * MAXT>;  // [i][j] sum of the finished groups (N_GROUPS > 1)
    var w_next: array<u32, 8>;          // the next chunk, staged through registers (W_ITEMS <= 8)
    var a_next: array<vec4<u32>, 8>;    // (A_ITEMS <= 8)
    for (var m = 0u; m < W_ITEMS; m++) { w_next[m] = load_weight_word(out0, lid + WG * m, c_begin); }
    for (var m = 0u; m < A_ITEMS; m++) { a_next[m] = load_act_words(tok0, lid + WG * m, c_begin); }

    for (var c = c_begin; c < c_end; c++) {
        workgroupBarrier();  // everyone is done with the previous chunk
        for (var m = 0u; m < W_ITEMS; m++) {
            let item = lid + WG * m;
            if (item < BM * KW) { w_tile[(item / KW) * (KW + 1u) + item % KW] = signed_words(w_next[m]); }
        }
        for (var m = 0u; m < A_ITEMS; m++) {
            let item = lid + WG * m;
            if (item < BN * KW) { a_tile[item] = a_next[m]; }
        }
        workgroupBarrier();
        if (c + 1u < c_end) {  // global loads of the next chunk overlap this chunk's math
            for (var m = 0u; m < W_ITEMS; m++) { w_next[m] = load_weight_word(out0, lid + WG * m, c + 1u); }
            for (var m = 0u; m < A_ITEMS; m++) { a_next[m] = load_act_words(tok0, lid + WG * m, c + 1u); }
        }
        for (var kw = 0u; kw < KW; kw++) {
            var wv: array<vec4<u32>, MAXT>;
            for (var i = 0u; i < TM; i++) { wv[i] = w_tile[(tr + TR * i) * (KW + 1u) + kw]; }
            for (var j = 0u; j < TN; j++) {
                let a = a_tile[(tc + TC * j) * KW + kw];
                for (var i = 0u; i < TM; i++) {
                    var d = acc[i * TN + j];
                    d += dot4_i8(wv[i].x, a.x);
                    d += dot4_i8(wv[i].y, a.y);
                    d += dot4_i8(wv[i].z, a.z);
                    d += dot4_i8(wv[i].w, a.w);
                    acc[i * TN + j] = d;
                }
            }
        }
        if (N_GROUPS > 1u && ((c + 1u) * KW) % p.group_words == 0u) {
            let g = (c + 1u) * KW / p.group_words - 1u;
            for (var i = 0u; i < TM; i++) {
                let gs = bitcast<f32>(weights[p.scales_offset + valid_row(rows[i]) * N_GROUPS + g]);
                for (var j = 0u; j < TN; j++) {
                    facc[i * TN + j] += mul_rn(div_by(f32(acc[i * TN + j]), a_s[j], a_r[j]), gs);
                    acc[i * TN + j] = 0;
                }
            }
        }
    }

    if (SPLIT > 1u) {  // the raw sums of this share of K (gemm_split_sum.wgsl adds the shares)
        for (var j = 0u; j < TN; j++) {
            let t = tok0 + tc + TC * j;
            if (t >= p.n_tokens) { continue; }
            for (var i = 0u; i < TM; i++) {
                if (rows[i] == 0xffffffffu) { continue; }
                y[p.y_offset + (wid.z * p.n_tokens + t) * p.y_stride + rows[i]] = bitcast<f32>(acc[i * TN + j]);
            }
        }
        return;
    }
    // Epilogue: v per (row, token), times the row's output scale.
    var v: array<f32, MAXT * MAXT>;
    for (var i = 0u; i < TM; i++) {
        let r  = valid_row(rows[i]);
        let os = bitcast<f32>(weights[p.oscales_offset + r]);
        let gs = bitcast<f32>(weights[p.scales_offset + r * N_GROUPS]);
        for (var j = 0u; j < TN; j++) {
            var x: f32;
            if (N_GROUPS == 1u) {
                x = div_by(f32(acc[i * TN + j]), a_s[j], a_r[j]) * gs;
            } else {
                x = facc[i * TN + j];
            }
            v[i * TN + j] = mul_rn(x, os);  // rounded: y + v or exp(-g) follow
        }
    }
    for (var j = 0u; j < TN; j++) {
        let t = tok0 + tc + TC * j;
        if (t >= p.n_tokens) { continue; }
        let yt = p.y_offset + t * p.y_stride;
        if (GATE_UP) {
            for (var i = 0u; i < TM / 2u; i++) {
                let o = out0 + tr + TR * i;
                if (o >= p.n_out) { continue; }
                let g = v[i * TN + j];
                let u = v[(i + TM / 2u) * TN + j];
                y[yt + o] = ffn_gate(g, u, p.last);
            }
        } else {
            for (var i = 0u; i < TM; i++) {
                if (rows[i] == 0xffffffffu) { continue; }
                let yi = yt + rows[i];
                if (p.last != 0u) {
                    y[yi] = y[yi] + v[i * TN + j];
                } else {
                    y[yi] = v[i * TN + j];
                }
            }
        }
    }
}
