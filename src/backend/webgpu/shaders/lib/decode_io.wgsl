// Where the one-matmul decode kernels (bitlinear_decode, gate_up_decode, qkv_rope_decode) take
// their inputs for lib/act_stage.wgsl and lib/ternary_decode.wgsl: the bindings `wq`, `src` (x as
// f32 bits, or int8 activation words) and `src_scale` (norm weights, or the activation scale) at
// the uniform's src_offset / scale_offset, and `norm_stats` at stats_in / stats_out. The layer kernel
// (layer_decode.wgsl) defines its own.

fn weight_vec4(i: u32) -> vec4<u32> { return wq[i]; }

fn stage_x4(j: u32) -> vec4<f32> {
    let o = p.src_offset + 4u * j;
    return vec4<f32>(bitcast<f32>(src[o]), bitcast<f32>(src[o + 1u]), bitcast<f32>(src[o + 2u]),
                     bitcast<f32>(src[o + 3u]));
}

fn stage_nw4(j: u32) -> vec4<f32> {
    let n = p.scale_offset + 4u * j;
    return vec4<f32>(src_scale[n], src_scale[n + 1u], src_scale[n + 2u], src_scale[n + 3u]);
}

fn stage_qword(j: u32) -> u32 { return src[p.src_offset + j]; }

fn stage_qscale() -> f32 { return src_scale[p.scale_offset]; }

// The norm statistics (lib/sum_squares.wgsl): x's block sums of squares at the uniform's stats_in,
// and the producers' side: out_v is the value this invocation wrote at output r (0 where it wrote
// none); the workgroup's outputs are whole aligned blocks of 32, invocation r % 32 of a team
// holding output r. Every invocation calls put_block_sums (barriers without SG32).
fn stage_stats(b: u32) -> f32 { return norm_stats[p.stats_in + b]; }

fn put_block_sums(lid: u32, r: u32, out_v: f32, wrote: bool) {
    let s = team_halving_sum(lid, mul_rn(out_v, out_v), NORM_BLOCK);
    if (wrote && lid % NORM_BLOCK == 0u) { norm_stats[p.stats_out + r / NORM_BLOCK] = s; }
}

// A row's (scale, output scale) at the uniform's scales_offset / oscales_offset (lib/ternary_decode.wgsl).
fn row_scales(row: u32) -> vec2<f32> {
    return row_scales_at(row, p.scales_offset, p.oscales_offset);
}
