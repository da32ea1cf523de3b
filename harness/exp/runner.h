/* runner.h - run the points of a sweep and record them.
 *
 * One point: load the dataset slice, render and tokenise the prompts (the
 * config's template), schedule them per the batching mode, generate with the
 * point's policy wired in, grade every sample and measure it, and hand the run
 * to the store in one transaction (runner_sweep).
 *
 * Batching modes (the batch size B is the point's batch_size):
 *   ragged      static batches of B in dataset order, no padding
 *   continuous  all requests at once with B live; a finished slot is refilled
 *   padded      static batches of B in dataset order, each left-padded to its
 *               longest prompt (pad token: EOS).  Pad slots live in the KV
 *               cache: they are masked in attention, take K+V bytes, count
 *               against the budget and in the memory estimate, and policies
 *               see them (cache_view.pad, pad_policy).  Real tokens keep
 *               positions from 0, as Hugging Face derives them from the
 *               attention mask.  params_json records the pads ("pad_tokens").
 *   grouped     sort by prompt length, then padded static batches of B
 *
 * Out of memory for a batch size - the runtime's estimate not fitting the
 * memory, or a batch's KV bytes exceeding the config's max_kv_bytes - is a
 * result (status 'oom'), not a failure.  A runtime failure inside a point is
 * recorded as status 'error' (retried by the next run of the sweep).
 *
 * Library code: nothing is printed; progress goes to a callback. */
#ifndef EB_RUNNER_H
#define EB_RUNNER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "harness/exp/config.h"
#include "harness/store/store.h"
#include "harness/exp/sweep.h"

struct runner_progress {
    int point, n_points;        /* 1-based */
    const char *label;
    int samples_done, n_samples;
    long gen_tokens;            /* generated so far in this point */
    double elapsed_s;           /* this point */
    double tokens_per_s;        /* this point so far */
    double eta_s;               /* this point, < 0 when unknown */
    double sweep_eta_s;         /* the rest of the sweep, < 0 when unknown */
    const char *event;          /* "batch", "done", "skip", "oom", "error" */
};

/* A prompt given already tokenised (tests; models without a tokenizer). */
struct runner_item {
    const char *id;
    const char *reference;      /* reference answer */
    const int *prompt;
    int n_prompt;
};

struct runner_opts {
    const char *data_dir;       /* NULL: dataset_default_data_dir */
    int threads;                /* CPU threads; 0: all cores */
    size_t mem_limit;           /* bytes for weights + KV + activations; 0: available RAM */
    volatile sig_atomic_t *stop;  /* non-NULL: stop after the current batch once *stop != 0 */
    void (*progress)(void *ctx, const struct runner_progress *p);
    void *progress_ctx;
    const char *device;         /* stored with each run; NULL: "cpu" */
    double lease_s;             /* claim lease on a point (store_claim); 0: 600 s.  Another
                                   process sharing the database takes a point whose
                                   owner stopped renewing for this long */
    /* Non-NULL: every point runs these prompts instead of its dataset's (the
     * dataset name still picks the grading rule).  For tests. */
    const struct runner_item *items;
    int n_items;
};


/* One run's record, samples and sentences (the sentence policies' traces,
 * in the order the samples finished); the strings they point at are owned
 * here. */
struct run_output {
    struct run_record run;
    struct sample_record *samples;
    int n_samples;
    struct sentence_record *sents;
    int n_sents, cap_sents;
    char **owned;               /* strings to free */
    int n_owned, cap_owned;
};

struct runner;

int runner_create(const struct runner_opts *o, struct runner **out, struct eb_err *e);
void runner_free(struct runner *r);

/* Run one point.  Returns 0 with out filled (status ok, oom or error), 1 when
 * stopped by *opts.stop (out empty, nothing to record), -1 when the point
 * cannot run at all (e set: model, tokenizer or dataset unusable). */
int runner_run_point(struct runner *r, const struct exp_config *cfg, const struct point *pt,
                     struct run_output *out, struct eb_err *e);

/* The same with prompts given as token ids.  The model's tokenizer is used
 * for the text when it has one; otherwise the text is the ids ("12 7 99"). */
int runner_run_items(struct runner *r, const struct exp_config *cfg, const struct point *pt,
                     const struct runner_item *items, int n, struct run_output *out,
                     struct eb_err *e);

void run_output_free(struct run_output *o);

struct sweep_summary {
    int n_points, skipped, ok, oom, errors;
    int interrupted;            /* 1: stopped by *opts.stop */
};

/* Run every point of the sweep not yet done in the store (run_key), writing
 * each run in one transaction.  Returns 0 (also when interrupted or when some
 * points recorded 'error'; see sum), -1 on a failure that stops the sweep
 * (e set; runs written so far stay). */
int runner_sweep(struct runner *r, const struct sweep *s, struct store *st, int64_t exp_id,
                 struct sweep_summary *sum, struct eb_err *e);


#endif
