/* generate.c - continuous ragged batching over model_forward (and left pads
 * for static padded batches). */
#include "generate.h"
#include "util/clock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { DEFAULT_CHUNK = 512 };
enum slot_state { SLOT_FREE = 0, SLOT_PREFILL, SLOT_DECODE };

struct slot {
    enum slot_state state;
    int req;                 /* request index */
    int max_new;             /* after clamping to the context */
    int n_fed;               /* prompt tokens already in the cache */
    int last;                /* last sampled token (fed next) */
    struct kvcache *cache;
    struct sampler sampler;
};

size_t generate_available_memory(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                return (size_t)kb * 1024;
            }
        fclose(f);
    }
    long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (size_t)pages * (size_t)size : 0;
}

static int ctx_len(const struct model_config *c, const struct gen_options *opt)
{
    return opt->n_ctx > 0 ? opt->n_ctx : c->n_ctx_train;
}

static int pads_of(const struct gen_options *opt, int req)
{
    return opt->n_pad ? opt->n_pad[req] : 0;
}

/* Slots a request's cache holds once its prompt is in (gen_options.fill_to). */
static int prompt_slots(const struct gen_options *opt, const struct gen_request *r)
{
    return opt->fill_to > r->n_prompt ? opt->fill_to : r->n_prompt;
}

/* Pads take negative positions: only the real tokens use up the context. */
int generate_max_new(const struct model_config *c, const struct gen_options *opt,
                     const struct gen_request *r, int n_pad)
{
    int room = ctx_len(c, opt) - (prompt_slots(opt, r) - n_pad);
    return r->max_new < room ? r->max_new : room;
}

/* Slots to allocate for one request's cache (see gen_hooks.kv_slot_limit). */
int generate_cache_slots(const struct model_config *c, const struct gen_options *opt,
                         const struct gen_request *r, int n_pad)
{
    int mx = generate_max_new(c, opt, r, n_pad);
    int n_in = prompt_slots(opt, r);
    int full = n_in + (mx > 0 ? mx : 0);
    int limit = opt->hooks ? opt->hooks->kv_slot_limit : 0;
    if (limit <= 0) return full > 0 ? full : 1;
    int capped = n_in + 1 > limit ? n_in + 1 : limit;
    return capped < full ? capped : full;
}

static int live_count(const struct gen_options *opt, int n)
{
    return opt->max_live > 0 && opt->max_live < n ? opt->max_live : n;
}

static int chunk_tokens(const struct gen_options *opt, int live)
{
    int chunk = opt->prefill_chunk > 0 ? opt->prefill_chunk : DEFAULT_CHUNK;
    return chunk > live ? chunk : live; /* room for every decode token at least */
}

static int cmp_size_desc(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x < y) - (x > y);
}

static size_t sat_add(size_t a, size_t b)
{
    return a + b < a ? SIZE_MAX : a + b;
}

/* Each part is what generate() asks be->alloc for (backend_alloc_bytes per
 * buffer), so the plan is the allocation, not a guess with slack. */
