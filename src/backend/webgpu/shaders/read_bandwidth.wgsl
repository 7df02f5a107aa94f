// read_bandwidth: reads a buffer once and keeps nothing, for `tern bench --roofline`: the read-only
// bandwidth a WGSL kernel reaches on this device (the ceiling of kernels that only stream, as the
// greedy head's int8 table does), where copy_bandwidth.wgsl measures reads and writes together.
//
//   src: [n] vec4<u32>   dst: [threads] u32 (written only when a thread's XOR of its words equals
//   p.never, which the host picks so that it does not happen; the loads stay observable)
// Bindings: 0 src (read), 1 dst (read_write), 2 params (uniform)
// Dispatch: (groups, 1, 1), 256 threads each. Grid-stride: thread i reads elements i + u stride for
// u = 0 .. LOADS - 1, then moves on by LOADS stride (every load instruction of the grid covers a
// contiguous span), so LOADS is how many 16-byte loads each thread has in flight at once.
// ROWS (one of the layouts measure_read_bandwidth tries): the greedy head's pattern instead, teams
// of 32 lanes reading rows of ROW_VEC4 vec4s (lane l: vec4s l, l + 32, ...), the next row's loads
// issued before the current row's words are folded, team rows dealt to the teams in turn.

override LOADS: u32 = 4u;
override ROWS: bool = false;
override ROW_VEC4: u32 = 160u;  // (ROWS) vec4s per row: 2560 bytes, a 2B4T head row in int8

struct Params {
    n: u32,       // vec4 elements
    stride: u32,  // threads in the dispatch
    never: u32,
}

@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

const PER_LANE: u32 = 8u;  // (ROWS) at most ROW_VEC4 <= 256

fn load_row(row: u32, lane: u32) -> array<vec4<u32>, PER_LANE> {
    var w: array<vec4<u32>, PER_LANE>;
    for (var v = 0u; v < PER_LANE; v++) {
        let i = lane + 32u * v;
        if (i < ROW_VEC4 && (row + 1u) * ROW_VEC4 <= p.n) { w[v] = src[row * ROW_VEC4 + i]; }
    }
    return w;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    var acc = vec4<u32>();
    if (ROWS) {
        let team  = gid.x / 32u;
        let lane  = gid.x % 32u;
        let teams = p.stride / 32u;
        var next  = load_row(team, lane);
        for (var row = team; row * ROW_VEC4 < p.n; row += teams) {
            let cur = next;
            next    = load_row(row + teams, lane);
            for (var v = 0u; v < PER_LANE; v++) { acc ^= cur[v]; }
        }
        acc ^= next[0];
    } else {
        var i = gid.x;
        for (; i + (LOADS - 1u) * p.stride < p.n; i += LOADS * p.stride) {
            var w: array<vec4<u32>, 16>;
            for (var u = 0u; u < LOADS; u++) { w[u] = src[i + u * p.stride]; }
            for (var u = 0u; u < LOADS; u++) { acc ^= w[u]; }
        }
        for (; i < p.n; i += p.stride) { acc ^= src[i]; }
    }
    let a = acc.x ^ acc.y ^ acc.z ^ acc.w;
    if (a == p.never) { dst[gid.x] = a; }
}
