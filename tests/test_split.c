/* The cut of a batch into chunks at the extremes of the chunk size: a size past the rows (up
 * to 2^63 - 1, which a checkpoint or a caller may hold) is one chunk of every row, not an
 * overflow. */
#include "check.h"
#include "gradcache/split.h"

static void test_chunk_count(void) {
    CHECK(gc_chunk_count(10, 3) == 4);
    CHECK(gc_chunk_count(9, 3) == 3);
    CHECK(gc_chunk_count(0, 5) == 0);
    CHECK(gc_chunk_count(10, 10) == 1 && gc_chunk_count(10, 11) == 1);
    CHECK(gc_chunk_count(10, INT64_MAX) == 1);
    CHECK(gc_chunk_count(INT64_MAX, INT64_MAX) == 1);
}

static void test_split_huge_chunk(void) {
    gc_tensor *rows = gc_arange(5, 0, 1, GC_F32, gc_cpu());
    REQUIRE(rows);
    gc_batch batch = {.count = 1, .names = {"x"}, .tensors = {rows}};
    gc_batch chunks[2];
    CHECK(gc_split_by_rows(&batch, INT64_MAX, chunks, 2, NULL) == 1);
    CHECK(chunks[0].count == 1 && chunks[0].tensors[0]->shape[0] == 5);
    gc_batch_release(&chunks[0]);
    gc_tensor_release(rows);
}

int main(void) {
    test_chunk_count();
    test_split_huge_chunk();
    return gc_test_result();
}
