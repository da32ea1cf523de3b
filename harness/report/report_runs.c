/* report_runs.c - the runs table and the provenance section of the
 * report's index page (see report.h). */
#include "harness/report/report_priv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "harness/exp/sweep.h"
#include "harness/store/store.h"
#include "util/repo_file.h"

/* Every run with its FullKV reference: the ok FullKV run of the same model,
 * dataset slice, sampling and generation cap (the same batching first). */
#define SAME_POINT "o.policy = 'fullkv' AND o.status = 'ok' AND o.model = r.model AND " \
    "o.dataset = r.dataset AND o.data_offset = r.data_offset AND o.data_limit IS r.data_limit " \
    "AND o.sampling_json IS r.sampling_json AND o.max_new_tokens IS r.max_new_tokens"
static const char RUNS_SQL[] =
    "SELECT r.*, f.accuracy AS fullkv_accuracy, f.n_samples AS fullkv_n FROM (SELECT r.id, "
    "r.model, r.dataset, r.data_offset, r.data_limit, r.policy, r.budget, r.batch_size, "
    "r.batching, r.status, r.n_samples, r.accuracy, r.mean_gen_tokens, (SELECT AVG(s.finished) "
    "FROM samples s WHERE s.run_id = r.id) AS frac_finished, r.peak_kv_bytes, r.tokens_per_s, "
    "COALESCE((SELECT MIN(o.id) FROM runs o WHERE " SAME_POINT " AND o.batch_size = r.batch_size "
    "AND o.batching = r.batching), (SELECT MIN(o.id) FROM runs o WHERE " SAME_POINT ")) AS "
    "fullkv_id FROM runs r) r LEFT JOIN runs f ON f.id = r.fullkv_id "
    "ORDER BY r.model, r.dataset, r.policy, r.budget, r.batch_size, r.batching, r.id";

struct col {
    const char *name, *head, *type;
};

static const struct col COLS[] = {
    {"model", "model", "text"}, {"dataset", "dataset", "text"}, {"policy", "policy", "text"},
    {"budget", "budget", "num"}, {"batching", "batching", "text"}, {"status", "status", "text"},
    {"n_samples", "samples", "num"}, {"accuracy", "accuracy ± SE", "num"},
    {"delta_fullkv", "Δ vs FullKV ± SE", "num"}, {"mean_gen_tokens", "mean length", "num"},
    {"frac_finished", "share finished", "num"}, {"peak_kv_bytes", "peak KV (batch)", "num"},
    {"tokens_per_s", "tokens/s", "num"},
};
enum { N_COLS = sizeof COLS / sizeof COLS[0] };

/* A cell: its raw value in data-v (what sorting and the tests read), its text shown. */
static void cell(struct sbuf *b, const char *raw, const char *shown, int text)
{
    sb_printf(b, "<td%s data-v=\"", text ? " class=\"t\"" : "");
    html_text(b, raw ? raw : "");
    sb_printf(b, "\">");
    html_text(b, shown ? shown : "—");
    sb_printf(b, "</td>");
}

static double se_of(double p, double n)
{
    return n > 0 && isfinite(p) ? sqrt(p * (1 - p) / n) : NAN;
}

