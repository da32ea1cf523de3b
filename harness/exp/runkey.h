/* runkey.h - the run_key: a stable name for one measured point of a sweep.
 *
 * The key is the SHA-256 (hex) of a canonical JSON serialisation of every
 * parameter that changes a result.  Canonical means: object keys sorted by
 * byte order at every depth, no whitespace, numbers in one spelling, strings
 * escaped one way.  So the same parameters written in a different key order or
 * spacing give the same key, and any change to any of them gives a new one.
 * A rerun of a sweep skips the keys already in the results store. */
#ifndef EB_RUNKEY_H
#define EB_RUNKEY_H

#include <stdint.h>

#include "util/err.h"

/* Bumped whenever the serialisation below changes meaning. */
#define RUNKEY_FORMAT 2
#define RUNKEY_HEX_LEN 64

/* Every input of one run.  Strings may be NULL (serialised as null); the
 * *_json fields hold JSON text (any value; usually an object) or NULL. */
struct runkey_params {
    const char *model;           /* identity of the weights, e.g. "name@sha256:..." or "name@size" */
    const char *dataset;         /* dataset name */
    const char *data_hash;       /* SHA-256 of the slice's contents (sweep_data_hash), so an
                                    edited dataset line makes new keys */
    int64_t data_offset;         /* first item */
    int64_t data_limit;          /* number of items; -1: all */
    const char *prompt_template; /* the template text itself, not its name */
    const char *policy;          /* policy or preset name */
    const char *params_json;     /* policy parameters */
    int64_t budget;              /* KV budget in tokens; -1: none (fullkv) */
    int64_t batch_size;
    const char *batching;        /* padded | grouped | ragged | continuous */
    const char *sampling_json;   /* greedy or temperature/top_p/n_samples */
    uint64_t seed;
    int64_t max_new_tokens;
    const char *extra_json;      /* anything else that changes a result (max_total_tokens,
                                    max_kv_bytes, mode, ...); NULL if none */
    const char *code_version;    /* the sources' hash: the shared code and the policy's own
                                    files (code_hash_policy, code_hash.h), so changed code
                                    makes new keys and another policy's files do not */
};

/* out receives RUNKEY_HEX_LEN lowercase hex digits and a NUL.
 * Fails (clear message) when a *_json field is not valid JSON or holds an
 * object with a duplicated key. */
int runkey_compute(const struct runkey_params *p, char out[RUNKEY_HEX_LEN + 1],
                   struct eb_err *e);

/* The exact text that runkey_compute hashes (malloc'd; caller frees).  Useful
 * to store next to a key or to see why two keys differ. */
int runkey_serialize(const struct runkey_params *p, char **out, struct eb_err *e);

/* Canonical form of one JSON text (malloc'd; caller frees). */
int json_canonical(const char *json, char **out, struct eb_err *e);

#endif
