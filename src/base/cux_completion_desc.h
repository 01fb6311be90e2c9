/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The completion engine's own parts (cux_completion.h), shared by its two files: the descriptors its stream
 * queues hold, one per operation or flush marker, and the helpers that queue them.
 * Nothing outside src/base/cux_completion.c and cux_copy_batch.c includes it.
 */
#ifndef CUX_COMPLETION_DESC_H_
#define CUX_COMPLETION_DESC_H_

#include "cux_completion.h"

#include <ucs/debug/memtrack_int.h>

/* A flush waits for one marker in each queue that was busy when it was issued. */
typedef struct cux_flush_req {
    uct_completion_t *comp;
    unsigned         markers;
} cux_flush_req_t;

typedef struct cux_desc {
    ucs_queue_elem_t         qe;
    int                      is_marker;   /* a flush marker, not an operation */
    CUevent                  event;       /* an operation's, shared by the copies of one batch; NULL: done */
    int                      owns_event;  /* the last of its batch gives the event back */
    ucs_status_t             status;      /* of an operation with no event */
    uct_completion_t         *comp;
    cux_flush_req_t          *flush;
    cux_completion_release_func_t release;
    void                     *release_arg;
} cux_desc_t;

static inline cux_desc_t *cux_desc_get(cux_completion_t *completion)
{
    cux_desc_t *desc;

    if (ucs_likely(!ucs_queue_is_empty(&completion->free_descs))) {
        return ucs_queue_pull_elem_non_empty(&completion->free_descs, cux_desc_t, qe);
    }
    desc = ucs_malloc(sizeof(*desc), "cux_desc");
    if (desc != NULL) {
        ++completion->num_descs;
    }
    return desc;
}

/* An operation's descriptor: completes when event does (status, if it has none), then calls release and comp. */
static inline void cux_desc_init_op(cux_desc_t *desc, CUevent event, int owns_event, uct_completion_t *comp,
                                    cux_completion_release_func_t release, void *release_arg)
{
    desc->is_marker   = 0;
    desc->event       = event;
    desc->owns_event  = owns_event;
    desc->status      = UCS_OK;
    desc->comp        = comp;
    desc->flush       = NULL;
    desc->release     = release;
    desc->release_arg = release_arg;
}

static inline void cux_desc_put(cux_completion_t *completion, cux_desc_t *desc)
{
    ucs_queue_push(&completion->free_descs, &desc->qe);
}

static inline void cux_stream_queue_push(cux_stream_queue_t *sq, cux_desc_t *desc)
{
    if (ucs_queue_is_empty(&sq->descs)) {
        ucs_list_add_tail(&sq->completion->active, &sq->active);
    }
    ucs_queue_push(&sq->descs, &desc->qe);
}

#endif
