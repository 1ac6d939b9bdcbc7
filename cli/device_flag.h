/* The --device flag of the commands that compute: "cpu", or "cuda" for the first GPU. */
#ifndef GC_CLI_DEVICE_FLAG_H
#define GC_CLI_DEVICE_FLAG_H

#include "gradcache/device.h"

enum { GC_DEVICE_FLAG_CPU, GC_DEVICE_FLAG_CUDA };
/* The choices of a GC_FLAG_CHOICE flag, in the order of the enum above. */
extern const char *const gc_device_flag_choices[];

/* The device `choice` names: 0, or (after one line naming --device, when no GPU is usable)
 * the usage exit status. */
int gc_device_from_flag(const char *command, int choice, gc_device *device);

#endif
