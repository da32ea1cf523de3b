/* test_sentences.c - sentence segmentation, labels, representations, PSS
 * marks, the cache-range mapping (property test over random compactions),
 * SEAL step classification and the split-token rules. */
#include "policies/sentences.h"
#include "policies/steering.h"
#include "test.h"

enum { D1 = 10, D2 = 11, CHK = 20, SPLIT = 30, OPEN = 41, CLOSE = 40, NV = 64 };

static void make_tokens(struct sent_tokens *st)
{
    int delim[] = {D2, D1, D1}, check[] = {CHK}, split[] = {SPLIT};
    struct eb_err e = {0};
    CHECK(sent_tokens_from_ids(delim, 3, check, 1, split, 1, NV, OPEN, CLOSE, st, &e) == 0);
}

static void test_segmentation(void)
{
    struct sent_tokens st;
    make_tokens(&st);
    CHECK(st.n_delim == 2 && st.delim[0] == D1); /* sorted, deduplicated */
    struct sent_tracker t;
    struct eb_err e = {0};
    CHECK(sent_tracker_init(&t, &st, 0, 0.95f, &e) == 0);
    /* prompt: "a b ." "." -> the second delimiter is a one-token sentence
     * (released SkipKV); then "c Wait d ;" check; then a sentence holding
     * </think>; then an unterminated tail */
    int prompt[] = {1, 2, D1, D1};
    int gen[] = {3, CHK, 4, D2, 5, CLOSE, 6, D1, 7, 8};
    CHECK(sent_tracker_tokens(&t, prompt, 4, &e) == 0);
    for (int i = 0; i < 10; i++) CHECK(sent_tracker_tokens(&t, &gen[i], 1, &e) == 0);
    CHECK(t.n == 4);
    if (t.n == 4) {
        CHECK(t.s[0].b == 0 && t.s[0].e == 2 && t.s[0].label == SENT_OTHERS);
        CHECK(t.s[1].b == 3 && t.s[1].e == 3 && t.s[1].label == SENT_OTHERS);
        CHECK(t.s[2].b == 4 && t.s[2].e == 7 && t.s[2].label == SENT_CHECK);
        CHECK(t.s[3].b == 8 && t.s[3].e == 11 && t.s[3].label == SENT_OTHERS);
    }
    CHECK(t.n_check == 1);
    sent_tracker_free(&t);
    /* a delimiter first: a one-token sentence; a check word that is its own sentence end */
    CHECK(sent_tracker_init(&t, &st, 0, 0.95f, &e) == 0);
    int seq[] = {D1, 1, D2, CHK, D1, D1, D2};
    CHECK(sent_tracker_tokens(&t, seq, 7, &e) == 0);
    CHECK(t.n == 5); /* consecutive delimiters: one-token sentences */
    if (t.n == 5) {
        CHECK(t.s[0].b == 0 && t.s[0].e == 0);
        CHECK(t.s[1].b == 1 && t.s[1].e == 2);
        CHECK(t.s[2].b == 3 && t.s[2].e == 4 && t.s[2].label == SENT_CHECK);
        CHECK(t.s[3].b == 5 && t.s[3].e == 5 && t.s[3].label == SENT_OTHERS);
        CHECK(t.s[4].b == 6 && t.s[4].e == 6 && t.s[4].label == SENT_OTHERS);
    }
    sent_tracker_free(&t);
    sent_tokens_free(&st);
}

