/* STUB */
#include "gradcache/ops.h"
#include "gradcache/random.h"
