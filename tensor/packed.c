/* Weights' packed forms (gradcache/tensor.h, gc_tensor_set_weight; packed.h).
 *
 * A GEMM packs op(b) into panels before it multiplies; for a weight that is the same work on
 * every product, and at one row of a (one text encoded alone) it costs more than the multiply
 * itself. So a weight's storage keeps, per product shape (op(b)'s offset, k, n, transpose
 * and dtype), the panels the backend packs, with the version they were packed at: a product
 * at another version repacks them in place first, so a form is never stale.
 *
 * A form is kept from the second product of one version on, never from the first: a plain
 * training step multiplies each form once before the optimizer writes the weight, and would
 * only pay memory for it; a GradCache step (one product per chunk and pass) or a stream of
 * inference batches multiplies it many times. Once kept, a form is refreshed at its first
 * product of every version (packing into it costs what packing into scratch does).
 *
 * The panels are what the GEMM packs itself, so a product gives the same bits with or
 * without them. They are allocated through the allocator and counted as packed_bytes, not as
 * live bytes (alloc.h says why); when the memory is refused (a limit), the product packs its
 * own and nothing is kept. */
#include <stdlib.h>

#include "alloc.h"
#include "packed.h"

/* One kept form of op(b). */
typedef struct gc_packed_form {
    struct gc_packed_form *next;
    size_t offset;   /* op(b)'s first element in the storage */
    int64_t k, n;    /* op(b) [k, n], stored [n, k] when trans_b */
    bool trans_b;
    gc_dtype dtype;
    bool seen;                 /* a product packed it for itself at seen_version */
    uint64_t seen_version;
    void *panels;              /* [nbytes] on the storage's device, or NULL */
    size_t nbytes;
    uint64_t version;          /* the storage's version the panels were packed at */
} gc_packed_form;

static bool packing_off;

void gc_set_weight_packing(bool enabled) { packing_off = !enabled; }

void gc_tensor_set_weight(gc_tensor *t) { t->storage->weight = true; }
bool gc_tensor_is_weight(const gc_tensor *t) { return t->storage->weight; }
uint64_t gc_tensor_version(const gc_tensor *t) { return t->storage->version; }
void gc_tensor_mark_written(gc_tensor *t) { t->storage->version++; }

static gc_packed_form *form_for(gc_storage *storage, const gc_tensor *b, const gc_matmul_args *args) {
    for (gc_packed_form *f = storage->packed; f; f = f->next)
        if (f->offset == b->offset && f->k == args->k && f->n == args->n && f->trans_b == args->trans_b &&
            f->dtype == args->dtype)
            return f;
    gc_packed_form *f = calloc(1, sizeof *f);
    if (!f) gc_fatal("matmul: out of host memory for a packed form's header");
    *f = (gc_packed_form){.next = storage->packed, .offset = b->offset, .k = args->k, .n = args->n,
                          .trans_b = args->trans_b, .dtype = args->dtype};
    storage->packed = f;
    return f;
}

/* The form's panels, of nbytes, allocated or kept; NULL when the memory is refused. */
static void *panels_of(gc_packed_form *f, gc_device device, size_t nbytes) {
    if (f->panels && f->nbytes == nbytes) return f->panels;
    gc_free_packed(device, f->panels, f->nbytes);
    f->panels = gc_alloc_packed(device, nbytes);
    f->nbytes = f->panels ? nbytes : 0;
    return f->panels;
}

void gc_packed_prepare(const gc_tensor *b, gc_matmul_args *args) {
    gc_storage *storage = b->storage;
    if (!storage->weight) return;
    args->b_is_weight = true;
    const gc_backend *backend = gc_backend_for(b->device);
    size_t nbytes = 0;
    if (packing_off) gc_packed_free(storage); /* what was kept before packing was turned off */
    if (packing_off || !backend->pack_b_bytes) return;
    backend->pack_b_bytes(args, &nbytes);
    if (!nbytes) return;
    gc_packed_form *f = form_for(storage, b, args);
    uint64_t version = storage->version;
    if (f->panels && f->nbytes == nbytes && f->version == version) {
        args->packed_b = f->panels;
        return;
    }
    bool second = f->seen && f->seen_version == version;
    if (!f->panels && !second) { /* the first product at this version packs for itself */
        f->seen = true;
        f->seen_version = version;
        return;
    }
    if (!panels_of(f, b->device, nbytes)) return;
    backend->pack_b(args, f->panels);
    f->version = version;
    args->packed_b = f->panels;
}

void gc_packed_free(gc_storage *storage) {
    for (gc_packed_form *f = storage->packed, *next; f; f = next) {
        next = f->next;
        gc_free_packed(storage->device, f->panels, f->nbytes);
        free(f);
    }
    storage->packed = NULL;
}
