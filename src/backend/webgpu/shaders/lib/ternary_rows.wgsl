// The inner loop and the epilogue shared by the ternary matmul kernels (bitlinear, gate_up, qkv_rope): adds this
// lane's share of weight row `row` · activations, for tokens tok0 .. tok0 + n_tok - 1, into the
// workgroup integer sums dots[(team * TOKS + t) * N_GROUPS + group]. Lane l takes words l, l + lanes,
// ... of the row (neighbouring lanes, neighbouring words) and flushes its partial sum whenever it
// crosses into another scale group. Integer sums: the order does not matter, the result is exact.
// The including kernel declares `weights`, `act_q`, the workgroup array `dots`, the uniform `p`
// (k_words, group_words, act_offset, act_stride) and the overrides TOKS and N_GROUPS.
fn accumulate_row_dots(row: u32, team: u32, lane: u32, lanes: u32, tok0: u32, n_tok: u32) {
    var acc: array<i32, 8>;
    var g_cur = lane / p.group_words;
    for (var kw = lane; kw < p.k_words; kw += lanes) {
        let g = kw / p.group_words;
        if (g != g_cur) {
            for (var t = 0u; t < n_tok; t++) {
                atomicAdd(&dots[(team * TOKS + t) * N_GROUPS + g_cur], acc[t]);
                acc[t] = 0;
            }
            g_cur = g;
        }
        let wv = weights[row * p.k_words + kw];
        for (var t = 0u; t < n_tok; t++) {
            let ao = p.act_offset + (tok0 + t) * p.act_stride + 4u * kw;
            acc[t] += ternary_dot16(wv, vec4<u32>(act_q[ao], act_q[ao + 1u], act_q[ao + 2u], act_q[ao + 3u]));
        }
    }
    if (lane < p.k_words) {
        for (var t = 0u; t < n_tok; t++) {
            atomicAdd(&dots[(team * TOKS + t) * N_GROUPS + g_cur], acc[t]);
        }
    }
}

// The bitlinear epilogue of weight row `row` from its integer sums dots[d0 + g] (one per scale
// group, in group order): sum_g (f32(dot_g) / act_scale) * scale_g, then * the row's output scale,
// as cpu::bitlinear_dot. The result is rounded on its own (mul_rn): callers add it to y or feed it
// to exp / RoPE, and the CPU rounds it first. Needs p.scales_offset, p.oscales_offset.
fn row_epilogue(d0: u32, row: u32, as_: f32) -> f32 {
    let s0 = p.scales_offset + row * N_GROUPS;
    var v  = 0.0;
    if (N_GROUPS == 1u) {
        v = div_rn(f32(atomicLoad(&dots[d0])), as_) * bitcast<f32>(weights[s0]);
    } else {
        for (var g = 0u; g < N_GROUPS; g++) {
            v += mul_rn(div_rn(f32(atomicLoad(&dots[d0 + g])), as_), bitcast<f32>(weights[s0 + g]));
        }
    }
    return mul_rn(v, bitcast<f32>(weights[p.oscales_offset + row]));
}
