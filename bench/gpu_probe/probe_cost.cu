/* What the harness's per-call "clock and busy probe" step costs, by part
 * (bench/call_trace.sh put the step at about 1.4 ms a call on an H100,
 * 2026-12-06): NVML's handle lookup, its current and its maximum SM
 * clock (avo_nvml_sm_clock does all three on every call), and the busy
 * probe (avo_gate_probe: one empty kernel and a stream synchronize).
 * N rounds of each, interleaved; median and 90th percentile in us.
 *   nvcc -O2 -std=c++17 -arch=sm_90 bench/gpu_probe/probe_cost.cu daemon/gpu/avo_gate.cu -ldl -o probe_cost
 *   ./probe_cost [N]   (default 200) */
#include "../../daemon/gpu/avo_gate.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <dlfcn.h>
#include <vector>

#include <cuda_runtime.h>

typedef int (*init_fn)(void);
typedef int (*handle_fn)(unsigned, void **);
typedef int (*clock_fn)(void *, int, unsigned *);

static double now_us()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static void report(const char *what, std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    printf("%-44s median %8.1f us   p90 %8.1f us   (%zu)\n", what, v[v.size() / 2], v[v.size() * 9 / 10], v.size());
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 200;
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib) {
        printf("no NVML: %s\n", dlerror());
        return 1;
    }
    init_fn init = (init_fn)dlsym(lib, "nvmlInit_v2");
    handle_fn handle = (handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    clock_fn clock = (clock_fn)dlsym(lib, "nvmlDeviceGetClockInfo"),
             maxclock = (clock_fn)dlsym(lib, "nvmlDeviceGetMaxClockInfo");
    if (!init || !handle || !clock || !maxclock || init() != 0)
        return 1;
    cudaStream_t st;
    cudaFree(0);
    cudaStreamCreate(&st);
    void *d = NULL;
    handle(0, &d);
    std::vector<double> th, tc, tm, tall, tp;
    unsigned mhz = 0;
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        void *h = NULL;
        handle(0, &h);
        double t1 = now_us();
        clock(d, 1, &mhz);
        double t2 = now_us();
        maxclock(d, 1, &mhz);
        double t3 = now_us();
        handle(0, &h);
        clock(h, 1, &mhz);
        maxclock(h, 1, &mhz);
        double t4 = now_us();
        double s = 0;
        avo_gate_probe(st, &s);
        double t5 = now_us();
        th.push_back(t1 - t0), tc.push_back(t2 - t1), tm.push_back(t3 - t2), tall.push_back(t4 - t3),
            tp.push_back(t5 - t4);
    }
    report("nvmlDeviceGetHandleByIndex_v2", th);
    report("nvmlDeviceGetClockInfo (SM, cached handle)", tc);
    report("nvmlDeviceGetMaxClockInfo (SM)", tm);
    report("all three (as avo_nvml_sm_clock)", tall);
    report("busy probe (avo_gate_probe)", tp);
    printf("last SM clock %u MHz\n", mhz);
    return 0;
}
