requires packed_4x8_integer_dot_product;
enable subgroups;
enable chromium_experimental_subgroup_matrix;

// ternary_gemm_mma: ternary_gemm.wgsl on the subgroup matrices (Dawn's
// chromium_experimental_subgroup_matrix: int8 x int8 -> i32 products on the tensor cores of an
// NVIDIA GPU), with the same bindings, parameters and results, bit for bit: each scale group's
// integer dot is exact either way, and the float epilogue is ternary_gemm's.
//
//   weights: codes [N][K/16] u32 | group scales [N][n_groups] f32 | output scales [N] f32
//   act_q: [K, T] int8 (u32 words)   act_scale: [T] f32   y: [n_out, T] f32
// Bindings: 0 weights (read), 1 act_q (read), 2 act_scale (read), 3 y (read_write), 4 params (uniform)
// Dispatch: (ceil(n_out / OUTS), ceil(T / BN), 1), OUTS = BM (BM / 2 with GATE_UP). The host checks
// that K is a multiple of 64, act_q's offset and stride multiples of 4 words (the loads are vec4s)
// and that subgroups are 32 wide.
//
// A workgroup is SGM x SGN subgroups of 32 and owns BM = 32 SGM weight rows x BN = 32 SGN tokens;
// subgroup s (@builtin(subgroup_id): uniform in the subgroup, as the builtins' offsets must be)
// takes the 32 x 32 block of rows 32 (s % SGM).., tokens 32 (s / SGM)... It walks K in chunks of
// 64 elements:
//   1. the chunk's code words (one vec4 per row: invocation r < BM loads row r) and activations
//      (4 vec4s per token, spread over the invocations) are loaded into registers one chunk ahead,
//      then stored to workgroup memory, the codes unpacked to signed bytes: w_tile [BM][64 i8]
//      then a_tile [BN][64 i8] (each token's K values together: the right operand column-major),
//      rows padded to RS words;
//   2. a subgroup's block is 2 x 2 result matrices of 16 x 16 (named, not indexed by a loop
//      variable: with loop-indexed arrays of matrices the results were wrong on an H200); a chunk
//      adds 2 (K steps of 32) x 4 products 16 x 16 x 32;
//   3. where a chunk ends a scale group (several groups per row) the results go to workgroup
//      memory as [token][row] (BM x BN words, where the tiles were: they are dead by then) and
//      invocation i folds row i % BM's, tokens 32 (i / BM).., into f32 in group order
//      (ternary_gemm's); at the end the same invocation takes that row's epilogue and stores
//      (neighbouring invocations on neighbouring rows of y). With GATE_UP tile row lr < BM / 2 is
//      gate row out0 + lr and lr >= BM / 2 up row n_out + out0 + lr - BM / 2: the gate rows hand
//      their values over through workgroup memory.
// Sharing staged tiles between subgroups is most of the speed: H100 pp512 of 2B4T went from ~18,200
// tokens/s with one subgroup per workgroup to ~26,600 with 4 x 1 (2 x 1 for K > 4096).
// The builtins count the i8 operands' offsets and strides in MU bytes: 1 (i8 elements) or 4 (the
// i32 words that hold them), as WebGpuBackend::mma_unit found with subgroup_matrix_probe.wgsl (it
// differs between Dawn versions and spellings of the builtins; 4 in npm webgpu 0.6.2).
// Workgroup memory: max(BM x BN, (BM + BN) x RS) words (16 KiB for 4 x 1).

// #include "lib/ternary.wgsl"
// #include "lib/dot4_native.wgsl"
// #include "lib/numerics.wgsl"
// #include "lib/gemm_tile.wgsl"

const SUB = 32u;               // rows and tokens of one subgroup's block
const KW  = 4u;                // code words per row per chunk (64 elements)
override SGM: u32 = 4u;        // subgroups along the rows: 1, 2, 4 or 8
override SGN: u32 = 1u;        // subgroups along the tokens (32 SGM SGN <= 1024)
override BM: u32 = SUB * SGM;  // weight rows per workgroup
override BN: u32 = SUB * SGN;  // tokens per workgroup
override WG: u32 = 32u * SGM * SGN;
override A_PER: u32 = max(1u, 4u * BN / WG);  // activation vec4s each invocation stages per chunk
override N_GROUPS: u32 = 1u;  // scale groups per row
override GATE_UP: bool = false;
// Workgroups along K (dispatch z; N_GROUPS 1 only), as ternary_gemm.wgsl's SPLIT: the raw integer
// sums of this share of the chunks to y as [SPLIT][T][N] i32, for gemm_split_sum.wgsl.
override SPLIT: u32 = 1u;
override MU: u32 = 4u;        // bytes per unit of the builtins' operand offsets and strides
// Words per operand row in workgroup memory (16 + padding); H200 pp512 17,290-17,790 tokens/s with
// 20, 14,407-14,414 with 16, 13,989-14,233 with 24 (the builtins' loads and the staging stores hit
// the banks best with 4 words of padding).
override RS: u32 = 20u;
override SMEM: u32 = max(BM * BN, (BM + BN) * RS);

