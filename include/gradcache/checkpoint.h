/* Checkpoints in the safetensors format (https://huggingface.co/docs/safetensors): an
 * 8-byte little-endian header length, a JSON header mapping each tensor name to its
 * dtype ("F32", "F16", "BF16", "I32", "F64"), shape and [begin, end) byte offsets into the
 * data that follows, and an optional "__metadata__" object of string values. PyTorch and
 * Hugging Face tools read what this writes, and this reads what they write (for the dtypes
 * above).
 *
 * Writing is atomic (gradcache/files.h): a hidden temporary file in the same folder, fsync,
 * rename; a crash leaves the old file or the new one, never half of one, and
 * gc_remove_stale_temporaries clears what a killed writer left. Files are
 * deterministic: the tensors are laid out as the reference writer lays them out (by dtype,
 * widest first: F64, F32, I32, BF16, F16; then by name), which also aligns every tensor to
 * its element size, and metadata keys are sorted; for the same content (and at most one
 * metadata key, whose order the reference leaves to chance) gc_safetensors_save_plain
 * writes the bytes the official Python library writes.
 *
 * The checksum. The format has none, so a flipped bit in the tensor data would load
 * silently. gc_safetensors_save adds one metadata entry, GC_SAFETENSORS_CHECKSUM_KEY: the
 * XXH64 (seed 0) of the whole data section (every byte after the header, the tensors in
 * file order), as 16 lowercase hex digits -- what `tail -c +$((9 + N)) FILE | xxhsum -H64`
 * prints for a header of N bytes. The file stays a valid safetensors file for every other
 * reader. Opening a file that has the entry recomputes the hash and refuses the file
 * (GC_ERR_FORMAT naming it) when they differ; a file without it (written elsewhere) opens
 * as before. It catches accidents -- bit flips, torn or overwritten blocks -- with a chance
 * of 2^-64 of missing one; it does not cover the header (whose JSON and sizes are checked
 * as below) and it is no defence against a deliberate edit, which can recompute it.
 *
 * Reading checks everything it relies on (sizes, offsets in range, known dtypes, shape
 * against byte count, at most GC_MAX_DIMS dims, unique names, a header of sane size that is
 * strict JSON) and, as the reference does, that the tensors cover the data buffer exactly:
 * no overlaps and no bytes that belong to no tensor. A malformed file is rejected with
 * GC_ERR_FORMAT and a message naming the file and the problem; a file that cannot be read
 * gives GC_ERR_IO with the system's reason. Nothing is leaked on any error. */
#ifndef GRADCACHE_CHECKPOINT_H
#define GRADCACHE_CHECKPOINT_H

#include "gradcache/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest JSON header accepted (the format's reference implementation uses 100 MB). */
#define GC_SAFETENSORS_MAX_HEADER (100u << 20)

/* The metadata key of the data checksum (see above), and the width of its value. */
#define GC_SAFETENSORS_CHECKSUM_KEY "gradcache.data_xxh64"
#define GC_SAFETENSORS_CHECKSUM_DIGITS 16

/* Writes every tensor of `tensors` under its name, with metadata given as
 * {key, value, key, value, ..., NULL} (or NULL for none) and the checksum of the data.
 * Tensors on a GPU are copied to the host. GC_ERR_IO (the file untouched) on failure;
 * GC_ERR_FORMAT (nothing written) for a header that would pass GC_SAFETENSORS_MAX_HEADER.
 * Names must be non-empty, unique, valid UTF-8 and other than "__metadata__", metadata keys
 * unique, valid UTF-8 and other than GC_SAFETENSORS_CHECKSUM_KEY: anything else is a
 * programmer error. */
gc_status gc_safetensors_save(const char *path, const gc_param_list *tensors, const char *const *metadata);
/* The same without the checksum: exactly the given content, as the reference writer writes
 * it (for files compared byte for byte with another tool's). */
gc_status gc_safetensors_save_plain(const char *path, const gc_param_list *tensors, const char *const *metadata);

