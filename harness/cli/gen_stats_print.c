/* gen_stats_print.c - see gen_stats_print.h. */
#include <stdio.h>
#include <string.h>

#include "harness/cli/gen_stats_print.h"
#include "policies/registry.h"
#include "policies/steering.h"

/* The sentence/steering statistics of trace seq, when the policy keeps them
 * (seal, skipkv and their presets); PSS only where it builds sentence
 * representations (it observes hidden states). */
static void print_trace_stats(const struct policy *pol, int seq, int n)
{
    struct policy_trace_stats t;
    if (policy_trace_stats(pol, seq, &t) || !t.valid) return;
    char who[32] = "";
    if (n > 1) snprintf(who, sizeof who, " %d", seq);
    fprintf(stderr, "trace%s: %d sentences, N_o %d (non-execution sentences)", who,
            t.s.n_sentences, t.s.n_check);
    if (pol->info.needs & POLICY_NEED_HIDDEN_LAST)
        fprintf(stderr, "; %ld redundant pairs of %ld compared, %d sentences marked redundant, PSS "
                        "mean %.4f max %.4f", t.s.n_pairs_above, t.s.n_pairs, t.s.n_redundant,
                t.s.pss_mean, t.s.pss_max);
    fputc('\n', stderr);
    if (t.alpha != 0.0)
        fprintf(stderr, "steering%s: alpha %.4f at the end, %ld rows steered\n", who, t.alpha,
                t.n_steered);
}

/* --stats: prefill and decode speed, KV memory, and the policy's work. */
void gen_print_stats(const struct gen_stats *st, const struct gen_result *res, int n,
                     const struct gen_print_ctx *c)
{
    long gen = 0;
    for (int i = 0; i < n; i++) gen += res[i].n_tokens;
    fprintf(stderr, "prefill: %ld tokens, %.3f s, %.1f tok/s\n", st->prefill_tokens, st->prefill_s,
            st->prefill_s > 0 ? st->prefill_tokens / st->prefill_s : 0.0);
    fprintf(stderr, "decode:  %ld tokens, %.3f s, %.1f tok/s (%ld generated in all; the decode "
                    "loop's wall time, every policy hook inside it)\n",
            st->decode_tokens, st->decode_s, st->decode_s > 0 ? st->decode_tokens / st->decode_s : 0.0,
            gen);
    double steps = st->decode_steps > 0 ? (double)st->decode_steps : 1.0;
    fprintf(stderr, "decode step: %ld batch steps; per step %.3f ms: forward and sampling %.3f ms, "
                    "hooks %.3f ms\n", st->decode_steps, 1e3 * st->decode_s / steps,
            1e3 * st->decode_forward_s / steps, 1e3 * (st->decode_s - st->decode_forward_s) / steps);
    fprintf(stderr, "fused layer blocks per decode step: %.1f attention inputs and %.1f layer "
                    "outputs of %d layers (the rest ran as single ops)\n",
            st->decode_fused_in / steps, st->decode_fused_out / steps, c->n_layer);
    if (st->device_clock)
        fprintf(stderr, "host vs device per decode step: host %.3f ms of its own work and %.3f ms "
                        "waiting on the device; device %.3f ms (host work %.0f%% of device time)\n",
                1e3 * (st->decode_forward_s - st->decode_wait_s) / steps,
                1e3 * st->decode_wait_s / steps, 1e3 * st->decode_device_s / steps,
                st->decode_device_s > 0
                    ? 100.0 * (st->decode_forward_s - st->decode_wait_s) / st->decode_device_s
                    : 0.0);
    else
        fprintf(stderr, "host vs device per decode step: no device clock on the %s backend "
                        "(on the CPU, ops are done when they return: host time is device "
                        "time)\n", c->device ? c->device : "cpu");
    if (st->graphs)
        fprintf(stderr, "step graphs: %.2f graph launches per decode step (%ld of %ld steps "
                        "replayed or just captured as one graph, the embedding and every layer); "
                        "%ld captures (a new batch shape or cache binding, e.g. a compaction)\n",
                st->decode_graph_steps / steps, st->decode_graph_steps, st->decode_steps,
                st->decode_graph_captures);
    else
        fprintf(stderr, "step graphs: none (each op launched on its own%s)\n",
                c->device && strncmp(c->device, "cuda", 4) == 0
                    ? "; EVICTBENCH_CUDA_GRAPH=1 records them"
                    : "");
    fprintf(stderr, "kv cache: peak %zu bytes; memory estimate %zu bytes; %s elements\n",
            st->peak_kv_bytes, st->est_bytes, c->kv_name);
    if (st->decode_jobs > 0)
        fprintf(stderr, "threads per decode step: %.1f parallel jobs, %.1f barriers inside them\n",
                st->decode_jobs / steps, st->decode_barriers / steps);
    if (st->decode_calls_min > 0)
        fprintf(stderr, "backend calls per decode step: %ld (at most %ld, when caches are "
                        "rebound)\n", st->decode_calls_min, st->decode_calls_max);
    if (c->glue) {
        struct policy_glue_stats ps;
        policy_glue_stats(c->glue, &ps);
        double all = st->prefill_s + st->decode_s;
        fprintf(stderr, "policy %s, budget %ld: %ld compressions, %.0f tokens evicted (%ld "
                        "layer-head slots)\n", c->pol->spec, c->budget, ps.compressions,
                ps.evicted_tokens, ps.evicted_slots);
        fprintf(stderr, "policy kv: peak %zu bytes, mean %.0f bytes per sequence; at most %d "
                        "slots in a head\n", ps.peak_kv_bytes, ps.mean_kv_bytes, ps.max_slots);
        fprintf(stderr, "policy time: %.3f ms per batch step (%.1f%% of the generate's wall "
                        "time): score %.3f, select %.3f, compact %.3f ms per batch step\n",
                1e3 * ps.policy_s / steps, all > 0 ? 100.0 * ps.policy_s / all : 0.0,
                1e3 * ps.score_s / steps, 1e3 * ps.select_s / steps, 1e3 * ps.compact_s / steps);
        if (ps.batch_compressions > 0 && ps.compress_calls > 0)
            fprintf(stderr, "backend calls per compression: %llu (%ld batched compressions)\n",
                    ps.compress_calls / (unsigned long long)ps.batch_compressions,
                    ps.batch_compressions);
        for (int i = 0; i < n; i++) print_trace_stats(c->pol, i, n);
    }
}
