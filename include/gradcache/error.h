/* Error model.
 *
 * Two kinds of failure, handled differently on purpose:
 *
 *  - A programmer error (shape, dtype or device mismatch, an index out of range,
 *    a NULL where a tensor is required) cannot be handled by the caller in any useful
 *    way: the program stops with ONE line on stderr naming the op and the offending
 *    values, then abort()s.
 *
 *  - A condition the caller can handle (out of memory, memory limit reached, I/O,
 *    malformed file, dead peer) is returned: the function returns NULL (or a non-zero
 *    gc_status) and records a status and a message in thread-local storage. Nothing is
 *    leaked. Every op given a NULL tensor input returns NULL at once without touching
 *    the recorded error, so a chain of ops can be checked once at its end:
 *
 *        gc_tensor *h = gc_matmul(x, w, false, false);
 *        gc_tensor *y = gc_relu(h);        // NULL if the matmul failed
 *        gc_tensor_release(h);             // releasing NULL is a no-op
 *        if (!y) fprintf(stderr, "%s\n", gc_last_error());
 */
#ifndef GRADCACHE_ERROR_H
#define GRADCACHE_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gc_status {
    GC_OK = 0,
    GC_ERR_OUT_OF_MEMORY, /* the device (or the host) has no memory left */
    GC_ERR_MEM_LIMIT,     /* the per-device byte limit set by the user was reached */
    GC_ERR_IO,            /* a file could not be read or written */
    GC_ERR_FORMAT,        /* a file or a value from outside is malformed */
    GC_ERR_PEER,          /* a peer process died or hung up */
    GC_ERR_UNAVAILABLE,   /* a backend or device that is not built or not present */
    GC_ERR_NON_FINITE,    /* a value that must be finite is an inf or a nan (an overflow) */
    GC_ERR_CONFIG         /* a setting the caller chose cannot work with the data, the device or the
                             launcher's environment (a batch larger than the data, a dtype the
                             device lacks): the caller's to change, not a fault of the inputs */
} gc_status;

/* The status and message of the most recent recoverable error on this thread. */
gc_status gc_last_status(void);
const char *gc_last_error(void);
void gc_clear_error(void);
const char *gc_status_name(gc_status status);

/* Records a recoverable error (printf-style message) for the caller to read. The message is
 * one line: a control byte in it (a newline in a quoted name, say) is stored as '?'. */
void gc_set_error(gc_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Stops the program on a programmer error: one line "gradcache: <message>" on stderr,
 * then abort(). */
#if defined(__GNUC__)
__attribute__((noreturn, format(printf, 1, 2)))
#endif
void gc_fatal(const char *fmt, ...);

#ifdef __cplusplus
}
#endif
#endif
