/* slurm.h - Slurm itself does the scheduling: an sbatch script for a job
 * array (task I runs `exp CONFIG --shard I/N`), submission with sbatch, and
 * the tasks' states from squeue and sacct.  The commands are run as child
 * processes (never through a shell); nothing here talks to Slurm otherwise.
 *
 * A config's files live in results/slurm/<config name>/: the sbatch script
 * (job.sbatch), a copy of the config the tasks read (<name>.json, so editing
 * the original cannot change a running sweep), the shard databases
 * (shard-I-of-N.db), the tasks' logs and jobs.tsv (one line per submission:
 * job id, array, shards, UTC time). */
#ifndef EB_SLURM_H
#define EB_SLURM_H

#include <stddef.h>

#include "util/err.h"

struct slurm_job {
    const char *name;           /* config name (the job is "eb-<name>") */
    const char *config;         /* absolute path of the config copy */
    const char *dir;            /* absolute results/slurm/<name> */
    const char *workdir;        /* absolute directory the tasks run in */
    const char *binary;         /* absolute path of evictbench */
    const char *data_dir;       /* NULL: the submitting environment's */
    int shards;
    int cpus_per_task;
    int gpus_per_task;          /* > 0: --device cuda */
    const char *partition, *time, *mem;   /* NULL: the cluster's defaults */
};

/* The script text (malloc'd into *out). */
int slurm_script(const struct slurm_job *j, char **out, struct eb_err *e);

/* sbatch --parsable [--array=array] script: the job id into id[cap]. */
int slurm_submit(const char *script, const char *array, char *id, size_t cap, struct eb_err *e);

/* Append one line to <dir>/jobs.tsv. */
int slurm_record_job(const char *dir, const char *id, const char *array, int shards,
                     struct eb_err *e);

/* The shard count and time of the last submission in <dir>/jobs.tsv
 * (*shards 0 when nothing was submitted); since (cap bytes) gets the first
 * submission's time, for sacct. */
int slurm_last_job(const char *dir, int *shards, char *since, size_t cap, struct eb_err *e);

/* The latest state of each array task of job "eb-<name>": states[i] for
 * shard i + 1 ("" when Slurm knows no task for it), job id in ids[i].  From
 * squeue (pending and running tasks) and, where accounting is enabled, sacct
 * (finished ones); *have_sacct says whether sacct answered. */
#define SLURM_STATE_LEN 32
#define SLURM_ID_LEN 48
int slurm_task_states(const char *name, const char *since, int shards,
                      char (*states)[SLURM_STATE_LEN], char (*ids)[SLURM_ID_LEN], int *have_sacct,
                      struct eb_err *e);

/* Run argv (argv[0] looked up in PATH) and collect its stdout and stderr
 * (malloc'd, NUL-terminated) and exit status (-1: not found / killed). */
int slurm_run(char *const argv[], char **output, int *status, struct eb_err *e);

#endif
