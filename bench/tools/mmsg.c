/* Batched UDP for bench/kernels.sh: one flow, datagrams sent with sendmmsg and read with
 * recvmmsg (iperf3 makes a system call per datagram, which a user-mode-Linux guest cannot
 * afford). Every datagram carries a sequence number in its first 8 bytes.
 *
 *   mmsg send ADDR PORT SECONDS LEN [INTERVAL_US]
 *       a flood in batches of 64 (INTERVAL_US 0 or absent) or one datagram every INTERVAL_US
 *   mmsg recv PORT SECONDS [poll]
 *       reads until SECONDS have passed or, once datagrams came, none came for 2 s (with
 *       `poll`, without ever sleeping: the reader spins on non-blocking reads, so the sender's
 *       CPU never has to wake it; for a host with a CPU to spare, not a one-CPU guest); prints
 *       {"datagrams":N,"pps":R,"max_gap_ms":G,"lost":L,"dups":D} where N counts each sequence
 *       number once (a broadcast bond without dedup delivers every datagram once per link;
 *       those copies are D, not throughput), pps is N over the time from the first datagram
 *       to the last, max_gap_ms the longest wait between two reads that returned data and
 *       lost the sequence numbers below the highest that never arrived.
 *
 * Build: cc -O2 -o mmsg mmsg.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int usage(void)
{
    fprintf(stderr, "usage: mmsg send ADDR PORT SECONDS LEN [INTERVAL_US] | mmsg recv PORT SECONDS [poll]\n");
    return 2;
}

static int do_send(int argc, char **argv)
{
    if (argc < 6)
        return usage();
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[3]))};
    if (inet_pton(AF_INET, argv[2], &to.sin_addr) != 1)
        return usage();
    double seconds = atof(argv[4]);
    size_t len = (size_t)atoi(argv[5]);
    long interval = argc > 6 ? atol(argv[6]) : 0;
    if (len < 8 || len > 1472)
        return usage();
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) {
        perror("socket");
        return 1;
    }
    static char bufs[BATCH][1472];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = len;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &to;
        msgs[i].msg_hdr.msg_namelen = sizeof to;
    }
    uint64_t seq = 0, sent = 0;
    double end = now() + seconds;
    if (interval > 0) {
        struct timespec next;
        clock_gettime(CLOCK_MONOTONIC, &next);
        while (now() < end) {
            memcpy(bufs[0], &seq, 8);
            seq++;
            if (sendto(fd, bufs[0], len, 0, (struct sockaddr *)&to, sizeof to) > 0)
                sent++;
            next.tv_nsec += interval * 1000;
            while (next.tv_nsec >= 1000000000) {
                next.tv_nsec -= 1000000000;
                next.tv_sec++;
            }
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        }
    } else {
        while (now() < end) {
            for (int i = 0; i < BATCH; i++) {
                uint64_t s = seq + i;
                memcpy(bufs[i], &s, 8);
            }
            int n = sendmmsg(fd, msgs, BATCH, 0);
            if (n > 0) {
                seq += n;
                sent += n;
            }
        }
    }
    printf("{\"sent\":%llu}\n", (unsigned long long)sent);
    return 0;
}

static int do_recv(int argc, char **argv)
{
    if (argc < 4)
        return usage();
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    double seconds = atof(argv[3]);
    int poll = 0;
    if (argc > 4) {
        if (strcmp(argv[4], "poll"))
            return usage();
        poll = 1;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int big = 4 << 20;
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
        bind(fd, (struct sockaddr *)&me, sizeof me) < 0) {
        perror("recv socket");
        return 1;
    }
    static char bufs[BATCH][2048];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = sizeof bufs[i];
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    uint64_t count = 0, maxseq = 0, dups = 0;
    /* One bit per sequence number seen, grown as they come (a flood of 64-byte datagrams
     * for a few seconds: some megabits). */
    uint8_t *seen = NULL;
    size_t seen_len = 0;
    double start = now(), first = 0, last = 0, gap = 0;
    while (now() < start + seconds) {
        int n = recvmmsg(fd, msgs, BATCH, poll ? MSG_DONTWAIT : MSG_WAITFORONE, NULL);
        double t = now();
        if (n <= 0) {
            if (count && t - last > 2.0)
                break;
            continue;
        }
        if (!count)
            first = t;
        else if (t - last > gap)
            gap = t - last;
        last = t;
        for (int i = 0; i < n; i++) {
            uint64_t s;
            if (msgs[i].msg_len < 8)
                continue;
            memcpy(&s, bufs[i], 8);
            if (s >= (uint64_t)1 << 40)
                continue; /* not one of our numbers */
            if (s / 8 >= seen_len) {
                size_t len = seen_len ? seen_len : 1 << 16;
                while (s / 8 >= len)
                    len *= 2;
                uint8_t *grown = realloc(seen, len);
                if (!grown) {
                    perror("realloc");
                    return 1;
                }
                memset(grown + seen_len, 0, len - seen_len);
                seen = grown;
                seen_len = len;
            }
            if (seen[s / 8] & (1u << (s % 8))) {
                dups++;
                continue;
            }
            seen[s / 8] |= 1u << (s % 8);
            if (s > maxseq)
                maxseq = s;
            count++;
        }
    }
    double span = last - first;
    long long lost = count ? (long long)(maxseq + 1) - (long long)count : 0;
    printf("{\"datagrams\":%llu,\"pps\":%.0f,\"max_gap_ms\":%.1f,\"lost\":%lld,\"dups\":%llu}\n",
           (unsigned long long)count, span > 0 ? count / span : 0.0, gap * 1000, lost,
           (unsigned long long)dups);
    free(seen);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "send"))
        return do_send(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "recv"))
        return do_recv(argc, argv);
    return usage();
}
