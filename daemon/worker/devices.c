/* The worker host's CPU and NVIDIA GPUs, and the GPU CUDA_VISIBLE_DEVICES names (devices.h). */
#include "devices.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "avo_nvml.h"

void avo_devices_cpu_model(char *out, size_t len, const char *none)
{
    snprintf(out, len, "%s", none);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                snprintf(out, len, "%s", c + 1 + (c[1] == ' '));
                out[strcspn(out, "\n")] = 0;
            }
            break;
        }
    fclose(f);
}

static json_t *cpu_entry(void)
{
    char model[256];
    avo_devices_cpu_model(model, sizeof model, "unknown");
    return json_pack("{s:s,s:s,s:i}", "kind", "cpu", "model", model, "cores", (int)sysconf(_SC_NPROCESSORS_ONLN));
}

json_t *avo_devices_probe(void)
{
    json_t *a = json_array();
    char err[256];
    json_array_append_new(a, cpu_entry());
    int n = avo_nvml_open(err, sizeof err);
    if (n < 0) {
        json_array_append_new(a, json_pack("{s:s,s:b,s:s}", "kind", "gpu-probe", "available", 0, "reason", err));
        return a;
    }
    char driver[80] = "";
    avo_nvml_driver_version(driver, sizeof driver);
    for (int i = 0; i < n; i++) {
        avo_gpu_info g;
        if (avo_nvml_device(i, &g) < 0)
            continue;
        char cc[16], sm[16];
        snprintf(cc, sizeof cc, "%d.%d", g.cc_major, g.cc_minor);
        snprintf(sm, sizeof sm, "sm_%d%d", g.cc_major, g.cc_minor);
        json_array_append_new(a, json_pack("{s:s,s:i,s:s,s:s,s:s,s:s,s:s}", "kind", "gpu", "index", i, "name", g.name,
                                           "uuid", g.uuid, "compute_capability", cc, "arch", sm, "driver", driver));
    }
    avo_nvml_close();
    return a;
}

int avo_devices_visible_index(const char *cvd)
{
    if (!cvd || !*cvd)
        return 0;
    char first[128];
    snprintf(first, sizeof first, "%.*s", (int)strcspn(cvd, ","), cvd);
    if (first[0] >= '0' && first[0] <= '9') {
        char *end;
        long v = strtol(first, &end, 10);
        return *end == 0 && v <= 4096 ? (int)v : -EINVAL;
    }
    if (strncmp(first, "GPU-", 4) != 0 && strncmp(first, "MIG-", 4) != 0)
        return -EINVAL;
    char nerr[64];
    int n = avo_nvml_open(nerr, sizeof nerr), found = -ENODEV;
    for (int i = 0; i < n && found < 0; i++) {
        avo_gpu_info g;
        if (avo_nvml_device(i, &g) == 0 && strncmp(g.uuid, first, strlen(first)) == 0)
            found = i;
    }
    if (n >= 0)
        avo_nvml_close();
    return found;
}
