/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucx-cuda-check: what `ucx-cuda-run --check` asks of the process it would run, one line per check, each
 * "OK", "WARN" or "FAIL" with what to do. Exit status 1 when a check failed.
 *
 *   ucx-cuda-check --before MODULE   without the launcher's preloads: the CUDA driver and its GPUs, the UCX this
 *                                    process loads against the one the module was built for, and whether UCX
 *                                    loads a CUDA module by itself (ours, or its own)
 *   ucx-cuda-check --after           with them: the CUDA transports UCX then shows, and peer access between GPUs
 *
 * The driver is opened as the module opens it (CUX_DRIVER_PATH, else libcuda.so.1), through its exported names
 * only: this program must not carry a second copy of the module's driver loader into a process UCX may load
 * the module into.
 */
#define _GNU_SOURCE
#include "driver/cux_cuda.h"
#include "driver/cux_driver.h" /* CUX_DRIVER_MIN_VERSION (the loader itself is not linked) */
#include "driver/cux_nvml.h"   /* NVML's word on the NVLink fabric (no driver loader in it) */
#include "base/cux_imex.h"    /* whether an IMEX channel is there, as the module looks for one */
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <unistd.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>
#include "compat/cux_ucx_compat.h" /* CUX_UCX_LOADS_PLUGIN_PATH: the release's rule */

#define CHECK_MAX_GPUS 16

static int check_failed;

