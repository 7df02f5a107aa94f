// The producers' side of the norm max records (lib/norm_max.wgsl says what they are and why): the
// kernel that writes x leaves one record per block of 32 outputs. The including kernel includes
// lib/numerics.wgsl, lib/wg_reduce.wgsl, lib/sum_squares.wgsl and lib/norm_max.wgsl and declares
// `norm_stats` (read_write f32); the one-matmul kernels also `p.stats_out` and next_nw(r).

// The record of the block of 32 outputs held by a team of `width` invocations (16 or 32, aligned),
// each holding up to two of them: x2 (its output values), nw2 (the next norm's weights there), n
// (how many of the two it holds, 0 for none). Writes record `block` of slot `slot` from the
// invocation that holds the block's largest p (the lowest such invocation; its first such element).
// Every invocation of the workgroup calls it (barriers without subgroups).
@diagnostic(off, subgroup_uniformity)
fn nm_put_record(lid: u32, width: u32, x2: vec2<f32>, nw2: vec2<f32>, n: u32, slot: u32, block: u32) {
    let p0 = select(0.0, abs(x2.x * nw2.x), n > 0u);
    let p1 = select(0.0, abs(x2.y * nw2.y), n > 1u);
    // This invocation's largest p (its first on equal keys) and its other one.
    let k0    = order_key(p0);
    let k1    = order_key(p1);
    let first = k0 >= k1;
    let top_p = select(p1, p0, first);
    let top_k = select(k1, k0, first);
    let rest  = select(p0, p1, first);
    let top_x = select(x2.y, x2.x, first);
    let top_w = select(nw2.y, nw2.x, first);
    if (nm_sg()) {
        let half  = width < 32u && (lid % 32u) >= width;  // (teams of 16: the subgroup's two halves)
        let mk    = nm_team_umax(top_k, half, width);
        let owner = nm_team_umin(select(0xffffffffu, lid, top_k == mk), half, width);
        let other = select(top_k, order_key(rest), lid == owner);
        let sk    = nm_team_umax(other, half, width);
        if (lid == owner && n > 0u) {
            let tie = !(from_order_key(sk) < nm_threshold(from_order_key(mk)));
            nm_write(slot, block, top_x, top_w, tie);
        }
        return;
    }
    // Without subgroups: the team's invocations leave (top p, other p, x, nw) in workgroup memory
    // and the team's first invocation reduces them in order.
    workgroupBarrier();  // (earlier uses of these arrays are over)
    wg_red_h[lid]   = top_p;
    wg_red_max[lid] = rest;
    wg_red_df[lid]  = vec2<f32>(top_x, top_w);
    workgroupBarrier();
    if (lid % width == 0u && n > 0u) {
        // The first invocation with the largest key owns the record.
        var owner = lid;
        var mk    = order_key(wg_red_h[lid]);
        for (var i = lid + 1u; i < lid + width; i++) {
            let k = order_key(wg_red_h[i]);
            if (k > mk) {
                mk    = k;
                owner = i;
            }
        }
        var sk = order_key(wg_red_max[owner]);
        for (var i = lid; i < lid + width; i++) {
            if (i != owner) { sk = max(sk, order_key(wg_red_h[i])); }
        }
        let tie = !(from_order_key(sk) < nm_threshold(from_order_key(mk)));
        let xw  = wg_red_df[owner];
        nm_write(slot, block, xw.x, xw.y, tie);
    }
    workgroupBarrier();
}

fn nm_write(slot: u32, block: u32, x: f32, nw: f32, tie: bool) {
    let a = bitcast<f32>(bitcast<u32>(abs(x)) | select(0u, 0x80000000u, tie));
    let i = NM_REC_BASE + 2u * (slot + block);
    norm_stats[i]      = a;
    norm_stats[i + 1u] = abs(nw);
}

// u32 max / min over an aligned team of 16 or 32 lanes of a 32-wide subgroup (`half`: the caller
// is in the upper 16 of a team of 16). Neutral values: 0 for the max, 0xffffffff for the min.
@diagnostic(off, subgroup_uniformity)
fn nm_team_umax(v: u32, half: bool, width: u32) -> u32 {
    if (width >= 32u) { return sg_umax(v); }
    let lo = sg_umax(select(v, 0u, half));
    let hi = sg_umax(select(0u, v, half));
    return select(lo, hi, half);
}

@diagnostic(off, subgroup_uniformity)
fn nm_team_umin(v: u32, half: bool, width: u32) -> u32 {
    if (width >= 32u) { return sg_umin(v); }
    let lo = sg_umin(select(v, 0xffffffffu, half));
    let hi = sg_umin(select(0xffffffffu, v, half));
    return select(lo, hi, half);
}

// The one-matmul kernels (bitlinear_decode, gate_up_decode): x's record of the block of output r
// (MAX_OUT, with STATS_OUT); nw is the next norm's weight there, which the kernel loads with its
// row scales (next_nw(r), from its `nwn` binding): a load issued at the end would hold the
// kernel's last workgroup for a trip to memory. Invocation r % 32 of a team holds output r, as for
// lib/decode_io.wgsl's put_block_sums. Every invocation calls it.
override MAX_OUT: bool = false;
// A timing aid ($TERN_WEBGPU_CONST=NM_NW_ONE=1; records wrong): the producers take 1 for every
// next norm weight instead of loading it.
override NM_NW_ONE: bool = false;
fn nm_load_nw() -> bool { return STATS_OUT && MAX_OUT && !NM_NW_ONE; }

fn put_block_record(lid: u32, r: u32, out_v: f32, nw: f32, wrote: bool) {
    nm_put_record(lid, NORM_BLOCK, vec2<f32>(out_v, 0.0), vec2<f32>(nw, 0.0), select(0u, 1u, wrote), p.stats_out,
                  r / NORM_BLOCK);
}