/* An opened file: the header parsed and checked, the data read. */
typedef struct gc_safetensors gc_safetensors;

/* *file is NULL on failure. Only a regular file is read (its size bounds the reading): a
 * folder, a device or a pipe is GC_ERR_IO at once, never waited on. */
gc_status gc_safetensors_open(const char *path, gc_safetensors **file);
/* The same from `size` bytes of memory (copied: the buffer may go away afterwards); `name`
 * stands for the file in messages. */
gc_status gc_safetensors_open_memory(const void *data, size_t size, const char *name, gc_safetensors **file);
/* The entries, in name order. Entries of a dtype the format defines but gradcache has no
 * tensors of (I64, U8, BOOL, ...: a BERT checkpoint's position_ids) are listed too. */
int gc_safetensors_count(const gc_safetensors *file);
const char *gc_safetensors_name(const gc_safetensors *file, int index);
/* An entry's dtype as the format spells it ("F32", "I64", ...), and its shape. */
const char *gc_safetensors_dtype_of(const gc_safetensors *file, int index, int *ndim, int64_t shape[GC_MAX_DIMS]);
/* A new tensor holding the named entry on `device`; NULL with GC_ERR_FORMAT when there is no
 * such entry or its dtype is not one of gradcache's. */
gc_tensor *gc_safetensors_get(const gc_safetensors *file, const char *name, gc_device device);
/* The bytes of tensor data: the sum of every entry's size (the file's own size, less its
 * header), known before any tensor is made. */
uint64_t gc_safetensors_data_size(const gc_safetensors *file);
/* A metadata value, or NULL (also for GC_SAFETENSORS_CHECKSUM_KEY, checked on open and not
 * listed among the metadata). */
const char *gc_safetensors_metadata(const gc_safetensors *file, const char *key);
/* The metadata keys, in sorted order. */
int gc_safetensors_metadata_count(const gc_safetensors *file);
const char *gc_safetensors_metadata_key(const gc_safetensors *file, int index);
/* NULL is a no-op. */
void gc_safetensors_close(gc_safetensors *file);

/* Copies every tensor of `into` from the file entry of the same name (same shape; the
 * dtype is converted if it differs); entries of the file that `into` lacks are ignored.
 * GC_ERR_FORMAT naming the file and the tensor when one is missing or of another shape;
 * nothing is changed then, because every tensor is checked before the first is copied
 * (only an allocation failure while copying can leave some tensors loaded). */
gc_status gc_safetensors_load_into(const char *path, const gc_param_list *into);
/* The same from an opened file, tensor i of `into` from the entry named file_names[i] (or
 * from its own name when file_names is NULL). An entry of a dtype gradcache has no tensors
 * of is GC_ERR_FORMAT naming it. */
gc_status gc_safetensors_load_named(const gc_safetensors *file, const gc_param_list *into,
                                    const char *const *file_names);

/* The strict form, for a file that must hold exactly `into` (the parameters of a model it
 * describes): every tensor of `into` from the entry of its name, of its shape AND dtype (no
 * conversion), and no entry that `into` lacks, except those whose names start with one of
 * `others` (a NULL-terminated list of prefixes, or NULL), which the caller reads itself.
 * GC_ERR_FORMAT naming the file and the first tensor that does not fit; nothing is changed
 * then. */
gc_status gc_safetensors_load_exact(const gc_safetensors *file, const gc_param_list *into, const char *const *others);
/* gc_safetensors_load_exact, but an entry may be of a narrower float dtype than its tensor
 * when the conversion loses nothing (bf16 or f16 into f32 or f64, f32 into f64): adapters
 * saved in a 16-bit base's dtype (PEFT's) loaded into f32 ones. A narrowing is GC_ERR_FORMAT
 * naming the tensor and both dtypes. */
gc_status gc_safetensors_load_widening(const gc_safetensors *file, const gc_param_list *into,
                                       const char *const *others);

#ifdef __cplusplus
}
#endif
#endif