static void test_representations_and_marks(void)
{
    struct sent_tokens st;
    make_tokens(&st);
    struct sent_tracker t;
    struct eb_err e = {0};
    enum { DIM = 4 };
    CHECK(sent_tracker_init(&t, &st, DIM, 0.9f, &e) == 0);
    /* S0 = [0,2], S1 = [3,4], S2 = [5,6], S3 = [7,7] (a second delimiter) */
    int toks[] = {1, 2, D1, 3, D1, 4, D1, D1};
    float rows[8][DIM] = {
        {1, 0, 0, 0}, {1, 0, 0, 0}, {1, 1, 0, 0},   /* S0 mean (1, 1/3, 0, 0) */
        {0, 0, 3, 0}, {0, 0, 1, 0},                 /* S1 mean (0, 0, 2, 0) */
        {3, 1, 0, 0}, {3, 1, 0, 0}, {3, 1, 0, 0},   /* S2 mean (3, 1, 0, 0): parallel to S0 */
    };
    CHECK(sent_tracker_rows(&t, rows[0], 1, DIM, &e) != 0); /* a row before its token */
    CHECK(sent_tracker_tokens(&t, toks, 7, &e) == 0);
    CHECK(sent_tracker_rows(&t, rows[0], 2, DIM, &e) == 0);
    CHECK(sent_tracker_repr(&t, 0) == NULL);                /* S0 incomplete */
    CHECK(sent_tracker_rows(&t, rows[2], 5, DIM, &e) == 0); /* rows 2..6 */
    const float *v0 = sent_tracker_repr(&t, 0), *v1 = sent_tracker_repr(&t, 1);
    CHECK(v0 && v1);
    if (v0 && v1) {
        double n0 = sqrt(1.0 + 1.0 / 9.0);
        CHECK_NEAR(v0[0], 1.0 / (n0 + 1e-8), 1e-6);
        CHECK_NEAR(v0[1], 1.0 / 3.0 / (n0 + 1e-8), 1e-6);
        CHECK_NEAR(v1[2], 1.0, 1e-6);
    }
    CHECK(sent_tracker_repr(&t, 2) != NULL);  /* [5,6] complete so far */
    CHECK(sent_tracker_compare(&t) == 3);
    CHECK(t.s[0].redundant && !t.s[1].redundant && !t.s[2].redundant);
    CHECK_NEAR(t.s[0].lambda, 1.0, 1e-6);
    /* a second delimiter is its own sentence S3 = [7,7]; it waits for row 7 */
    CHECK(sent_tracker_tokens(&t, &toks[7], 1, &e) == 0);
    CHECK(t.n == 4 && t.s[2].e == 6 && t.s[3].b == 7 && t.s[3].e == 7);
    CHECK(sent_tracker_repr(&t, 3) == NULL);
    CHECK(sent_tracker_rows(&t, rows[7], 1, DIM, &e) == 0);
    CHECK(sent_tracker_repr(&t, 3) != NULL);
    /* released skipkv compares one-token sentences too (issue 27): S3 =
     * (3, 1, 0, 0) marks S0 again and, new, S2 (both lambda 1) */
    CHECK(sent_tracker_compare(&t) == 1);
    CHECK(t.s[0].redundant && !t.s[1].redundant && t.s[2].redundant && !t.s[3].redundant);
    CHECK_NEAR(t.s[2].lambda, 1.0, 1e-6);
    CHECK(t.s[3].compared);
    struct sent_stats ss;
    sent_tracker_stats(&t, &ss);
    CHECK(ss.n_sentences == 4 && ss.n_pairs == 6 && ss.n_pairs_above == 3 && ss.n_redundant == 2);
    CHECK_NEAR(ss.pss_max, 1.0, 1e-6);
    CHECK(ss.pss_mean > 0.49 && ss.pss_mean < 0.51); /* (0 + 1 + 0 + 1 + 0 + 1) / 6 */
    /* the penalty reaches exactly the cached slots inside S0 = [0, 2] and S2 = [5, 6] */
    int pos[] = {0, 2, 3, 5, 6};
    double z[5] = {0};
    CHECK(sent_tracker_penalize(&t, pos, 5, 5, z, 9) == 4);
    CHECK_NEAR(z[0], -t.s[0].lambda, 1e-12);
    CHECK_NEAR(z[1], -t.s[0].lambda, 1e-12);
    CHECK(z[2] == 0);
    CHECK_NEAR(z[3], -t.s[2].lambda, 1e-12);
    CHECK_NEAR(z[4], -t.s[2].lambda, 1e-12);
    /* released SkipKV: a sentence with a single surviving slot in the head is
     * not penalised; slots in the window count as survivors but take no penalty */
    int one[] = {0, 3, 5};
    double z1[3] = {0};
    CHECK(sent_tracker_penalize(&t, one, 3, 3, z1, 9) == 0);
    CHECK(z1[0] == 0 && z1[1] == 0 && z1[2] == 0);
    int win[] = {0, 3, 5, 2}; /* S0's slot 3 (position 2) is in the window */
    double z2[4] = {0};
    CHECK(sent_tracker_penalize(&t, win, 3, 4, z2, 9) == 1);
    CHECK(z2[0] < 0 && z2[1] == 0 && z2[2] == 0 && z2[3] == 0);
    /* any slot order */
    int shuffled[] = {6, 3, 0, 5, 2};
    double z3[5] = {0};
    CHECK(sent_tracker_penalize(&t, shuffled, 5, 5, z3, 9) == 4);
    CHECK(z3[0] < 0 && z3[1] == 0 && z3[2] < 0 && z3[3] < 0 && z3[4] < 0);
    CHECK(sent_tracker_rows(&t, rows[0], 1, DIM + 1, &e) != 0); /* wrong width */
    sent_tracker_free(&t);
    sent_tokens_free(&st);
}

