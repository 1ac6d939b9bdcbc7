/* The run's secret: what proves that a connection comes from a process of this run (see
 * auth.h), where a process finds it, and the random bytes it and the handshake's nonces are
 * made of. Private to dist/.
 *
 * A process of a run of several finds the secret in the file named by GC_DIST_SECRET_FILE
 * (its bytes, as they are; the file must not be readable by other users), else in
 * GC_DIST_SECRET (the variable's text), which `gradcache launch` sets for its processes
 * when no file is named. */
#ifndef GC_DIST_SECRET_H
#define GC_DIST_SECRET_H

#include <stddef.h>

#include "gradcache/dist.h"

/* `size` bytes from the operating system's generator (getrandom). GC_ERR_IO (recorded) when
 * it has none to give. */
gc_status gc_dist_random_bytes(void *out, size_t size);

/* The secret from the environment (above). GC_ERR_FORMAT naming the variable when neither is
 * set, the file is not a regular file, is readable by others, or the secret is shorter than
 * GC_DIST_SECRET_MIN or longer than GC_DIST_SECRET_MAX bytes; GC_ERR_IO when the file cannot
 * be read. */
gc_status gc_dist_secret_from_env(gc_dist_secret *secret);

/* A fresh secret for a launcher's processes: GC_DIST_SECRET_MIN random bytes written as
 * lowercase hex into text (the value of GC_DIST_SECRET). GC_ERR_IO as gc_dist_random_bytes. */
#define GC_DIST_SECRET_TEXT_SIZE (2 * GC_DIST_SECRET_MIN + 1)
gc_status gc_dist_secret_make_text(char text[GC_DIST_SECRET_TEXT_SIZE]);

#endif
