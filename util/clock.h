/* clock.h - one monotonic clock for every timing the program reports. */
#ifndef EB_CLOCK_H
#define EB_CLOCK_H

/* Seconds on CLOCK_MONOTONIC: only differences mean anything. */
double clock_now_s(void);

#endif
