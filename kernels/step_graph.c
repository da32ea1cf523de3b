/* step_graph.c - see step_graph.h. */
#include "kernels/step_graph.h"

#include <stddef.h>

int step_graph_begin(struct step_graph *g, const void *owner, unsigned long shape)
{
    g->step_shape = shape;
    if (owner != g->owner) {
        step_graph_forget(g);
        g->owner = owner;
    }
    if (shape == 0 || shape == g->refused)
        g->mode = STEP_EAGER;
    else if (shape == g->shape)
        g->mode = STEP_REPLAY;
    else if (shape == g->eager_shape)
        g->mode = STEP_CAPTURE;
    else
        g->mode = STEP_EAGER;
    if (g->mode == STEP_EAGER) g->eager_shape = shape;
    return g->mode;
}

void step_graph_end(struct step_graph *g, int kept)
{
    if (g->mode == STEP_CAPTURE) {
        if (kept) {
            g->shape = g->step_shape;
            g->captures++;
        } else {
            g->refused = g->step_shape;
            g->discarded++;
        }
    } else if (g->mode == STEP_REPLAY) {
        if (kept) g->replays++;
        else g->shape = 0;
    }
    g->mode = STEP_EAGER;
}

void step_graph_forget(struct step_graph *g)
{
    g->owner = NULL;
    g->shape = g->eager_shape = g->refused = 0;
    g->mode = STEP_EAGER;
}