void generate_plan(const struct model_config *c, size_t weight_bytes, const struct gen_request *reqs,
                   int n, const struct gen_options *opt, struct gen_mem_plan *p)
{
    memset(p, 0, sizeof *p);
    p->weights = p->total = weight_bytes;
    if (n <= 0) return;
    const struct gen_hooks *h = opt->hooks;
    int live = live_count(opt, n), rows = chunk_tokens(opt, live);
    int q_window = h ? h->recent_q_window : 0, max_cap = 0;
    size_t *kv = malloc((size_t)n * 2 * sizeof *kv), *host = kv ? kv + n : NULL, prompts = 0;
    if (!kv) {
        p->total = SIZE_MAX;
        return;
    }
    for (int i = 0; i < n; i++) {
        int cap = generate_cache_slots(c, opt, &reqs[i], pads_of(opt, i));
        if (cap > max_cap) max_cap = cap;
        kv[i] = kvcache_device_bytes(c->n_layer, c->n_head_kv, c->head_dim, cap, opt->kv_type,
                                     q_window, c->n_head * c->head_dim);
        host[i] = kvcache_alloc_bytes(c->n_layer, c->n_head_kv, c->head_dim, cap, opt->kv_type) -
                  kvcache_device_bytes(c->n_layer, c->n_head_kv, c->head_dim, cap, opt->kv_type,
                                       0, 0);
        prompts = sat_add(prompts, (size_t)reqs[i].n_prompt);
    }
    /* The live caches at their largest: the max_live largest requests. */
    qsort(kv, (size_t)n, sizeof *kv, cmp_size_desc);
    qsort(host, (size_t)n, sizeof *host, cmp_size_desc);
    for (int i = 0; i < live; i++) {
        p->kv = sat_add(p->kv, kv[i]);
        p->host = sat_add(p->host, host[i]);
    }
    free(kv);
    p->forward = forward_device_bytes(c, rows, live);
    p->host = sat_add(p->host, forward_alloc_bytes(c, rows, live) - p->forward);
    /* A step's probabilities: at most `rows` rows, and no more than the
     * prompts plus one decode row per live sequence. */
    if (h && h->model && (h->model->needs & MODEL_NEED_ATTN_PROBS)) {
        size_t most = sat_add(prompts, (size_t)live);
        int prob_rows = most < (size_t)rows ? (int)most : rows;
        p->probs = forward_probs_bytes(c, prob_rows, max_cap);
    }
    if (h && h->device_bytes) p->hooks = h->device_bytes(h->ctx, live, max_cap);
    p->device = sat_add(sat_add(p->kv, p->forward), sat_add(p->probs, p->hooks));
    p->total = sat_add(sat_add(weight_bytes, p->device), p->host);
}

size_t generate_estimate_bytes(const struct model_config *c, size_t weight_bytes,
                               const struct gen_request *reqs, int n,
                               const struct gen_options *opt)
{
    struct gen_mem_plan p;
    generate_plan(c, weight_bytes, reqs, n, opt, &p);
    return p.total;
}

void gen_results_free(struct gen_result *results, int n)
{
    for (int i = 0; i < n; i++) {
        free(results[i].tokens);
        results[i].tokens = NULL;
    }
}

int generate_check(const struct model_config *c, size_t weight_bytes, int weights_loaded,
                   const struct gen_request *reqs, int n, const struct gen_options *opt,
                   struct eb_err *e)
{
    if (n < 1) return eb_fail(e, "generate: no prompts");
    int ctx = ctx_len(c, opt);
    for (int i = 0; i < n; i++) {
        const struct gen_request *r = &reqs[i];
        if (r->n_prompt < 1 || !r->prompt) return eb_fail(e, "generate: prompt %d is empty", i);
        int n_pad = pads_of(opt, i);
        if (n_pad < 0 || n_pad >= r->n_prompt)
            return eb_fail(e, "generate: prompt %d has %d pads among %d tokens (at least one "
                              "real token is needed)", i, n_pad, r->n_prompt);
        if (r->max_new < 1)
            return eb_fail(e, "generate: max new tokens must be >= 1 (prompt %d asks for %d)", i,
                           r->max_new);
        if (prompt_slots(opt, r) - n_pad >= ctx)
            return eb_fail(e, "generate: prompt %d has %d tokens; the context of %d leaves no room "
                              "to generate", i, prompt_slots(opt, r) - n_pad, ctx);
        if (opt->fill_to > r->n_prompt && n_pad > 0)
            return eb_fail(e, "generate: a filled context cannot have left pads (prompt %d)", i);
        for (int t = 0; t < r->n_prompt; t++)
            if (r->prompt[t] < 0 || r->prompt[t] >= c->n_vocab)
                return eb_fail(e, "generate: prompt %d has token id %d outside [0, %d)", i,
                               r->prompt[t], c->n_vocab);
        struct sampler probe; /* the sampler's own parameter checks, up front */
        if (sampler_init(&probe, &r->sampling, 1, e)) return eb_wrap(e, "generate");
        sampler_free(&probe);
    }
    size_t need = generate_estimate_bytes(c, weight_bytes, reqs, n, opt);
    size_t limit = opt->mem_limit;
    if (!limit) {
        limit = generate_available_memory();
        if (weights_loaded) limit += weight_bytes; /* already resident, not in "available" */
    }
    if (need > limit)
        return eb_fail(e, "generate: a batch of %d sequence(s) needs an estimated %zu bytes "
                          "(weights %zu + KV cache + activations), more than the %zu bytes %s",
                       live_count(opt, n), need, weight_bytes, limit,
                       opt->mem_limit ? "allowed" : "available");
    return 0;
}

