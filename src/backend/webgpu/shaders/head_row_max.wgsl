// head_row_max: max |e| of every row e of an F16 LM head, made once on the device for
// lm_head_f16_teams.wgsl's offset sums (OFFSET_SUM), which need a bound on each row's products.
// NaN halves count as infinity (the f16 bit patterns of |e| order as the values, NaN above inf).
//
//   head: [n_vocab][K] f16 (vec4<u32>: 8 halves)   row_max: [n_vocab] f32 (exact: f16 -> f32)
// Bindings: 0 head (read), 1 row_max (read_write), 2 params (uniform)
// Dispatch: (n_groups, 1, 1), n_groups <= 65535. 256 threads = 8 teams of 32 lanes; team t handles
// rows 8 (g + i n_groups) + t, i = 0, 1, ...; lane l the vec4 words l, l + 32, ... of a row.

override K: u32 = 2560u;  // elements per row, a multiple of 8

struct Params {
    n_vocab: u32,
    n_groups: u32,
}

@group(0) @binding(0) var<storage, read> head: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> row_max: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> red: array<u32, 256>;  // [team][lane]: |e| bits

// The larger |half| of each of w's words, as f16 bits in the low 16 bits.
fn abs_bits(w: vec4<u32>) -> vec4<u32> {
    return max(w & vec4<u32>(0x7fffu), (w >> vec4<u32>(16u)) & vec4<u32>(0x7fffu));
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let team  = lid / 32u;
    let lane  = lid % 32u;
    let words = K / 8u;
    let teams = p.n_groups * 8u;
    let n_iters = (p.n_vocab + teams - 1u) / teams;  // uniform: every invocation reaches the barriers
    for (var it = 0u; it < n_iters; it++) {
        let row = (wid.x + it * p.n_groups) * 8u + team;
        var m = vec4<u32>(0u);
        if (row < p.n_vocab) {
            for (var i = lane; i < words; i += 32u) { m = max(m, abs_bits(head[row * words + i])); }
        }
        red[lid] = max(max(m.x, m.y), max(m.z, m.w));
        workgroupBarrier();
        for (var s = 16u; s > 0u; s >>= 1u) {
            if (lane < s) { red[lid] = max(red[lid], red[lid + s]); }
            workgroupBarrier();
        }
        if (lane == 0u && row < p.n_vocab) { row_max[row] = unpack2x16float(min(red[lid], 0x7c00u)).x; }
        workgroupBarrier();  // (the next row writes red again)
    }
}
