/* One writer per run folder: process 0 of a run holds an advisory lock on FOLDER/lock for the
 * run's life (an open file description lock, F_OFD_SETLK: two opens conflict even inside one
 * process, and the kernel drops the lock when the holder exits, killed too). The file says
 * who holds it -- "pid P on host H since T" -- so that a refused run names the holder; the
 * file itself stays behind (removing it could let two processes lock two files of one name),
 * and a file nobody holds locked is simply taken over. */
#ifndef GC_TRAIN_RUN_LOCK_H
#define GC_TRAIN_RUN_LOCK_H

#include <stdbool.h>

#include "gradcache/error.h"

typedef struct gc_run_lock {
    bool held; /* false in a zeroed struct: nothing to release */
    int fd;    /* the open lock file, when held */
} gc_run_lock;

/* Takes FOLDER/lock (the folder must exist). GC_OK; GC_ERR_CONFIG when another process (or
 * another trainer of this one) holds it: "FOLDER is being written by pid P on host H since T:
 * one writer per run folder"; GC_ERR_IO naming the file when it cannot be opened or locked.
 * Nothing is held on failure. */
gc_status gc_run_lock_take(gc_run_lock *lock, const char *folder);
/* Releases it (nothing when none is held). */
void gc_run_lock_release(gc_run_lock *lock);

#endif
