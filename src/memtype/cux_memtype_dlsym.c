/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libcux_memtype.so: dlsym, so that a driver opened with a handle of its own hands out our entry points.
 *
 * The static CUDA runtime (and the shared one, and our module) opens libcuda.so.1 itself, looks up
 * cuGetProcAddress in it with dlsym, and gets every other entry point from that: the dynamic linker never
 * binds those calls, so no preload sees them by name. Interposing dlsym on lookups in a handle lets
 * cux_memtype_driver.c give out its cuGetProcAddress (and its allocation calls, for a program that looks those
 * up one by one), which wraps what the driver returns.
 *
 * dlsym's answer depends on who calls it where the handle is RTLD_DEFAULT or RTLD_NEXT (the caller's
 * namespace and place in the search order): such lookups must reach the C library with the caller's return
 * address untouched, so the entry is a jump written in assembly. Where it cannot be written (an architecture
 * other than x86_64 and aarch64, a C library other than glibc), dlsym is not interposed and the static
 * runtime's allocations would pass for host memory: the library says so once and turns UCP's memory-type
 * cache off (UCX_MEMTYPE_CACHE=n, unless set), as CUX_MEMTYPE=query does.
 */
#define _GNU_SOURCE
#include "memtype/cux_memtype_driver.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__GLIBC__) && (defined(__x86_64__) || defined(__aarch64__))
#define CUX_MT_DLSYM_INTERPOSED 1
#else
#define CUX_MT_DLSYM_INTERPOSED 0
#endif

typedef void *(*cux_mt_dlsym_fn_t)(void *handle, const char *name);

/* The C library's dlsym: the assembly entry jumps to it (hidden, so that the jump needs no relocation). */
CUX_MT_INTERNAL cux_mt_dlsym_fn_t cux_mt_libc_dlsym;

/* glibc 2.34+ defines dlsym in libc with version GLIBC_2.34; before, libdl did, with the architecture's first
 * version (x86_64 GLIBC_2.2.5, aarch64 GLIBC_2.17), which newer glibc keeps for old programs. */
CUX_MT_INTERNAL void cux_mt_dlsym_init(void)
{
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    static const char message[] = "libcux_memtype: the C library's dlsym not found\n";
    void *found = NULL;
    unsigned i;

    if (__atomic_load_n(&cux_mt_libc_dlsym, __ATOMIC_ACQUIRE) != NULL) {
        return;
    }
    for (i = 0; (found == NULL) && (i < sizeof(versions) / sizeof(versions[0])); ++i) {
        found = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    }
    if (found == NULL) {
        /* cannot happen with glibc; no lookup can be answered without it */
        (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
        _exit(127);
    }
    __atomic_store_n(&cux_mt_libc_dlsym, (cux_mt_dlsym_fn_t)found, __ATOMIC_RELEASE);
}

/* The library's own lookups: the caller is this library either way. */
void *cux_memtype_real_dlsym(void *handle, const char *name)
{
#if CUX_MT_DLSYM_INTERPOSED
    cux_mt_dlsym_init();
    return cux_mt_libc_dlsym(handle, name);
#else
    return dlsym(handle, name);
#endif
}

#if !CUX_MT_DLSYM_INTERPOSED
__attribute__((constructor)) static void cux_mt_dlsym_missing(void)
{
    if (getenv("UCX_MEMTYPE_CACHE") == NULL) {
        fprintf(stderr, "libcux_memtype: allocations made through cuGetProcAddress (the static CUDA runtime) "
                        "cannot be seen here: UCP's memory-type cache turned off (as CUX_MEMTYPE=query)\n");
        setenv("UCX_MEMTYPE_CACHE", "n", 0);
    }
}
#endif

#if CUX_MT_DLSYM_INTERPOSED
/* A lookup in a handle (the assembly entry's other case): the answer does not depend on the caller. */
CUX_MT_INTERNAL void *cux_mt_dlsym_in_handle(void *handle, const char *name)
{
    return cux_memtype_wrap_symbol(name, cux_mt_libc_dlsym(handle, name));
}

/*
 * void *dlsym(void *handle, const char *name): the C library's dlsym found on first use; RTLD_DEFAULT (0) and
 * RTLD_NEXT (-1) jump to it with the caller's frame as it came; any other handle goes to cux_mt_dlsym_in_handle.
 */
#if defined(__x86_64__)
__asm__(
    "    .text\n"
    "    .globl dlsym\n"
    "    .type dlsym, @function\n"
    "dlsym:\n"
    "    .cfi_startproc\n"
    "    endbr64\n" /* a target of indirect branches where those are checked (CET) */
    "    cmpq $0, cux_mt_libc_dlsym(%rip)\n"
    "    jne 1f\n"
    "    pushq %rdi\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    pushq %rsi\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    subq $8, %rsp\n" /* the stack 16-byte aligned at the call */
    "    .cfi_adjust_cfa_offset 8\n"
    "    call cux_mt_dlsym_init\n"
    "    addq $8, %rsp\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    popq %rsi\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    popq %rdi\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "1:  testq %rdi, %rdi\n"
    "    je 2f\n"
    "    cmpq $-1, %rdi\n"
    "    je 2f\n"
    "    jmp cux_mt_dlsym_in_handle\n"
    "2:  jmp *cux_mt_libc_dlsym(%rip)\n"
    "    .cfi_endproc\n"
    "    .size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(
    "    .text\n"
    "    .globl dlsym\n"
    "    .type dlsym, %function\n"
    "    .p2align 2\n"
    "dlsym:\n"
    "    .cfi_startproc\n"
    "    hint #34\n" /* bti c: a target of indirect calls where those are checked (BTI) */
    "    adrp x16, cux_mt_libc_dlsym\n"
    "    ldr x16, [x16, :lo12:cux_mt_libc_dlsym]\n"
    "    cbnz x16, 1f\n"
    "    stp x29, x30, [sp, #-32]!\n"
    "    .cfi_def_cfa_offset 32\n"
    "    .cfi_offset 29, -32\n"
    "    .cfi_offset 30, -24\n"
    "    mov x29, sp\n"
    "    stp x0, x1, [sp, #16]\n"
    "    bl cux_mt_dlsym_init\n"
    "    ldp x0, x1, [sp, #16]\n"
    "    ldp x29, x30, [sp], #32\n"
    "    .cfi_restore 30\n"
    "    .cfi_restore 29\n"
    "    .cfi_def_cfa_offset 0\n"
    "    adrp x16, cux_mt_libc_dlsym\n"
    "    ldr x16, [x16, :lo12:cux_mt_libc_dlsym]\n"
    "1:  cbz x0, 2f\n"
    "    cmn x0, #1\n"
    "    b.eq 2f\n"
    "    b cux_mt_dlsym_in_handle\n"
    "2:  br x16\n"
    "    .cfi_endproc\n"
    "    .size dlsym, .-dlsym\n");
#endif
#endif
