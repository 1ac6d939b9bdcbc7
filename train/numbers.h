/* Numbers written as text that reads back exactly: logs and metadata stay comparable byte
 * for byte between runs, yet 0.0005 is written 0.0005, not 0.00050000000000000001. */
#ifndef GC_TRAIN_NUMBERS_H
#define GC_TRAIN_NUMBERS_H

/* The shortest %.Ng form of value (N from 1 to 17) that strtod reads back as value itself,
 * into buf (at least 32 bytes); returns buf. nan and inf come out as printf writes them. */
const char *gc_format_exact(double value, char *buf, int size);

#endif
