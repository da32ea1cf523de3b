/* test_params_typed.c - every policy's parameters land in its typed struct:
 * each table's offsets fit the struct buffer, aligned, without overlap; a
 * value set by a spec is read back at its offset and disturbs no other; a
 * scorer row's window is known before any instance. */
#include "test.h"

#include <stddef.h>

#include "policies/registry.h"
#include "policies/row.h"
#include "policies/schedule.h"

static size_t width(const struct param_def *d)
{
    return d->type == PARAM_FLOAT ? sizeof(double) : sizeof(int);
}

static double typed_at(const struct policy_params *p, const struct param_def *d)
{
    if (d->type == PARAM_FLOAT) {
        double x;
        memcpy(&x, p->typed + d->offset, sizeof x);
        return x;
    }
    int x;
    memcpy(&x, p->typed + d->offset, sizeof x);
    return x;
}

static void test_offsets_disjoint(void)
{
    int n;
    const struct policy_entry *en = policy_registry(&n);
    for (int i = 0; i < n; i++) {
        const struct policy_entry *got;
        struct policy_params p;
        struct eb_err e = {0};
        CHECK_MSG(policy_parse(en[i].name, &got, &p, &e) == 0, "%s: %s", en[i].name, e.msg);
        for (int a = 0; a < p.n; a++) {
            const struct param_def *da = p.def[a];
            CHECK_MSG(da->offset + width(da) <= POLICY_TYPED_BYTES && da->offset % width(da) == 0,
                      "%s: %s at offset %zu", en[i].name, da->key, da->offset);
            for (int b = a + 1; b < p.n; b++) {
                const struct param_def *db = p.def[b];
                int apart = da->offset + width(da) <= db->offset ||
                            db->offset + width(db) <= da->offset;
                CHECK_MSG(apart, "%s: %s and %s overlap", en[i].name, da->key, db->key);
            }
            CHECK_MSG(typed_at(&p, da) == p.val[a], "%s: %s typed %g, value %g", en[i].name,
                      da->key, typed_at(&p, da), p.val[a]);
        }
    }
}

/* A value other than cur (the resolved one), as spec text. */
static void other_value(const struct param_def *d, double cur, char *buf, size_t size)
{
    switch (d->type) {
    case PARAM_INT: {
        long v = (long)cur + 1 <= (long)d->hi ? (long)cur + 1 : (long)cur - 1;
        snprintf(buf, size, "%ld", v);
        return;
    }
    case PARAM_FLOAT:
        snprintf(buf, size, "%.17g", cur == d->lo ? (d->lo + d->hi) / 2 : d->lo);
        return;
    case PARAM_BOOL:
        snprintf(buf, size, "%d", cur == 0);
        return;
    case PARAM_CHOICE: {
        int n_choices = 1;
        for (const char *c = d->choices; *c; c++) n_choices += *c == '|';
        policy_choice_name(d->choices, ((int)cur + 1) % n_choices, buf, size);
        return;
    }
    }
}

static void test_set_reads_back(void)
{
    int n, n_set = 0;
    const struct policy_entry *en = policy_registry(&n);
    for (int i = 0; i < n; i++) {
        const struct policy_entry *got;
        struct policy_params base;
        struct eb_err e = {0};
        if (policy_parse(en[i].name, &got, &base, &e)) continue;
        for (int a = 0; a < base.n; a++) {
            char value[64], spec[160];
            if (base.def[a]->lo == base.def[a]->hi) continue; /* one value only (beaconkv) */
            other_value(base.def[a], base.val[a], value, sizeof value);
            snprintf(spec, sizeof spec, "%s:%s=%s", en[i].name, base.def[a]->key, value);
            struct policy_params p;
            CHECK_MSG(policy_parse(spec, &got, &p, &e) == 0, "%s: %s", spec, e.msg);
            for (int b = 0; b < p.n; b++)
                CHECK_MSG(typed_at(&p, p.def[b]) == p.val[b] &&
                              (b == a || p.val[b] == base.val[b]),
                          "%s: %s reads %g (value %g)", spec, p.def[b]->key,
                          typed_at(&p, p.def[b]), p.val[b]);
            CHECK_MSG(p.val[a] != base.val[a], "%s: unchanged", spec);
            n_set++;
        }
    }
    CHECK(n_set > 100);
}

/* A row's configure gives its window before an instance, and the instance
 * agrees (policy_instantiate checks it too). */
static void test_row_window_before_instance(void)
{
    int n, rows = 0;
    const struct policy_entry *en = policy_registry(&n);
    struct policy_model m = {.n_layer = 2, .n_head = 4, .n_kv = 2, .head_dim = 8};
    for (int i = 0; i < n; i++) {
        if (!en[i].row) continue;
        rows++;
        const struct policy_entry *got;
        struct policy_params p;
        struct policy *inst = NULL;
        struct eb_err e = {0};
        CHECK(policy_parse(en[i].name, &got, &p, &e) == 0);
        int w = policy_entry_window(&en[i], &p);
        if (en[i].row->follow) {
            /* its follower needs a tokenizer (and a steering vector):
             * test_skipkv and test_seal build these instances */
            CHECK_MSG(w >= 0, "%s: window %d", en[i].name, w);
            continue;
        }
        CHECK_MSG(policy_instantiate(&en[i], &p, &m, &inst, &e) == 0, "%s: %s", en[i].name,
                  e.msg);
        CHECK_MSG(inst && w >= 0 && w == inst->info.window && !strcmp(inst->ops->name, en[i].name),
                  "%s: window %d before, %d after", en[i].name, w, inst ? inst->info.window : -1);
        CHECK(policy_entry_budget_check(&en[i], &p, w, &e) == -1); /* must exceed it */
        CHECK(policy_entry_budget_check(&en[i], &p, w + 64, &e) == 0);
        policy_free(inst);
    }
    CHECK(rows >= 8);
    /* a bad value fails where the spec is checked, before any instance */
    const struct policy_entry *snap = policy_registry_find("snapkv");
    struct policy_params p;
    struct eb_err e = {0};
    CHECK(policy_parse("snapkv:kernel=4", &snap, &p, &e) == 0);
    CHECK(policy_entry_window(snap, &p) == -1);
}

int main(void)
{
    RUN(test_offsets_disjoint);
    RUN(test_set_reads_back);
    RUN(test_row_window_before_instance);
    return test_summary("params_typed");
}
