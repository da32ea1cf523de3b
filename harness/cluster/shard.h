/* shard.h - one sweep split into N shards for N processes (Slurm array tasks).
 *
 * The split is a pure function of the points' run keys and estimated work, so
 * every array task computes the same partition on its own, whatever order the
 * points come in: points are taken heaviest first (ties broken by run key) and
 * each goes to the shard with the least work so far (ties: the lowest shard).
 * This greedy rule keeps the heaviest shard within one point's work of the
 * mean.  Work is samples x max tokens, the bound on what a point generates.
 *
 * Shards are numbered 1..N, as in "--shard 2/4" and Slurm's --array=1-4. */
#ifndef EB_SHARD_H
#define EB_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "harness/exp/config.h"
#include "harness/exp/sweep.h"
#include "util/err.h"

/* "I/N" with 1 <= I <= N <= SHARD_MAX. */
#define SHARD_MAX 100000
int shard_parse(const char *spec, int *index, int *count, struct eb_err *e);

/* A dataset whose size the registry does not know counts as this many items. */
#define SHARD_UNKNOWN_ITEMS 100

/* The work estimate of one point: items x samples per item x max tokens. */
int64_t shard_point_work(const struct exp_config *cfg, const struct point *pt);

/* Assign n points (run keys, work estimates) to count shards: shard_of[i] in
 * 1..count.  Keys must be distinct. */
int shard_assign(const char *const *keys, const int64_t *work, int n, int count, int *shard_of,
                 struct eb_err *e);

/* The shard of every point of a sweep (malloc'd array of s->n). */
int shard_assign_sweep(const struct sweep *s, int count, int **shard_of, struct eb_err *e);

/* The points of shard index of count, as a sweep that borrows them from s
 * (same cfg, shallow copies of the points, in sweep order).  Free it with
 * shard_view_free, never sweep_free. */
int shard_view(const struct sweep *s, int index, int count, struct sweep *out, struct eb_err *e);
void shard_view_free(struct sweep *v);

/* The database a shard writes by default: "<dir>/shard-I-of-N.db" in the
 * config's Slurm folder (results/slurm/<config name>; created when create). */
int shard_default_db(const char *config_name, int index, int count, char *out, size_t cap,
                     int create, struct eb_err *e);

/* results/slurm/<config name> (created with its parents when missing). */
int shard_job_dir(const char *config_name, char *out, size_t cap, int create, struct eb_err *e);

#endif
