/* The fused attention kernels built for AVX2 (attention_cpu_variant.h): the same bits as the
 * portable build's, twice as wide. */
#define ATTENTION_VARIANT avx2
#include "attention_cpu_variant.h"
