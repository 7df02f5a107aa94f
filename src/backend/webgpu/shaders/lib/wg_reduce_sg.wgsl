// lib/wg_reduce.wgsl with subgroup operations: the same functions (wg_max, wg_df_sum) and the same
// contract, for the "<kernel>_sg" shader variants (cmake/embed_wgsl_script.cmake builds one for every
// kernel that includes lib/wg_reduce.wgsl, with `enable subgroups;`). A subgroup reduces in
// registers, its first invocation writes one slot, one barrier, and every invocation reduces the
// slots again: 1 barrier where the tree takes log2(WG).
//
// Assumes what WGSL does not promise and the backend checks once per device before it picks these
// variants (subgroup_probe.wgsl): subgroup s of a workgroup is invocations s * size .. s * size +
// size - 1, with subgroup_invocation_id = local_invocation_index % size. So an invocation's lane and
// its subgroup's slot follow from lid and the size (the number of active invocations: these
// functions are called in uniform control flow, like the tree versions).
//
// The double-float sum is reproducible: pairs are combined by a butterfly in lane order (the lane
// with the lower index is df_add's first operand), and the slots in slot order, so every run and
// every invocation gets the same bits. It adds in a different order from the tree (and the CPU), as
// the tree does; at double-float precision the f32 results it feeds agree.

// One slot per subgroup (at most WG). u32 words: the keys, and f32 values by their bits
// (wg_red_slot, wg_red_at), stay bit for bit whatever they are.
var<workgroup> wg_red_max: array<u32, WG>;
var<workgroup> wg_red_df: array<vec2<f32>, WG>;

// Subgroups at least 32 wide (set by the host where the adapter's smallest subgroup has 32
// invocations): the reductions take one slot per 32 invocations, with constant shifts and masks,
// where they otherwise divide by the subgroup size that subgroupAdd(1u) gives at run time (integer
// divisions are long instruction sequences on GPUs, and they sat on every decode prologue's path).
// lib/sum_squares.wgsl's teams shuffle with it.
override SG32: bool = false;

// The double-float sum over aligned groups of `width` lanes (a power of two), in every lane. The
// loop bound comes from subgroupAdd, which the uniformity analysis cannot prove uniform; it is the
// same in the whole subgroup (callers are in uniform control flow).
@diagnostic(off, subgroup_uniformity)
fn sg_df_sum(v: vec2<f32>, lane: u32, width: u32) -> vec2<f32> {
    var a = v;
    for (var m = 1u; m < width; m <<= 1u) {
        let o     = vec2<f32>(subgroupShuffleXor(a.x, m), subgroupShuffleXor(a.y, m));
        let first = (lane & m) == 0u;
        a = df_add(select(o, a, first), select(a, o, first));
    }
    return a;
}

// The max of floats as a max of u32 keys in the same order (one instruction on NVIDIA, REDUX,
// where subgroupMax of f32 is a shuffle butterfly). H100 tg128 489-491 tokens/s against 484-485
// with subgroupMax of the f32 values (four alternating runs each).
// (order_key, from_order_key: lib/numerics.wgsl)
fn sg_max(v: f32) -> f32 {
    return from_order_key(subgroupMax(order_key(v)));
}

// Where subgroups are 32 wide, wg_max reads the slots back one per lane and takes a second
// subgroup max (wg_max_one_read). H200s (tg128, alternating rounds in one call each): 978.5-981.1
// tokens/s against 967.7-970.4 with every slot read in every invocation (a chain of WG / 32 - 1
// maxes); with wg_max_nonneg's keys 984.9-985.4 against 966.5-969.5. Also tried, slower: the slots
// as vec4 keys and a short tree (972.8-975.3), and no subgroup max before the barrier, each
// invocation's own max in a slot read back as vec4s (974.5-975.3).

fn wg_red_slot(i: u32, v: f32) { wg_red_max[i] = bitcast<u32>(v); }
fn wg_red_at(i: u32) -> f32 { return bitcast<f32>(wg_red_max[i]); }

// Whether wg_max takes the one-read form (which needs at least one 32-invocation slot).
fn wg_max_one_read() -> bool {
    return SG32 && WG >= 32u;
}

// The largest u32 key of the workgroup (wg_max_one_read): a subgroup max, one slot per 32
// invocations (each 32-lane half of a wider subgroup writes its subgroup's), one barrier, and
// lane l's subgroup max over slots l % (WG / 32), which covers every slot (WG / 32 <= 32).
fn wg_umax_sg32(lid: u32, k: u32) -> u32 {
    wg_umax_publish(lid, k);
    workgroupBarrier();
    return umax_of_slots(lid);
}

// wg_umax_sg32 before its barrier (a kernel may do other work between this, the barrier and
// umax_of_slots; wg_max_split() says whether this form applies).
fn wg_umax_publish(lid: u32, k: u32) {
    let r = subgroupMax(k);
    if (lid % 32u == 0u) { wg_red_max[lid / 32u] = r; }
}

fn wg_max_split() -> bool { return wg_max_one_read(); }

