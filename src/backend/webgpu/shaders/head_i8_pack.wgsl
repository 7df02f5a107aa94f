// head_i8_pack: the int8 copy of an F16 LM head that greedy decoding streams instead of the table
// (lm_head_i8_argmax.wgsl), made once on the device; with TABLE_F32 the same from an f32 table (the
// f32 copy of a Q8_0 / Q4_0 / Q6_K head, GpuTable::buffer: dequantize_row's values, which the exact
// head multiplies). Per row e (K halves or f32 values):
//
//   m = max |e|,  s = m / 127,  q = clamp(round(e * (127 / m)), -127, 127)   (s = 0, q = 0 if m = 0)
//   c = (1 + 2^-8) (s ||q|| (K + 3) u + ||e - s q|| + u ||e||)                  (u = 2^-24, 2-norms)
//   sq = (1 + 2^-8) s ||q||
//
// c bounds the greedy head's error: for any input h, the f32 value f = s * (f32 fma sum of q h, any
// order) is within c ||h|| of the exact head's logit (the f32 rounding of sum e h):
//   |f - sum e h| <= |s sum q h - sum e h| + s (K + 2) u sum |q h| <= ||e - s q|| ||h|| + s (K + 2) u ||q|| ||h||
//   (Cauchy-Schwarz; the f32 sum of K terms, and the product by s, u |f| more), and the exact head's
//   rounding adds u |sum e h| <= u ||e|| ||h||. The factor 1 + 2^-8 covers the f32 rounding of c
//   itself (its sums of K <= 4096 squares are within K u <= 2^-12 of exact).
// TABLE_F32: e - s q is rounded once more (fma) and its squares may underflow; the rounding is
// relative (inside the margin) and a Q-block row's nonzero values are at least 2^-24 (an f16 scale
// times a nonzero integer), so u ||e|| >= 2^-48 and the margin's 2^-8 c exceeds what underflowed
// squares can hide (sqrt(4096) x 2^-63).
//
//   head: [K, n_vocab] f16 (vec4<u32>: 8 halves; TABLE_F32: f32, 4 values per vec4<u32>)   q8: [n_vocab][K / 4] u32, element 4j + b of a row
//   in byte b of word j (two's complement)   info: [n_vocab] (s, c, sq, 0) f32
// Bindings: 0 head (read), 1 q8 (read_write), 2 info (read_write), 3 params (uniform)
// Dispatch: (n_groups, 1, 1), n_groups <= 65535. 256 threads = 8 teams of 32 lanes; team t packs
// rows 8 (g + i n_groups) + t, i = 0, 1, ...; lane l handles vec4 words l, l + 32, ... of a row.

override K: u32 = 2560u;  // elements per row, a multiple of 8, at most 4096
override PER_LANE: u32 = (K / 8u + 31u) / 32u;  // 8-value units per lane per row (<= 16)
override TABLE_F32: bool = false;  // the table is f32 (read again for the codes rather than kept)

struct Params {
    n_vocab: u32,
    n_groups: u32,
}

@group(0) @binding(0) var<storage, read> head: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> q8: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> info: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> red: array<vec3<f32>, 256>;  // [team][lane]

// Sums (op = 0) or maxes (op = 1) red over each team's 32 lanes; every invocation calls it.
fn team_reduce(lid: u32, v: vec3<f32>, op: u32) -> vec3<f32> {
    let lane = lid % 32u;
    red[lid] = v;
    workgroupBarrier();
    for (var s = 16u; s > 0u; s >>= 1u) {
        if (lane < s) {
            if (op == 0u) {
                red[lid] = red[lid] + red[lid + s];
            } else {
                red[lid] = max(red[lid], red[lid + s]);
            }
        }
        workgroupBarrier();
    }
    let r = red[lid - lane];
    workgroupBarrier();  // red is reused by the next call
    return r;
}

// Four halves as int8 codes (round half to even, as WGSL's round) packed into a u32.
fn pack_codes(e: vec4<f32>, inv: f32) -> u32 {
    let c = vec4<i32>(clamp(round(e * inv), vec4<f32>(-127.0), vec4<f32>(127.0)));
    let b = bitcast<vec4<u32>>(c) & vec4<u32>(0xffu);
    return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
}

// Values 8 i .. 8 i + 3 (hi: + 4 .. + 7) of `row`: from its F16 word wv, or read from the f32 table.
fn unit_half(row: u32, i: u32, wv: vec4<u32>, hi: bool) -> vec4<f32> {
    if (TABLE_F32) { return bitcast<vec4<f32>>(head[row * (K / 4u) + 2u * i + select(0u, 1u, hi)]); }
    if (hi) { return vec4<f32>(unpack2x16float(wv.z), unpack2x16float(wv.w)); }
    return vec4<f32>(unpack2x16float(wv.x), unpack2x16float(wv.y));
}

fn codes_of(w: u32) -> vec4<f32> {
    let c = bitcast<vec4<i32>>(vec4<u32>(w) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
    return vec4<f32>(c);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let team  = lid / 32u;
    let lane  = lid % 32u;
    let words = K / 8u;  // 8-value units per row (F16: vec4<u32> words)
    for (var base = wid.x * 8u; base < p.n_vocab; base += 8u * p.n_groups) {  // uniform trip count
        let row   = base + team;
        let valid = row < p.n_vocab;
        var wv: array<vec4<u32>, 16>;
        var m = 0.0;
        for (var v = 0u; v < PER_LANE; v++) {
            let i = lane + 32u * v;
            if (valid && i < words) {
                if (!TABLE_F32) { wv[v] = head[row * words + i]; }
                let a = abs(unit_half(row, i, wv[v], false));
                let b = abs(unit_half(row, i, wv[v], true));
                m = max(m, max(max(max(a.x, a.y), max(a.z, a.w)), max(max(b.x, b.y), max(b.z, b.w))));
            }
        }
        m = team_reduce(lid, vec3<f32>(m, 0.0, 0.0), 1u).x;
        // s and 127 / m are only used as an approximation: rounding in them is part of e - s q.
        let s   = select(m / 127.0, 0.0, m == 0.0);
        let inv = select(127.0 / m, 0.0, m == 0.0);
        var sums = vec3<f32>(0.0);  // (||q||^2, ||e - s q||^2, ||e||^2)
        for (var v = 0u; v < PER_LANE; v++) {
            let i = lane + 32u * v;
            if (valid && i < words) {
                let lo = unit_half(row, i, wv[v], false);
                let hi = unit_half(row, i, wv[v], true);
                let packed = vec2<u32>(pack_codes(lo, inv), pack_codes(hi, inv));
                q8[row * words + i] = packed;
                let ql = codes_of(packed.x);
                let qh = codes_of(packed.y);
                let dl = fma(vec4<f32>(-s), ql, lo);
                let dh = fma(vec4<f32>(-s), qh, hi);
                sums += vec3<f32>(dot(ql, ql) + dot(qh, qh), dot(dl, dl) + dot(dh, dh), dot(lo, lo) + dot(hi, hi));
            }
        }
        sums = team_reduce(lid, sums, 0u);
        if (valid && lane == 0u) {
            let u = 5.9604645e-8;
            let margin = 1.0 + 1.0 / 256.0;
            var c = (s * sqrt(sums.x) * (f32(K) + 3.0) * u + sqrt(sums.y) + u * sqrt(sums.z)) * margin;
            if (!(c <= 3.0e38)) { c = 3.0e38; }  // a non-finite row: every logit of it is a candidate
            info[row] = vec4<f32>(s, c, s * sqrt(sums.x) * margin, 0.0);
        }
    }
}
