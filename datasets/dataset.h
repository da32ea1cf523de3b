/* dataset.h - evaluation datasets: the registry, the JSONL loader and the
 * built-in synthetic set.
 *
 * A dataset is a list of items (id, problem text, reference answer, and the
 * source's other fields kept verbatim as one JSON object string).  Files are
 * JSON Lines in a data directory: the one given explicitly (--data-dir), else
 * $EVICTBENCH_DATA, else datasets/data/.  The registry (registry.c) says for
 * each name which file to read, which keys hold the problem, answer and id,
 * which grading rule applies, and where `make data` fetches the official
 * copy (tools/fetch_data.sh).
 *
 * "synthetic" (or "synthetic:N" / "synthetic:N:SEED") needs no file: the
 * problems are generated from the seed by synthetic.c.  It is a unit-test
 * fixture (the tests' configs use it), not a benchmark: no shipped experiment
 * uses it, and nothing ever substitutes it for a missing dataset.
 *
 * dataset_load checks a file's SHA-256 before reading it (dataset_verify_file);
 * dataset_load_file reads any file unchecked. */
#ifndef EB_DATASET_H
#define EB_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define DATASET_MAX_KEYS 3

struct dataset_spec {
    const char *name;                         /* "aime24" */
    const char *file;                         /* file in the data dir; NULL: generated */
    const char *problem_keys[DATASET_MAX_KEYS]; /* first key present wins; NULL-terminated */
    const char *answer_keys[DATASET_MAX_KEYS];
    const char *id_keys[DATASET_MAX_KEYS];
    const char *grader;                       /* grading rule: "math", "gsm8k" or "code" */
    int rows;                                 /* rows of the official file; 0 = unknown */
    const char *source_url;                   /* upstream file `make data` downloads; NULL: none */
    const char *source_sha256;                /* sha256 of that upstream file */
    const char *sha256;                       /* sha256 of our normalised JSONL file */
    const char *about;                        /* one line for listings */
};

struct dataset_item {
    char *id;
    char *problem;
    char *answer;      /* reference answer; for "code" the test cases as JSON text */
    char *extra_json;  /* the row's other fields as one JSON object, "{}" when none */
};

struct dataset {
    const struct dataset_spec *spec;
    struct dataset_item *items;
    int n;
};

/* Defaults of the synthetic set when the name carries no N or SEED. */
#define SYNTHETIC_DEFAULT_N 100
#define SYNTHETIC_DEFAULT_SEED 1u
#define SYNTHETIC_MAX_N 1000000

/* The registry, in listing order; *n receives its length. */
const struct dataset_spec *dataset_specs(int *n);

/* Look a name up ("synthetic:N:SEED" finds "synthetic").  Returns NULL when
 * unknown and, if e is given, fills it with a message naming the known ones. */
const struct dataset_spec *dataset_find(const char *name, struct eb_err *e);

/* The data directory: explicit_dir when non-empty, else $EVICTBENCH_DATA when
 * set and non-empty, else "datasets/data".  Fails only if it does not fit. */
int dataset_default_data_dir(const char *explicit_dir, char *out, size_t cap,
                             struct eb_err *e);

/* "<data_dir>/<spec->file>" (data_dir resolved as above when NULL). */
int dataset_file_path(const struct dataset_spec *spec, const char *data_dir, char *out,
                      size_t cap, struct eb_err *e);

/* 1 when the dataset can be loaded without generating: its file exists and
 * is readable; 1 for "synthetic" as well; 0 otherwise (unknown name too). */
int dataset_available(const char *name, const char *data_dir);

/* Load `name`, keeping rows [offset, offset + limit) (limit <= 0: all from
 * offset).  The file's checksum is verified first (dataset_verify_file),
 * then the whole file is validated; a malformed line, a missing
 * or empty required field or a duplicate id fails with "<file>:<line>: <what>"
 * and leaves *out empty.  data_dir NULL: see dataset_default_data_dir. */
int dataset_load(const char *name, const char *data_dir, int offset, int limit,
                 struct dataset *out, struct eb_err *e);

/* The file at `path` (spec's file in data_dir) must have the SHA-256 that
 * <data_dir>/SHA256SUMS lists for it when the directory has that file (it
 * must then list it), else the registry's spec->sha256; no checksum anywhere:
 * not checked.  0, or -1 with e saying which checksum differs. */
int dataset_verify_file(const struct dataset_spec *spec, const char *data_dir, const char *path,
                        struct eb_err *e);

/* Read one JSONL file with the field mapping of `spec` (used by dataset_load;
 * public for tests and for `evictbench grade`-style tools). */
int dataset_load_file(const struct dataset_spec *spec, const char *path, int offset,
                      int limit, struct dataset *out, struct eb_err *e);

void dataset_free(struct dataset *d);
/* Free one item's strings (and zero it). */
void dataset_item_free(struct dataset_item *it);

/* synthetic.c: parse "synthetic", "synthetic:N" or "synthetic:N:SEED". */
int synthetic_parse_name(const char *name, int *n, uint32_t *seed, struct eb_err *e);

/* Generate n problems from seed (problem i depends only on seed and i, so a
 * smaller n gives a prefix).  Same seed => same bytes on every platform. */
int synthetic_generate(int n, uint32_t seed, struct dataset *out, struct eb_err *e);

#endif
