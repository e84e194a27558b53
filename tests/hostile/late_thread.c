/* Hostile: hands the whole product to a detached thread and returns at
 * once, so a timer around the call sees almost nothing. Whatever the thread
 * writes lands after the harness has looked (and maybe after it re-poisoned
 * or freed the buffers). Expected: not ok (wrong_result when the check sees
 * the poison; cheat_suspected if it is caught during timing; crash when the
 * late stores hit freed memory). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    const float *A, *B;
    float *C;
    int64_t M, N, K;
} job;

static void *work(void *arg)
{
    job *j = arg;
    for (int64_t i = 0; i < j->M; i++) {
        for (int64_t n = 0; n < j->N; n++)
            j->C[i * j->N + n] = 0;
        for (int64_t k = 0; k < j->K; k++)
            for (int64_t n = 0; n < j->N; n++)
                j->C[i * j->N + n] += j->A[i * j->K + k] * j->B[k * j->N + n];
    }
    free(j);
    return NULL;
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    job *j = malloc(sizeof *j);
    if (!j)
        return 1;
    *j = (job){tensors[0], tensors[1], tensors[2], sizes[0], sizes[1], sizes[2]};
    pthread_t t;
    if (pthread_create(&t, NULL, work, j) != 0) {
        free(j);
        return 1;
    }
    pthread_detach(t);
    return 0;
}
