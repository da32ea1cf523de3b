/* graph_check.h - gpu_check graph (graph_check.c). */
#ifndef EB_GRAPH_CHECK_H
#define EB_GRAPH_CHECK_H

/* gpu_check graph's options after the subcommand; returns the exit status. */
int cmd_graph(int argc, char **argv);

#endif
