/* Probes the worker's toolchain record: compilers, driver, CUDA, GPU, CPU (toolchain.h). */
#include "toolchain.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "avo_nvml.h"
#include "devices.h"
#include "avo_toolchain.h"
#include "avo_version.h"
#include "compile.h"

/* The executable `name` resolves to through PATH, as execvp would find
 * it, with links resolved: the record names the file that really ran. */
static int which(const char *name, char *out, size_t outlen)
{
    const char *path = getenv("PATH");
    char cand[PATH_MAX], real[PATH_MAX];
    if (strchr(name, '/')) {
        if (access(name, X_OK) < 0 || !realpath(name, real))
            return -ENOENT;
        snprintf(out, outlen, "%s", real);
        return 0;
    }
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        if (n && (size_t)snprintf(cand, sizeof cand, "%.*s/%s", (int)n, p, name) < sizeof cand &&
            access(cand, X_OK) == 0 && realpath(cand, real)) {
            snprintf(out, outlen, "%s", real);
            return 0;
        }
        p += n + (p[n] == ':');
    }
    return -ENOENT;
}

/* {"path", "banner", "version"}, or the string "none". The banner is the
 * line that carries the version: cc prints it first, nvcc last but one
 * ("Cuda compilation tools, release 13.0, V13.0.88"). */
static json_t *compiler(const char *name, json_t *versions)
{
    char path[PATH_MAX], ident[512], ver[64];
    if (which(name, path, sizeof path) < 0 || avo_compile_identity(name, ident, sizeof ident) < 0)
        return json_string("none");
    /* avo_compile_identity joined the lines with spaces: cut the banner */
    const char *rel = strstr(ident, "Cuda compilation tools");
    char banner[256];
    if (rel) {
        const char *end = strstr(rel, " Build ");
        snprintf(banner, sizeof banner, "%.*s", end ? (int)(end - rel) : (int)strlen(rel), rel);
    } else {
        /* cc: its first line; the join lost the line break, so cut at
         * the copyright notice every gcc and clang banner has next */
        const char *end = strstr(ident, " Copyright");
        const char *t = strstr(ident, " Target:");
        if (!end || (t && t < end))
            end = t;
        snprintf(banner, sizeof banner, "%.*s", end ? (int)(end - ident) : (int)strlen(ident), ident);
    }
    json_t *o = json_pack("{s:s,s:s}", "path", path, "banner", banner);
    if (avo_toolchain_banner_version(banner, ver, sizeof ver) == 0) {
        json_object_set_new(o, "version", json_string(ver));
        json_object_set_new(versions, name, json_string(ver));
    } else {
        json_object_set_new(o, "version", json_string("none"));
    }
    return o;
}

/* CUDA encodes versions as 1000 * major + 10 * minor. */
static void cuda_version(int v, char *out, size_t outlen)
{
    snprintf(out, outlen, "%d.%d", v / 1000, (v % 1000) / 10);
}

/* The CUDA runtime candidates link (the toolkit's libcudart, beside nvcc;
 * then the loader's default): its version without creating a context
 * (cudaRuntimeGetVersion needs no GPU). */
static int runtime_version(const json_t *nvcc, char *out, size_t outlen)
{
    char lib[PATH_MAX];
    void *h = NULL;
    const char *p = json_string_value(json_object_get(nvcc, "path"));
    const char *slash = p ? strrchr(p, '/') : NULL;
    if (slash && (size_t)snprintf(lib, sizeof lib, "%.*s/../lib64/libcudart.so", (int)(slash - p), p) < sizeof lib)
        h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -ENOENT;
    int (*get)(int *);
    *(void **)&get = dlsym(h, "cudaRuntimeGetVersion");
    int v = 0, rc = get && get(&v) == 0 && v > 0 ? 0 : -EIO;
    if (!rc)
        cuda_version(v, out, outlen);
    dlclose(h);
    return rc;
}

static json_t *cpu_model(void)
{
    char model[256];
    avo_devices_cpu_model(model, sizeof model, "none");
    return json_string(model);
}

/* The driver, the CUDA version it supports and, on a GPU worker, its GPU;
 * "none" for each where NVML is not there (a CI machine, a CPU host). */
