// The weight side of the decode (T = 1) ternary kernels: one row of the GPU layout
// (lib/ternary.wgsl) dotted with the activations staged by lib/act_stage.wgsl, read as vec4<u32>
// (64 weights per load). A row is shared by `lanes` lanes: lane l takes vec4s l, l + lanes, ...
// (neighbouring lanes read neighbouring 16 bytes), at most ROW_VEC4_MAX per lane, loaded
// up front by prefetch_row() so that the weight reads are in flight while the prologue runs.
// The including kernel declares `override WG`, `acts` (lib/act_stage.wgsl) and
// `weight_vec4(i) -> vec4<u32>`, vec4 i of the weight buffer (lib/decode_io.wgsl: `wq[i]`).

const ROW_VEC4_MAX: u32 = 10u;  // vec4 loads per lane (WebGpuBackend::decode_tiling keeps to it)
alias RowWords = array<vec4<u32>, ROW_VEC4_MAX>;

fn prefetch_row(row: u32, lane: u32, lanes: u32, k: u32) -> RowWords {
    var w: RowWords;
    let n    = k / 64u;
    let base = row * n;
    for (var v = 0u; v < ROW_VEC4_MAX; v++) {
        let i = lane + v * lanes;
        if (i < n) { w[v] = weight_vec4(base + i); }
    }
    return w;
}

// The 64 activations that weight vec4 i of a k-element row multiplies, word q's 16 in vec4 q
// (lib/act_stage.wgsl's order: vec4 q (k / 64) + i of `acts`).
fn acts64(i: u32, n: u32) -> array<vec4<u32>, 4> {
    return array<vec4<u32>, 4>(acts[i], acts[n + i], acts[2u * n + i], acts[3u * n + i]);
}

// sum(code * a) over one weight vec4 as codes_dot16's (1, 4, 16)-scaled parts, and sum(a).
fn codes_dot64(w: vec4<u32>, a: array<vec4<u32>, 4>) -> vec3<i32> {
    return codes_dot16(w.x, a[0]) + codes_dot16(w.y, a[1]) + codes_dot16(w.z, a[2]) + codes_dot16(w.w, a[3]);
}
fn act_sum64(a: array<vec4<u32>, 4>) -> i32 {
    return act_sum16(a[0]) + act_sum16(a[1]) + act_sum16(a[2]) + act_sum16(a[3]);
}

// The dot from those sums: exact, as acc.y and acc.z are multiples of 4 and 16.
fn codes_total(acc: vec3<i32>, asum: i32) -> i32 {
    return acc.x + (acc.y >> 2u) + (acc.z >> 4u) - asum;
}

// This lane's share of the row's integer dot product (exact; the order does not matter), as
// sum(code * a) - sum(a) (lib/ternary.wgsl: codes_dot16). With ASUM_ONCE (lib/act_stage.wgsl) sum(a)
// is the whole vector's, taken once when it was quantized, and only lane 0 subtracts it.
fn row_dot(w: RowWords, lane: u32, lanes: u32, k: u32) -> i32 {
    var acc  = vec3<i32>();  // sums of code * a as (1, 4, 16) times (lib/ternary.wgsl: codes_dot16)
    var asum = 0;            // sum of a over the same elements
    let n    = k / 64u;
    for (var v = 0u; v < ROW_VEC4_MAX; v++) {
        let i = lane + v * lanes;
        if (i < n) {
            let a = acts64(i, n);
            acc += codes_dot64(w[v], a);
            if (!asum_once()) { asum += act_sum64(a); }
        }
    }
    if (asum_once()) { asum = select(0, acts_total, lane == 0u); }  // (lib/act_stage.wgsl)
    return codes_total(acc, asum);
}

// Two rows per lane team (the decode matmuls' pairs): the lanes of a team read vec4s l, l + lanes,
// ... of both rows (at most ROW_VEC4_MAX / 2 per row: slots 2 v, 2 v + 1), so every activation vec4
// read from workgroup memory serves two rows, and sum(a) is taken once for both. Those reads were
// the dot phase's largest cost (src/backend/webgpu/README.md, "Decode: norm in the prologue").
fn prefetch_row_pair(rows: vec2<u32>, valid: vec2<bool>, lane: u32, lanes: u32, k: u32) -> RowWords {
    var w: RowWords;
    let n = k / 64u;
    for (var v = 0u; v < ROW_VEC4_MAX / 2u; v++) {
        let i = lane + v * lanes;
        if (i < n) {
            if (valid.x) { w[2u * v] = weight_vec4(rows.x * n + i); }
            if (valid.y) { w[2u * v + 1u] = weight_vec4(rows.y * n + i); }
        }
    }
    return w;
}

// This lane's shares of the two rows' dots (row_dot for each).
fn row_dot_pair(w: RowWords, lane: u32, lanes: u32, k: u32) -> vec2<i32> {
    var acc0 = vec3<i32>();
    var acc1 = vec3<i32>();
    var asum = 0;
    let n    = k / 64u;
    for (var v = 0u; v < ROW_VEC4_MAX / 2u; v++) {
        let i = lane + v * lanes;
        if (i < n) {
            let a = acts64(i, n);  // read once for both rows
            acc0 += codes_dot64(w[2u * v], a);
            acc1 += codes_dot64(w[2u * v + 1u], a);
            if (!asum_once()) { asum += act_sum64(a); }
        }
    }
    if (asum_once()) { asum = select(0, acts_total, lane == 0u); }
    return vec2<i32>(codes_total(acc0, asum), codes_total(acc1, asum));
}

