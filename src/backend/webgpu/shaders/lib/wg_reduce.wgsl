// Workgroup-wide reductions by a tree in workgroup memory: log2(WG) levels, a barrier each (the
// kernel declares `override WG`, a power of two). Every invocation must call them, and all get the
// result. The result is read from slot 0 after the last barrier, so two reductions of the same kind
// in a row need a barrier between them (the kernels alternate max and sum).

var<workgroup> wg_red_max: array<f32, WG>;
var<workgroup> wg_red_df: array<vec2<f32>, WG>;

// Subgroups at least 32 wide, laid out as lib/wg_reduce_sg.wgsl assumes: set by the host where the
// `_sg` variants run and the adapter's smallest subgroup has 32 invocations (never in this variant).
override SG32: bool = false;

// wg_max of values that are not negative (lib/wg_reduce_sg.wgsl has a faster form).
fn wg_max_nonneg(lid: u32, v: f32) -> f32 { return wg_max(lid, v); }

// The split form of lib/wg_reduce_sg.wgsl (publish, other work, barrier, read): never here.
fn wg_max_split() -> bool { return false; }
fn wg_umax_publish(lid: u32, k: u32) {}
fn umax_of_slots(lid: u32) -> u32 { return 0u; }

fn wg_max(lid: u32, v: f32) -> f32 {
    wg_red_max[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { wg_red_max[lid] = max(wg_red_max[lid], wg_red_max[lid + s]); }
        workgroupBarrier();
    }
    return wg_red_max[0];
}

// The double-float sum (lib/numerics.wgsl's df_add, pairs i and i + s at each level).
fn wg_df_sum(lid: u32, v: vec2<f32>) -> vec2<f32> {
    wg_red_df[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { wg_red_df[lid] = df_add(wg_red_df[lid], wg_red_df[lid + s]); }
        workgroupBarrier();
    }
    return wg_red_df[0];
}

// The max of values that are not negative and the plain f32 sum of (other) values, both over the
// workgroup: (max, sum). The sum's order is unspecified (lib/wg_reduce_sg.wgsl's differs), so it
// serves bounds only (lm_head_i8_argmax.wgsl's ||g||). Here the two trees, a max and a double-float sum.
fn wg_max_sum(lid: u32, m: f32, s: f32) -> vec2<f32> {
    let mx = wg_max(lid, m);
    return vec2<f32>(mx, wg_df_sum(lid, vec2<f32>(s, 0.0)).x);
}

// Whether the subgroup forms exist (lib/wg_reduce_sg.wgsl); here not, and team_isum,
// sg_shuffle_xor, sg_shuffle_xor_i, sg_shuffle and sg_size are never called.
const WG_REDUCE_SG: bool = false;
fn team_isum(v: vec2<i32>) -> vec2<i32> { return v; }
fn sg_shuffle_xor_i(v: vec2<i32>, m: u32) -> vec2<i32> { return v; }
fn sg_shuffle_xor(v: f32, m: u32) -> f32 { return v; }
fn sg_shuffle(v: f32, lane: u32) -> f32 { return v; }
fn sg_size() -> u32 { return 1u; }
