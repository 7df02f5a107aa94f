// The weight side of the decode (T = 1) ternary kernels: one row of the GPU layout
// (lib/ternary.wgsl) dotted with the activations staged by lib/act_stage.wgsl, read as vec4<u32>
// (64 weights per load). A row is shared by `lanes` lanes: lane l takes vec4s l, l + lanes, ...
// (neighbouring lanes read neighbouring 16 bytes), at most 8 per lane (k <= 512 lanes), loaded
// up front by prefetch_row() so that the weight reads are in flight while the prologue runs.
// The including kernel declares `override WG`, `acts` (lib/act_stage.wgsl) and
// `weight_vec4(i) -> vec4<u32>`, vec4 i of the weight buffer (lib/decode_io.wgsl: `wq[i]`).

alias RowWords = array<vec4<u32>, 8>;

fn prefetch_row(row: u32, lane: u32, lanes: u32, k: u32) -> RowWords {
    var w: RowWords;
    let n    = k / 64u;
    let base = row * n;
    for (var v = 0u; v < 8u; v++) {
        let i = lane + v * lanes;
        if (i < n) { w[v] = weight_vec4(base + i); }
    }
    return w;
}

// This lane's share of the row's integer dot product (exact; the order does not matter).
fn row_dot(w: RowWords, lane: u32, lanes: u32, k: u32) -> i32 {
    var acc = 0;
    let n   = k / 64u;
    for (var v = 0u; v < 8u; v++) {
        let i = lane + v * lanes;
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
    return weight_vec4(i / 4u)[i % 4u];
}

// The bitlinear epilogue of `row` (one scale group) whose row scales start at u32 `so` and output
// scales at `oso` in the weight buffer: (f32(dot) / act_scale) * scale * output scale, rounded on
// its own (mul_rn: callers add it to y or feed it to exp / RoPE).
fn row_product_at(dot: i32, row: u32, as_: f32, so: u32, oso: u32) -> f32 {
    let v = div_rn(f32(dot), as_) * bitcast<f32>(weight_word(so + row));
    return mul_rn(v, bitcast<f32>(weight_word(oso + row)));
}

var<workgroup> lane_sums: array<i32, WG>;

// Sums the lanes of every row: returns row r's dot for invocations r < WG / lanes (every invocation
// must call it; it has barriers).
fn reduce_rows(lid: u32, partial: i32, lanes: u32) -> i32 {
    lane_sums[lid] = partial;
    workgroupBarrier();
    var s = 0;
    if (lid < WG / lanes) {
        for (var l = 0u; l < lanes; l++) { s += lane_sums[lid * lanes + l]; }
    }
    return s;
}
