/* Grad mode: one flag per thread; scopes nest by restoring the previous value. */
#include "gradcache/autograd.h"

static _Thread_local bool grad_disabled;

bool gc_set_grad_enabled(bool enabled) {
    bool previous = !grad_disabled;
    grad_disabled = !enabled;
    return previous;
}

bool gc_grad_enabled(void) { return !grad_disabled; }
