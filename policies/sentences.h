/* sentences.h - sentence segmentation, sentence representations and the
 * pairwise sentence similarity (PSS) that SkipKV evicts by
 * (../shared/specs/policies.md §7.1-§7.4), plus the token-id sets SEAL
 * steering fires on (§6.1, §6.6).
 *
 * A sent_tracker follows one sequence in generation space (absolute token
 * positions, prompt included):
 *   - tokens arrive first (the prompt at once, then each sampled token);
 *     a delimiter token at position p closes the sentence (start, p) and the
 *     next one starts at p + 1; a delimiter right after a delimiter makes a
 *     one-token sentence (released SkipKV);
 *   - a sentence is labelled Check when any check-word token lies inside it,
 *     Others otherwise; N_o counts the Check sentences (prompt included);
 *   - final-norm hidden rows arrive later, in position order; each sentence
 *     keeps only a running sum of its rows and, once every row is in, its
 *     representation: the mean, L2-normalised (v / (|v| + 1e-8)).  No
 *     per-token hidden state is kept.  The sum of the last sentence is kept
 *     until the next sentence closes;
 *   - sent_tracker_compare, at compression steps, compares each complete
 *     sentence not compared yet with every earlier sentence by cosine
 *     lambda_ij = v_i . v_j; for lambda_ij > tau the EARLIER sentence is
 *     marked redundant with that lambda (a later pair overwrites the value;
 *     the mark never goes away);
 *   - sent_tracker_penalize maps the redundant sentences to cache slots
 *     through the slots' original positions (so any number of compactions,
 *     in any slot order, is handled: a slot belongs to a sentence iff its
 *     position lies in the span) and subtracts lambda from those slots'
 *     scores where the head holds at least two of them; the step of the
 *     first penalty a sentence gets is kept as its evicted_step;
 *   - sent_tracker_export copies, per sentence, what the harness stores:
 *     span, label, largest similarity, evicted step (scalars only).
 *
 * Files: sent_tokens.c (the token-id sets), sentences.c (segmentation and
 * representations), sent_similarity.c (PSS, the penalty, statistics and
 * export).
 *
 * Tokens that are never followed by a delimiter (the tail of a trace) form
 * no sentence, as in the reference.  </think> is an ordinary token here: the
 * reference segments prompt, thought and answer alike. */
#ifndef EB_SENTENCES_H
#define EB_SENTENCES_H

#include <stddef.h>

#include "../util/err.h"

struct token_text;           /* policy.h */

/* The token-id sets of one tokenizer. */
struct sent_tokens {
    int *delim, n_delim;        /* sentence delimiters, sorted, distinct */
    int *check, n_check;        /* check-word ids, sorted, distinct */
    unsigned char *split;       /* [n_vocab]: SENT_SPLIT when the token's text contains "\n\n",
                                   | SENT_NL_FIRST / SENT_NL_LAST when it starts / ends with "\n" */
    int n_vocab;
    int think_open, think_close; /* ids of "<think>" and "</think>", or -1 */
};

/* The texts whose LAST token id is a delimiter (§7.1; the reference takes
 * encode(text)[-1]). */
#define SENT_DELIM_TEXTS {"\n", ".\n", ")\n", "\n\n", ".\n\n", ")\n\n", "?\n\n"}
#define SENT_N_DELIM_TEXTS 7
/* Check words (§7.1), encoded without a leading space as the reference does. */
#define SENT_CHECK_WORDS {"Alternatively", "Wait", "again"}
#define SENT_N_CHECK_WORDS 3

/* Build the sets from a tokenizer's view (policy.h; harness/exp/model_view.h
 * has the same from a model/ tokenizer, sent_tokens_from_tokenizer).
 * check_space = 1 also adds the ids of the check words with a leading space
 * (" Wait", ...), which the reference misses; 0 reproduces the reference
 * exactly. */
int sent_tokens_from_text(const struct token_text *tt, int check_space, struct sent_tokens *out,
                          struct eb_err *e);
/* Build the sets from explicit ids (tests, other tokenizers).  split may be
 * NULL (no split tokens).  Ids must lie in [0, n_vocab). */
int sent_tokens_from_ids(const int *delim, int n_delim, const int *check, int n_check,
                         const int *split, int n_split, int n_vocab, int think_open,
                         int think_close, struct sent_tokens *out, struct eb_err *e);
void sent_tokens_free(struct sent_tokens *t);

int sent_tokens_is_delim(const struct sent_tokens *t, int id);
int sent_tokens_is_check(const struct sent_tokens *t, int id);
int sent_tokens_is_split(const struct sent_tokens *t, int id);
enum { SENT_SPLIT = 1, SENT_NL_FIRST = 2, SENT_NL_LAST = 4 };
/* The split rule with an option for tokenizers that write "\n\n" as two
 * tokens (SmolLM2): pairs = 1 also counts a token that starts with "\n"
 * right after one that ends with "\n" (prev = -1: none).  pairs = 0 is
 * SEAL's rule exactly. */
