/* cmd_calibrate.h - `evictbench calibrate`: a SEAL steering vector from
 * greedy generations on calibration problems (harness/calibrate.c). */
#ifndef EB_CMD_CALIBRATE_H
#define EB_CMD_CALIBRATE_H

int cmd_calibrate(int argc, char **argv);

#endif
