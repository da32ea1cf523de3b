/* cmd_merge.c - `evictbench merge SHARD.db... --into DB`. */
#include "harness/cli/cmd_cluster.h"

#include <stdio.h>
#include <string.h>

#include "harness/cli/cli.h"
#include "harness/cluster/merge.h"
#include "harness/store/store.h"

static void print_help(void)
{
    printf("usage: evictbench merge SHARD.db... [--into DB]\n\n"
           "Copies the finished runs (status ok or oom) of shard databases, with their\n"
           "samples and sentences, into one results database (created when missing).\n"
           "Runs are matched by run key: one already there with the same results is\n"
           "skipped, so merging again changes nothing; one with different results is an\n"
           "error that names both files.  A shard that is still being written is read as\n"
           "one consistent snapshot (on the host that writes it); merge again later for\n"
           "the rest.  Runs recorded as 'error' are left behind (rerun the shard).\n\n"
           "  --into DB            the merged database (default results/results.db)\n"
           "  --quiet              no per-shard summary on stderr\n");
}

int cmd_merge(int argc, char **argv)
{
    const char *into = "results/results.db";
    int quiet = 0, n_shards = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { print_help(); return 0; }
        if (!strcmp(argv[i], "--quiet")) { quiet = 1; continue; }
        if (!strcmp(argv[i], "--into")) {
            if (!(into = cli_value(argc, argv, &i))) return 2;
            continue;
        }
        if (argv[i][0] == '-')
            return cli_errorf("merge: unknown option '%s' (see evictbench merge --help)", argv[i]), 2;
        n_shards++;
    }
    if (!n_shards) return cli_error("merge: no shard database given (see evictbench merge --help)"), 2;

    struct eb_err e = {0};
    struct store *st = NULL;
    struct merge *m = NULL;
    if (store_open(into, &st, &e) || merge_begin(st, into, &m, &e)) {
        store_close(st);
        return cli_error(e.msg);
    }
    int rc = 0;
    struct merge_stats total = {0, 0, 0};
    for (int i = 1; i < argc && !rc; i++) {
        if (!strcmp(argv[i], "--into")) { i++; continue; }
        if (argv[i][0] == '-') continue;
        struct merge_stats s;
        if (merge_shard(m, argv[i], &s, &e)) { rc = cli_error(e.msg); break; }
        total.copied += s.copied;
        total.present += s.present;
        total.unfinished += s.unfinished;
        if (!quiet)
            fprintf(stderr, "%s: %ld run(s) copied, %ld already there, %ld unfinished left behind\n",
                    argv[i], s.copied, s.present, s.unfinished);
    }
    if (!rc && !quiet)
        fprintf(stderr, "merged %d shard(s) into %s: %ld run(s) copied, %ld already there\n",
                n_shards, into, total.copied, total.present);
    merge_end(m);
    store_close(st);
    return rc;
}
