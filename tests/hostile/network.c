/* Hostile: tries TCP connections to 127.0.0.1:5432 (a local PostgreSQL,
 * avo's own database) and to a public address (1.1.1.1:443), and computes
 * the right answer ONLY if both attempts failed with ENETUNREACH, i.e. the
 * process has no usable network at all (a fresh network namespace, where
 * not even loopback is up). A connection, or a refusal from a live loopback
 * stack (ECONNREFUSED), or a silent drop (timeout) all mean the network was
 * reachable: then it writes zeros, and the evaluation cannot be ok.
 * So an ok outcome proves the network was cut. The computing kernel is a
 * deliberately slow one, so even then it scores below the seed.
 * Expected: ok when the sandbox reports "netns": true, else wrong_result. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* 0 when the address is unreachable because there is no route at all. */
static int reachable(const char *ip, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return errno != EAFNOSUPPORT && errno != EACCES && errno != EPERM;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    int rc = connect(fd, (struct sockaddr *)&a, sizeof a), e = errno;
    if (rc != 0 && e == EINPROGRESS) {
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, 1000) == 1) {
            socklen_t len = sizeof e;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len);
            rc = e ? -1 : 0;
        } else {
            e = ETIMEDOUT;
        }
    }
    close(fd);
    fprintf(stderr, "network: %s:%d: %s\n", ip, port, rc == 0 ? "CONNECTED" : strerror(e));
    return rc == 0 || (e != ENETUNREACH && e != EHOSTUNREACH && e != EADDRNOTAVAIL);
}

static void slow_gemm(const float *A, const float *B, float *C, int64_t M, int64_t N, int64_t K)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            volatile double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += (double)A[i * K + k] * (double)B[k * N + j];
            C[i * N + j] = (float)acc;
        }
}

int sgemm(void *const *tensors, const int64_t *sizes)
{
    /* Probed once: the verdict, not any output, is kept across calls. */
    static int probed, open_net;
    if (!probed) {
        open_net = reachable("127.0.0.1", 5432) | reachable("1.1.1.1", 443);
        probed = 1;
    }
    float *C = tensors[2];
    if (open_net) {
        memset(C, 0, (size_t)(sizes[0] * sizes[1]) * sizeof *C);
        return 0;
    }
    slow_gemm(tensors[0], tensors[1], C, sizes[0], sizes[1], sizes[2]);
    return 0;
}