static void gpu_part(const avo_toolchain_opts *o, json_t *tc, json_t *versions)
{
    char err[256], driver[96] = "";
    int n = avo_nvml_open(err, sizeof err);
    json_object_set_new(tc, "driver", json_string("none"));
    json_object_set_new(tc, "cuda_driver", json_string("none"));
    json_object_set_new(tc, "gpu", json_string("none"));
    if (n < 0)
        return;
    int cv = 0;
    char ver[32];
    if (avo_nvml_driver_version(driver, sizeof driver) == 0 && driver[0]) {
        json_object_set_new(tc, "driver", json_string(driver));
        json_object_set_new(versions, "driver", json_string(driver));
    }
    if (avo_nvml_cuda_driver_version(&cv) == 0 && cv > 0) {
        cuda_version(cv, ver, sizeof ver);
        json_object_set_new(tc, "cuda_driver", json_string(ver));
        json_object_set_new(versions, "cuda_driver", json_string(ver));
    }
    avo_gpu_info g;
    if (strncmp(o->target, "sm_", 3) == 0 && n > 0 && avo_nvml_device(o->gpu_index, &g) == 0) {
        char vbios[96] = "none";
        unsigned sm = 0, mem = 0;
        avo_nvml_vbios(o->gpu_index, vbios, sizeof vbios);
        json_t *gj = json_pack("{s:i,s:s,s:s,s:s}", "index", o->gpu_index, "name", g.name, "uuid", g.uuid, "vbios",
                               vbios);
        if (avo_nvml_app_clocks(o->gpu_index, &sm, &mem) == 0)
            json_object_set_new(gj, "app_clocks", json_pack("{s:i,s:i}", "sm_mhz", (int)sm, "mem_mhz", (int)mem));
        json_object_set_new(tc, "gpu", gj);
        json_object_set_new(versions, "gpu", json_string(g.name));
        json_object_set_new(versions, "gpu_uuid", json_string(g.uuid));
    }
    avo_nvml_close();
}

static int apply_override(const char *file, json_t *tc, char *err, size_t errlen)
{
    json_error_t je;
    json_t *ov = json_load_file(file, 0, &je);
    if (!json_is_object(ov)) {
        snprintf(err, errlen, "--toolchain-file %s: %s", file, ov ? "must be a JSON object" : je.text);
        json_decref(ov);
        return -EINVAL;
    }
    const char *k;
    json_t *v;
    json_object_foreach(ov, k, v)
    {
        if (!strcmp(k, "versions")) {
            if (!json_is_object(v)) {
                snprintf(err, errlen, "--toolchain-file %s: versions: must be an object", file);
                json_decref(ov);
                return -EINVAL;
            }
            json_object_update(json_object_get(tc, "versions"), v);
        } else {
            json_object_set(tc, k, v);
        }
    }
    json_object_set_new(tc, "overridden", json_true());
    json_decref(ov);
    return 0;
}

int avo_toolchain_probe(const avo_toolchain_opts *o, json_t **out, char *err, size_t errlen)
{
    json_t *tc = json_object(), *versions = json_object();
    char rt[32];
    json_object_set_new(tc, "versions", versions);
    const int cuda = strncmp(o->target, "sm_", 3) == 0;
    json_object_set_new(tc, "cc", compiler("cc", versions));
    /* nvcc only where the worker compiles CUDA: a CPU worker's record
     * should not change because a toolkit was installed beside it */
    json_object_set_new(tc, "nvcc", cuda ? compiler("nvcc", versions) : json_string("none"));
    if (cuda && runtime_version(json_object_get(tc, "nvcc"), rt, sizeof rt) == 0) {
        json_object_set_new(tc, "cuda_runtime", json_string(rt));
        json_object_set_new(versions, "cuda_runtime", json_string(rt));
    } else {
        json_object_set_new(tc, "cuda_runtime", json_string("none"));
    }
    gpu_part(o, tc, versions);
    json_t *cpu = cpu_model();
    json_object_set(versions, "cpu", cpu);
    json_object_set_new(tc, "cpu", cpu);
    json_object_set_new(tc, "avo", json_string(AVO_VERSION));
    json_object_set_new(versions, "avo", json_string(AVO_VERSION));
    if (o->override_file && *o->override_file && apply_override(o->override_file, tc, err, errlen) < 0) {
        json_decref(tc);
        return -EINVAL;
    }
    *out = tc;
    return 0;
}

json_t *avo_toolchain_for_result(const json_t *toolchain, const json_t *result)
{
    json_t *t = json_deep_copy(toolchain);
    if (!t)
        return NULL;
    long long lo = 0, hi = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(result, "configs"), i, c)
    {
        const json_t *k = json_object_get(c, "clock");
        long long a = json_integer_value(json_object_get(k, "min_mhz")),
                  b = json_integer_value(json_object_get(k, "max_mhz"));
        if (a > 0 && (!lo || a < lo))
            lo = a;
        if (b > hi)
            hi = b;
    }
    if (lo || hi)
        json_object_set_new(t, "clocks",
                            json_pack("{s:I,s:I}", "sm_min_mhz", (json_int_t)lo, "sm_max_mhz", (json_int_t)hi));
    return t;
}
