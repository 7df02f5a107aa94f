// The consumers' side of the norm max records (lib/norm_max.wgsl says what they are and why):
// lib/act_stage.wgsl's fused prologue with MAX_IN takes max |y| from them. The including kernel
// includes lib/norm_max.wgsl and declares stage_record(b) -> vec2<f32> (lib/decode_io.wgsl),
// stage_x4(j) and stage_nw4(j).

// What the records say before inv is known: the element whose |y| is the max (x = |x_m|,
// w = |nw_m|) when `one` holds.
struct NmCandidate {
    x: f32,
    w: f32,
    one: bool,
}

// From this invocation's records rc[i] = record lid % 32 + 32 i (nm_sg: stage_load reads them), or
// from all nb records read here (without subgroups).
@diagnostic(off, subgroup_uniformity)
fn nm_candidate(lid: u32, nb: u32, rc: array<vec2<f32>, 8>) -> NmCandidate {
    var c: NmCandidate;
    var mk = 0u;
    if (nm_sg()) {
        for (var i = 0u; i < 8u; i++) {
            if (lid % 32u + 32u * i < nb) { mk = max(mk, order_key(abs(rc[i].x) * rc[i].y)); }
        }
        mk = sg_umax(mk);
    } else {
        for (var b = 0u; b < nb; b++) {
            let r = stage_record(b);
            mk = max(mk, order_key(abs(r.x) * r.y));
        }
    }
    let m = from_order_key(mk);
    let t = nm_threshold(m);
    var count = 0u;
    var xk    = 0u;  // (bits of non-negative floats order as u32: the one candidate's, or 0)
    var wk    = 0u;
    if (nm_sg()) {
        for (var i = 0u; i < 8u; i++) {
            if (lid % 32u + 32u * i < nb) {
                let r = rc[i];
                if (abs(r.x) * r.y >= t) {
                    count += select(1u, 2u, nm_sign(r.x));
                    xk = max(xk, bitcast<u32>(abs(r.x)));
                    wk = max(wk, bitcast<u32>(r.y));
                }
            }
        }
        count = sg_uadd(count);
        xk    = sg_umax(xk);
        wk    = sg_umax(wk);
    } else {
        for (var b = 0u; b < nb; b++) {
            let r = stage_record(b);
            if (abs(r.x) * r.y >= t) {
                count += select(1u, 2u, nm_sign(r.x));
                xk = max(xk, bitcast<u32>(abs(r.x)));
                wk = max(wk, bitcast<u32>(r.y));
            }
        }
    }
    c.x   = bitcast<f32>(xk);
    c.w   = bitcast<f32>(wk);
    c.one = count == 1u && m > 0.0 && m <= NM_F32_MAX;
    return c;
}

// max |y| over the k elements, y = (x * inv) * nw (the prologue's rounding): from the candidate,
// else scanned (every subgroup, or every invocation, reads all of x and nw; no barrier).
@diagnostic(off, subgroup_uniformity)
fn nm_amax(lid: u32, k: u32, inv: f32, c: NmCandidate) -> f32 {
    if (c.one) {
        let y = abs((c.x * inv) * c.w);
        if (y <= NM_F32_MAX) { return y; }
    }
    let step  = select(1u, 32u, nm_sg());
    let start = select(0u, lid % 32u, nm_sg());
    var m     = 0.0;
    for (var j = start; j < k / 4u; j += step) {
        let y = (stage_x4(j) * inv) * stage_nw4(j);
        m = max(m, max(max(abs(y.x), abs(y.y)), max(abs(y.z), abs(y.w))));
    }
    if (nm_sg()) { return sg_max(m); }
    return m;
}
