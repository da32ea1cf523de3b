/* report_problems.c - one page per problem: the question, the reference
 * answer and every run's output side by side, each as a retention view when
 * its run recorded one (harness/exp/retention.h), and the list of problems
 * on the index page. */
#include "harness/report/report_priv.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/dataset.h"
#include "harness/exp/retention.h"
#include "harness/report/plot_figures.h"
#include "harness/store/store.h"

static const char SAMPLES_SQL[] =
    "SELECT s.run_id, s.sample_idx, s.item_id, s.correct, s.pred_answer, s.ref_answer, s.text, "
    "s.gen_tokens, s.prompt_tokens, r.model, r.dataset, r.policy, r.budget, r.batch_size, "
    "r.batching, r.sampling_json, r.max_new_tokens FROM samples s JOIN runs r ON r.id = s.run_id "
    "WHERE r.status = 'ok' ORDER BY r.dataset, s.item_id, r.model, r.policy <> 'fullkv', "
    "r.policy, r.budget, r.batch_size, r.batching, r.id, s.sample_idx";

/* Datasets loaded for their questions, by name. */
#define MAX_DS 16
struct ds_cache {
    int n;
    char name[MAX_DS][128];
    struct dataset d[MAX_DS];
    char why[MAX_DS][600];       /* "" when loaded */
};

static const char *question_of(struct ds_cache *c, const char *data_dir, const char *name,
                               const char *id, const char **why)
{
    int k = 0;
    while (k < c->n && strcmp(c->name[k], name)) k++;
    if (k == c->n && c->n < MAX_DS) {
        struct eb_err e = {0};
        snprintf(c->name[k], sizeof c->name[k], "%s", name);
        if (dataset_load(name, data_dir, 0, 0, &c->d[k], &e))
            snprintf(c->why[k], sizeof c->why[k], "%s", e.msg);
        c->n++;
    }
    *why = k < c->n && c->why[k][0] ? c->why[k] : "the dataset does not hold this item";
    for (int i = 0; k < c->n && i < c->d[k].n; i++)
        if (id && !strcmp(c->d[k].items[i].id, id)) return c->d[k].items[i].problem;
    return NULL;
}

static int hex_val(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* SQLite's hex() text back to bytes (malloc'd). */
static unsigned char *unhex(const char *h, size_t *n)
{
    size_t len = h ? strlen(h) / 2 : 0;
    unsigned char *out = malloc(len ? len : 1);
    for (size_t i = 0; out && i < len; i++) out[i] = (unsigned char)(hex_val(h[2 * i]) << 4 | hex_val(h[2 * i + 1]));
    *n = len;
    return out;
}

/* One output's retention data as a JSON block; 1 with why filled when it has none. */
struct output {
    const struct view_rows *t;
    int row;
    const char *text;
    long diverge_byte;           /* -1: none; -2: same as FullKV; -3: no FullKV */
};

#define V(o, name) view_cell((o)->t, (o)->row, view_col((o)->t, name))

/* The tokens' texts: token i is text[start[i], start[i + 1]), boundaries moved
 * forward to the next UTF-8 character start (a character split between two
 * tokens is shown with the first). */
static void json_tokens(struct sbuf *b, const char *text, const int *lens, int n, long diverge,
                        int *diverge_tok)
{
    size_t len = strlen(text), at = 0, end = 0;
    *diverge_tok = -1;
    sb_printf(b, "\"tokens\":[");
    for (int i = 0; i < n; i++) {
        end += (size_t)lens[i];
        size_t cut = end < len ? end : len;
        while (cut < len && (text[cut] & 0xc0) == 0x80) cut++;
        if (cut < at) cut = at;
        if (diverge >= 0 && *diverge_tok < 0 && (size_t)diverge < cut) *diverge_tok = i;
        sb_printf(b, "%s", i ? "," : "");
        json_str_n(b, text + at, cut - at);
        at = cut;
    }
    sb_printf(b, "],");
}

