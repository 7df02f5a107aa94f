// The weight side of the decode (T = 1) ternary kernels: one row of the GPU layout
// (lib/ternary.wgsl) dotted with the activations staged by lib/act_stage.wgsl, read as vec4<u32>
// (64 weights per load). A row is shared by LANES lanes: lane l takes vec4s l, l + LANES, ...
// (neighbouring lanes read neighbouring 16 bytes), at most 8 per lane (K <= 512 LANES), loaded
// up front by prefetch_row() so that the weight reads are in flight while the prologue runs.
// The including kernel declares `wq: array<vec4<u32>>`, `override K`, `override LANES` and acts.

alias RowWords = array<vec4<u32>, 8>;

fn prefetch_row(row: u32, lane: u32) -> RowWords {
    var w: RowWords;
    let n    = K / 64u;
    let base = row * n;
    for (var v = 0u; v < 8u; v++) {
        let i = lane + v * LANES;
        if (i < n) { w[v] = wq[base + i]; }
    }
    return w;
}

// This lane's share of the row's integer dot product (exact; the order does not matter).
fn row_dot(w: RowWords, lane: u32) -> i32 {
    var acc = 0;
    let n   = K / 64u;
    for (var v = 0u; v < 8u; v++) {
        let i = lane + v * LANES;
        if (i < n) {
            let wv = w[v];
            acc += ternary_dot16(wv.x, acts[4u * i]) + ternary_dot16(wv.y, acts[4u * i + 1u])
                 + ternary_dot16(wv.z, acts[4u * i + 2u]) + ternary_dot16(wv.w, acts[4u * i + 3u]);
        }
    }
    return acc;
}

// u32 element i of the weight buffer (scales live after the codes).
fn weight_word(i: u32) -> u32 {
    return wq[i / 4u][i % 4u];
}

// The bitlinear epilogue of `row` (one scale group): (f32(dot) / act_scale) * scale * output scale,
// rounded on its own (mul_rn: callers add it to y or feed it to exp / RoPE). Needs p.scales_offset
// and p.oscales_offset.
fn row_product(dot: i32, row: u32, as_: f32) -> f32 {
    let v = div_rn(f32(dot), as_) * bitcast<f32>(weight_word(p.scales_offset + row));
    return mul_rn(v, bitcast<f32>(weight_word(p.oscales_offset + row)));
}

var<workgroup> lane_sums: array<i32, WG>;

// Sums the lanes of every row: returns row r's dot for invocations r < WG / LANES (every invocation
// must call it; it has barriers).
fn reduce_rows(lid: u32, partial: i32) -> i32 {
    lane_sums[lid] = partial;
    workgroupBarrier();
    var s = 0;
    if (lid < WG / LANES) {
        for (var l = 0u; l < LANES; l++) { s += lane_sums[lid * LANES + l]; }
    }
    return s;
}
