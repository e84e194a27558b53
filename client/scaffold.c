/* Scaffolding a new problem package for `avoctl problem new` (scaffold.h):
 * the files of a small, correct row-sum problem for the CPU or CUDA. */
#include "scaffold.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "avo_file.h"

/* "@ENTRY@" stands for the entry point's name in every template. What the
 * cpu and cuda packages share: the computation's description and its
 * arguments. */
#define ROWSUM_DESCRIPTION                                                                                             \
    "  \"description\": \"@ENTRY@: y[i] = sum over j of x[i][j], float32, row-major (scaffolded by avoctl problem "    \
    "new: replace with your kernel)\",\n"
#define ROWSUM_TENSORS                                                                                                 \
    "  \"entry\": \"@ENTRY@\",\n"                                                                                      \
    "  \"sizes\": [\"M\", \"N\"],\n"                                                                                   \
    "  \"tensors\": [\n"                                                                                               \
    "    {\"name\": \"x\", \"dtype\": \"f32\", \"role\": \"input\",  \"shape\": [\"M\", \"N\"]},\n"                    \
    "    {\"name\": \"y\", \"dtype\": \"f32\", \"role\": \"output\", \"shape\": [\"M\"]}\n"                            \
    "  ],\n"

static const char cpu_problem[] = "{\n" ROWSUM_DESCRIPTION "  \"backend\": \"cpu\",\n" ROWSUM_TENSORS
                                  "  \"configs\": [\n"
                                  "    {\"name\": \"256x1024\", \"sizes\": {\"M\": 256,  \"N\": 1024}},\n"
                                  "    {\"name\": \"1000x999\", \"sizes\": {\"M\": 1000, \"N\": 999}}\n"
                                  "  ],\n"
                                  "  \"bytes\": \"4 * (M * N + M)\",\n"
                                  "  \"score_metric\": \"bytes\",\n"
                                  "  \"reference\": \"reference.c\",\n"
                                  "  \"seed\": \"seed.c\",\n"
                                  "  \"cflags\": [\"-O2\"],\n"
                                  "  \"knobs\": [\n"
                                  "    {\"name\": \"UNROLL\", \"values\": [1, 2, 4, 8], \"default\": 1},\n"
                                  "    {\"name\": \"ACC\",    \"values\": [1, 2, 4],    \"default\": 1}\n"
                                  "  ],\n"
                                  "  \"constraints\": [\"UNROLL % ACC == 0\"],\n"
                                  "  \"timing\": {\"max_seconds\": 0.5},\n"
                                  "  \"validate\": {\"sizes\": {\"M\": 7, \"N\": 33}}\n"
                                  "}\n";

static const char cpu_reference[] = "/* The trusted reference: plain loops, accumulating in double. avo_reference_f64\n"
                                    " * is its float64 twin, which the checker compares it with on the validate\n"
                                    " * sizes before any candidate runs (docs/problems.md). */\n"
                                    "#include <stdint.h>\n"
                                    "\n"
                                    "int avo_reference(void *const *tensors, const int64_t *sizes)\n"
                                    "{\n"
                                    "    const float *x = tensors[0];\n"
                                    "    float *y = tensors[1];\n"
                                    "    const int64_t M = sizes[0], N = sizes[1];\n"
                                    "    for (int64_t i = 0; i < M; i++) {\n"
                                    "        double acc = 0;\n"
                                    "        for (int64_t j = 0; j < N; j++)\n"
                                    "            acc += x[i * N + j];\n"
                                    "        y[i] = (float)acc;\n"
                                    "    }\n"
                                    "    return 0;\n"
                                    "}\n"
                                    "\n"
                                    "int avo_reference_f64(void *const *tensors, const int64_t *sizes)\n"
                                    "{\n"
                                    "    const double *x = tensors[0];\n"
                                    "    double *y = tensors[1];\n"
                                    "    const int64_t M = sizes[0], N = sizes[1];\n"
                                    "    for (int64_t i = 0; i < M; i++) {\n"
                                    "        double acc = 0;\n"
                                    "        for (int64_t j = 0; j < N; j++)\n"
                                    "            acc += x[i * N + j];\n"
                                    "        y[i] = acc;\n"
                                    "    }\n"
                                    "    return 0;\n"
                                    "}\n";

