/* Trusted reference for cpu/stencil2d: one Jacobi step of the 5-point
 * Laplace stencil with a fixed boundary. Plain row-major loops; the four
 * neighbours are summed in double, so the only rounding is the final cast
 * (the float result of a candidate differs by at most a few ulps). */
#include <stdint.h>

int avo_reference(void *const *tensors, const int64_t *sizes)
{
    const float *U = tensors[0];
    float *V = tensors[1];
    const int64_t H = sizes[0], W = sizes[1];
    for (int64_t i = 0; i < H; i++)
        for (int64_t j = 0; j < W; j++) {
            const int64_t k = i * W + j;
            if (i == 0 || j == 0 || i == H - 1 || j == W - 1)
                V[k] = U[k];
            else
                V[k] = (float)(0.25 * ((double)U[k - W] + (double)U[k + W] + (double)U[k - 1] + (double)U[k + 1]));
        }
    return 0;
}

/* The float64 twin the harness validates avo_reference against. */
int avo_reference_f64(void *const *tensors, const int64_t *sizes)
{
    const double *U = tensors[0];
    double *V = tensors[1];
    const int64_t H = sizes[0], W = sizes[1];
    for (int64_t i = 0; i < H; i++)
        for (int64_t j = 0; j < W; j++) {
            const int64_t k = i * W + j;
            if (i == 0 || j == 0 || i == H - 1 || j == W - 1)
                V[k] = U[k];
            else
                V[k] = 0.25 * (U[k - W] + U[k + W] + U[k - 1] + U[k + 1]);
        }
    return 0;
}
