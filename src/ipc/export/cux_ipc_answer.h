/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, exporting side: the answers this process gives a peer of another PID namespace over its socket (the
 * channel, cux_ipc_channel.h, carries them; the asking side is cux_ipc_proof_channel.c).
 */
#ifndef CUX_IPC_ANSWER_H_
#define CUX_IPC_ANSWER_H_

#include "ipc/channel/cux_ipc_channel.h"

/* What this process answers a peer of another PID namespace over its socket (cux_ipc_channel_listen). */
size_t cux_ipc_proof_answer(const cux_ipc_channel_request_t *req, cux_ipc_channel_reply_t *reply, int *fd_p);

#endif