// After the barrier: the max of the WG / 32 keys in wg_red_max, lane l reading slot l % (WG / 32).
fn umax_of_slots(lid: u32) -> u32 {
    return subgroupMax(wg_red_max[lid % (WG / 32u)]);
}

// wg_max of values that are not negative (nor -NaN): their bits order as u32 already, so the keys
// need no order_key conversions (lib/act_stage.wgsl's max |y|).
fn wg_max_nonneg(lid: u32, v: f32) -> f32 {
    if (wg_max_one_read()) { return bitcast<f32>(wg_umax_sg32(lid, bitcast<u32>(v))); }
    return wg_max(lid, v);
}

fn wg_max(lid: u32, v: f32) -> f32 {
    if (wg_max_one_read()) { return from_order_key(wg_umax_sg32(lid, order_key(v))); }
    if (SG32) {
        // Every lane of a subgroup holds its max, so each 32-lane half of a wider one writes it too.
        let r = sg_max(v);
        if (lid % 32u == 0u) { wg_red_slot(lid / 32u, r); }
        workgroupBarrier();
        var m = wg_red_at(0u);
        for (var i = 1u; i < WG / 32u; i++) { m = max(m, wg_red_at(i)); }
        return m;
    }
    let size = subgroupAdd(1u);
    let n    = WG / size;  // subgroups (slots)
    let r    = sg_max(v);
    if (lid % size == 0u) { wg_red_slot(lid / size, r); }
    workgroupBarrier();
    let lane = lid % size;
    var m    = wg_red_at(lane % n);
    for (var i = lane + size; i < n; i += size) { m = max(m, wg_red_at(i)); }
    return sg_max(m);
}

// wg_max_sum (lib/wg_reduce.wgsl): (max of values that are not negative, f32 sum in an unspecified
// order). Where subgroups are 32 wide or more: per 32-lane team a subgroup max of the bits and a
// butterfly of shuffles for the sum, a pair of slots, one barrier, then the slots read back in order.
var<workgroup> wg_red_sum: array<f32, WG>;
@diagnostic(off, subgroup_uniformity)
fn wg_max_sum(lid: u32, m: f32, s: f32) -> vec2<f32> {
    if (!(SG32 && WG >= 32u)) {
        let mx = wg_max_nonneg(lid, m);
        return vec2<f32>(mx, wg_df_sum(lid, vec2<f32>(s, 0.0)).x);
    }
    let mk = subgroupMax(bitcast<u32>(m));  // (a wider subgroup's max: the same for both halves)
    var t  = s;
    for (var d = 16u; d > 0u; d >>= 1u) { t = t + subgroupShuffleXor(t, d); }  // (within 32 lanes)
    if (lid % 32u == 0u) {
        wg_red_max[lid / 32u] = mk;
        wg_red_sum[lid / 32u] = t;
    }
    workgroupBarrier();
    let mx = umax_of_slots(lid);
    var tot = wg_red_sum[0];
    for (var i = 1u; i < WG / 32u; i++) { tot = tot + wg_red_sum[i]; }
    return vec2<f32>(bitcast<f32>(mx), tot);
}

fn wg_df_sum(lid: u32, v: vec2<f32>) -> vec2<f32> {
    let size = select(subgroupAdd(1u), 32u, SG32);  // (32-lane teams of a wider subgroup butterfly alike)
    let n    = WG / size;
    let lane = lid % size;
    let r    = sg_df_sum(v, lane, size);
    if (lane == 0u) { wg_red_df[lid / size] = r; }
    workgroupBarrier();
    // n <= size: every aligned group of n lanes holds the n slots in order; n > size: lane l sums
    // slots l, l + size, ... in order first.
    var a = wg_red_df[lane % n];
    for (var i = lane + size; i < n; i += size) { a = df_add(a, wg_red_df[i]); }
    return sg_df_sum(a, lane, min(n, size));
}

// The subgroup forms exist. team_isum: the sum over the caller's subgroup, in every invocation
// (integers: one instruction on NVIDIA), for kernels whose teams of lanes are whole subgroups (the
// host checks the subgroup size).
const WG_REDUCE_SG: bool = true;
fn team_isum(v: vec2<i32>) -> vec2<i32> { return subgroupAdd(v); }
// subgroupShuffleXor of an f32 (lib/sum_squares.wgsl's teams, where subgroups are 32 wide or more).
@diagnostic(off, subgroup_uniformity)
fn sg_shuffle_xor(v: f32, m: u32) -> f32 { return subgroupShuffleXor(v, m); }
// The same for a pair of integers (lib/ternary_decode.wgsl's lane sums).
@diagnostic(off, subgroup_uniformity)
fn sg_shuffle_xor_i(v: vec2<i32>, m: u32) -> vec2<i32> { return subgroupShuffleXor(v, m); }
// subgroupShuffle of an f32: lane `lane`'s v (lib/attention_core.wgsl's score rows, SG32).
@diagnostic(off, subgroup_uniformity)
fn sg_shuffle(v: f32, lane: u32) -> f32 { return subgroupShuffle(v, lane); }
// The caller's subgroup size (every invocation of the subgroup active).
@diagnostic(off, subgroup_uniformity)
fn sg_size() -> u32 { return subgroupAdd(1u); }
