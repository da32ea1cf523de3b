/* decode_compare.h - gpu_check compare (decode_compare.c). */
#ifndef EB_DECODE_COMPARE_H
#define EB_DECODE_COMPARE_H

/* gpu_check compare's options after the subcommand; returns the exit status. */
int cmd_compare(int argc, char **argv);

#endif