var<workgroup> lane_pairs: array<vec2<i32>, WG + 64u>;

// Teams of 32 lanes or more sum their partial dots in registers (the _sg variants): a team's lanes are
// neighbouring invocations, so one subgroupAdd per 32 lanes where every subgroup is exactly 32 wide
// (SG_EXACT32), else a butterfly of shuffles within aligned groups of g = min(32, LANE_GROUP) lanes
// (LANE_GROUP: the adapter's smallest subgroup size, which the host sets), leaves each group's sum in
// all its lanes, and one word per group goes through workgroup memory. Integer sums: exact in any
// order. Smaller teams, and LANE_GROUP = 0: every lane's partial goes to workgroup memory and the
// finishing invocation adds `lanes` words one after another. Measured on an H200 (tg128, medians
// of three alternating processes): shuffles for the 8- and 16-lane teams were slower than those
// sums (779.5 against 782.6 tokens/s), while the 32-lane o-projection this allows gained
// (WebGpuBackend::try_decode_bitlinear).
override LANE_GROUP: u32 = 0u;
override SG_EXACT32: bool = false;

fn lane_group(lanes: u32) -> u32 {
    if (!WG_REDUCE_SG || lanes < 32u) { return 0u; }
    return min(lanes, min(LANE_GROUP, 32u));
}

// The sum of the caller's aligned group of g lanes, in every member (g a power of two, at most the
// subgroup size; every invocation of the subgroup calls it).
fn lane_group_sum(v: vec2<i32>, g: u32) -> vec2<i32> {
    if (SG_EXACT32 && g == 32u) { return team_isum(v); }
    var a = v;
    for (var d = g / 2u; d > 0u; d >>= 1u) { a += sg_shuffle_xor_i(a, d); }
    return a;
}

// The two dots of team `team` from every lane's row_dot_pair (every invocation must call it with
// its own partial: it has a barrier; the caller reads any team's after it).
fn reduce_row_pairs(lid: u32, partial: vec2<i32>, team: u32, lanes: u32) -> vec2<i32> {
    let g = lane_group(lanes);
    if (g > 1u) {
        // One slot per group: team t's are slots t (lanes / g) .. (t + 1) (lanes / g) - 1.
        let s = lane_group_sum(partial, g);
        if (lid % g == 0u) { lane_pairs[lid / g] = s; }
        workgroupBarrier();
        var t = vec2<i32>();
        if (team < WG / lanes) {
            for (var i = 0u; i < lanes / g; i++) { t += lane_pairs[team * (lanes / g) + i]; }
        }
        return t;
    }
    lane_pairs[lane_slot(lid / lanes, lid % lanes, lanes)] = partial;
    workgroupBarrier();
    var s = vec2<i32>();
    if (team < WG / lanes) {
        for (var l = 0u; l < lanes; l++) { s += lane_pairs[lane_slot(team, l, lanes)]; }
    }
    return s;
}

// u32 element i of the weight buffer (scales live after the codes).
fn weight_word(i: u32) -> u32 {
    return weight_vec4(i / 4u)[i % 4u];
}

// The bitlinear epilogue of `row` (one scale group) whose row scales start at u32 `so` and output
// scales at `oso` in the weight buffer: (f32(dot) / act_scale) * scale * output scale, rounded on
// its own (mul_rn: callers add it to y or feed it to exp / RoPE).
fn row_product_at(dot: i32, row: u32, as_: f32, so: u32, oso: u32) -> f32 {
    return row_product_scaled(dot, as_, row_scales_at(row, so, oso));
}

// The row's (scale, output scale): the decode kernels load them with the weights, so that the
// epilogue does not wait for another round trip to memory after the dot.
fn row_scales_at(row: u32, so: u32, oso: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(weight_word(so + row)), bitcast<f32>(weight_word(oso + row)));
}

fn row_product_scaled(dot: i32, as_: f32, sc: vec2<f32>) -> f32 {
    let v = div_rn(f32(dot), as_) * sc.x;
    return mul_rn(v, sc.y);
}

// The lane sums in workgroup memory lane-major, lane l of team t at l (teams + 1) + t: the reads
// (every team's lane l at once) are consecutive words. Team-major (t lanes + l), teams a power of
// two apart shared banks, up to 16-way conflicts with 32 lanes; the padding word spreads the
// writes. H200 tg128 691.1-693.9 tokens/s against 688.6-689.8 team-major (alternating rounds).
fn lane_slot(team: u32, l: u32, lanes: u32) -> u32 {
    return l * (WG / lanes + 1u) + team;
}

var<workgroup> lane_sums: array<i32, WG + 64u>;

// Sums the lanes of every row: returns row r's dot for invocations r < WG / lanes (every invocation
// must call it; it has barriers).
fn reduce_rows(lid: u32, partial: i32, lanes: u32) -> i32 {
    let g = lane_group(lanes);
    if (g > 1u) {  // as reduce_row_pairs
        let s = lane_group_sum(vec2<i32>(partial, 0), g).x;
        if (lid % g == 0u) { lane_sums[lid / g] = s; }
        workgroupBarrier();
        var t = 0;
        if (lid < WG / lanes) {
            for (var i = 0u; i < lanes / g; i++) { t += lane_sums[lid * (lanes / g) + i]; }
        }
        return t;
    }
    lane_sums[lane_slot(lid / lanes, lid % lanes, lanes)] = partial;
    workgroupBarrier();
    var s = 0;
    if (lid < WG / lanes) {
        for (var l = 0u; l < lanes; l++) { s += lane_sums[lane_slot(lid, l, lanes)]; }
    }
    return s;
}
