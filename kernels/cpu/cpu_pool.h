/* cpu_pool.h - the CPU backend's thread pool: persistent workers that spin
 * briefly, then sleep.
 *
 * Why not OpenMP regions: an OpenMP barrier spins for a long while (libgomp:
 * 300,000 iterations) before it sleeps, and its wait policy is fixed when the
 * library loads.  On a core shared with other processes a thread that spins
 * there burns the time slice the preempted thread it waits for needs: with one
 * busy process per core, a batch-16 decode kept 22% of its quiet rate, 68-75%
 * of samples at barriers.  Here every wait (a worker waiting for work, the
 * caller waiting for the workers, a barrier inside a job) spins for at most
 * a bounded time (EVICTBENCH_SPIN_US, default CPU_POOL_SPIN_US) and then
 * sleeps on a futex, so a preempted thread gets the core back.
 *
 * A job is one parallel region: fn(ctx, ith, nth) runs on nth threads (the
 * caller is thread 0).  Inside it, cpu_pool_barrier() joins the nth threads
 * and cpu_pool_chunk() hands out work items dynamically.  A job started from
 * inside a job runs on the calling thread alone (nth = 1): no nesting. */
#ifndef EB_CPU_POOL_H
#define EB_CPU_POOL_H

#include <stdatomic.h>

enum { CPU_POOL_SPIN_US = 50 };

struct cpu_pool;

/* A pool of n threads (n - 1 workers plus the caller); NULL when a thread
 * cannot be started.  n <= 1 gives a pool that runs every job on the caller. */
struct cpu_pool *cpu_pool_create(int n);
void cpu_pool_free(struct cpu_pool *p);
int cpu_pool_size(const struct cpu_pool *p);

/* Run fn on min(nth, size) threads and return when all have finished.
 * nth <= 1, or a call from inside a job, runs fn(ctx, 0, 1) on the caller. */
void cpu_pool_run(struct cpu_pool *p, int nth, void (*fn)(void *ctx, int ith, int nth),
                  void *ctx);

/* Inside a job: wait until all nth threads of the job have arrived. */
void cpu_pool_barrier(struct cpu_pool *p, int nth);

/* Dynamic scheduling: the next unclaimed item of [0, n) from *next (set to 0
 * before the job), or -1 when none is left. */
static inline int cpu_pool_chunk(atomic_int *next, int n)
{
    int c = atomic_fetch_add_explicit(next, 1, memory_order_relaxed);
    return c < n ? c : -1;
}

/* The static share [*i0, *i1) of [0, n) for thread ith of nth. */
static inline void cpu_pool_share(int n, int ith, int nth, int *i0, int *i1)
{
    int per = n / nth, extra = n % nth;
    *i0 = ith * per + (ith < extra ? ith : extra);
    *i1 = *i0 + per + (ith < extra);
}

/* Synchronisations since the pool was created: jobs run on more than one
 * thread (each a start and an end) and barriers inside them. */
struct cpu_pool_counts {
    unsigned long jobs, barriers;
};
void cpu_pool_counts(const struct cpu_pool *p, struct cpu_pool_counts *out);

#endif
