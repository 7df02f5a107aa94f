enable chromium_experimental_subgroup_matrix;

// subgroup_matrix_probe: one 16 x 16 x 32 int8 product on the subgroup matrices (Dawn's
// chromium_experimental_subgroup_matrix; tensor cores on NVIDIA), c = a b, exact in i32, loaded from
// workgroup memory at an offset with the builtins spelled as ternary_gemm_mma.wgsl spells them (the
// layout as a template argument). Run by WebGpuBackend::subgroup_matrix_probe with the offsets and
// strides in i8 elements or in the i32 words that hold them (the unit differs between Dawn versions
// and spellings), to find the one that gives the integer product. One subgroup of 32 invocations.
//
//   a: [16 rows][64] i8, row-major, 4 per i32 (the lowest byte first): the product takes columns 32..63
//   b: [16 columns][64] i8, column-major, 4 per i32: the product takes rows 32..63
//   c: [16 rows][32] i32: the product goes to columns 16..31
// Bindings: 0 a (read), 1 b (read), 2 c (read_write), 3 params (uniform)

struct Params {
    off_ab: u32,     // offset of the operands in a and b (32 i8 = 8 words)
    stride_ab: u32,  // their row / column stride (64 i8 = 16 words)
}

@group(0) @binding(0) var<storage, read> a: array<i32>;
@group(0) @binding(1) var<storage, read> b: array<i32>;
@group(0) @binding(2) var<storage, read_write> c: array<i32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> wa: array<i32, 256>;
var<workgroup> wb: array<i32, 256>;

@compute @workgroup_size(32)
fn main(@builtin(local_invocation_index) lid: u32) {
    for (var i = lid; i < 256u; i += 32u) {
        wa[i] = a[i];
        wb[i] = b[i];
    }
    workgroupBarrier();
    let l = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>, row_major>(&wa, p.off_ab, p.stride_ab);
    let r = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>, col_major>(&wb, p.off_ab, p.stride_ab);
    var acc: subgroup_matrix_result<i32, 16, 16>;
    acc = subgroupMatrixMultiplyAccumulate(l, r, acc);
    subgroupMatrixStore<row_major>(&c, 16u, acc, 32u);
}
