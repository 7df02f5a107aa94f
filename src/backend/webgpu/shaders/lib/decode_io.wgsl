// Where the one-matmul decode kernels (bitlinear_decode, gate_up_decode, qkv_rope_decode) take
// their inputs for lib/act_stage.wgsl and lib/ternary_decode.wgsl: the bindings `wq`, `src` (x as
// f32 bits, or int8 activation words) and `src_scale` (norm weights, or the activation scale) at
// the uniform's src_offset / scale_offset, and `norm_stats` at stats_in / stats_out.

fn weight_vec4(i: u32) -> vec4<u32> { return wq[i]; }

// The offsets of the prologue's loads (x, the norm weights, x's statistics) as pipeline constants,
// where the host keys the pipeline with them (WebGpuBackend::decode_key; UNSET: the uniform's).
// The first read of the uniform buffer in a kernel waits for memory (~0.3 us), and the prologue's
// loads start the norm's chain, the kernel's longest; the weight loads never needed the uniform.
// H200 tg128 with those three at 0 (a one-off timing aid, not kept; argmax_exact skipped in both
// arms): 713.6-714.4 tokens/s against 695.8-702.6.
const UNSET: u32 = 0xffffffffu;
override SRC_AT: u32 = UNSET;
override NW_AT: u32 = UNSET;
override STATS_AT: u32 = UNSET;

fn stage_src_base() -> u32 {
    if (SRC_AT != UNSET) { return SRC_AT; }
    return p.src_offset;
}

fn stage_nw_base() -> u32 {
    if (NW_AT != UNSET) { return NW_AT; }
    return p.scale_offset;
}

// Where the offset is a multiple of 4 words, each vec4 of x and of the norm weights is one 16-byte
// load; otherwise four 4-byte loads (the same values). The compiler does not merge the four: H200
// tg128 906.7-910.3 tokens/s against 887.5-888.8 with four 4-byte loads everywhere.

fn stage_x4(j: u32) -> vec4<f32> {
    let b = stage_src_base();
    if (b % 4u == 0u) { return bitcast<vec4<f32>>(src[b / 4u + j]); }
    let o = b + 4u * j;
    return vec4<f32>(bitcast<f32>(src_word(o)), bitcast<f32>(src_word(o + 1u)), bitcast<f32>(src_word(o + 2u)),
                     bitcast<f32>(src_word(o + 3u)));
}

// PARTS: x is one query's attention output still in attention_split_pvt.wgsl's sums (a row of at
// most 512 positions: one superblock, [n_head hd] f32, x's own layout, bound as `src` at offset 0),
// the copy attention_split_combine.wgsl would have made deferred into this kernel
// (WebGpuBackend::split_attention): x is read from there as from any src, and the kernel writes it
// where the combine would have (x_out).
override PARTS: bool = false;

fn stage_nw4(j: u32) -> vec4<f32> {
    let b = stage_nw_base();
    if (b % 4u == 0u) { return src_scale[b / 4u + j]; }
    let n = b + 4u * j;
    return vec4<f32>(scale_word(n), scale_word(n + 1u), scale_word(n + 2u), scale_word(n + 3u));
}

// Word i of `src` and of `src_scale` (both bound as arrays of vec4).
fn src_word(i: u32) -> u32 { return src[i / 4u][i % 4u]; }
fn scale_word(i: u32) -> f32 { return src_scale[i / 4u][i % 4u]; }

fn stage_qword(j: u32) -> u32 { return src_word(p.src_offset + j); }

fn stage_qscale() -> f32 { return scale_word(p.scale_offset); }

// The norm statistics (lib/sum_squares.wgsl): x's block sums of squares at the uniform's stats_in,
// and the producers' side: out_v is the value this invocation wrote at output r (0 where it wrote
// none); the workgroup's outputs are whole aligned blocks of 32, invocation r % 32 of a team
// holding output r. Every invocation calls put_block_sums (barriers without SG32).
fn stage_stats(b: u32) -> f32 {
    if (STATS_AT != UNSET) { return norm_stats[STATS_AT + b]; }
    return norm_stats[p.stats_in + b];
}

fn put_block_sums(lid: u32, r: u32, out_v: f32, wrote: bool) {
    let s = team_halving_sum(lid, mul_rn(out_v, out_v), NORM_BLOCK);
    if (wrote && lid % NORM_BLOCK == 0u) { norm_stats[p.stats_out + r / NORM_BLOCK] = s; }
}

// A row's (scale, output scale) at the uniform's scales_offset / oscales_offset (lib/ternary_decode.wgsl).
fn row_scales(row: u32) -> vec2<f32> {
    return row_scales_at(row, p.scales_offset, p.oscales_offset);
}
