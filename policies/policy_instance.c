/* policy_instance.c - building an instance from a resolved registry row, and
 * the instance's calls that the vtable leaves optional (registry.h). */
#include "registry.h"

#include <stdlib.h>
#include <string.h>

#include "policies.h"
#include "row.h"
#include "schedule.h"
#include "steering.h"

int policy_instantiate(const struct policy_entry *entry, const struct policy_params *params,
                       const struct policy_model *m, struct policy **out, struct eb_err *e)
{
    *out = NULL;
    if (m->n_layer < 1 || m->n_head < 1 || m->n_kv < 1 || m->head_dim < 1 ||
        m->n_head % m->n_kv != 0)
        return eb_fail(e, "policy %s: bad model shape (%d layers, %d heads, %d kv heads, head_dim "
                          "%d)", entry->name, m->n_layer, m->n_head, m->n_kv, m->head_dim);
    struct policy *p = eb_calloc(1, sizeof *p, e);
    if (!p) return -1;
    p->name = entry->name;
    p->ops = entry->ops;
    if (entry->row) {   /* the registry builds the vtable: row.c's, under the row's name */
        p->row_ops = *row_ops_of(entry->row);
        p->row_ops.name = entry->name;
        p->ops = &p->row_ops;
    }
    p->params = *params;
    policy_params_format(entry, params, p->spec, sizeof p->spec);
    int rc = entry->row ? row_create(entry->row, params, m, &p->self, &p->info, e)
                        : entry->ops->create(params, m, &p->self, &p->info, e);
    if (rc) {
        eb_wrap(e, entry->name);
        free(p);
        return -1;
    }
    if ((p->info.schedule == POLICY_NEVER) != policy_keeps_all(entry, params)) {
        policy_free(p);
        return eb_fail(e, "policy %s: its registry row and its schedule disagree on whether it "
                          "evicts", entry->name);
    }
    /* the window a point's budget was checked against before this instance
     * (none for a policy that evicts nothing: fullkv-pss keeps all) */
    int window = policy_entry_window(entry, params), kept = p->info.window;
    if (p->info.schedule != POLICY_NEVER && window >= 0 && window != kept) {
        policy_free(p);
        return eb_fail(e, "policy %s: its parameters give a window of %d, but it keeps %d",
                       entry->name, window, kept);
    }
    *out = p;
    return 0;
}

int policy_create(const char *spec, const struct policy_model *m, struct policy **out,
                  struct eb_err *e)
{
    const struct policy_entry *en;
    struct policy_params pp;
    *out = NULL;
    if (policy_parse(spec, &en, &pp, e)) return -1;
    return policy_instantiate(en, &pp, m, out, e);
}

int policy_trace_stats(const struct policy *p, int seq, struct policy_trace_stats *out)
{
    memset(out, 0, sizeof *out);
    return p->ops->trace_stats ? p->ops->trace_stats(p->self, seq, out) : -1;
}

int policy_trace_sentences(const struct policy *p, int seq, struct sent_info **out, int *n,
                           struct eb_err *e)
{
    *out = NULL;
    *n = 0;
    return p->ops->trace_sentences ? p->ops->trace_sentences(p->self, seq, out, n, e) : 1;
}

void policy_free(struct policy *p)
{
    if (!p) return;
    if (p->ops && p->ops->destroy) p->ops->destroy(p->self);
    free(p);
}
