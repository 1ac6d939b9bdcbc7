/* SwiGLU's gated product silu(gate) up, fused: composed of ops (a sigmoid from tanh, three
 * products) it would keep three [.., hidden] tensors for the backward where this keeps its
 * two inputs, which the MLP's Linears made anyway; the MLP's inner width is the widest
 * activation of a decoder layer. The arithmetic is tensor/swiglu_impl.h's. */
#include "backend.h"
#include "gradcache/ops.h"
#include "op_internal.h"
#include "op_util.h"
#include "record.h"

static void check_pair(const char *op, const gc_tensor *gate, const gc_tensor *up) {
    char gate_text[128], up_text[128];
    gc_check_float(op, gate);
    gc_check_same_dtype(op, gate, up);
    gc_check_same_device(op, gate, up);
    if (!gc_same_shape(gate, up))
        gc_fatal("%s: gate %s and up %s differ in shape", op, gc_tensor_str(gate, gate_text, sizeof gate_text),
                 gc_tensor_str(up, up_text, sizeof up_text));
}

gc_tensor *gc_swiglu(const gc_tensor *gate, const gc_tensor *up) {
    if (!gate || !up) return NULL;
    check_pair("swiglu", gate, up);
    gc_tensor *out = gc_empty_like(gate);
    if (out) gc_backend_for(gate->device)->swiglu(gc_data(gate), gc_data(up), gc_data(out), (size_t)gc_numel(gate),
                                                  gate->dtype);
    return gc_finish_op(&(gc_op_record){.kind = GC_OP_SWIGLU, .n_inputs = 2,
                                        .inputs = (const gc_tensor *[]){gate, up}, .output = out});
}

bool gc_swiglu_backward(const gc_tensor *gate, const gc_tensor *up, const gc_tensor *g, gc_tensor **d_gate,
                        gc_tensor **d_up) {
    check_pair("swiglu_backward", gate, up);
    check_pair("swiglu_backward", gate, g);
    gc_tensor *gate_grad = d_gate ? gc_empty_like(gate) : NULL, *up_grad = d_up ? gc_empty_like(up) : NULL;
    if ((d_gate && !gate_grad) || (d_up && !up_grad)) {
        gc_tensor_release(gate_grad);
        gc_tensor_release(up_grad);
        return false;
    }
    gc_backend_for(gate->device)->swiglu_backward(gc_data(gate), gc_data(up), gc_data(g),
                                                  gate_grad ? gc_data(gate_grad) : NULL,
                                                  up_grad ? gc_data(up_grad) : NULL, (size_t)gc_numel(gate),
                                                  gate->dtype);
    if (d_gate) *d_gate = gate_grad;
    if (d_up) *d_up = up_grad;
    return true;
}
