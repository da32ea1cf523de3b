/* main.c - the evictbench binary: dispatch to subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cli/cmd_calibrate.h"
#include "harness/cli/cmd_exp.h"
#include "harness/cli/cmd_generate.h"
#include "harness/cli/cmd_grade.h"
#include "harness/cli/cmd_plots.h"
#include "harness/cli/commands.h"
#include "harness/cli/cmd_cluster.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"info", cmd_info, "describe a model file: architecture, dims, tensors"},
    {"tokenize", cmd_tokenize, "print token ids of a text and the round trip"},
    {"generate", cmd_generate, "generate text for one prompt or a JSONL file of prompts"},
    {"run", cmd_run, "run and record one point from flags"},
    {"exp", cmd_exp, "run an experiment config (a sweep; a rerun resumes it)"},
    {"slurm", cmd_slurm, "submit a config as a Slurm job array, one shard per task"},
    {"slurm-status", cmd_slurm_status, "a submitted config's shards: points done/running/failed"},
    {"merge", cmd_merge, "merge shard databases into one results database"},
    {"calibrate", cmd_calibrate, "compute a SEAL/SkipKV steering vector from graded traces"},
    {"grade", cmd_grade, "grade completions (JSONL) against reference answers"},
    {"plots", cmd_plots, "figures from the results database (gnuplot PNG + SVG)"},
    {"tables", cmd_tables, "paper tables as Markdown and LaTeX (booktabs)"},
    {"report", cmd_report, "a static HTML report: runs, figures, which tokens each policy kept"},
    {"bench", cmd_bench, "tokens/s, KV memory and policy overhead on a model"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: evictbench <command> [options]   (evictbench <command> --help)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "evictbench: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