int generate_is_eos(const struct model *m, const struct gen_options *opt, int tok)
{
    if (opt->ignore_eos) return 0;
    const int *ids = opt->eos_ids ? opt->eos_ids : m->cfg.eos_ids;
    int n = opt->eos_ids ? opt->n_eos : m->cfg.n_eos;
    for (int i = 0; i < n; i++)
        if (ids[i] == tok) return 1;
    return 0;
}

static void slot_release(struct slot *s)
{
    kvcache_free(s->cache);
    s->cache = NULL;
    sampler_free(&s->sampler);
    s->state = SLOT_FREE;
}

/* Put request `req` into a free slot. */
static int slot_admit(const struct model *m, const struct gen_request *reqs, int req,
                      const struct gen_options *opt, struct slot *s, struct gen_result *res,
                      struct eb_err *e)
{
    const struct gen_request *r = &reqs[req];
    memset(s, 0, sizeof *s);
    s->req = req;
    int n_pad = pads_of(opt, req);
    s->max_new = generate_max_new(&m->cfg, opt, r, n_pad);
    int n_valid = opt->n_vocab_valid > 0 && opt->n_vocab_valid < m->cfg.n_vocab ? opt->n_vocab_valid
                                                                                 : m->cfg.n_vocab;
    res->tokens = malloc((size_t)s->max_new * sizeof *res->tokens);
    if (!res->tokens) return eb_fail_nomem(e, "generate: out of memory");
    if (sampler_init(&s->sampler, &r->sampling, n_valid, e)) return -1;
    if (model_kvcache_create_as(m, generate_cache_slots(&m->cfg, opt, r, n_pad), opt->kv_type,
                                &s->cache, e)) {
        sampler_free(&s->sampler);
        return -1;
    }
    const struct gen_hooks *h = opt->hooks;
    if (n_pad > 0 && kvcache_left_pad(s->cache, n_pad, e)) {
        slot_release(s);
        return -1;
    }
    if (h && h->recent_q_window > 0 &&
        kvcache_qring_enable(s->cache, h->recent_q_window, m->cfg.n_head * m->cfg.head_dim, e)) {
        slot_release(s);
        return -1;
    }
    s->state = SLOT_PREFILL;
    if (h && h->begin_sequence && h->begin_sequence(h->ctx, req, r, s->cache, e)) {
        slot_release(s);
        return -1;
    }
    return 0;
}

/* Samples every row of logits the last forward produced in backend memory
 * (the backend's sample op): each sequence's uniform draw is taken here, on
 * the host, so its RNG advances exactly as sampler_sample's would; tok[row]
 * is then the token, or -1 for a row to sample on the host with rows[row].u. */
static int sample_in_backend(const struct model *m, const struct forward *f,
                             const struct fwd_seq *seqs, int ns, struct slot *slots,
                             const int *seq_slot, struct sample_row *rows, int *tok,
                             struct eb_err *e)
{
    int n_rows = 0;
    for (int q = 0; q < ns; q++) {
        if (seqs[q].logits == FWD_LOGITS_NONE) continue;
        struct sampler *sp = &slots[seq_slot[q]].sampler;
        int row = seqs[q].logit_row0;
        if (row < 0 || row >= ns || seqs[q].logits != FWD_LOGITS_LAST)
            return eb_fail(e, "generate: logits row %d of %d sequences", row, ns);
        rows[row] = (struct sample_row){sp->p.greedy, sp->p.temperature, sp->p.top_k,
                                        sp->p.top_p, sp->n_valid, sampler_draw(sp)};
        n_rows++;
    }
    if (n_rows == 0) return 0;
    struct backend *be = m->be;
    if (be->sample(be, tok, forward_logits_dev(f), n_rows, m->cfg.n_vocab, rows))
        return eb_fail(e, "generate: sampling on the %s backend failed", be->name);
    return 0;
}

/* A decode step's backend calls into the fewest/most (0 calls: not counted). */
static void note_calls(struct gen_stats *st, long calls)
{
    if (calls <= 0) return;
    if (st->decode_calls_min == 0 || calls < st->decode_calls_min) st->decode_calls_min = calls;
    if (calls > st->decode_calls_max) st->decode_calls_max = calls;
}