static int retention_json(struct store *s, const struct output *o, int has_table, struct sbuf *j,
                          char *why, size_t nwhy, struct eb_err *e)
{
    if (!strcmp(V(o, "policy"), "fullkv"))
        return snprintf(why, nwhy, "FullKV evicts nothing: every token stays in every cache."), 1;
    if (!has_table)
        return snprintf(why, nwhy, "this database was written before schema version 5 and has "
                                   "no retention records."), 1;
    char sql[400];
    snprintf(sql, sizeof sql, "SELECT n_layer, n_kv, n_prompt, n_positions, encoding, hex(steps), "
                              "hex(token_bytes) FROM retention WHERE run_id = %ld AND "
                              "sample_idx = %ld", atol(V(o, "run_id")), atol(V(o, "sample_idx")));
    struct view_rows r;
    if (view_rows_load(s, sql, &r, e)) return -1;
    int rc = 1;
    uint32_t *steps = NULL;
    int *lens = NULL;
    size_t nz = 0, nt = 0;
    unsigned char *z = NULL, *zt = NULL;
    int L = (int)view_num(&r, 0, 0), K = (int)view_num(&r, 0, 1), P = (int)view_num(&r, 0, 2),
        N = (int)view_num(&r, 0, 3), n_gen = N - P;
    if (r.nrows == 0)
        snprintf(why, nwhy, "no retention record for this sample: its run was made with "
                            "\"retention\": false (or run --no-retention), or by an older evictbench.");
    else if (strcmp(view_cell(&r, 0, 4), RETENTION_ENCODING))
        snprintf(why, nwhy, "its record is in an encoding this build does not read (%s).",
                 view_cell(&r, 0, 4));
    else if (!view_cell(&r, 0, 6) || n_gen != atoi(V(o, "gen_tokens")))
        snprintf(why, nwhy, "its record has no token boundaries (the tokens decoded one by one "
                            "do not add up to the text).");
    else if (!(z = unhex(view_cell(&r, 0, 5), &nz)) || !(zt = unhex(view_cell(&r, 0, 6), &nt)) ||
             retention_decode_steps(z, nz, (size_t)L * K * N, &steps, e) ||
             retention_decode_token_bytes(zt, nt, (size_t)n_gen, &lens, e))
        rc = -1;
    else
        rc = 0;
    if (rc == 0) {
        int dtok;
        sb_printf(j, "{\"n_layer\":%d,\"n_kv\":%d,\"n_prompt\":%d,\"n_positions\":%d,", L, K, P, N);
        json_tokens(j, o->text, lens, n_gen, o->diverge_byte, &dtok);
        sb_printf(j, "\"diverge\":%d,\"steps\":[", dtok);
        for (int h = 0; h < L * K; h++) {
            sb_printf(j, "%s\"", h ? "," : "");
            /* runs of one value as "value*count"; "never" (0) as an empty value */
            for (int p = 0; p < N;) {
                uint32_t v = steps[(size_t)h * N + p];
                int run = 1;
                while (p + run < N && steps[(size_t)h * N + p + run] == v) run++;
                if (p) sb_put(j, ",", 1);
                if (v) sb_printf(j, "%u", v);
                if (run > 1) sb_printf(j, "*%d", run);
                p += run;
            }
            sb_printf(j, "\"");
        }
        sb_printf(j, "],\"sentences\":[");
        snprintf(sql, sizeof sql, "SELECT start_tok, end_tok FROM sentences WHERE run_id = %ld AND "
                                  "sample_idx = %ld AND end_tok >= %d ORDER BY sent_idx",
                 atol(V(o, "run_id")), atol(V(o, "sample_idx")), P);
        struct view_rows sr;
        if (view_rows_load(s, sql, &sr, e)) rc = -1;
        for (int i = 0; rc == 0 && i < sr.nrows; i++)
            sb_printf(j, "%s[%s,%s]", i ? "," : "", view_cell(&sr, i, 0), view_cell(&sr, i, 1));
        if (rc == 0) view_rows_free(&sr);
        sb_printf(j, "]}");
    }
    free(z);
    free(zt);
    free(steps);
    free(lens);
    view_rows_free(&r);
    return rc;
}

/* The text with the first difference from FullKV marked (outputs without a retention view). */
static void marked_text(struct sbuf *b, const struct output *o)
{
    sb_printf(b, "<pre class=\"text\">");
    if (o->diverge_byte >= 0) {
        html_text_n(b, o->text, (size_t)o->diverge_byte);
        sb_printf(b, "<mark class=\"diverge\" title=\"first difference from FullKV\">|</mark>");
        html_text(b, o->text + o->diverge_byte);
    } else {
        html_text(b, o->text);
    }
    sb_printf(b, "</pre>\n");
}