static const char cpu_seed[] = "/* The seed: where evolution starts. Every knob has a default under #ifndef,\n"
                               " * and the source must be correct at every setting the constraints allow\n"
                               " * (`avoctl problem check` compiles them). UNROLL: elements per inner step;\n"
                               " * ACC: independent partial sums (UNROLL % ACC == 0). */\n"
                               "#include <stdint.h>\n"
                               "\n"
                               "#ifndef UNROLL\n"
                               "#define UNROLL 1\n"
                               "#endif\n"
                               "#ifndef ACC\n"
                               "#define ACC 1\n"
                               "#endif\n"
                               "\n"
                               "int @ENTRY@(void *const *tensors, const int64_t *sizes)\n"
                               "{\n"
                               "    const float *x = tensors[0];\n"
                               "    float *y = tensors[1];\n"
                               "    const int64_t M = sizes[0], N = sizes[1];\n"
                               "    for (int64_t i = 0; i < M; i++) {\n"
                               "        const float *row = x + i * N;\n"
                               "        float acc[ACC] = {0};\n"
                               "        int64_t j = 0;\n"
                               "        for (; j + UNROLL <= N; j += UNROLL)\n"
                               "            for (int u = 0; u < UNROLL; u++)\n"
                               "                acc[u % ACC] += row[j + u];\n"
                               "        for (; j < N; j++)\n"
                               "            acc[0] += row[j];\n"
                               "        float sum = 0;\n"
                               "        for (int a = 0; a < ACC; a++)\n"
                               "            sum += acc[a];\n"
                               "        y[i] = sum;\n"
                               "    }\n"
                               "    return 0;\n"
                               "}\n";

static const char cuda_problem[] = "{\n" ROWSUM_DESCRIPTION "  \"backend\": \"cuda\",\n"
                                   "  \"language\": \"cuda\",\n" ROWSUM_TENSORS "  \"configs\": [\n"
                                   "    {\"name\": \"4096x4096\", \"sizes\": {\"M\": 4096, \"N\": 4096}},\n"
                                   "    {\"name\": \"10000x999\", \"sizes\": {\"M\": 10000, \"N\": 999}}\n"
                                   "  ],\n"
                                   "  \"bytes\": \"4 * (M * N + M)\",\n"
                                   "  \"score_metric\": \"bytes\",\n"
                                   "  \"reference\": \"reference.cu\",\n"
                                   "  \"seed\": \"seed.cu\",\n"
                                   "  \"baseline\": \"baseline.cu\",\n"
                                   "  \"nvcc_flags\": [\"-O3\"],\n"
                                   "  \"knobs\": [\n"
                                   "    {\"name\": \"THREADS\", \"values\": [64, 128, 256, 512], \"default\": 256},\n"
                                   "    {\"name\": \"UNROLL\",  \"values\": [1, 2, 4],           \"default\": 1}\n"
                                   "  ],\n"
                                   "  \"constraints\": [\"THREADS * UNROLL <= 1024\"],\n"
                                   "  \"timing\": {\"max_seconds\": 0.5},\n"
                                   "  \"validate\": {\"sizes\": {\"M\": 7, \"N\": 33}}\n"
                                   "}\n";

static const char cuda_reference[] =
    "/* The trusted reference: one thread per row, accumulating in double.\n"
    " * avo_reference_f64 is its float64 twin (docs/problems.md, CUDA problems). */\n"
    "#include <cuda_runtime.h>\n"
    "#include <stdint.h>\n"
    "\n"
    "template <typename T>\n"
    "__global__ void rowsum(const T *x, T *y, int64_t M, int64_t N)\n"
    "{\n"
    "    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i >= M)\n"
    "        return;\n"
    "    double acc = 0;\n"
    "    for (int64_t j = 0; j < N; j++)\n"
    "        acc += x[i * N + j];\n"
    "    y[i] = (T)acc;\n"
    "}\n"
    "\n"
    "template <typename T>\n"
    "static int launch(void *const *tensors, const int64_t *sizes, cudaStream_t stream)\n"
    "{\n"
    "    const int64_t M = sizes[0], N = sizes[1];\n"
    "    if (M <= 0)\n"
    "        return 0;\n"
    "    rowsum<T><<<(unsigned)((M + 127) / 128), 128, 0, stream>>>(static_cast<const T *>(tensors[0]),\n"
    "                                                               static_cast<T *>(tensors[1]), M, N);\n"
    "    return (int)cudaGetLastError();\n"
    "}\n"
    "\n"
    "extern \"C\" int avo_reference(void *const *tensors, const int64_t *sizes, cudaStream_t stream)\n"
    "{\n"
    "    return launch<float>(tensors, sizes, stream);\n"
    "}\n"
    "\n"
    "extern \"C\" int avo_reference_f64(void *const *tensors, const int64_t *sizes, cudaStream_t stream)\n"
    "{\n"
    "    return launch<double>(tensors, sizes, stream);\n"
    "}\n";

