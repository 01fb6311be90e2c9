/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc's names as UCX knows them: the component, the transport and the prefix of its settings
 * (UCX_CUDA_IPC_*), which log lines name at every level of the transport.
 */
#ifndef CUX_IPC_NAMES_H_
#define CUX_IPC_NAMES_H_

#define CUX_IPC_COMPONENT_NAME "cuda_ipc"
#define CUX_IPC_TL_NAME        "cuda_ipc"
#define CUX_IPC_CONFIG_PREFIX  "CUDA_IPC_"

#endif
