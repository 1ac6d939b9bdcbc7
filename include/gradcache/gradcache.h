/* The whole public API of the gradcache engine. */
#ifndef GRADCACHE_GRADCACHE_H
#define GRADCACHE_GRADCACHE_H

#include "gradcache/autograd.h"
#include "gradcache/cache.h"
#include "gradcache/checkpoint.h"
#include "gradcache/clock.h"
#include "gradcache/config.h"
#include "gradcache/ddp.h"
#include "gradcache/device.h"
#include "gradcache/dist.h"
#include "gradcache/dtype.h"
#include "gradcache/error.h"
#include "gradcache/files.h"
#include "gradcache/hash.h"
#include "gradcache/launch.h"
#include "gradcache/loss.h"
#include "gradcache/loss_scaler.h"
#include "gradcache/measure.h"
#include "gradcache/memory.h"
#include "gradcache/model_fetch.h"
#include "gradcache/nn.h"
#include "gradcache/ops.h"
#include "gradcache/optim.h"
#include "gradcache/pretrained.h"
#include "gradcache/random.h"
#include "gradcache/rng.h"
#include "gradcache/tensor.h"
#include "gradcache/tokenizer.h"
#include "gradcache/train.h"
#include "gradcache/zero.h"

#endif
