/*
 * The floor under a same-host pipeline hand-off: a producer thread on CPU 0 copies messages into a 1 MiB
 * single-producer/single-consumer ring in 256 KiB chunks, a consumer thread on CPU 1 copies each message
 * out into one destination buffer, both with "rep movsb" (what the tcp backend's native copy uses) and
 * spinning with sched_yield. Prints messages per second and the consumer's time per message (mean and
 * percentiles). Run it a few times in a row: on a shared VM whole runs come out several times slower than
 * the others (docs/PERFORMANCE.md, "Pipeline"), which says the host, not the code, set that pace.
 *
 * Build and run (x86-64, 2 CPUs or more):
 *   cc -O2 -pthread -o /tmp/ring-handoff scripts/bench/ring-handoff.c && /tmp/ring-handoff [BYTES] [MESSAGES]
 * (defaults 4194304 and 3000).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RING (1 << 20)
#define CHUNK (256 << 10)

static size_t bytes = 4194304;
static int messages = 3000;
static char *ring;
static _Atomic long head;
static _Atomic long tail;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void copy(void *d, const void *s, size_t n) {
    __asm__ __volatile__("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static void *produce(void *unused) {
    (void) unused;
    pin(0);
    char *src = malloc(bytes);
    memset(src, 3, bytes);
    long h = 0;
    for (int i = 0; i < messages; i++) {
        size_t sent = 0;
        while (sent < bytes) {
            while (RING - (h - atomic_load_explicit(&tail, memory_order_acquire)) < CHUNK) {
                sched_yield();
            }
            size_t n = bytes - sent < CHUNK ? bytes - sent : CHUNK;
            copy(ring + (h & (RING - 1)), src + sent, n);
            sent += n;
            h += n;
            atomic_store_explicit(&head, h, memory_order_release);
        }
    }
    free(src);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) bytes = strtoul(argv[1], NULL, 10);
    if (argc > 2) messages = atoi(argv[2]);
    if (bytes == 0 || messages <= 0) {
        fprintf(stderr, "usage: ring-handoff [BYTES] [MESSAGES]\n");
        return 2;
    }
    ring = aligned_alloc(4096, RING);
    memset(ring, 0, RING);
    char *dst = malloc(bytes);
    memset(dst, 0, bytes);
    double *took = malloc(sizeof(double) * messages);
    pthread_t producer;
    pthread_create(&producer, NULL, produce, NULL);
    pin(1);
    long t = 0;
    double start = now();
    for (int i = 0; i < messages; i++) {
        double s = now();
        size_t got = 0;
        while (got < bytes) {
            long h;
            while ((h = atomic_load_explicit(&head, memory_order_acquire)) == t) {
                sched_yield();
            }
            size_t n = (size_t) (h - t);
            size_t room = RING - (size_t) (t & (RING - 1));
            if (n > room) n = room;
            if (n > bytes - got) n = bytes - got; /* the producer may be into the next message already */
            copy(dst + got, ring + (t & (RING - 1)), n);
            got += n;
            t += (long) n;
            atomic_store_explicit(&tail, t, memory_order_release);
        }
        took[i] = (now() - s) * 1e6;
    }
    double elapsed = now() - start;
    pthread_join(producer, NULL);
    double sum = 0;
    for (int i = 0; i < messages; i++) sum += took[i];
    qsort(took, messages, sizeof(double), by_value);
    printf("%zu B x %d: %.0f msg/s, mean %.1f us, p50 %.1f, p90 %.1f, p99 %.1f, p99.9 %.1f, mean/p50 %.2f\n",
           bytes, messages, messages / elapsed, sum / messages, took[messages / 2], took[messages * 9 / 10],
           took[messages * 99 / 100], took[messages * 999 / 1000], sum / messages / took[messages / 2]);
    return 0;
}