static void check_line(const char *level, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void check_line(const char *level, const char *what, const char *fmt, ...)
{
    va_list ap;

    printf("%-4s %-18s ", level, what);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    check_failed |= !strcmp(level, "FAIL");
}

/* ------------------------------------------------------------------ the driver */

static struct {
    CUresult (*init)(unsigned);
    CUresult (*version)(int*);
    CUresult (*count)(int*);
    CUresult (*get)(CUdevice*, int);
    CUresult (*name)(char*, int, CUdevice);
    CUresult (*can_peer)(int*, CUdevice, CUdevice);
    CUresult (*uuid)(CUuuid*, CUdevice);
} drv;

/* Number of GPUs, or -1 when the driver does not load or initialise (said in a FAIL line). */
static int check_driver(int report)
{
    const char *path = getenv("CUX_DRIVER_PATH") ? getenv("CUX_DRIVER_PATH") : "libcuda.so.1";
    void *lib        = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    int version = 0, count = 0;
    CUresult res;

    if (lib == NULL) {
        if (report) {
            check_line("FAIL", "CUDA driver", "%s does not load (%s): install the NVIDIA driver, or set "
                       "CUX_DRIVER_PATH to its libcuda.so.1", path, dlerror());
        }
        return -1;
    }
    *(void**)&drv.init     = dlsym(lib, "cuInit");
    *(void**)&drv.version  = dlsym(lib, "cuDriverGetVersion");
    *(void**)&drv.count    = dlsym(lib, "cuDeviceGetCount");
    *(void**)&drv.get      = dlsym(lib, "cuDeviceGet");
    *(void**)&drv.name     = dlsym(lib, "cuDeviceGetName");
    *(void**)&drv.can_peer = dlsym(lib, "cuDeviceCanAccessPeer");
    *(void**)&drv.uuid     = dlsym(lib, "cuDeviceGetUuid_v2");
    if (!drv.init || !drv.version || !drv.count || !drv.get || !drv.name || !drv.can_peer) {
        if (report) {
            check_line("FAIL", "CUDA driver", "%s lacks a basic entry point: it is not a CUDA driver", path);
        }
        return -1;
    }
    res = drv.init(0);
    if ((res != CUDA_SUCCESS) && (res != CUDA_ERROR_NO_DEVICE)) {
        if (report) {
            check_line("FAIL", "CUDA driver", "%s does not initialise (error %d): see nvidia-smi and dmesg", path,
                       (int)res);
        }
        return -1;
    }
    if ((res == CUDA_SUCCESS) && (drv.count(&count) != CUDA_SUCCESS)) {
        count = 0;
    }
    drv.version(&version);
    if (report && (version < CUX_DRIVER_MIN_VERSION)) {
        check_line("FAIL", "CUDA driver", "driver %d.%d from %s is older than CUDA %d.%d, the oldest the module "
                   "supports (it then offers no transports): install an NVIDIA driver of the 525 series or later",
                   version / 1000, version % 1000 / 10, path, CUX_DRIVER_MIN_VERSION / 1000,
                   CUX_DRIVER_MIN_VERSION % 1000 / 10);
    } else if (report && (count == 0)) {
        check_line("FAIL", "CUDA driver", "driver %d.%d loads but sees no GPU: check CUDA_VISIBLE_DEVICES and "
                   "nvidia-smi (the transports report no devices)", version / 1000, version % 1000 / 10);
    } else if (report) {
        check_line("OK", "CUDA driver", "driver %d.%d from %s, %d GPU%s", version / 1000, version % 1000 / 10,
                   path, count, (count == 1) ? "" : "s");
    }
    return count;
}

/* ------------------------------------------------------------------ UCX and the module */

/* The path of the loaded object whose name contains part, or "" */
struct check_find {
    const char *part;
    char       path[PATH_MAX];
};

static int check_find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct check_find *find = arg;

    if ((info->dlpi_name != NULL) && (strstr(info->dlpi_name, find->part) != NULL)) {
        snprintf(find->path, sizeof(find->path), "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

static void check_loaded(const char *part, char *path, size_t max)
{
    struct check_find find = {.part = part, .path = ""};

    dl_iterate_phdr(check_find_object, &find);
    snprintf(path, max, "%s", find.path);
}

static int check_same_file(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];

    return (realpath(a, ra) != NULL) && (realpath(b, rb) != NULL) && !strcmp(ra, rb);
}

/* Make UCX load its modules, as any UCT user does when it lists the components. */
static void check_load_modules(void)
{
    uct_component_h *components;
    unsigned count;

    if (uct_query_components(&components, &count) == UCS_OK) {
        uct_release_component_list(components);
    }
}

static void check_before(const char *module)
{
    unsigned major, minor, release;
    char ucp_path[PATH_MAX], cuda_path[PATH_MAX], moddir[PATH_MAX], *slash;
    void *handle;
    int ours;

    check_driver(1);

    ucp_get_version(&major, &minor, &release);
    check_loaded("libucp.so", ucp_path, sizeof(ucp_path));
    if (major * 100 + minor != CUX_UCX_VERNUM) {
        check_line("FAIL", "UCX version", "this process loads UCX %u.%u.%u (%s) but the module was built for %s: "
                   "build the module against this UCX (configure --with-ucx=PREFIX --with-ucx-src=its source)",
                   major, minor, release, ucp_path, CUX_CHECK_UCX_VERSION);
    } else {
        check_line("OK", "UCX version", "UCX %u.%u.%u from %s, the version the module was built for", major, minor,
                   release, ucp_path);
    }

    if (access(module, R_OK) != 0) {
        check_line("FAIL", "module", "%s is not there: install uct-cuda-plugin (make install), or set CUX_MODULE",
                   module);
        return;
    }
    check_loaded("libuct.so", moddir, sizeof(moddir));
    if ((slash = strrchr(moddir, '/')) != NULL) {
        snprintf(slash, sizeof(moddir) - (slash - moddir), "/ucx");
    }

    /* what this UCX loads by itself, with nothing preloaded */
    check_load_modules();
    check_loaded("libuct_cuda", cuda_path, sizeof(cuda_path));
    if (cuda_path[0] == '\0') {
        if (CUX_UCX_LOADS_PLUGIN_PATH) {
            check_line("OK", "module loading", "UCX %u.%u finds no CUDA module by itself (none in %s or "
                       "UCX_PLUGIN_PATH, or UCX_MODULES leaves cuda out): ucx-cuda-run adds the module's directory "
                       "to UCX_PLUGIN_PATH", major, minor, moddir);
        } else {
            check_line("OK", "module loading", "UCX %u.%u opens only the modules compiled into it: ucx-cuda-run "
                       "preloads %s", major, minor, module);
        }
        return;
    }
    handle = dlopen(cuda_path, RTLD_LAZY | RTLD_NOLOAD);
    ours   = (handle != NULL) && (dlsym(handle, "cux_module_version") != NULL);
    if (handle != NULL) {
        dlclose(handle);
    }
    if (!ours) {
        check_line("FAIL", "module loading", "UCX loads its own CUDA module %s: install ours in its place (make "
                   "install into %s), or run with UCX_MODULES=^cuda so that ucx-cuda-run's preload is the only one",
                   cuda_path, moddir);
    } else if (check_same_file(cuda_path, module)) {
        check_line("OK", "module loading", "UCX loads the module by itself from %s: no launcher needed", cuda_path);
    } else {
        check_line("WARN", "module loading", "UCX loads another copy of this module, %s, not %s: remove one of "
                   "them", cuda_path, module);
    }
}

/* ------------------------------------------------------------------ transports and peers */

/* Number of devices of a transport in a component, as ucx_info -d lists them. */
static int check_transport(const char *component_name, const char *tl_name)
{
    uct_component_h *components;
    uct_tl_resource_desc_t *tls;
    uct_md_config_t *config;
    unsigned count, i, j, num_tls;
    int devices = 0;
    uct_md_h md;

    if (uct_query_components(&components, &count) != UCS_OK) {
        return 0;
    }
    for (i = 0; i < count; ++i) {
        /* a component lists no memory domain without a GPU: none is opened then, as ucx_info -d does */
        uct_component_attr_t attr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                                                   UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT};
        if ((uct_component_query(components[i], &attr) != UCS_OK) || strcmp(attr.name, component_name) ||
            (attr.md_resource_count == 0) || (uct_md_config_read(components[i], NULL, NULL, &config) != UCS_OK)) {
            continue;
        }
        if (uct_md_open(components[i], component_name, config, &md) == UCS_OK) {
            if (uct_md_query_tl_resources(md, &tls, &num_tls) == UCS_OK) {
                for (j = 0; j < num_tls; ++j) {
                    devices += !strcmp(tls[j].tl_name, tl_name);
                }
                uct_release_tl_resource_list(tls);
            }
            uct_md_close(md);
        }
        uct_config_release(config);
    }
    uct_release_component_list(components);
    return devices;
}

/* Whether a GPU is in a multi-node NVLink domain (NVML), and whether cuda_ipc reaches the domain's other hosts:
 * only through an IMEX channel (UCX_CUDA_IPC_ENABLE_MNNVL, src/ipc/common/cux_ipc_domain.h). */
static void check_fabric(int gpus)
{
    cux_fabric_info_t info, first = {.state = CUX_FABRIC_NONE};
    char cluster[33], channel_name[PATH_MAX];
    const char *channel = cux_imex_channel_name(channel_name, sizeof(channel_name));
    CUuuid uuid;
    CUdevice dev;
    int g, i, seen = 0, said = 0;

    snprintf(first.why, sizeof(first.why), "%s", (gpus > 0) ? "the driver gives no GPU's UUID" : "no GPU");
    for (g = 0; (g < gpus) && (g < CHECK_MAX_GPUS); ++g) {
        if ((drv.uuid == NULL) || (drv.get(&dev, g) != CUDA_SUCCESS) || (drv.uuid(&uuid, dev) != CUDA_SUCCESS)) {
            continue;
        }
        cux_nvml_fabric_info(&uuid, &info);
        if (!seen++) {
            first = info;
        }
        said |= (info.state != CUX_FABRIC_NONE);
        if (info.state == CUX_FABRIC_COMPLETE) {
            for (i = 0; i < 16; ++i) {
                snprintf(cluster + 2 * i, 3, "%02x", info.cluster[i]);
            }
            if (channel != NULL) {
                check_line("OK", "NVLink fabric", "GPU%d is in a multi-node NVLink domain (cluster %s, clique %u), "
                           "IMEX channel %s: cuda_ipc reaches the domain's other hosts through fabric handles "
                           "(UCX_CUDA_IPC_ENABLE_MNNVL; what it trusts: README, \"Multi-node NVLink\")", g, cluster,
                           info.clique, channel);
            } else {
                check_line("WARN", "NVLink fabric", "GPU%d is in a multi-node NVLink domain (cluster %s, clique %u), "
                           "but this process has no IMEX channel (%s/channelN): cuda_ipc carries GPU memory between "
                           "processes of this host only", g, cluster, info.clique, CUX_IMEX_CHANNELS_DIR);
            }
        } else if (info.state != CUX_FABRIC_NONE) {
            check_line("WARN", "NVLink fabric", "GPU%d: %s (see nvidia-smi -q, Fabric)", g, info.why);
        }
    }
    if (!said) {
        check_line("OK", "NVLink fabric", "none (%s): GPU memory goes between processes of this host", first.why);
    }
}

static void check_after(void)
{
    int copy = check_transport("cuda_cpy", "cuda_copy"), ipc = check_transport("cuda_ipc", "cuda_ipc");
    int gpus = check_driver(0), a, b, can_ab, can_ba;
    CUdevice da, db;

    if ((copy == 0) && (ipc == 0)) {
        check_line("FAIL", "transports", "UCX shows no CUDA transport: see the lines above (driver, UCX version, "
                   "module); UCX_LOG_LEVEL=debug ucx-cuda-run --check says why");
    } else {
        check_line(ipc ? "OK" : "WARN", "transports", "cuda_copy: %d device%s, cuda_ipc: %d device%s%s", copy,
                   (copy == 1) ? "" : "s", ipc, (ipc == 1) ? "" : "s",
                   ipc ? "" : " (without cuda_ipc, GPU memory between processes goes through host memory)");
    }
    check_fabric(gpus);
    if (gpus < 2) {
        check_line("OK", "peer access", "%s", (gpus == 1) ? "one GPU: nothing to check" : "no GPU");
        return;
    }
    for (a = 0; (a < gpus) && (a < CHECK_MAX_GPUS); ++a) {
        for (b = a + 1; (b < gpus) && (b < CHECK_MAX_GPUS); ++b) {
            if ((drv.get(&da, a) != CUDA_SUCCESS) || (drv.get(&db, b) != CUDA_SUCCESS) ||
                (drv.can_peer(&can_ab, da, db) != CUDA_SUCCESS) || (drv.can_peer(&can_ba, db, da) != CUDA_SUCCESS)) {
                can_ab = can_ba = 0;
            }
            if (can_ab && can_ba) {
                check_line("OK", "peer access", "GPU%d <-> GPU%d", a, b);
            } else {
                check_line("WARN", "peer access", "GPU%d and GPU%d cannot access each other: cuda_ipc refuses that "
                           "pair and UCP sends through host memory (see nvidia-smi topo -m)", a, b);
            }
        }
    }
}

int main(int argc, char **argv)
{
    if ((argc == 3) && !strcmp(argv[1], "--before")) {
        check_before(argv[2]);
    } else if ((argc == 2) && !strcmp(argv[1], "--after")) {
        check_after();
    } else {
        fprintf(stderr, "usage: %s --before MODULE | --after (run by ucx-cuda-run --check)\n", argv[0]);
        return 2;
    }
    return check_failed ? 1 : 0;
}
