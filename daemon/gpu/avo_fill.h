/* Input tensors generated on the device: the same ChaCha20 stream, bit for
 * bit, as the host's fill (daemon/harness/tensors.c, avo_tensors_fill), so a
 * call's inputs need no host generation and no host-to-device copy, and the
 * checker can still regenerate them on the host for a checked call. */
#ifndef AVO_FILL_H
#define AVO_FILL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Queue on stream st: element e of dst (n elements of dtype, an avo_dtype
 * value) = unit(word e of the ChaCha20 keystream under key, block counter
 * starting at 0, nonce {nonce0, nonce1, nonce2}) * scale, converted as the
 * host converts it. Returns 0, or -EINVAL for an unknown dtype or a stream
 * longer than the 32-bit block counter, or -EIO when the launch failed. */
int avo_fill_launch(void *dst, int64_t n, int dtype, float scale, const unsigned char key[32], uint32_t nonce0,
                    uint32_t nonce1, uint32_t nonce2, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
