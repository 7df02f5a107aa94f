// Where a query column's keys and values are, for the split attention kernels
// (attention_split_*.wgsl) and the paged rope_kv.wgsl. With PAGED, the columns of a batch of
// sequences in a paged KV cache (backend.h: KvBatch): cols[4 t ..] = (position, sequence, cache row,
// 0) and pages = [n_seq][max_pages] physical pages, so that position p of the column's sequence is
// cache row pages[seq max_pages + p / PAGE] PAGE + p % PAGE. Without PAGED, one sequence in a
// contiguous cache: column t at position pos0 + t, position p in cache row p.
// The including kernel declares `cols` and `pages` (array<i32>, read; any buffer without PAGED) and
// a uniform p with pos0, max_pages, cols_offset and pages_offset (i32 indices of cols[0], pages[0]).

override PAGED: bool = false;
override PAGE: u32 = 256u;  // positions per page (PAGED)
override BLOCK_ROWS: bool = true;  // kv_row_in_block: one page look-up per block of 32 positions

struct KvColumn {
    pos: u32,    // the column's position (it attends positions 0 ..= pos)
    table: u32,  // index in `pages` of its sequence's first entry (PAGED)
}

fn kv_column(t: u32) -> KvColumn {
    if (PAGED) {
        let c = p.cols_offset + 4u * t;
        return KvColumn(u32(cols[c]), p.pages_offset + u32(cols[c + 1u]) * p.max_pages);
    }
    return KvColumn(p.pos0 + t, 0u);
}

// The cache row of position `pos` of the column's sequence.
fn kv_row(c: KvColumn, pos: u32) -> u32 {
    if (PAGED) { return u32(pages[c.table + pos / PAGE]) * PAGE + pos % PAGE; }
    return pos;
}

// The cache row of position `pos` in the block of 32 positions that starts at `pos0` (a multiple of
// 32, pos0 <= pos < pos0 + 32), given base = kv_row(c, pos0): where PAGE is a multiple of 32 the
// block lies in one page, so its rows are consecutive and the page table is read once per block
// instead of once per position (a load that each V or K load would otherwise wait for). With
// BLOCK_ROWS false (the including kernel's override) every position looks its page up.
fn kv_row_in_block(c: KvColumn, base: u32, pos0: u32, pos: u32) -> u32 {
    if (PAGED && (!BLOCK_ROWS || PAGE % 32u != 0u)) { return kv_row(c, pos); }
    return base + (pos - pos0);
}

// kv_column(t) as a uniform value (read by invocation 0, shared through workgroup memory), so that
// a workgroup may return early on it before its barriers. Every invocation must call it.
var<workgroup> kv_col_wg: KvColumn;
fn kv_column_uniform(lid: u32, t: u32) -> KvColumn {
    if (lid == 0u) { kv_col_wg = kv_column(t); }
    return workgroupUniformLoad(&kv_col_wg);
}
