/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test/run-cross-dlsym.sh: run with the cross-built hooks preloaded. The first dlsym of the process is
 * RTLD_NEXT (the entry's first-use path), which must answer for this program (the preload's definition comes next
 * after it); then the driver opened RTLD_LOCAL as the static CUDA runtime opens it, its cuGetProcAddress looked up
 * in the handle, and an allocation and a release through what it returns must be reported once each.
 *
 *   dlsym_entry_prog DRIVER.so
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int                CUresult;
typedef unsigned long long CUdeviceptr;

int main(int argc, char **argv)
{
    CUresult (*get_proc)(const char*, void**, int, unsigned long long, int*);
    CUresult (*mem_alloc)(CUdeviceptr*, size_t), (*mem_free)(CUdeviceptr);
    void *next = dlsym(RTLD_NEXT, "cuGetProcAddress_v2"), *driver;
    int *allocs, *frees, status, failures = 0;
    CUdeviceptr p;
    Dl_info info;

    failures += !((next != NULL) && dladdr(next, &info) && (strstr(info.dli_fname, "libmt") != NULL));
    printf("%s: dlsym(RTLD_NEXT) first, for the program: %s\n", failures ? "FAIL" : "ok",
           (next != NULL) ? info.dli_fname : "(none)");
    driver = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    *(void**)&get_proc = (driver != NULL) ? dlsym(driver, "cuGetProcAddress_v2") : NULL;
    if ((get_proc == NULL) || get_proc("cuMemAlloc", (void**)&mem_alloc, 13000, 0, &status) ||
        get_proc("cuMemFree", (void**)&mem_free, 13000, 0, &status)) {
        printf("FAIL: the driver's entry points\n");
        return 1;
    }
    mem_alloc(&p, 100);
    mem_free(p);
    allocs = dlsym(RTLD_DEFAULT, "cux_cross_allocs");
    frees  = dlsym(RTLD_DEFAULT, "cux_cross_frees");
    if ((allocs == NULL) || (frees == NULL) || (*allocs != 1) || (*frees != 1)) {
        printf("FAIL: %d allocation and %d release reports, not 1 and 1\n", allocs ? *allocs : -1,
               frees ? *frees : -1);
        ++failures;
    } else {
        printf("ok: 1 allocation and 1 release reported through cuGetProcAddress\n");
    }
    if (dlsym(RTLD_DEFAULT, "cux_cross_no_such_symbol") != NULL) {
        printf("FAIL: dlsym(RTLD_DEFAULT) of nothing\n");
        ++failures;
    }
    printf("%s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