static const char cuda_seed[] =
    "/* The seed: one block per row, THREADS threads each summing UNROLL\n"
    " * elements per step, then a shared-memory tree. Every knob has a default\n"
    " * under #ifndef, and the source must be correct at every setting the\n"
    " * constraints allow (`avoctl problem check` compiles them). */\n"
    "#include <cuda_runtime.h>\n"
    "#include <stdint.h>\n"
    "\n"
    "#ifndef THREADS\n"
    "#define THREADS 256\n"
    "#endif\n"
    "#ifndef UNROLL\n"
    "#define UNROLL 1\n"
    "#endif\n"
    "\n"
    "__global__ void __launch_bounds__(THREADS) rowsum(const float *x, float *y, int64_t N)\n"
    "{\n"
    "    __shared__ float part[THREADS];\n"
    "    const float *row = x + (int64_t)blockIdx.x * N;\n"
    "    float acc = 0;\n"
    "    for (int64_t j = threadIdx.x; j < N; j += (int64_t)THREADS * UNROLL) {\n"
    "#pragma unroll\n"
    "        for (int u = 0; u < UNROLL; u++)\n"
    "            if (j + (int64_t)u * THREADS < N)\n"
    "                acc += row[j + (int64_t)u * THREADS];\n"
    "    }\n"
    "    part[threadIdx.x] = acc;\n"
    "    __syncthreads();\n"
    "    for (int s = THREADS / 2; s > 0; s /= 2) {\n"
    "        if ((int)threadIdx.x < s)\n"
    "            part[threadIdx.x] += part[threadIdx.x + s];\n"
    "        __syncthreads();\n"
    "    }\n"
    "    if (threadIdx.x == 0)\n"
    "        y[blockIdx.x] = part[0];\n"
    "}\n"
    "\n"
    "extern \"C\" int @ENTRY@(void *const *tensors, const int64_t *sizes, cudaStream_t stream)\n"
    "{\n"
    "    const int64_t M = sizes[0], N = sizes[1];\n"
    "    if (M <= 0 || M > 0x7fffffff)\n"
    "        return M == 0 ? 0 : (int)cudaErrorInvalidValue;\n"
    "    rowsum<<<(unsigned)M, THREADS, 0, stream>>>(static_cast<const float *>(tensors[0]),\n"
    "                                             static_cast<float *>(tensors[1]), N);\n"
    "    return (int)cudaGetLastError();\n"
    "}\n";

static const char cuda_baseline[] =
    "/* The baseline: the vendor library's figure, timed beside the candidate\n"
    " * and checked like one. A row sum is x (M x N, row-major) times a vector\n"
    " * of ones; read column-major, x is an N x M matrix with leading dimension\n"
    " * N, so y = x^T-in-cuBLAS-terms * ones: cublasSgemv with CUBLAS_OP_T.\n"
    " * The handle and the ones vector are made at the first call (warm-up)\n"
    " * and kept, as the ABI allows. */\n"
    "#include <cublas_v2.h>\n"
    "#include <cuda_runtime.h>\n"
    "#include <stdint.h>\n"
    "\n"
    "__global__ void fill_ones(float *v, int64_t n)\n"
    "{\n"
    "    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        v[i] = 1.0f;\n"
    "}\n"
    "\n"
    "extern \"C\" int avo_baseline(void *const *tensors, const int64_t *sizes, cudaStream_t stream)\n"
    "{\n"
    "    static cublasHandle_t handle = NULL;\n"
    "    static float *ones = NULL;\n"
    "    static int64_t nones = 0;\n"
    "    const int64_t M = sizes[0], N = sizes[1];\n"
    "    if (M < 0 || N < 0 || M > 0x7fffffff || N > 0x7fffffff)\n"
    "        return (int)cudaErrorInvalidValue;\n"
    "    if (M == 0)\n"
    "        return 0;\n"
    "    if (!handle && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {\n"
    "        handle = NULL;\n"
    "        return 1000 + (int)CUBLAS_STATUS_NOT_INITIALIZED;\n"
    "    }\n"
    "    if (nones < N) {\n"
    "        /* grown once per larger N: only the warm-up calls pay for it */\n"
    "        cudaError_t e = cudaMalloc((void **)&ones, (size_t)N * sizeof(float));\n"
    "        if (e != cudaSuccess)\n"
    "            return (int)e;\n"
    "        fill_ones<<<(unsigned)((N + 255) / 256), 256, 0, stream>>>(ones, N);\n"
    "        nones = N;\n"
    "    }\n"
    "    cublasStatus_t st = cublasSetStream(handle, stream);\n"
    "    if (st != CUBLAS_STATUS_SUCCESS)\n"
    "        return 1000 + (int)st;\n"
    "    const float one = 1.0f, zero = 0.0f;\n"
    "    st = cublasSgemv(handle, CUBLAS_OP_T, (int)N, (int)M, &one, static_cast<const float *>(tensors[0]),\n"
    "                     N > 0 ? (int)N : 1, ones, 1, &zero, static_cast<float *>(tensors[1]), 1);\n"
    "    if (st != CUBLAS_STATUS_SUCCESS)\n"
    "        return 1000 + (int)st;\n"
    "    return (int)cudaGetLastError();\n"
    "}\n";