@group(0) @binding(0) var<storage, read> weights4: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> act_q4: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> act_scale: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> smem: array<i32, SMEM>;

alias Left  = subgroup_matrix_left<i8, 32, 16>;
alias Right = subgroup_matrix_right<i8, 16, 32>;
alias Acc   = subgroup_matrix_result<i32, 16, 16>;

// u32 element i of the weight buffer (scales live after the codes).
fn wword(i: u32) -> u32 { return weights4[i / 4u][i % 4u]; }

// Tile row lr's 4 code words of chunk c (value 0 past the matrix). Needs K / 16 a multiple of 4.
fn load_weight_vec(out0: u32, lr: u32, c: u32) -> vec4<u32> {
    let row = tile_row(out0, lr);
    if (row == 0xffffffffu || c * KW >= p.k_words) { return vec4<u32>(0x55555555u); }
    return weights4[(row * p.k_words) / 4u + c];
}

// Activation vec4 `item` (token-major, 4 vec4s of 16 elements per token) of chunk c, 0 past the
// matrix. Needs act_offset and act_stride multiples of 4.
fn load_act_vec(tok0: u32, item: u32, c: u32) -> vec4<u32> {
    let t  = tok0 + item / 4u;
    let kw = c * KW + item % 4u;
    if (t >= p.n_tokens || kw >= p.k_words) { return vec4<u32>(0u); }
    return act_q4[(p.act_offset + t * p.act_stride) / 4u + kw];
}

