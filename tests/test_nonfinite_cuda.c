/* The multi-tensor finiteness check on CUDA: the CPU test's cases (nonfinite_cases.h) on the
 * GPU, including more tensors than one launch takes (512), so that the batching into several
 * launches is exercised; and the verdict agrees with the CPU's on the same lists. */
#include "check.h"
#include "nonfinite_cases.h"

static void test_parity(int count) {
    gc_tensor **on_cpu = nonfinite_make(count, gc_cpu()), **on_gpu = calloc((size_t)count, sizeof *on_gpu);
    REQUIRE(on_gpu);
    for (int i = 0; i < count; i++) REQUIRE((on_gpu[i] = gc_to_device(on_cpu[i], gc_cuda(0))));
    CHECK(nonfinite_verdict(on_cpu, count) == 0 && nonfinite_verdict(on_gpu, count) == 0);
    int planted = count - 3; /* in the second launch when count > 512 */
    int64_t index = nonfinite_sizes[planted % 7] ? nonfinite_sizes[planted % 7] - 1 : 0;
    if (nonfinite_sizes[planted % 7] == 0) planted--;
    nonfinite_set(on_cpu[planted], index, NAN);
    nonfinite_set(on_gpu[planted], index, NAN);
    CHECK_MSG(nonfinite_verdict(on_cpu, count) == 1 && nonfinite_verdict(on_gpu, count) == 1,
              "%d tensors, nan in tensor %d", count, planted);
    nonfinite_free(on_cpu, count);
    nonfinite_free(on_gpu, count);
}

int main(void) {
    gc_test_require_cuda();
    nonfinite_check_all(7, gc_cuda(0));
    nonfinite_check_all(9, gc_cuda(0));
    nonfinite_check_all(600, gc_cuda(0)); /* two launches; the last tensor is in the second */
    test_parity(513);
    test_parity(1100);
    return gc_test_result();
}