static void run_row(struct sbuf *b, const struct view_rows *t, int r)
{
    char shown[128], raw[64];
#define V(name) view_cell(t, r, view_col(t, name))
#define N(name) view_num(t, r, view_col(t, name))
    sb_printf(b, "<tr data-run-id=\"%s\">", V("id"));
    cell(b, V("model"), V("model"), 1);
    char ds[256];
    const char *lim = V("data_limit");
    snprintf(ds, sizeof ds, "%s [%s:%s]", V("dataset"), V("data_offset"), lim ? lim : "");
    cell(b, V("dataset"), ds, 1);
    cell(b, V("policy"), policy_display_name(V("policy")), 1);
    cell(b, V("budget"), V("budget") ? V("budget") : "none", 0);
    describe_batching(V("batch_size"), V("batching"), shown, sizeof shown);
    cell(b, V("batching"), shown, 1);
    cell(b, V("status"), V("status"), 1);
    cell(b, V("n_samples"), V("n_samples"), 0);
    double acc = N("accuracy"), n = N("n_samples"), se = se_of(acc, n);
    snprintf(shown, sizeof shown, "%.3f ± %.3f", acc, se);
    cell(b, V("accuracy"), isfinite(acc) ? shown : NULL, 0);
    double ref = N("fullkv_accuracy"), d = acc - ref;
    double sed = sqrt(se * se + pow(se_of(ref, N("fullkv_n")), 2));
    int is_ref = V("fullkv_id") && !strcmp(V("fullkv_id"), V("id"));
    snprintf(raw, sizeof raw, "%.17g", d);
    snprintf(shown, sizeof shown, is_ref ? "reference" : "%+.3f ± %.3f", d, sed);
    cell(b, isfinite(d) ? raw : NULL, isfinite(d) ? shown : NULL, 0);
    double len = N("mean_gen_tokens"), fin = N("frac_finished"), kv = N("peak_kv_bytes"),
           tps = N("tokens_per_s");
    snprintf(shown, sizeof shown, "%.1f", len);
    cell(b, V("mean_gen_tokens"), isfinite(len) ? shown : NULL, 0);
    snprintf(shown, sizeof shown, "%.3f", fin);
    cell(b, V("frac_finished"), isfinite(fin) ? shown : NULL, 0);
    snprintf(shown, sizeof shown, "%.2f MiB", kv / (1024.0 * 1024.0));
    cell(b, V("peak_kv_bytes"), isfinite(kv) ? shown : NULL, 0);
    snprintf(shown, sizeof shown, "%.2f", tps);
    cell(b, V("tokens_per_s"), isfinite(tps) ? shown : NULL, 0);
    sb_printf(b, "</tr>\n");
#undef V
#undef N
}

int report_runs(struct store *s, struct sbuf *b, struct eb_err *e)
{
    struct view_rows t;
    if (view_rows_load(s, RUNS_SQL, &t, e)) return eb_wrap(e, "runs table");
    sb_printf(b, "<section id=\"runs\">\n<h2>Runs</h2>\n<p class=\"note\">One row per measured "
                 "point; click a column to sort, type to filter.  Accuracy is pass@1 with its "
                 "standard error sqrt(p(1-p)/n); the difference from FullKV (same model, "
                 "dataset slice, sampling and generation cap) carries the standard error of "
                 "the difference of two independent proportions.</p>\n"
                 "<input class=\"filter\" data-table=\"runs-table\" placeholder=\"filter rows "
                 "(e.g. rkv 64)\">\n<table id=\"runs-table\" class=\"sortable\">\n<thead><tr>");
    for (int c = 0; c < N_COLS; c++)
        sb_printf(b, "<th data-col=\"%s\" data-type=\"%s\"%s>%s</th>", COLS[c].name, COLS[c].type,
                  strcmp(COLS[c].type, "text") ? "" : " class=\"t\"", COLS[c].head);
    sb_printf(b, "</tr></thead>\n<tbody>\n");
    for (int r = 0; r < t.nrows; r++) run_row(b, &t, r);
    sb_printf(b, "</tbody>\n</table>\n</section>\n");
    view_rows_free(&t);
    return 0;
}

/* ---- provenance ---- */

/* The registry's file and SHA-256 of a model name (model/models.json). */
static void model_file_sha(const char *model, char *file, size_t nf, char *sha, size_t ns)
{
    snprintf(file, nf, "%s", model);
    snprintf(sha, ns, "not in the registry");
    char path[4096];
    if (eb_repo_file("model/models.json", path, sizeof path, NULL, 0) != 0) return;
    char *text = report_slurp(path, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, model);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(m, "file"),
                *h = cJSON_GetObjectItemCaseSensitive(m, "sha256");
    if (cJSON_IsString(f)) snprintf(file, nf, "%s", f->valuestring);
    if (cJSON_IsString(h)) snprintf(sha, ns, "%s", h->valuestring);
    cJSON_Delete(j);
}