int sent_tokens_split_at(const struct sent_tokens *t, int prev, int id, int pairs);

enum sent_label { SENT_OTHERS = 0, SENT_CHECK = 1 };

struct sentence {
    int b, e;                 /* span [b, e] of absolute positions */
    enum sent_label label;
    int n_rows;               /* hidden rows summed so far */
    int compared;             /* compared with every earlier sentence */
    int redundant;            /* marked redundant (persists) */
    float lambda;             /* the similarity that marked it (latest pair) */
    float max_pss;            /* largest lambda of any pair it is part of (-2: none) */
    int evicted_step;         /* step of its first penalty (sent_tracker_penalize); -1: none */
    double *sum;              /* running sum of its rows, NULL once no longer needed */
};
/* Every row of its span is in (its representation is ready). */
static inline int sentence_complete(const struct sentence *s)
{
    return s->n_rows == s->e - s->b + 1;
}

/* PSS statistics of a trace (the observation interface for the harness). */
struct sent_stats {
    int n_sentences;          /* closed sentences */
    int n_check;              /* N_o: Check sentences */
    int n_redundant;          /* sentences marked redundant */
    long n_pairs;             /* pairs compared */
    long n_pairs_above;       /* pairs with lambda > tau */
    double pss_mean;          /* mean lambda over the compared pairs (0 when none) */
    double pss_max;           /* max lambda (0 when none) */
};

struct sent_tracker {
    const struct sent_tokens *tok;   /* borrowed */
    int dim;                  /* hidden size; 0: no representations (labels only) */
    float tau;
    struct sentence *s;
    int n, cap;
    float *repr;              /* [cap][dim]: valid for a sentence whose rows are all in */
    int n_tokens;             /* tokens seen = the next token's position */
    int n_rows;               /* hidden rows seen = the next row's position */
    int open_b;               /* start of the open (unclosed) span */
    int open_check;           /* a check token lies in the open span */
    double *open_sum;         /* [dim] sum of the open span's rows */
    int row_cursor;           /* first sentence that may still receive rows */
    int n_check;              /* N_o */
    int n_redundant;
    long n_pairs, n_pairs_above;
    double pss_sum, pss_max;
};

/* tok is borrowed; dim 0 keeps labels and counts only. */
int sent_tracker_init(struct sent_tracker *t, const struct sent_tokens *tok, int dim, float tau,
                      struct eb_err *e);
void sent_tracker_free(struct sent_tracker *t);

/* The next n tokens of the sequence (the prompt at once, then each sampled
 * token). */
int sent_tracker_tokens(struct sent_tracker *t, const int *ids, int n, struct eb_err *e);
/* The next n final-norm hidden rows [n][dim], in position order; rows may
 * only follow tokens already given. */
int sent_tracker_rows(struct sent_tracker *t, const float *rows, int n, int dim,
                      struct eb_err *e);
/* Compare the complete sentences not compared yet with all earlier ones
 * (compression step).  Returns how many new sentences were compared. */
int sent_tracker_compare(struct sent_tracker *t);
/* Representation of sentence i (NULL until its rows are all in). */
const float *sent_tracker_repr(const struct sent_tracker *t, int i);

/* z[j] -= lambda of the redundant sentence whose span holds pos[j], for the
 * candidate slots j < n_cand of a head holding len slots (pos[0..len), any
 * order), but only for a sentence with at least two slots in the head
 * (released SkipKV).  A sentence penalised here for the first time gets step
 * (the caller's generation step) as its evicted_step.  Returns the number
 * of slots penalised. */
int sent_tracker_penalize(struct sent_tracker *t, const int *pos, int n_cand, int len, double *z,
                          int step);

/* Slots [*lo, *hi) of the ascending pos[0..n) whose positions lie in [b, e]
 * (the cache-range mapping of §7.3); *lo == *hi when none. */
void sent_span_slots(const int *pos, int n, int b, int e, int *lo, int *hi);

void sent_tracker_stats(const struct sent_tracker *t, struct sent_stats *out);

/* One sentence of a trace as the harness reads it (the observation
 * interface, steering.h: policy_trace_sentences). */
struct sent_info {
    int start, end;           /* span [start, end] of absolute positions, prompt included */
    int in_prompt;            /* 1: the whole span lies in the prompt (end < n_prompt) */
    enum sent_label label;
    double max_sim;           /* largest lambda against any sentence it was compared with;
                                 NAN: never compared (no representations, or incomplete) */
    int evicted_step;         /* generation step of its first penalty; -1: never */
};

/* The label's name as the results database stores it: "check" or "others". */
const char *sent_label_name(enum sent_label label);

/* Every closed sentence, in order, into *out (malloc'd, the caller frees;
 * NULL when *n is 0).  n_prompt: the prompt's length, for in_prompt. */
int sent_tracker_export(const struct sent_tracker *t, int n_prompt, struct sent_info **out,
                        int *n, struct eb_err *e);

#endif