static int write_output(struct store *s, const struct output *o, int has_table, int k,
                        struct sbuf *b, int *n_ret, struct eb_err *e)
{
    int ok = atoi(V(o, "correct"));
    const char *budget = V(o, "budget");
    char batching[128];
    describe_batching(V(o, "batch_size"), V(o, "batching"), batching, sizeof batching);
    sb_printf(b, "<article class=\"output\" data-run-id=\"%s\" data-sample-idx=\"%s\"",
              V(o, "run_id"), V(o, "sample_idx"));
    struct sbuf j = {0};
    char why[300] = "";
    int rc = retention_json(s, o, has_table, &j, why, sizeof why, e);
    if (rc < 0) {
        free(j.p);
        return -1;
    }
    if (rc == 0) sb_printf(b, " data-json=\"ret-%d\"", k);
    sb_printf(b, ">\n<h3>");
    html_text(b, policy_display_name(V(o, "policy")));
    sb_printf(b, "%s%s <span class=\"%s\">%s</span></h3>\n<p class=\"meta\">", budget ? ", budget " : "",
              budget ? budget : "", ok ? "correct" : "incorrect", ok ? "✓ correct" : "✗ incorrect");
    html_text(b, V(o, "model"));
    sb_printf(b, " · %s · %s tokens · answer: ", batching, V(o, "gen_tokens"));
    html_text(b, V(o, "pred_answer") ? V(o, "pred_answer") : "none");
    sb_printf(b, "</p>\n<p class=\"divergence\">%s</p>\n",
              o->diverge_byte == -2 ? "Same text as FullKV." :
              o->diverge_byte == -3 ? "No FullKV output to compare with." :
              o->diverge_byte == -1 ? "" : "First difference from FullKV marked in red.");
    if (rc == 0) {
        sb_printf(b, "<p class=\"ret-summary\">Evicted tokens (gone from every cache): <b "
                     "class=\"n-evicted-tokens\"></b>; evicted (position, cache) pairs: <b "
                     "class=\"n-evicted-slots\"></b>; tokens held at this step: <b "
                     "class=\"n-held\"></b></p>\n<div class=\"controls\">step <input "
                     "type=\"range\" class=\"step\" min=\"0\" max=\"0\" value=\"0\"> <span "
                     "class=\"step-label\"></span><br><select class=\"layer\"></select> <select "
                     "class=\"head\"></select></div>\n<div class=\"prompt-cells\" title=\"the "
                     "prompt's positions\"></div>\n<div class=\"tokens\"></div>\n"
                     "<script type=\"application/json\" id=\"ret-%d\">", k);
        sb_put(b, j.p, j.n);
        sb_printf(b, "</script>\n");
        (*n_ret)++;
    } else {
        sb_printf(b, "<p class=\"no-retention\">No retention view: ");
        html_text(b, why);
        sb_printf(b, "</p>\n");
        marked_text(b, o);
    }
    sb_printf(b, "</article>\n");
    free(j.p);
    return j.oom ? eb_fail_nomem(e, "report page") : 0;
}

/* First differing byte of a and b; -2 when equal, -3 when b is NULL. */
static long first_difference(const char *a, const char *b)
{
    if (!b) return -3;
    long i = 0;
    while (a[i] && a[i] == b[i]) i++;
    return a[i] == b[i] ? -2 : i;
}

/* FullKV's text for the output in row r: the FullKV output of the same model,
 * sampling and cap, of the same sample index when there is one. */
static const char *fullkv_text(const struct view_rows *t, int r0, int r1, int r)
{
    int cm = view_col(t, "model"), cs = view_col(t, "sampling_json"),
        cx = view_col(t, "max_new_tokens"), cp = view_col(t, "policy"), ci = view_col(t, "sample_idx");
    const char *any = NULL;
    for (int k = r0; k < r1; k++) {
        if (!str_same(view_cell(t, k, cp), "fullkv") || !str_same(view_cell(t, k, cm), view_cell(t, r, cm)) ||
            !str_same(view_cell(t, k, cs), view_cell(t, r, cs)) ||
            !str_same(view_cell(t, k, cx), view_cell(t, r, cx)))
            continue;
        const char *text = view_cell(t, k, view_col(t, "text"));
        if (str_same(view_cell(t, k, ci), view_cell(t, r, ci))) return text ? text : "";
        if (!any) any = text ? text : "";
    }
    return any;
}

