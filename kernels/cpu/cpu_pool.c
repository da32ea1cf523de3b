/* cpu_pool.c - persistent worker threads with bounded spinning (cpu_pool.h).
 *
 * Three waits, one rule: spin on an atomic word for at most spin_ns, then
 * sleep on it with a futex.  A waker makes the system call only when some
 * thread sleeps (the sleepers count), so a quiet machine pays none. */
#include "kernels/cpu/cpu_pool.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>

struct cpu_pool {
    int n;                   /* threads, the caller included */
    long spin_ns;
    pthread_t *workers;      /* [n - 1] */
    int n_started;
    /* the current job, written by the caller before job_gen moves */
    void (*fn)(void *ctx, int ith, int nth);
    void *ctx;
    int nth;
    atomic_uint job_gen;     /* futex word: moves once per job (and at stop) */
    atomic_uint n_done;      /* futex word: workers finished with the job */
    atomic_uint bar_arrived;
    atomic_uint bar_gen;     /* futex word: moves once per barrier */
    atomic_int sleepers;     /* threads inside futex_wait */
    atomic_int stop;
    atomic_int in_job;       /* a job runs: a nested cpu_pool_run stays serial */
    unsigned long jobs;
    atomic_ulong barriers;
};

struct worker_arg {
    struct cpu_pool *p;
    int ith;
};

static void futex_wait(atomic_uint *w, unsigned v)
{
    syscall(SYS_futex, (unsigned *)w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void wake_all(struct cpu_pool *p, atomic_uint *w)
{
    if (atomic_load(&p->sleepers) > 0)
        syscall(SYS_futex, (unsigned *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Return once *w != v: spin up to spin_ns, then sleep. */
static void wait_while(struct cpu_pool *p, atomic_uint *w, unsigned v)
{
    if (atomic_load(w) != v) return;
    long t0 = now_ns();
    for (int i = 1;; i++) {
        cpu_relax();
        if (atomic_load(w) != v) return;
        if ((i & 63) == 0 && now_ns() - t0 > p->spin_ns) break;
    }
    for (;;) {
        atomic_fetch_add(&p->sleepers, 1);
        if (atomic_load(w) == v) futex_wait(w, v);
        atomic_fetch_sub(&p->sleepers, 1);
        if (atomic_load(w) != v) return;
    }
}

static void *worker_main(void *arg)
{
    struct worker_arg a = *(struct worker_arg *)arg;
    struct cpu_pool *p = a.p;
    free(arg);
    unsigned seen = 0;
    for (;;) {
        wait_while(p, &p->job_gen, seen);
        seen = atomic_load(&p->job_gen);
        if (atomic_load(&p->stop)) return NULL;
        if (a.ith < p->nth) p->fn(p->ctx, a.ith, p->nth);
        if (atomic_fetch_add(&p->n_done, 1) + 1 == (unsigned)(p->n - 1)) wake_all(p, &p->n_done);
    }
}

void cpu_pool_free(struct cpu_pool *p)
{
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->job_gen, 1);
    wake_all(p, &p->job_gen);
    for (int i = 0; i < p->n_started; i++) pthread_join(p->workers[i], NULL);
    free(p->workers);
    free(p);
}

struct cpu_pool *cpu_pool_create(int n)
{
    struct cpu_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n > 1 ? n : 1;
    p->spin_ns = CPU_POOL_SPIN_US * 1000L;
    const char *s = getenv("EVICTBENCH_SPIN_US");
    if (s && *s) p->spin_ns = atol(s) * 1000L;
    if (p->spin_ns < 0) p->spin_ns = 0;
    p->workers = calloc((size_t)p->n, sizeof *p->workers);
    if (!p->workers) {
        free(p);
        return NULL;
    }
    for (int i = 1; i < p->n; i++) {
        struct worker_arg *a = malloc(sizeof *a);
        if (!a) break;
        *a = (struct worker_arg){p, i};
        if (pthread_create(&p->workers[p->n_started], NULL, worker_main, a)) {
            free(a);
            break;
        }
        p->n_started++;
    }
    if (p->n_started != p->n - 1) {
        p->n = p->n_started + 1; /* the started workers must still see a consistent n */
        cpu_pool_free(p);
        return NULL;
    }
    return p;
}

int cpu_pool_size(const struct cpu_pool *p)
{
    return p ? p->n : 1;
}

void cpu_pool_run(struct cpu_pool *p, int nth, void (*fn)(void *ctx, int ith, int nth),
                  void *ctx)
{
    if (!p || nth <= 1 || p->n <= 1 || atomic_load(&p->in_job)) {
        fn(ctx, 0, 1);
        return;
    }
    atomic_store(&p->in_job, 1);
    p->fn = fn;
    p->ctx = ctx;
    p->nth = nth < p->n ? nth : p->n;
    p->jobs++;
    atomic_store(&p->n_done, 0);
    atomic_fetch_add(&p->job_gen, 1);
    wake_all(p, &p->job_gen);
    fn(ctx, 0, p->nth);
    unsigned done;
    while ((done = atomic_load(&p->n_done)) != (unsigned)(p->n - 1)) wait_while(p, &p->n_done, done);
    atomic_store(&p->in_job, 0);
}

void cpu_pool_barrier(struct cpu_pool *p, int nth)
{
    if (!p || nth <= 1) return;
    unsigned g = atomic_load(&p->bar_gen);
    if (atomic_fetch_add(&p->bar_arrived, 1) + 1 == (unsigned)nth) {
        atomic_store(&p->bar_arrived, 0);
        atomic_fetch_add(&p->barriers, 1);
        atomic_fetch_add(&p->bar_gen, 1);
        wake_all(p, &p->bar_gen);
    } else {
        wait_while(p, &p->bar_gen, g);
    }
}

void cpu_pool_counts(const struct cpu_pool *p, struct cpu_pool_counts *out)
{
    out->jobs = p ? p->jobs : 0;
    out->barriers = p ? atomic_load(&p->barriers) : 0;
}
