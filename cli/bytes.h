/* Byte counts for people: binary units (KiB, MiB, ...). */
#ifndef GC_CLI_BYTES_H
#define GC_CLI_BYTES_H

/* The largest unit 1024^k (k <= 4) not above `bytes`, and its name ("B", "KiB", ...). */
double gc_byte_unit(double bytes, const char **name);
/* "1.59 MiB" into buf (3 significant digits); returns buf. */
const char *gc_format_bytes(double bytes, char *buf, int size);

#endif