static void provenance_row(struct sbuf *b, const struct view_rows *t, int r,
                           const struct report_options *o)
{
#define V(name) view_cell(t, r, view_col(t, name))
    char file[1024], sha[128], hash[65];
    model_file_sha(V("model"), file, sizeof file, sha, sizeof sha);
    const char *lim = V("data_limit");
    struct eb_err ignored = {0};
    if (sweep_data_hash(V("dataset"), o->data_dir, atoi(V("data_offset")), lim ? atoi(lim) : 0,
                        hash, &ignored))
        snprintf(hash, sizeof hash, "absent");
    sb_printf(b, "<tr data-run-id=\"%s\"><td>%s</td><td class=\"t\"><code>", V("id"), V("id"));
    html_text(b, V("run_key"));
    sb_printf(b, "</code></td><td class=\"t\"><code>");
    html_text(b, V("code_version"));
    sb_printf(b, "</code></td><td class=\"t\">");
    html_text(b, file);
    sb_printf(b, "<br><code>");
    html_text(b, sha);
    sb_printf(b, "</code></td><td class=\"t\">");
    html_text(b, V("dataset"));
    sb_printf(b, " [%s:%s]<br><code>", V("data_offset"), lim ? lim : "");
    html_text(b, hash);
    sb_printf(b, "</code></td><td class=\"t\"><code>");
    html_text(b, V("params_json"));
    sb_printf(b, "</code></td></tr>\n");
#undef V
}

int report_provenance(struct store *s, const struct report_options *o, struct sbuf *b,
                      struct eb_err *e)
{
    struct view_rows x, t;
    if (view_rows_load(s, "SELECT id, name, started_at, code_version, config_json FROM "
                          "experiments ORDER BY id", &x, e))
        return eb_wrap(e, "provenance");
    if (view_rows_load(s, "SELECT r.id, r.run_key, r.model, r.dataset, r.data_offset, "
                          "r.data_limit, r.params_json, x.code_version FROM runs r LEFT JOIN "
                          "experiments x ON x.id = r.experiment_id ORDER BY r.id", &t, e)) {
        view_rows_free(&x);
        return eb_wrap(e, "provenance");
    }
    sb_printf(b, "<section id=\"provenance\">\n<h2>Provenance</h2>\n<p class=\"note\">What the "
                 "run keys hash: the code hash, the model (registry file and SHA-256, checked "
                 "when fetched), the dataset slice (SHA-256 of its items, computed now from "
                 "this machine's data; \"absent\" when the data is not here) and the "
                 "parameters.</p>\n");
    for (int r = 0; r < x.nrows; r++) {
        sb_printf(b, "<h3>Experiment ");
        html_text(b, view_cell(&x, r, 1));
        sb_printf(b, " (started ");
        html_text(b, view_cell(&x, r, 2));
        sb_printf(b, ", code <code>");
        html_text(b, view_cell(&x, r, 3));
        sb_printf(b, "</code>)</h3>\n<details><summary>config</summary><pre>");
        html_text(b, view_cell(&x, r, 4));
        sb_printf(b, "</pre></details>\n");
    }
    sb_printf(b, "<table id=\"provenance-table\"><thead><tr><th>run</th><th class=\"t\">run "
                 "key</th><th class=\"t\">code hash</th><th class=\"t\">model file, "
                 "SHA-256</th><th class=\"t\">data slice, SHA-256</th><th class=\"t\">"
                 "parameters</th></tr></thead>\n<tbody>\n");
    for (int r = 0; r < t.nrows; r++) provenance_row(b, &t, r, o);
    sb_printf(b, "</tbody></table>\n</section>\n");
    view_rows_free(&x);
    view_rows_free(&t);
    return 0;
}