/* The per-sentence export on a fixed trace: spans, prompt flag, labels,
 * the largest similarity (NAN when never compared) and the step of the first
 * penalty (only when a slot of the sentence was among the candidates). */
static void test_export(void)
{
    struct sent_tokens st;
    make_tokens(&st);
    struct sent_tracker t;
    struct eb_err e = {0};
    enum { DIM = 4, N_PROMPT = 5 };
    CHECK(sent_tracker_init(&t, &st, DIM, 0.9f, &e) == 0);
    /* prompt: S0 = [0,1], S1 = [2,4] (check); generated: S2 = [5,6], S3 = [7,9]
     * (its last row never arrives), then a tail that is no sentence */
    int toks[] = {1, D1, 2, CHK, D1, 3, D1, 5, 6, D1, 7};
    float rows[9][DIM] = {
        {1, 0, 0, 0}, {1, 0, 0, 0},                 /* S0: (1, 0, 0, 0) */
        {0, 1, 0, 0}, {0, 1, 0, 0}, {0, 1, 0, 0},   /* S1: orthogonal to S0 */
        {2, 0, 0, 0}, {2, 0, 0, 0},                 /* S2: parallel to S0 */
        {0, 0, 1, 0}, {0, 0, 1, 0},                 /* S3: incomplete */
    };
    struct sent_info *v = NULL;
    int n = -1;
    CHECK(sent_tracker_export(&t, N_PROMPT, &v, &n, &e) == 0 && n == 0 && v == NULL);
    CHECK(sent_tracker_tokens(&t, toks, N_PROMPT, &e) == 0);
    CHECK(sent_tracker_rows(&t, rows[0], N_PROMPT, DIM, &e) == 0);
    CHECK(sent_tracker_compare(&t) == 2);
    int pos_prefill[] = {0, 1, 2, 3, 4};
    double z[8] = {0};
    CHECK(sent_tracker_penalize(&t, pos_prefill, 5, 5, z, 1) == 0); /* nothing redundant yet */
    CHECK(sent_tracker_tokens(&t, &toks[5], 2, &e) == 0);
    CHECK(sent_tracker_rows(&t, rows[5], 2, DIM, &e) == 0);
    CHECK(sent_tracker_compare(&t) == 1);
    CHECK(t.s[0].redundant && !t.s[1].redundant);
    /* S0's slots are already gone: no penalty, no eviction step */
    int pos_later[] = {5, 6};
    CHECK(sent_tracker_penalize(&t, pos_later, 2, 2, z, 2) == 0);
    CHECK(t.s[0].evicted_step == -1);
    int pos_one[] = {1, 5, 6}; /* one slot of S0 left: no penalty (released SkipKV) */
    CHECK(sent_tracker_penalize(&t, pos_one, 3, 3, z, 3) == 0);
    CHECK(t.s[0].evicted_step == -1);
    int pos_two[] = {0, 1, 5, 6};
    CHECK(sent_tracker_penalize(&t, pos_two, 4, 4, z, 3) == 2);
    CHECK(sent_tracker_penalize(&t, pos_two, 4, 4, z, 4) == 2); /* the first step stays */
    CHECK(sent_tracker_tokens(&t, &toks[7], 4, &e) == 0);
    CHECK(sent_tracker_rows(&t, rows[7], 2, DIM, &e) == 0);
    CHECK(sent_tracker_compare(&t) == 0); /* S3 lacks its last row */

    CHECK(sent_tracker_export(&t, N_PROMPT, &v, &n, &e) == 0);
    CHECK_MSG(n == 4 && v != NULL, "%d sentences", n);
    if (n == 4 && v) {
        const int b[] = {0, 2, 5, 7}, en[] = {1, 4, 6, 9}, in_prompt[] = {1, 1, 0, 0};
        for (int i = 0; i < 4; i++)
            CHECK_MSG(v[i].start == b[i] && v[i].end == en[i] && v[i].in_prompt == in_prompt[i],
                      "sentence %d: [%d, %d] prompt %d", i, v[i].start, v[i].end, v[i].in_prompt);
        CHECK(v[1].label == SENT_CHECK && v[0].label == SENT_OTHERS && v[2].label == SENT_OTHERS);
        CHECK_STR(sent_label_name(v[1].label), "check");
        CHECK_STR(sent_label_name(v[0].label), "others");
        CHECK_NEAR(v[0].max_sim, 1.0, 1e-6);  /* against S2 */
        CHECK_NEAR(v[1].max_sim, 0.0, 1e-6);
        CHECK_NEAR(v[2].max_sim, 1.0, 1e-6);
        CHECK(isnan(v[3].max_sim));           /* never compared */
        CHECK(v[0].evicted_step == 3 && v[1].evicted_step == -1 && v[2].evicted_step == -1 &&
              v[3].evicted_step == -1);
    }
    free(v);
    sent_tracker_free(&t);

    /* labels only (no representations): the same spans, no similarity */
    CHECK(sent_tracker_init(&t, &st, 0, 0.9f, &e) == 0);
    CHECK(sent_tracker_tokens(&t, toks, 11, &e) == 0);
    CHECK(sent_tracker_compare(&t) == 0);
    CHECK(sent_tracker_export(&t, N_PROMPT, &v, &n, &e) == 0 && n == 4);
    int ok = 1;
    for (int i = 0; v && i < n; i++) ok &= isnan(v[i].max_sim) && v[i].evicted_step == -1;
    CHECK(ok && v && v[3].start == 7 && v[3].end == 9 && v[1].label == SENT_CHECK);
    free(v);
    sent_tracker_free(&t);
    sent_tokens_free(&st);
}