static int problem_page(struct store *s, const struct report_options *o, const struct view_rows *t,
                        int r0, int r1, int page, const char *question, const char *qwhy,
                        int has_table, int *n_ret, struct eb_err *e)
{
    struct sbuf b = {0};
    struct output first = {t, r0, NULL, -1};
    char title[400];
    snprintf(title, sizeof title, "%s %s", V(&first, "dataset"), V(&first, "item_id"));
    html_head(&b, title, "../");
    sb_printf(&b, "<p><a href=\"../index.html#problems\">← all problems</a></p>\n<h1>Problem ");
    html_text(&b, title);
    sb_printf(&b, "</h1>\n<h2>Question</h2>\n");
    if (question) {
        sb_printf(&b, "<pre class=\"question\">");
        html_text(&b, question);
        sb_printf(&b, "</pre>\n");
    } else {
        sb_printf(&b, "<p class=\"note\">The question is not available here: ");
        html_text(&b, qwhy);
        sb_printf(&b, "</p>\n");
    }
    sb_printf(&b, "<h2>Reference answer</h2>\n<pre class=\"reference\">");
    html_text(&b, V(&first, "ref_answer"));
    sb_printf(&b, "</pre>\n<h2>Outputs</h2>\n<p class=\"note legend\">Each token is shaded by the "
                  "share of (layer, KV head) caches that still hold it at the chosen step "
                  "(<span style=\"background:rgba(0,114,178,0.63)\"></span> all, <span "
                  "style=\"background:rgba(0,114,178,0.08)\"></span> none: struck through); grey "
                  "tokens were not generated yet; the squares are the prompt's positions; "
                  "purple outlines are the policy's sentences.</p>\n<div class=\"outputs\">\n");
    int rc = 0;
    for (int r = r0; r < r1 && rc == 0; r++) {
        struct output out = {t, r, view_cell(t, r, view_col(t, "text")), -1};
        if (!out.text) out.text = "";
        if (strcmp(V(&out, "policy"), "fullkv"))
            out.diverge_byte = first_difference(out.text, fullkv_text(t, r0, r1, r));
        rc = write_output(s, &out, has_table, r - r0, &b, n_ret, e);
    }
    sb_printf(&b, "</div>\n");
    html_foot(&b, "../");
    char path[4200];
    snprintf(path, sizeof path, "%s/problems/p%04d.html", o->out_dir, page);
    if (rc == 0) rc = html_write(path, &b, e);
    free(b.p);
    return rc;
}

static void index_row(struct sbuf *b, const struct view_rows *t, int r0, int r1, int page,
                      const char *question)
{
    int correct = 0;
    for (int r = r0; r < r1; r++) correct += atoi(view_cell(t, r, view_col(t, "correct")));
    sb_printf(b, "<tr><td class=\"t\">");
    html_text(b, view_cell(t, r0, view_col(t, "dataset")));
    sb_printf(b, "</td><td class=\"t\"><a href=\"problems/p%04d.html\">", page);
    html_text(b, view_cell(t, r0, view_col(t, "item_id")));
    sb_printf(b, "</a></td><td class=\"t\">");
    if (question) html_text_n(b, question, strlen(question) > 100 ? 100 : strlen(question));
    sb_printf(b, "</td><td data-v=\"%d\">%d</td><td data-v=\"%d\">%d</td></tr>\n", r1 - r0, r1 - r0,
              correct, correct);
}

int report_problems(struct store *s, const struct report_options *o, struct sbuf *index,
                    struct report_summary *sum, struct eb_err *e)
{
    struct view_rows t;
    if (view_rows_load(s, SAMPLES_SQL, &t, e)) return eb_wrap(e, "problems");
    struct view_rows has;
    int has_table = 0;
    if (view_rows_load(s, "SELECT name FROM sqlite_master WHERE name = 'retention'", &has, e) == 0) {
        has_table = has.nrows > 0;
        view_rows_free(&has);
    }
    static struct ds_cache dc;
    memset(&dc, 0, sizeof dc);
    sb_printf(index, "<section id=\"problems\">\n<h2>Problems</h2>\n<p class=\"note\">One page "
                     "per problem: the question, the reference answer and every run's output "
                     "side by side, with which tokens each policy kept.</p>\n<table "
                     "id=\"problems-table\" class=\"sortable\"><thead><tr><th class=\"t\">dataset"
                     "</th><th class=\"t\" data-col=\"item\">problem</th><th class=\"t\">question"
                     "</th><th data-type=\"num\">outputs</th><th data-type=\"num\">correct</th>"
                     "</tr></thead>\n<tbody>\n");
    int cd = view_col(&t, "dataset"), ci = view_col(&t, "item_id"), rc = 0;
    for (int r0 = 0, page = 1; rc == 0 && r0 < t.nrows; page++) {
        int r1 = r0 + 1;
        while (r1 < t.nrows && str_same(view_cell(&t, r1, cd), view_cell(&t, r0, cd)) &&
               str_same(view_cell(&t, r1, ci), view_cell(&t, r0, ci)))
            r1++;
        const char *qwhy = NULL;
        const char *q = question_of(&dc, o->data_dir, view_cell(&t, r0, cd), view_cell(&t, r0, ci), &qwhy);
        rc = problem_page(s, o, &t, r0, r1, page, q, qwhy, has_table, &sum->n_retention, e);
        index_row(index, &t, r0, r1, page, q);
        sum->n_problems++;
        r0 = r1;
    }
    sb_printf(index, "</tbody></table>\n</section>\n");
    for (int i = 0; i < dc.n; i++)
        if (!dc.why[i][0]) dataset_free(&dc.d[i]);
    view_rows_free(&t);
    return rc;
}
