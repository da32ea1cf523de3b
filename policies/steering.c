/* steering.c - where SEAL steering fires and how strongly (steering.h):
 * the step classification of §6.2, the thought/split-token tracker of §6.6
 * and SkipKV's adaptive alpha (§7.5).  The vector file is steer_vector.c,
 * its use inside a policy steerer.c. */
#include "steering.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ---- SEAL step classification (§6.2) ---- */

static const char *const REFLECTION_KEYS[] = {
    "verify", "make sure", "hold on", "think again", "'s correct", "'s incorrect",
    "let me check", "seems right",
};
static const char *const TRANSITION_KEYS[] = {
    "think differenly", "another way", "another approach", "another method",
    "another solution", "another strategy", "another technique",
};

enum step_class steering_classify(const char *text, size_t len, int fixed_typo)
{
    /* lower-case, without leading and trailing spaces and newlines */
    while (len && isspace((unsigned char)*text)) text++, len--;
    while (len && isspace((unsigned char)text[len - 1])) len--;
    char *s = malloc(len + 1);
    if (!s) return STEP_EXECUTION;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        s[i] = c == '\0' ? ' ' : (char)tolower(c);
    }
    s[len] = '\0';
    enum step_class cls = STEP_EXECUTION;
    if (!strncmp(s, "wait", 4)) cls = STEP_REFLECTION;
    for (size_t i = 0; cls == STEP_EXECUTION && i < sizeof REFLECTION_KEYS / sizeof *REFLECTION_KEYS; i++)
        if (strstr(s, REFLECTION_KEYS[i])) cls = STEP_REFLECTION;
    if (cls == STEP_EXECUTION && !strncmp(s, "alternatively", 13)) cls = STEP_TRANSITION;
    for (size_t i = 0; cls == STEP_EXECUTION && i < sizeof TRANSITION_KEYS / sizeof *TRANSITION_KEYS; i++) {
        const char *k = (i == 0 && fixed_typo) ? "think differently" : TRANSITION_KEYS[i];
        if (strstr(s, k)) cls = STEP_TRANSITION;
    }
    free(s);
    return cls;
}

/* ---- where steering fires (§6.6) ---- */

void steer_track_begin(struct steer_track *st, enum think_mode mode, int pairs, int n_prompt)
{
    st->mode = mode;
    st->pairs = pairs;
    st->prev = -1;
    st->n_prompt = n_prompt;
    st->pos = 0;
    st->in_think = 0;
    st->open_seen = 0;
}

int steer_track_token(struct steer_track *st, const struct sent_tokens *tok, int id)
{
    int p = st->pos++;
    if (st->mode == THINK_ALWAYS) {
        st->in_think = p >= st->n_prompt;
    } else if (p < st->n_prompt) {
        /* Released SkipKV (modeling_nhid.py, first forward): the flag is set
         * when <think> occurs anywhere in the prompt, then updated with the
         * prompt's last token only. */
        st->open_seen |= id == tok->think_open && id >= 0;
        if (p == st->n_prompt - 1)
            st->in_think = (st->open_seen || id == tok->think_open) &&
                           !(id == tok->think_close && id >= 0);
    } else if (id == tok->think_open && id >= 0) {
        st->in_think = 1;
    } else if (id == tok->think_close && id >= 0) {
        st->in_think = 0;
    }
    int prev = st->prev;
    st->prev = id;
    /* among prompt tokens only the last: SEAL steers the last position of each input */
    if (p < st->n_prompt - 1) return 0;
    return st->in_think && sent_tokens_split_at(tok, prev, id, st->pairs);
}

double steering_alpha(double alpha0, double gamma, int n_o)
{
    return alpha0 - gamma * n_o;
}
