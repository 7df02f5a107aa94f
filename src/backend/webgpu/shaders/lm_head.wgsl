// lm_head: logits[v, t] = head[v] · h[t], with h[t] first rounded to f16 when ROUND_IN is set
// (what ggml does for an F16 head). The dot product is kept in double-float, so each logit is the
// CPU's double sum rounded to f32. The table is read as u32 words: two f16 per word (TABLE_F16,
// unpack2x16float, no shader-f16 needed) or one f32.
//
//   head: [K, n_vocab] f16 or f32   h: [K, T] f32   logits: [n_vocab, T] f32
// Bindings: 0 head (read), 1 h (read), 2 logits (read_write), 3 params (uniform)
// Dispatch: (ceil(n_vocab / ROWS), ceil(T / TOKS), 1). A workgroup owns ROWS vocabulary rows x TOKS
// tokens; its threads form ROWS teams of WG / ROWS lanes striding over the row's words (the host
// picks lanes ~ K/8, at most 64, so that each lane reads a few words).

// #include "lib/numerics.wgsl"

override WG: u32 = 256u;
override ROWS: u32 = 4u;       // divides WG; WG / ROWS a power of two
override TOKS: u32 = 1u;       // 1..4
override TABLE_F16: bool = true;
override ROUND_IN: bool = false;  // h rounded to f16 first (a pipeline constant: one sum form in the loop)

struct Params {
    n_vocab: u32,
    k: u32,            // elements per row (even for f16)
    n_tokens: u32,
    head_offset: u32,  // u32 index of row 0 of the table
    h_offset: u32,     // f32 index of h[0, 0]
    h_stride: u32,
    out_offset: u32,   // f32 index of logits[0, 0]
    out_stride: u32,
    rn_zero: u32,      // 0, filled by the encoder (mul_rn, lib/numerics.wgsl)
}

@group(0) @binding(0) var<storage, read> head: array<u32>;
@group(0) @binding(1) var<storage, read> h: array<f32>;
@group(0) @binding(2) var<storage, read_write> logits: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> red: array<vec2<f32>, WG * TOKS>;  // [thread][token]

fn h_at(t: u32, i: u32) -> f32 {
    let v = h[p.h_offset + t * p.h_stride + i];
    return select(v, round_f16(v), ROUND_IN);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let lanes = WG / ROWS;
    let team  = lid / lanes;
    let lane  = lid % lanes;
    let row   = wid.x * ROWS + team;
    let tok0  = wid.y * TOKS;
    let n_tok = min(TOKS, p.n_tokens - tok0);

    var acc: array<vec2<f32>, 4>;
    if (row < p.n_vocab) {
        if (TABLE_F16) {
            let base = p.head_offset + row * (p.k / 2u);
            for (var kw = lane; kw < p.k / 2u; kw += lanes) {
                let e = unpack2x16float(head[base + kw]);
                for (var t = 0u; t < n_tok; t++) {
                    let h0 = h_at(tok0 + t, 2u * kw);
                    let h1 = h_at(tok0 + t, 2u * kw + 1u);
                    if (ROUND_IN) {  // f16 x f16: the f32 product is exact
                        acc[t] = df_add_f(df_add_f(acc[t], e.x * h0), e.y * h1);
                    } else {
                        acc[t] = df_fma(df_fma(acc[t], e.x, h0), e.y, h1);
                    }
                }
            }
        } else {
            let base = p.head_offset + row * p.k;
            for (var i = lane; i < p.k; i += lanes) {
                let e = bitcast<f32>(head[base + i]);
                for (var t = 0u; t < n_tok; t++) {
                    acc[t] = df_fma(acc[t], e, h_at(tok0 + t, i));
                }
            }
        }
    }
    for (var t = 0u; t < TOKS; t++) { red[lid * TOKS + t] = acc[t]; }
    workgroupBarrier();
    for (var s = lanes / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var t = 0u; t < TOKS; t++) {
                red[lid * TOKS + t] = df_add(red[lid * TOKS + t], red[(lid + s) * TOKS + t]);
            }
        }
        workgroupBarrier();
    }
    if (lane == 0u && row < p.n_vocab) {
        for (var t = 0u; t < n_tok; t++) {
            logits[p.out_offset + (tok0 + t) * p.out_stride + row] = df_to_f32(red[lid * TOKS + t]);
        }
    }
}
