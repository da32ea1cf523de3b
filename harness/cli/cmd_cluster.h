/* cmd_cluster.h - the commands that run one sweep across a cluster:
 * `slurm` (submit a job array, one shard per task), `slurm-status` (where
 * the shards stand) and `merge` (shard databases into one).  Each takes the
 * arguments after the subcommand name and returns the exit code (0 ok,
 * 1 failure, 2 bad usage). */
#ifndef EB_CMD_CLUSTER_H
#define EB_CMD_CLUSTER_H

int cmd_slurm(int argc, char **argv);
int cmd_slurm_status(int argc, char **argv);
int cmd_merge(int argc, char **argv);

#endif
