// The epilogue shared by the QKV kernels (qkv_rope.wgsl, qkv_rope_decode.wgsl): rows visited in
// "slots" (within a head, slot 4u + e (4u < n_rot) is dimension 2u, 2u+1, 2u+half, 2u+1+half for
// e = 0..3, half = n_rot / 2; slot j >= n_rot is dimension j), so that one thread holds both members
// of two NeoX RoPE pairs and two whole f16 words of the cache. store_qkv_unit applies RoPE to q and
// k heads and writes q to q_out, k and v into the cache (f16 rounded to nearest even like
// core/fp16.h, or f32), with the CPU's arithmetic.
// The including kernel declares the bindings rope, k_cache, v_cache, the overrides K_F16 and V_F16,
// a uniform p with head_dim, n_rot, n_head, n_head_kv, k_offset, v_offset, n_embd_kv, and
//   store_q(tok, i, v)            element i of token tok's q (q_out[p.q_offset + tok p.q_stride + i])

// n_rot as a pipeline constant where the host sets it (the decode kernel): slot_dim() gives the
// weight rows a workgroup loads, which then need nothing from the uniform buffer (whose first read
// waits for memory). 0: the uniform's (right for n_rot = 0 too).
override QKV_N_ROT: u32 = 0u;

fn qkv_n_rot() -> u32 {
    if (QKV_N_ROT != 0u) { return QKV_N_ROT; }
    return p.n_rot;
}

// Head-relative dimension of slot j.
fn slot_dim(j: u32) -> u32 {
    let n_rot = qkv_n_rot();
    if (j >= n_rot) { return j; }
    let e = j & 3u;
    return 2u * (j >> 2u) + (e & 1u) + (e >> 1u) * (n_rot / 2u);
}

// Stores two consecutive cache elements (e even) of one position.
fn store_kv(is_k: bool, e: u32, a: f32, b: f32) {
    if (is_k) {
        if (K_F16) {
            let w = (p.k_offset + e) / 2u;
            let word = pack_f16x2(a, b);
            k_cache[w] = word;
        } else {
            k_cache[p.k_offset + e]      = bitcast<u32>(a);
            k_cache[p.k_offset + e + 1u] = bitcast<u32>(b);
        }
    } else {
        if (V_F16) {
            let w = (p.v_offset + e) / 2u;
            let word = pack_f16x2(a, b);
            v_cache[w] = word;
        } else {
            v_cache[p.v_offset + e]      = bitcast<u32>(a);
            v_cache[p.v_offset + e + 1u] = bitcast<u32>(b);
        }
    }
}

// RoPE and store of the four slots j .. j + 3 (j a multiple of 4) of head `head` for token `tok`
// at position `pos`, its k and v into cache row `row`; v holds the projections of those slots.
fn store_qkv_unit(head: u32, j: u32, tok: u32, pos: u32, row: u32, v_in: array<f32, 4>) {
    store_qkv_unit_rope(head, j, tok, row, v_in, rope_of_unit(head, j, pos));
}

// The (cos, sin) pairs of RoPE for slots j .. j + 3 of `head` at `pos` (zeros where no RoPE applies):
// the decode kernel loads them with the weights (lib/qkv_decode.wgsl).
fn rope_of_unit(head: u32, j: u32, pos: u32) -> vec4<f32> {
    if (head >= p.n_head + p.n_head_kv || j >= qkv_n_rot()) { return vec4<f32>(); }
    let at = pos * (qkv_n_rot() / 2u) + 2u * (j >> 2u);
    return vec4<f32>(rope[at], rope[at + 1u]);
}

// store_qkv_unit with the RoPE pairs given (rope_of_unit), k and v into cache row `row`.
fn store_qkv_unit_rope(head: u32, j: u32, tok: u32, row: u32, v_in: array<f32, 4>, cs: vec4<f32>) {
    var v = v_in;
    let hd = p.head_dim;
    let is_qk = head < p.n_head + p.n_head_kv;
    if (is_qk && j < qkv_n_rot()) {
        // Pairs (2u', 2u'+half) and (2u'+1, 2u'+1+half): x0 * c - x1 * s, x0 * s + x1 * c.
        let c0 = cs.xy;
        let c1 = cs.zw;
        // Each product rounded before the add, as the CPU (no fma contraction: mul_rn).
        let a0 = mul_rn(v[0], c0.x) - mul_rn(v[2], c0.y);
        let b0 = mul_rn(v[0], c0.y) + mul_rn(v[2], c0.x);
        let a1 = mul_rn(v[1], c1.x) - mul_rn(v[3], c1.y);
        let b1 = mul_rn(v[1], c1.y) + mul_rn(v[3], c1.x);
        v[0] = a0; v[2] = b0; v[1] = a1; v[3] = b1;
    }
    // Dimensions held: (d0, d0 + 1) and (d2, d2 + 1).
    let d0 = slot_dim(j);
    let d2 = slot_dim(j + 2u);
    if (head < p.n_head) {
        let qo = head * hd;
        store_q(tok, qo + d0, v[0]);
        store_q(tok, qo + d0 + 1u, v[1]);
        store_q(tok, qo + d2, v[2]);
        store_q(tok, qo + d2 + 1u, v[3]);
    } else {
        let is_k = head < p.n_head + p.n_head_kv;
        let kvh  = select(head - p.n_head - p.n_head_kv, head - p.n_head, is_k);
        let e0   = row * p.n_embd_kv + kvh * hd;
        store_kv(is_k, e0 + d0, v[0], v[1]);
        store_kv(is_k, e0 + d2, v[2], v[3]);
    }
}
