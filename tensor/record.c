/* The op observer hook (see record.h). */
#include "record.h"

static const gc_op_observer *observer;

void gc_set_op_observer(const gc_op_observer *new_observer) { observer = new_observer; }

gc_tensor *gc_finish_op(const gc_op_record *record) {
    if (!record->output) return NULL;
    if (observer && observer->wants(record->inputs, record->n_inputs) && !observer->record(record)) {
        gc_tensor_release(record->output);
        return NULL;
    }
    return record->output;
}

bool gc_op_would_record(const gc_tensor *const *inputs, int n_inputs) {
    return observer && observer->wants(inputs, n_inputs);
}
