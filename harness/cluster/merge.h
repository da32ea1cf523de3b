/* merge.h - shard databases merged into one results database.
 *
 * A shard is a results database written by `exp --shard I/N` (or any other
 * run of evictbench).  Merging copies its finished runs (status 'ok' or
 * 'oom') with their samples and sentences, and the experiments rows they
 * belong to; runs recorded as 'error' are left behind (a rerun retries them).
 *
 * Runs are matched by run key: one the target already holds with the same
 * results is skipped, so merging again changes nothing; one with different
 * results (status, sample count, accuracy, or any sample's item, length,
 * grade, answer or text) is an error naming both files.  Timings and the
 * device are not results: a point measured twice keeps its first row.
 *
 * A shard may still be written while it is merged: it is read in one
 * transaction (one WAL snapshot), and each run was written with its samples
 * in one transaction, so the copy holds whole runs only.  (SQLite's WAL needs
 * the writer and the merge on one host; merge a shard on a network file
 * system once its task has ended.) */
#ifndef EB_MERGE_H
#define EB_MERGE_H

#include "harness/store/store.h"
#include "util/err.h"

struct merge_stats {
    long copied;        /* finished runs new to the target */
    long present;       /* finished runs the target already held, same results */
    long unfinished;    /* 'error' runs left behind */
};

/* One merge session into an open target (store_open).  into_path names the
 * target in messages. */
struct merge;

int merge_begin(struct store *into, const char *into_path, struct merge **out, struct eb_err *e);

/* Merge one shard in one transaction: all of it or, on an error, nothing.
 * A conflict names the file the target's row came from: a shard merged
 * earlier in this session, else the target. */
int merge_shard(struct merge *m, const char *shard_path, struct merge_stats *st, struct eb_err *e);

void merge_end(struct merge *m);

#endif
