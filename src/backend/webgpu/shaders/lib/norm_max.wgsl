// The fused prologue's max |y| without a workgroup reduction (the norm max records): the kernel that
// writes x (o-projection, down projection, gate+up, attention) also knows the next norm's weights
// nw, so for every block of 32 outputs it leaves one record, the element with the largest
// p = |fl(x nw)| and a flag when another element of the block comes within 2^-20 of it. The next
// kernel's prologue (lib/act_stage.wgsl, MAX_IN) takes M = the largest p over the records; when
// exactly one element anywhere reaches T = fl(M (1 - 2^-20)), max |y| is that element's
// |fl(fl(x inv) nw)|, computed from its record once inv is known, and no barrier waits for the
// whole workgroup's y. Otherwise (ties, zeros, NaN or infinity) every subgroup, or every invocation
// without subgroups, scans the whole vector itself, still without a barrier, so the result is the
// same bits as the workgroup max in every case.
//
// Why one element suffices: |y_j| = |x_j nw_j| inv (1 + d), |d| <= 2u + u^2 (u = 2^-24), and
// p_j = |x_j nw_j| (1 + d0), |d0| <= u, so |y_j| lies within p_j inv (1 -+ 3.01 u). Every element
// without its own record, or with a record below T, has p_j < T <= M (1 - 15 u): its |y_j| is below
// M inv (1 - 3.01 u) <= |y| of the element with p = M. (Underflow only adds ~2^-149 absolute: far
// below the 1e-5 clamp of max |y| that decides the scale whenever the values are that small.)
//
// Record (2 f32 at NM_REC_BASE + 2 (slot + b), slot = the statistics slot, b = block):
//   (|x_m|, |nw_m|) of the block's element m with the largest p, the sign bit of the first set
//   when the block holds a second element with p >= fl(p_m (1 - 2^-20)) (a tie: the consumer
//   falls back when such a block reaches T). |y| does not depend on the signs, and the consumer
//   recomputes p = |x_m| |nw_m| with the producer's rounding.
//
// This file holds what both sides share; lib/norm_max_out.wgsl the producers' side and
// lib/norm_max_in.wgsl the consumers' (lib/act_stage.wgsl's MAX_IN). The including kernel includes
// lib/numerics.wgsl and lib/wg_reduce.wgsl.

// Where the records start in norm_stats: after the two statistics slots (WebGpuBackend::k_stats_slot
// f32 each).
const NM_REC_BASE: u32 = 512u;

// Subgroups of exactly 32 (the host sets it where SG_EXACT32 holds): records are reduced by
// subgroup operations (REDUX on NVIDIA); otherwise by loops in every invocation and, for the
// producers, workgroup memory.
override NM_SG: bool = false;

fn nm_sg() -> bool { return WG_REDUCE_SG && SG32 && NM_SG; }

// fl(m (1 - 2^-20)) (m 2^-20 is exact): the smallest p that counts as a tie with m.
fn nm_threshold(m: f32) -> f32 { return m - m * 9.5367431640625e-07; }

fn nm_sign(v: f32) -> bool { return (bitcast<u32>(v) & 0x80000000u) != 0u; }

const NM_F32_MAX: f32 = 0x1.fffffep+127f;
