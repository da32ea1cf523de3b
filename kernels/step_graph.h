/* step_graph.h - when a backend records a decode step's device work as one
 * graph, and when it replays the recording (kernels/backend.h, "step
 * graphs").  Plain C, shared by the CUDA backend and the CPU tests' recording
 * backend, so the decision is tested where no GPU is.
 *
 * A step's shape is an id model/forward.c gives it: the same id means the
 * same sequences in the same slots with the same bindings and row counts, so
 * a recording of one such step does the next one's work once the step's
 * parameters (ids, positions, lengths) are in device memory.  The first step
 * of a shape runs eagerly (its ops size their scratch), the second is
 * captured, and from the third on the recording is replayed.  A capture the
 * backend could not keep (something in it read host memory) marks its shape
 * as eager for good. */
#ifndef EB_STEP_GRAPH_H
#define EB_STEP_GRAPH_H

enum step_graph_mode { STEP_EAGER = 0, STEP_CAPTURE = 1, STEP_REPLAY = 2 };

struct step_graph {
    const void *owner;          /* the forward pass whose shapes these are */
    unsigned long shape;        /* the kept recording's shape, 0: none */
    unsigned long eager_shape;  /* the last eager step's shape */
    unsigned long refused;      /* a shape whose capture was not kept */
    int mode;                   /* of the step between begin and end */
    unsigned long step_shape;   /* that step's shape */
    unsigned long captures;     /* recordings kept */
    unsigned long replays;      /* steps replayed */
    unsigned long discarded;    /* captures not kept */
};

/* The mode of the next step of `shape` (0: not to be recorded) by `owner`. */
int step_graph_begin(struct step_graph *g, const void *owner, unsigned long shape);
/* After that step: kept = the step's recording (capture) or replay went
 * through; a failed replay drops the recording. */
void step_graph_end(struct step_graph *g, int kept);
/* Drops any recording (the owner's buffers are gone). */
void step_graph_forget(struct step_graph *g);

#endif
