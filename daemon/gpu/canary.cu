// avo-canary: after a crash, a timeout or a sticky CUDA error in a candidate,
// the worker runs this small known-good kernel in a fresh process before it
// claims more work. A GPU that cannot run it correctly (driver wedged, Xid,
// ECC) marks the worker unhealthy instead of failing every later candidate.
// Prints one JSON line; exit 0 = healthy, 1 = unhealthy, 2 = usage.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__global__ void canary_saxpy(int n, float a, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

static int fail(const char *what, cudaError_t e)
{
    printf("{\"ok\": false, \"stage\": \"%s\", \"error\": \"%s\"}\n", what, cudaGetErrorString(e));
    return 1;
}

int main(int argc, char **argv)
{
    int dev = argc > 1 ? atoi(argv[1]) : 0;
    const int n = 1 << 20;
    cudaError_t e;
    cudaDeviceProp prop;
    if ((e = cudaSetDevice(dev)) != cudaSuccess)
        return fail("set_device", e);
    if ((e = cudaGetDeviceProperties(&prop, dev)) != cudaSuccess)
        return fail("properties", e);

    float *hx = (float *)malloc(n * sizeof(float)), *hy = (float *)malloc(n * sizeof(float));
    float *dx = NULL, *dy = NULL;
    if (!hx || !hy)
        return 1;
    // Non-trivial data: zeros would let a broken device look healthy.
    for (int i = 0; i < n; i++) {
        hx[i] = (float)(i % 1024) * 0.5f;
        hy[i] = (float)(i % 77) - 38.0f;
    }
    if ((e = cudaMalloc(&dx, n * sizeof(float))) != cudaSuccess ||
        (e = cudaMalloc(&dy, n * sizeof(float))) != cudaSuccess)
        return fail("malloc", e);
    cudaEvent_t t0, t1;
    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    if ((e = cudaMemcpy(dx, hx, n * sizeof(float), cudaMemcpyHostToDevice)) != cudaSuccess ||
        (e = cudaMemcpy(dy, hy, n * sizeof(float), cudaMemcpyHostToDevice)) != cudaSuccess)
        return fail("copy_in", e);
    cudaEventRecord(t0);
    canary_saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, dx, dy);
    cudaEventRecord(t1);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return fail("launch", e);
    if ((e = cudaDeviceSynchronize()) != cudaSuccess)
        return fail("run", e);
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    float *out = (float *)malloc(n * sizeof(float));
    if (!out || (e = cudaMemcpy(out, dy, n * sizeof(float), cudaMemcpyDeviceToHost)) != cudaSuccess)
        return fail("copy_out", e);
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (out[i] != 2.0f * hx[i] + hy[i])
            bad++;
    printf("{\"ok\": %s, \"device\": %d, \"name\": \"%s\", \"cc\": \"%d.%d\", \"kernel_ms\": %.4f, \"wrong\": %d}\n",
           bad ? "false" : "true", dev, prop.name, prop.major, prop.minor, ms, bad);
    cudaFree(dx);
    cudaFree(dy);
    free(hx);
    free(hy);
    free(out);
    return bad ? 1 : 0;
}