int generate(const struct model *m, const struct gen_request *reqs, int n,
             const struct gen_options *opt, struct gen_result *results, struct gen_stats *stats,
             struct eb_err *e)
{
    struct gen_stats st;
    memset(&st, 0, sizeof st);
    if (n > 0) memset(results, 0, (size_t)n * sizeof *results);
    if (generate_check(&m->cfg, m->weight_bytes, 1, reqs, n, opt, e)) return -1;
    st.est_bytes = generate_estimate_bytes(&m->cfg, m->weight_bytes, reqs, n, opt);

    const struct gen_hooks *h = opt->hooks;
    int live = live_count(opt, n), budget = chunk_tokens(opt, live);
    struct slot *slots = eb_calloc((size_t)live, sizeof *slots, e);
    struct fwd_seq *seqs = eb_calloc((size_t)live, sizeof *seqs, e);
    int *decode_tok = eb_calloc((size_t)live, sizeof *decode_tok, e);
    int *seq_slot = eb_calloc((size_t)live, sizeof *seq_slot, e);
    /* Sampling in backend memory: only ids cross to the host. */
    int in_backend = m->be->sample && !opt->host_sampling;
    struct sample_row *srows = eb_calloc((size_t)live, sizeof *srows, e);
    int *stok = eb_calloc((size_t)live, sizeof *stok, e);
    struct forward *f = NULL;
    int rc = -1, next_req = 0, done = 0;
    double t0 = clock_now_s();
    if (!slots || !seqs || !decode_tok || !seq_slot || !srows || !stok) goto out;
    if (forward_create(m, budget, live, &f, e)) goto out;
    forward_logits_stay(f, in_backend);

    for (int i = 0; i < live; i++) {
        if (slot_admit(m, reqs, next_req, opt, &slots[i], &results[next_req], e)) goto out;
        next_req++;
    }

