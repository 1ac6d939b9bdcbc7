/* Checkpoints of GPU tensors: a CUDA tensor saves the same bytes as its CPU copy, reads
 * back onto the GPU, and load_into fills GPU parameters (converting the dtype). */
#include "checkpoint_files.h"

/* Bytes are copied, not computed: every comparison is exact. */
#define EXACT 0.0, 0.0

int main(void) {
    gc_test_require_cuda();
    gc_device gpu = gc_cuda(0);
    char folder[PATH_MAX], on_cpu[PATH_MAX], on_gpu[PATH_MAX];
    gc_test_make_folder(folder);
    gc_param_list cpu_list = {0}, gpu_list = {0};
    for (int d = 0; d < GC_DTYPE_COUNT; d++) {
        gc_tensor *cpu = gc_test_random(GC_SHAPE(7, 33), (gc_dtype)d, 100 + (uint64_t)d);
        gc_tensor *moved = gc_to_device(cpu, gpu);
        REQUIRE(moved);
        gc_param_list_add(&cpu_list, "", gc_dtype_name((gc_dtype)d), cpu, false);
        gc_param_list_add(&gpu_list, "", gc_dtype_name((gc_dtype)d), moved, false);
        gc_tensor_release(cpu);
        gc_tensor_release(moved);
    }
    REQUIRE(gc_safetensors_save(gc_test_path(on_cpu, folder, "cpu.safetensors"), &cpu_list, NULL) == GC_OK);
    REQUIRE(gc_safetensors_save(gc_test_path(on_gpu, folder, "gpu.safetensors"), &gpu_list, NULL) == GC_OK);
    size_t cpu_size = 0, gpu_size = 0;
    unsigned char *cpu_bytes = gc_test_read_bytes(on_cpu, &cpu_size), *gpu_bytes = gc_test_read_bytes(on_gpu, &gpu_size);
    CHECK(cpu_bytes && gpu_bytes && cpu_size == gpu_size && memcmp(cpu_bytes, gpu_bytes, cpu_size) == 0);
    free(cpu_bytes);
    free(gpu_bytes);

    gc_safetensors *file;
    REQUIRE(gc_safetensors_open(on_gpu, &file) == GC_OK);
    for (int i = 0; i < cpu_list.count; i++) {
        gc_tensor *got = gc_safetensors_get(file, cpu_list.items[i].name, gpu);
        REQUIRE(got);
        CHECK(gc_device_equal(got->device, gpu));
        gc_test_expect_close(cpu_list.items[i].tensor, got, EXACT, cpu_list.items[i].name);
        gc_tensor_release(got);
    }
    gc_safetensors_close(file);

    /* f32 entry into an f64 GPU parameter: converted on the host, then copied. */
    gc_param_list into = {0};
    gc_tensor *target = gc_zeros(GC_SHAPE(7, 33), GC_F64, gpu);
    REQUIRE(target);
    gc_param_list_add(&into, "", gc_dtype_name(GC_F32), target, false);
    CHECK(gc_safetensors_load_into(on_cpu, &into) == GC_OK);
    gc_test_expect_close(gc_param_list_find(&cpu_list, gc_dtype_name(GC_F32)), target, EXACT, "load_into f64 on cuda:0");
    gc_tensor_release(target);

    gc_param_list_free(&into);
    gc_param_list_free(&cpu_list);
    gc_param_list_free(&gpu_list);
    REQUIRE(unlink(on_cpu) == 0 && unlink(on_gpu) == 0);
    gc_test_remove_folder(folder);
    return gc_test_result();
}
