// head_topk_batch: a batched top-k head's threshold per column (between lm_head_i8_batch.wgsl and
// head_exact_batch.wgsl with TOP_K). lm_head_i8_batch leaves each workgroup's largest lower bound
// f - B per column (as an order key; 0: none); each belongs to a different row, so at least k rows
// have an exact logit at or above the k-th largest of them, and a row whose upper bound f + B is
// below it cannot be among the k largest. That k-th largest key (0 with fewer than k workgroups:
// every row) replaces the column's threshold slot, found bit by bit from the top: the largest key
// that at least k of the keys reach.
//
// It also sets each column's list count to 0 for head_exact_batch.wgsl, which appends the rows it
// recomputes to that list.
//
//   wmax: [T][n_row_groups] u32 keys   thr: [T] u32   list: column c's count at list_offset + c list_stride
// Bindings: 0 wmax (read), 1 thr (read_write), 2 list (read_write), 3 params (uniform)
// Dispatch: (T, 1, 1), a workgroup per column.

override WG: u32 = 256u;  // a power of two

struct Params {
    n_row_groups: u32,
    k: u32,
    list_offset: u32,  // u32 index of column 0's list
    list_stride: u32,  // u32 per column's list
}

@group(0) @binding(0) var<storage, read> wmax: array<u32>;
@group(0) @binding(1) var<storage, read_write> thr: array<u32>;
@group(0) @binding(2) var<storage, read_write> list: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> counts: array<u32, WG>;

// How many of the column's keys are >= t (every invocation calls it; barriers).
fn count_at_least(lid: u32, col: u32, t: u32) -> u32 {
    var n = 0u;
    for (var i = lid; i < p.n_row_groups; i += WG) { n += select(0u, 1u, wmax[col * p.n_row_groups + i] >= t); }
    counts[lid] = n;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { counts[lid] += counts[lid + s]; }
        workgroupBarrier();
    }
    let total = counts[0];
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let col = wid.x;
    var t = 0u;  // the largest key so far with at least k keys >= it
    for (var b = 31; b >= 0; b--) {
        let c = t | (1u << u32(b));
        if (count_at_least(lid, col, c) >= p.k) { t = c; }
    }
    if (lid == 0u) {
        thr[col] = t;
        list[p.list_offset + col * p.list_stride] = 0u;
    }
}