typedef struct {
    const char *name;
    const char *text;
} file_t;

/* avo_file_mkdirs with the scaffold's message. */
static int make_dirs(const char *path, char *err, size_t errlen)
{
    char failed[PATH_MAX];
    int rc = avo_file_mkdirs(path, 0755, failed, sizeof failed);
    if (rc == -ENAMETOOLONG)
        snprintf(err, errlen, "%s: path too long", path);
    else if (rc && snprintf(err, errlen, "cannot create %s: %s", failed, strerror(-rc)) < 0)
        err[0] = 0;
    return rc;
}

/* The template with every "@ENTRY@" replaced; caller frees. */
static char *expand(const char *tmpl, const char *entry)
{
    size_t n = 0, el = strlen(entry);
    for (const char *s = tmpl; (s = strstr(s, "@ENTRY@")); s += 7)
        n++;
    char *out = malloc(strlen(tmpl) + n * el + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *s = tmpl;;) {
        const char *at = strstr(s, "@ENTRY@");
        size_t k = at ? (size_t)(at - s) : strlen(s);
        memcpy(o, s, k);
        o += k;
        if (!at)
            break;
        memcpy(o, entry, el);
        o += el;
        s = at + 7;
    }
    *o = 0;
    return out;
}

int avoctl_scaffold(const char *dir, const char *target, const char *entry, char *out_files, size_t out_len, char *err,
                    size_t errlen)
{
    const file_t cpu[] = {{"problem.json", cpu_problem}, {"reference.c", cpu_reference}, {"seed.c", cpu_seed}};
    const file_t cuda[] = {{"problem.json", cuda_problem},
                           {"reference.cu", cuda_reference},
                           {"seed.cu", cuda_seed},
                           {"baseline.cu", cuda_baseline}};
    const file_t *files;
    size_t nfiles;
    char derived[64], path[4400];
    if (target && !strcmp(target, "cpu")) {
        files = cpu;
        nfiles = sizeof cpu / sizeof cpu[0];
    } else if (target && !strcmp(target, "cuda")) {
        files = cuda;
        nfiles = sizeof cuda / sizeof cuda[0];
    } else {
        snprintf(err, errlen, "--target: '%s' is not cpu or cuda", target ? target : "");
        return -EINVAL;
    }
    if (!entry) {
        /* The directory's last component, as an identifier. */
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
            n--;
        size_t b = n;
        while (b && dir[b - 1] != '/')
            b--;
        size_t k = 0;
        if (b < n && isdigit((unsigned char)dir[b]))
            derived[k++] = 'k';
        for (size_t i = b; i < n && k + 1 < sizeof derived; i++)
            derived[k++] = isalnum((unsigned char)dir[i]) ? dir[i] : '_';
        derived[k] = 0;
        entry = k ? derived : "kernel";
    }
    if (!*entry || strlen(entry) > 63 || !(isalpha((unsigned char)entry[0]) || entry[0] == '_') ||
        strspn(entry, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != strlen(entry) ||
        !strncmp(entry, "avo_", 4)) {
        snprintf(err, errlen,
                 "--name: '%s' is not a C identifier of 1 to 63 characters outside the avo_ prefix "
                 "(it becomes the seed's entry point)",
                 entry);
        return -EINVAL;
    }
    for (size_t i = 0; i < nfiles; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        if (access(path, F_OK) == 0) {
            snprintf(err, errlen, "%s already exists; not overwriting a package (pick an empty directory)", path);
            return -EEXIST;
        }
    }
    int rc = make_dirs(dir, err, errlen);
    if (rc < 0)
        return rc;
    out_files[0] = 0;
    for (size_t i = 0; i < nfiles; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        char *text = expand(files[i].text, entry);
        FILE *f = text ? fopen(path, "wx") : NULL;
        int ok = f && fputs(text, f) >= 0;
        if (f && fclose(f) != 0)
            ok = 0;
        if (!ok) {
            int e = text ? errno : ENOMEM;
            snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
            free(text);
            return -e;
        }
        free(text);
        size_t used = strlen(out_files);
        snprintf(out_files + used, out_len - used, "%s%s", i ? ", " : "", files[i].name);
    }
    return 0;
}
