/* Trusted reference for cpu/softmax: each row of X [R, C] becomes
 * exp(x - max) / sum(exp(x - max)). Three plain passes in double (max,
 * sum of exponentials, division), so rounding in the reference is far below
 * the float tolerance it judges candidates by. */
#include <math.h>
#include <stdint.h>

static void softmax_rows_f64(const double *x, double *y, int64_t R, int64_t C)
{
    for (int64_t r = 0; r < R; r++) {
        const double *xr = x + r * C;
        double *yr = y + r * C;
        double m = xr[0];
        for (int64_t c = 1; c < C; c++)
            m = xr[c] > m ? xr[c] : m;
        double s = 0;
        for (int64_t c = 0; c < C; c++)
            s += exp(xr[c] - m);
        for (int64_t c = 0; c < C; c++)
            yr[c] = exp(xr[c] - m) / s;
    }
}

int avo_reference(void *const *tensors, const int64_t *sizes)
{
    const float *X = tensors[0];
    float *Y = tensors[1];
    const int64_t R = sizes[0], C = sizes[1];
    for (int64_t r = 0; r < R; r++) {
        const float *xr = X + r * C;
        float *yr = Y + r * C;
        double m = xr[0];
        for (int64_t c = 1; c < C; c++)
            m = xr[c] > m ? xr[c] : m;
        double s = 0;
        for (int64_t c = 0; c < C; c++)
            s += exp((double)xr[c] - m);
        for (int64_t c = 0; c < C; c++)
            yr[c] = (float)(exp((double)xr[c] - m) / s);
    }
    return 0;
}

/* The float64 twin the harness validates avo_reference against: the same
 * three passes on double tensors. */
int avo_reference_f64(void *const *tensors, const int64_t *sizes)
{
    softmax_rows_f64(tensors[0], tensors[1], sizes[0], sizes[1]);
    return 0;
}