static unsigned rng_next(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) & 0xffffff;
}

/* After random compactions and appends, a span maps to exactly the slots
 * whose original positions lie in it. */
static void test_range_mapping_property(void)
{
    enum { CAP = 400 };
    unsigned seed = 7;
    int bad = 0;
    for (int trial = 0; trial < 200 && !bad; trial++) {
        int pos[CAP], n = 0, next = 0;
        for (int round = 0; round < 6; round++) {
            int add = 20 + (int)(rng_next(&seed) % 40);
            for (int i = 0; i < add && n < CAP; i++) pos[n++] = next++;
            int m = 0; /* a compaction keeps a random subset, order preserved */
            for (int i = 0; i < n; i++)
                if (rng_next(&seed) % 3) pos[m++] = pos[i];
            n = m;
        }
        for (int q = 0; q < 30; q++) {
            int b = (int)(rng_next(&seed) % (unsigned)(next + 1));
            int e = b + (int)(rng_next(&seed) % 30);
            int lo, hi;
            sent_span_slots(pos, n, b, e, &lo, &hi);
            for (int j = 0; j < n; j++) {
                int in = pos[j] >= b && pos[j] <= e, mapped = j >= lo && j < hi;
                if (in != mapped) bad = 1;
            }
        }
    }
    CHECK(!bad);
    int none[1];
    int lo, hi;
    sent_span_slots(none, 0, 3, 5, &lo, &hi);
    CHECK(lo == 0 && hi == 0);
}