// A subgroup's results (rows r0.., tokens t0..) into smem [token][row] (every invocation calls it).
fn store_results(acc: array<Acc, 4>, r0: u32, t0: u32) {
    for (var i = 0u; i < 2u; i++) {
        for (var j = 0u; j < 2u; j++) {
            subgroupMatrixStore<col_major>(&smem, (t0 + 16u * j) * BM + r0 + 16u * i, acc[2u * i + j], BM);
        }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(subgroup_id) sg: u32) {
    let out0 = wid.x * outs_per_tile();
    let tok0 = wid.y * BN;
    let n_chunks = (p.k_words + KW - 1u) / KW;
    let per      = (n_chunks + SPLIT - 1u) / SPLIT;  // this workgroup's chunks [c_begin, c_end)
    let c_begin  = min(n_chunks, wid.z * per);
    let c_end    = min(n_chunks, c_begin + per);
    let r0 = SUB * (sg % SGM);  // this subgroup's block: tile rows r0.., tokens t0..
    let t0 = SUB * (sg / SGM);
    let lr  = lid % BM;         // the epilogue's row and tokens
    let tb  = SUB * (lid / BM);
    let row = tile_row(out0, lr);
    let vr  = valid_row(row);

    var acc: array<Acc, 4>;    // [row block i][token block j] at 2 i + j
    var facc: array<f32, 32>;  // row lr's finished groups (N_GROUPS > 1), per token
    var w_next: vec4<u32>;     // the next chunk, staged through registers: row lid's code words
    var a_next: array<vec4<u32>, 4>;
    if (lid < BM) { w_next = load_weight_vec(out0, lid, c_begin); }
    for (var m = 0u; m < A_PER; m++) {
        if (lid + WG * m < 4u * BN) { a_next[m] = load_act_vec(tok0, lid + WG * m, c_begin); }
    }

    for (var c = c_begin; c < c_end; c++) {
        workgroupBarrier();  // everyone is done with the previous chunk
        if (lid < BM) {
            for (var q = 0u; q < 4u; q++) {
                let sw = bitcast<vec4<i32>>(signed_words(w_next[q]));
                let wb = lid * RS + 4u * q;
                smem[wb] = sw.x;
                smem[wb + 1u] = sw.y;
                smem[wb + 2u] = sw.z;
                smem[wb + 3u] = sw.w;
            }
        }
        for (var m = 0u; m < A_PER; m++) {
            let ai = lid + WG * m;
            if (ai >= 4u * BN) { break; }
            let ab = (BM + ai / 4u) * RS + 4u * (ai % 4u);
            let av = bitcast<vec4<i32>>(a_next[m]);
            smem[ab] = av.x;
            smem[ab + 1u] = av.y;
            smem[ab + 2u] = av.z;
            smem[ab + 3u] = av.w;
        }
        workgroupBarrier();
        if (c + 1u < c_end) {
            if (lid < BM) { w_next = load_weight_vec(out0, lid, c + 1u); }
            for (var m = 0u; m < A_PER; m++) {
                if (lid + WG * m < 4u * BN) { a_next[m] = load_act_vec(tok0, lid + WG * m, c + 1u); }
            }
        }
        for (var kk = 0u; kk < 2u; kk++) {  // K steps of 32 bytes
            let l0 = subgroupMatrixLoad<Left, row_major>(&smem, (r0 * RS * 4u + 32u * kk) / MU, RS * 4u / MU);
            let l1 = subgroupMatrixLoad<Left, row_major>(&smem, ((r0 + 16u) * RS * 4u + 32u * kk) / MU, RS * 4u / MU);
            let b0 = subgroupMatrixLoad<Right, col_major>(&smem, ((BM + t0) * RS * 4u + 32u * kk) / MU, RS * 4u / MU);
            let b1 = subgroupMatrixLoad<Right, col_major>(&smem, ((BM + t0 + 16u) * RS * 4u + 32u * kk) / MU, RS * 4u / MU);
            acc[0] = subgroupMatrixMultiplyAccumulate(l0, b0, acc[0]);
            acc[1] = subgroupMatrixMultiplyAccumulate(l0, b1, acc[1]);
            acc[2] = subgroupMatrixMultiplyAccumulate(l1, b0, acc[2]);
            acc[3] = subgroupMatrixMultiplyAccumulate(l1, b1, acc[3]);
        }
        if (N_GROUPS > 1u && ((c + 1u) * KW) % p.group_words == 0u) {
            workgroupBarrier();  // the tiles are read: the results may take their place
            store_results(acc, r0, t0);
            for (var q = 0u; q < 4u; q++) { acc[q] = Acc(); }
            workgroupBarrier();
            let g  = (c + 1u) * KW / p.group_words - 1u;
            let gs = bitcast<f32>(wword(p.scales_offset + vr * N_GROUPS + g));
            for (var m = 0u; m < 32u; m++) {
                let t  = min(tok0 + tb + m, p.n_tokens - 1u);
                let s  = act_scale[p.ascale_offset + t];
                facc[m] += mul_rn(div_by(f32(smem[(tb + m) * BM + lr]), s, recip_part(s)), gs);
            }
        }
    }

    if (N_GROUPS == 1u) {
        workgroupBarrier();
        store_results(acc, r0, t0);
        workgroupBarrier();
    }
    if (SPLIT > 1u) {  // the raw sums of this share of K (gemm_split_sum.wgsl adds the shares)
        if (row != 0xffffffffu) {
            for (var m = 0u; m < 32u; m++) {
                let t = tok0 + tb + m;
                if (t >= p.n_tokens) { continue; }
                y[p.y_offset + (wid.z * p.n_tokens + t) * p.y_stride + row] = bitcast<f32>(smem[(tb + m) * BM + lr]);
            }
        }
        return;
    }
    let os = bitcast<f32>(wword(p.oscales_offset + vr));
    let gs = bitcast<f32>(wword(p.scales_offset + vr * N_GROUPS));
    var v: array<f32, 32>;
    for (var m = 0u; m < 32u; m++) {
        var x: f32;
        if (N_GROUPS == 1u) {
            let t = min(tok0 + tb + m, p.n_tokens - 1u);
            let s = act_scale[p.ascale_offset + t];
            x = div_by(f32(smem[(tb + m) * BM + lr]), s, recip_part(s)) * gs;
        } else {
            x = facc[m];
        }
        v[m] = mul_rn(x, os);
    }
    if (GATE_UP) {
        workgroupBarrier();
        if (lr < BM / 2u) {
            for (var m = 0u; m < 32u; m++) { smem[(tb + m) * BM + lr] = bitcast<i32>(v[m]); }
        }
        workgroupBarrier();
        if (lr >= BM / 2u) {
            let o = out0 + lr - BM / 2u;
            if (o < p.n_out) {
                for (var m = 0u; m < 32u; m++) {
                    let t = tok0 + tb + m;
                    if (t >= p.n_tokens) { continue; }
                    let g = bitcast<f32>(smem[(tb + m) * BM + lr - BM / 2u]);
                    y[p.y_offset + t * p.y_stride + o] = ffn_gate(g, v[m], p.last);
                }
            }
        }
    } else if (row != 0xffffffffu) {
        for (var m = 0u; m < 32u; m++) {
            let t = tok0 + tb + m;
            if (t >= p.n_tokens) { continue; }
            let yi = p.y_offset + t * p.y_stride + row;
            if (p.last != 0u) {
                y[yi] = y[yi] + v[m];
            } else {
                y[yi] = v[m];
            }
        }
    }
}
