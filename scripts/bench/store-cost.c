/*
 * What writing a block into memory that the other core just read costs, by the kind of store: the floor
 * under every copy into shared memory (see CoherenceCost.java for Java's own copy, and docs/PERFORMANCE.md,
 * "Stores into shared memory"). A writer thread copies BYTES into a shared buffer, a reader thread then
 * copies it out, in turns; prints the median time of each side per kind of store.
 *
 * Build and run (x86-64 with AVX2):
 *   cc -O2 -mavx2 -pthread -o /tmp/store-cost scripts/bench/store-cost.c && /tmp/store-cost [BYTES] [ROUNDS]
 * (defaults 65536 and 50000).
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t bytes = 65536;
static int rounds = 50000;
static volatile long turn;
static char *shared, *src, *dst;
static long *wt, *rt;
static int kind;

static long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void rep_movsb(void *d, const void *s, size_t n) {
    __asm__ __volatile__("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

static void stores8(void *d, const void *s, size_t n) {
    volatile long *dd = d;
    const long *ss = s;
    for (size_t i = 0; i < n / 8; i++) dd[i] = ss[i];
}

static void stores32(void *d, const void *s, size_t n) {
    for (size_t i = 0; i < n; i += 32)
        _mm256_store_si256((__m256i *) ((char *) d + i), _mm256_load_si256((const __m256i *) ((const char *) s + i)));
}

static void stream32(void *d, const void *s, size_t n) {
    for (size_t i = 0; i < n; i += 32)
        _mm256_stream_si256((__m256i *) ((char *) d + i), _mm256_load_si256((const __m256i *) ((const char *) s + i)));
    _mm_sfence();
}

static const char *names[] = {"8-byte stores", "32-byte stores", "memcpy (glibc)", "rep movsb",
                              "non-temporal 32-byte stores"};

static void copy(void *d, const void *s, size_t n) {
    switch (kind) {
        case 0: stores8(d, s, n); break;
        case 1: stores32(d, s, n); break;
        case 2: memcpy(d, s, n); break;
        case 3: rep_movsb(d, s, n); break;
        default: stream32(d, s, n); break;
    }
}

static void *writer(void *arg) {
    (void) arg;
    for (int k = 0; k < rounds; k++) {
        while (turn != 2L * k) _mm_pause();
        long t0 = now();
        copy(shared, src, bytes);
        wt[k] = now() - t0;
        __atomic_store_n(&turn, 2L * k + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    long x = *(const long *) a, y = *(const long *) b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc > 1) bytes = (size_t) atol(argv[1]) & ~(size_t) 63;
    if (argc > 2) rounds = atoi(argv[2]);
    if (bytes == 0 || rounds <= 0) {
        fprintf(stderr, "usage: %s [BYTES >= 64] [ROUNDS > 0]\n", argv[0]);
        return 2;
    }
    shared = aligned_alloc(64, bytes);
    src = aligned_alloc(64, bytes);
    dst = aligned_alloc(64, bytes);
    wt = calloc(rounds, sizeof(long));
    rt = calloc(rounds, sizeof(long));
    if (!shared || !src || !dst || !wt || !rt) return 1;
    memset(shared, 1, bytes);
    memset(src, 2, bytes);
    memset(dst, 3, bytes);
    printf("%zu B, %d rounds: median us, writer's copy in / reader's copy out\n", bytes, rounds);
    for (kind = 0; kind < 5; kind++) {
        pthread_t t;
        turn = 0;
        pthread_create(&t, NULL, writer, NULL);
        for (int k = 0; k < rounds; k++) {
            while (turn != 2L * k + 1) _mm_pause();
            long t0 = now();
            memcpy(dst, shared, bytes);
            rt[k] = now() - t0;
            __atomic_store_n(&turn, 2L * k + 2, __ATOMIC_RELEASE);
        }
        pthread_join(t, NULL);
        qsort(wt, rounds, sizeof(long), cmp);
        qsort(rt, rounds, sizeof(long), cmp);
        printf("  %-28s %8.2f / %8.2f\n", names[kind], wt[rounds / 2] / 1e3, rt[rounds / 2] / 1e3);
    }
    return 0;
}