static void test_classify(void)
{
    const char *refl[] = {"Wait, that is off.", "  wait no", "Let me verify this.",
                          "I should make sure", "Hold on.", "So it's correct.",
                          "let me check the sum", "That seems right", "Let me think again"};
    const char *trans[] = {"Alternatively, use a table.", "Try another approach here",
                           "another way to see it", "or another strategy"};
    const char *exec[] = {"Compute 3 + 4 = 7.", "", "So x = 2.", "I think differently now"};
    for (size_t i = 0; i < sizeof refl / sizeof *refl; i++)
        CHECK_MSG(steering_classify(refl[i], strlen(refl[i]), 0) == STEP_REFLECTION, "%s", refl[i]);
    for (size_t i = 0; i < sizeof trans / sizeof *trans; i++)
        CHECK_MSG(steering_classify(trans[i], strlen(trans[i]), 0) == STEP_TRANSITION, "%s", trans[i]);
    for (size_t i = 0; i < sizeof exec / sizeof *exec; i++)
        CHECK_MSG(steering_classify(exec[i], strlen(exec[i]), 0) == STEP_EXECUTION, "%s", exec[i]);
    /* the reference's typo: "think differenly" matches only itself; fixed spelling optional */
    CHECK(steering_classify("I think differenly", 18, 0) == STEP_TRANSITION);
    CHECK(steering_classify("I think differently now", 23, 1) == STEP_TRANSITION);
    /* reflection wins over transition */
    CHECK(steering_classify("Wait, another way", 17, 0) == STEP_REFLECTION);
}

static void test_split_rules(void)
{
    struct sent_tokens st;
    make_tokens(&st);
    CHECK(sent_tokens_is_split(&st, SPLIT) && !sent_tokens_is_split(&st, D1));
    /* pairs: mark D1 as "\n"-led and "\n"-ended by hand */
    st.split[D1] |= SENT_NL_FIRST | SENT_NL_LAST;
    CHECK(sent_tokens_split_at(&st, D1, D1, 1) && !sent_tokens_split_at(&st, D1, D1, 0));
    CHECK(!sent_tokens_split_at(&st, 5, D1, 1) && !sent_tokens_split_at(&st, -1, D1, 1));
    CHECK(sent_tokens_split_at(&st, 5, SPLIT, 0));
    /* steering positions: split tokens inside <think> only, generated or the prompt's last */
    struct steer_track tr;
    steer_track_begin(&tr, THINK_TAGS, 0, 4);
    int toks[] = {OPEN, SPLIT, 2, SPLIT, 3, SPLIT, CLOSE, SPLIT, OPEN, SPLIT};
    int want[] = {0, 0, 0, 1, 0, 1, 0, 0, 0, 1};
    int ok = 1;
    for (int i = 0; i < 10; i++) ok &= steer_track_token(&tr, &st, toks[i]) == want[i];
    CHECK(ok);
    /* released SkipKV: <think> anywhere in the prompt sets the flag, even
     * after a </think> inside the prompt, unless the prompt ends with </think> */
    steer_track_begin(&tr, THINK_TAGS, 0, 4);
    int toks3[] = {OPEN, CLOSE, 2, SPLIT, SPLIT};
    int want3[] = {0, 0, 0, 1, 1};
    ok = 1;
    for (int i = 0; i < 5; i++) ok &= steer_track_token(&tr, &st, toks3[i]) == want3[i];
    CHECK(ok);
    steer_track_begin(&tr, THINK_TAGS, 0, 3);
    int toks4[] = {OPEN, 2, CLOSE, SPLIT, OPEN, SPLIT};
    int want4[] = {0, 0, 0, 0, 0, 1};
    ok = 1;
    for (int i = 0; i < 6; i++) ok &= steer_track_token(&tr, &st, toks4[i]) == want4[i];
    CHECK(ok);
    steer_track_begin(&tr, THINK_ALWAYS, 0, 2);
    int toks2[] = {SPLIT, SPLIT, SPLIT, CLOSE, SPLIT};
    int want2[] = {0, 0, 1, 0, 1};
    ok = 1;
    for (int i = 0; i < 5; i++) ok &= steer_track_token(&tr, &st, toks2[i]) == want2[i];
    CHECK(ok);
    struct eb_err e = {0};
    int badid[] = {NV};
    struct sent_tokens bad;
    CHECK(sent_tokens_from_ids(badid, 1, NULL, 0, NULL, 0, NV, -1, -1, &bad, &e) != 0);
    sent_tokens_free(&st);
}

int main(void)
{
    RUN(test_segmentation);
    RUN(test_representations_and_marks);
    RUN(test_export);
    RUN(test_range_mapping_property);
    RUN(test_classify);
    RUN(test_split_rules);
    return test_summary("sentences");
}