    while (done < n) {
        /* Decode tokens first (one per generating sequence), then prompt chunks. */
        int ns = 0, used = 0, has_prefill = 0;
        for (int i = 0; i < live; i++) {
            struct slot *s = &slots[i];
            if (s->state != SLOT_DECODE) continue;
            decode_tok[i] = s->last;
            seqs[ns] = (struct fwd_seq){.id = s->req, .cache = s->cache, .tokens = &decode_tok[i],
                                        .n_tokens = 1, .logits = FWD_LOGITS_LAST};
            seq_slot[ns++] = i;
            used++;
        }
        for (int i = 0; i < live && used < budget; i++) {
            struct slot *s = &slots[i];
            if (s->state != SLOT_PREFILL) continue;
            const struct gen_request *r = &reqs[s->req];
            int take = r->n_prompt - s->n_fed;
            if (take > budget - used) take = budget - used;
            int finishes = s->n_fed + take == r->n_prompt;
            int pads = pads_of(opt, s->req) - s->n_fed; /* the chunk's pads: a prefix of it */
            pads = pads < 0 ? 0 : pads > take ? take : pads;
            seqs[ns] = (struct fwd_seq){.id = s->req, .cache = s->cache,
                                        .tokens = r->prompt + s->n_fed, .n_tokens = take,
                                        .n_pad = pads,
                                        .logits = finishes ? FWD_LOGITS_LAST : FWD_LOGITS_NONE};
            seq_slot[ns++] = i;
            used += take;
            has_prefill = 1;
        }
        if (ns == 0) break; /* cannot happen: some slot is busy while done < n */

        struct fwd_batch b = {seqs, ns, 0};
        double t_start = clock_now_s();
        unsigned long jobs0 = 0, bars0 = 0, jobs1 = 0, bars1 = 0;
        if (m->be->thread_syncs) m->be->thread_syncs(m->be, &jobs0, &bars0);
        unsigned long long calls0 = backend_count_calls(m->be);
        int clocked = m->be->time_mark && m->be->time_device_s && m->be->time_waited_s;
        double waited0 = clocked ? m->be->time_waited_s(m->be) : 0.0;
        unsigned long caps0 = 0, reps0 = 0, caps1 = 0, reps1 = 0, drop = 0;
        if (m->be->graph_counts) m->be->graph_counts(m->be, &caps0, &reps0, &drop);
        if (clocked) m->be->time_mark(m->be);
        if (model_forward(f, &b, h ? h->model : NULL, e)) goto out;
        if (in_backend && sample_in_backend(m, f, seqs, ns, slots, seq_slot, srows, stok, e))
            goto out;
        if (clocked) m->be->time_mark(m->be);
        double t_forward = clock_now_s() - t_start;
        double waited = clocked ? m->be->time_waited_s(m->be) - waited0 : 0.0;
        double device_s = clocked && !has_prefill ? m->be->time_device_s(m->be) : 0.0;
        if (m->be->graph_counts) m->be->graph_counts(m->be, &caps1, &reps1, &drop);
        st.forward_calls++;
        if (!has_prefill) note_calls(&st, (long)(backend_count_calls(m->be) - calls0));

        size_t kv_now = 0; /* measured before finished sequences give their cache back */
        for (int i = 0; i < live; i++)
            if (slots[i].state != SLOT_FREE) kv_now += slots[i].cache->bytes;
        if (kv_now > st.peak_kv_bytes) st.peak_kv_bytes = kv_now;

        for (int q = 0; q < ns; q++) {
            struct slot *s = &slots[seq_slot[q]];
            struct gen_result *res = &results[s->req];
            if (s->state == SLOT_PREFILL) {
                s->n_fed += seqs[q].n_tokens;
                st.prefill_tokens += seqs[q].n_tokens;
                if (seqs[q].logits == FWD_LOGITS_NONE) continue;
                s->state = SLOT_DECODE;
                res->ttft_s = clock_now_s() - t0;
                if (opt->fill_to > 0 && kvcache_fill_repeat(s->cache, opt->fill_to, e)) goto out;
            }
            int row = seqs[q].logit_row0, tok;
            if (!in_backend)
                tok = sampler_sample(&s->sampler,
                                     forward_logits(f) + (size_t)row * m->cfg.n_vocab,
                                     m->cfg.n_vocab);
            else if ((tok = stok[row]) < 0) /* the backend left this row to the host */
                tok = sampler_sample_u(&s->sampler, forward_logits_row(f, row), m->cfg.n_vocab,
                                       srows[row].u);
            s->last = tok;
            int eos = generate_is_eos(m, opt, tok);
            if (!eos) res->tokens[res->n_tokens++] = tok;
            if (h && h->on_step && h->on_step(h->ctx, s->req, tok, s->cache, e)) goto out;
            if (eos || res->n_tokens >= s->max_new) {
                res->finish = eos ? GEN_FINISH_EOS : GEN_FINISH_LENGTH;
                res->peak_kv_bytes = s->cache->peak_bytes;
                if (h && h->end_sequence) h->end_sequence(h->ctx, s->req, res);
                slot_release(s);
                done++;
                if (next_req < n) {
                    if (slot_admit(m, reqs, next_req, opt, s, &results[next_req], e)) goto out;
                    next_req++;
                }
            }
        }
        if (h && h->after_step && h->after_step(h->ctx, e)) goto out;
        /* A step's time is its whole wall time: the forward, sampling and
         * every hook (a policy's scoring and compaction), so tokens/s counts
         * what eviction costs. */
        double dt = clock_now_s() - t_start;
        if (m->be->thread_syncs) m->be->thread_syncs(m->be, &jobs1, &bars1);
        if (has_prefill) {
            st.prefill_s += dt;
        } else {
            st.decode_s += dt;
            st.decode_forward_s += t_forward;
            st.decode_wait_s += waited;
            st.decode_device_s += device_s;
            st.device_clock = clocked;
            int fin, fout;
            forward_fused_layers(f, &fin, &fout);
            st.decode_fused_in += fin;
            st.decode_fused_out += fout;
            st.graphs = m->be->graph_counts != NULL;
            st.decode_graph_steps += (long)(caps1 - caps0 + reps1 - reps0);
            st.decode_graph_captures += (long)(caps1 - caps0);
            st.decode_steps++;
            st.decode_tokens += used;
            st.decode_jobs += jobs1 - jobs0;
            st.decode_barriers += bars1 - bars0;
        }
    }
    rc = 0;
out:
    if (slots)
        for (int i = 0; i < live; i++)
            if (slots[i].state != SLOT_FREE || slots[i].cache) slot_release(&slots[i]);
    forward_free(f);
    free(slots);
    free(seqs);
    free(decode_tok);
    free(seq_slot);
    free(srows);
    free(stok);
    if (rc != 0) gen_results_free(results, n);
    if (stats) *stats = st;
    return rc;
}
