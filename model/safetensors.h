/* safetensors.h - reader for Hugging Face safetensors checkpoints.
 *
 * One file:  8-byte little-endian header length N, N bytes of JSON
 * ({name: {"dtype", "shape", "data_offsets"}}, optional "__metadata__"), then
 * the raw tensor bytes.  The header is untrusted: it is validated against the
 * file size (N capped at 100 MB, offsets inside the data, byte size equal to
 * prod(shape) * dtype size, no two tensors overlapping, no duplicate names)
 * before anything is exposed.  Only F32, F16 and BF16 tensors are accepted;
 * any other dtype is an error naming the tensor.
 *
 * Tensors are described as struct tensor_ref in ggml order (the PyTorch shape
 * reversed into ne[]), under the names the file uses (HF names).  Data points
 * into the read-only mapping and stays valid until the file is closed.
 *
 * A checkpoint is a directory with model.safetensors, or with
 * model.safetensors.index.json whose "weight_map" names the shard of every
 * tensor; st_checkpoint_open handles both and presents one tensor list. */
#ifndef EB_SAFETENSORS_H
#define EB_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "tensor.h"

#define SAFETENSORS_MAX_HEADER (100u * 1024u * 1024u)

struct safetensors;

/* Open and validate one file; on failure -1 with e = "<path>: <what is wrong>". */
int safetensors_open(const char *path, struct safetensors **out, struct eb_err *e);
/* Parse from memory (fuzzer, tests); data must outlive the handle.  name is
 * used in error messages. */
int safetensors_open_memory(const void *data, size_t size, const char *name,
                            struct safetensors **out, struct eb_err *e);
void safetensors_close(struct safetensors *st);

size_t safetensors_file_size(const struct safetensors *st);
int safetensors_tensor_count(const struct safetensors *st);
const struct tensor_ref *safetensors_tensor(const struct safetensors *st, int idx);
const struct tensor_ref *safetensors_find(const struct safetensors *st, const char *name);
/* Value of a "__metadata__" entry, or NULL. */
const char *safetensors_metadata(const struct safetensors *st, const char *key);

/* dtype string -> enum eb_type, or -1 for anything but F32/F16/BF16. */
int safetensors_dtype_type(const char *dtype);

/* A checkpoint directory: single file or index + shards. */
struct st_checkpoint;

int st_checkpoint_open(const char *dir, struct st_checkpoint **out, struct eb_err *e);
void st_checkpoint_close(struct st_checkpoint *ck);

int st_checkpoint_tensor_count(const struct st_checkpoint *ck);
/* Every tensor of every shard, in file order (shard after shard). */
const struct tensor_ref *st_checkpoint_tensor(const struct st_checkpoint *ck, int idx);
const struct tensor_ref *st_checkpoint_find(const struct st_checkpoint *ck, const char *name);
int st_checkpoint_shard_count(const struct st_checkpoint *ck);
size_t st_checkpoint_bytes(const struct st_checkpoint *ck); /* sum of the shard file sizes */
/* Bytes [p, p + n) of a shard will not be read again: drop their pages (see
 * util/mapped.h; a no-op for shards read into memory). */
void st_checkpoint_drop_pages(const struct st_checkpoint *ck, const void *p, size_t n);

#endif
