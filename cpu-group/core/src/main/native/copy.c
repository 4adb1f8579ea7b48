/*
 * libjcommcopy.so: the copy of the tcp backend's shared-memory paths (io.jcomm.cpu.internal.NativeCopy).
 *
 * Java's own copies (ByteBuffer.put, Unsafe.copyMemory) store 8 to 64 bytes at a time. A store to a cache
 * line that another core holds must first take the line from it, and on the machines measured (a
 * 2-vCPU AMD EPYC guest) such stores run at ~6 GB/s: 9-11 us for 64 KiB whose lines the peer rank read
 * last time. "rep movsb" (fast strings: whole lines without reading them first) writes the same
 * 64 KiB in ~1.7 us. docs/PERFORMANCE.md has the measurements.
 *
 * The Java side checks every bound before it calls: both buffers are direct, and the ranges lie
 * within them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <jni.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#include "io_jcomm_cpu_internal_NativeCopy.h"

/* The same source compiles as C and as C++ (build.sh falls back to g++). */
#ifdef __cplusplus
#define ADDRESS(env, buf) ((env)->GetDirectBufferAddress(buf))
#else
#define ADDRESS(env, buf) ((*(env))->GetDirectBufferAddress((env), (buf)))
#endif

static inline void copy_bytes(char *d, const char *s, size_t n) {
#if defined(__x86_64__)
    __asm__ __volatile__("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
#else
    __builtin_memcpy(d, s, n);
#endif
}

/*
 * A copy whose stores bypass the caches (SSE2 non-temporal stores, in every x86-64 CPU): for a destination
 * of megabytes that no core reads soon, it writes each line without first reading it from memory, which
 * "rep movsb" does on the machines measured. Two cores each copying 16 MiB at once: 1.3-1.4 ms this way
 * against 1.9-2.5 ms with "rep movsb" (docs/PERFORMANCE.md, "All-to-all"). The head up to the first
 * 16-byte boundary of the destination and the tail go by "rep movsb".
 */
static void stream_bytes(char *d, const char *s, size_t n) {
#if defined(__x86_64__)
    size_t head = (16 - ((uintptr_t) d & 15)) & 15;
    if (head > n) {
        head = n;
    }
    copy_bytes(d, s, head);
    d += head;
    s += head;
    n -= head;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *) (s + i));
        __m128i b = _mm_loadu_si128((const __m128i *) (s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *) (s + i + 32));
        __m128i e = _mm_loadu_si128((const __m128i *) (s + i + 48));
        _mm_stream_si128((__m128i *) (d + i), a);
        _mm_stream_si128((__m128i *) (d + i + 16), b);
        _mm_stream_si128((__m128i *) (d + i + 32), c);
        _mm_stream_si128((__m128i *) (d + i + 48), e);
    }
    _mm_sfence();
    copy_bytes(d + i, s + i, n - i);
#else
    __builtin_memcpy(d, s, n);
#endif
}

JNIEXPORT jint JNICALL Java_io_jcomm_cpu_internal_NativeCopy_probe0(JNIEnv *env, jclass cls) {
    (void) env;
    (void) cls;
    return 1;
}

/* Copies n bytes with the string copy, or past the caches (stream_bytes) when `stream` is set. */
JNIEXPORT jboolean JNICALL Java_io_jcomm_cpu_internal_NativeCopy_copy0(JNIEnv *env, jclass cls, jobject dst,
                                                                        jlong dstOff, jobject src, jlong srcOff,
                                                                        jlong n, jboolean stream) {
    (void) cls;
    char *d = (char *) ADDRESS(env, dst);
    const char *s = (const char *) ADDRESS(env, src);
    if (d == NULL || s == NULL || dstOff < 0 || srcOff < 0 || n < 0) {
        return JNI_FALSE;
    }
    if (stream) {
        stream_bytes(d + dstOff, s + srcOff, (size_t) n);
    } else {
        copy_bytes(d + dstOff, s + srcOff, (size_t) n);
    }
    return JNI_TRUE;
}

/*
 * Reads n bytes at `remote` in process `pid` into dst at dstOff with one kernel copy (cross-memory attach,
 * process_vm_readv): how the tcp backend's large all-to-all on one host moves a peer's part straight from
 * the peer's input into this rank's output, instead of through a ring (a copy in and a copy out). Returns
 * the bytes read (n), or -errno (EPERM where ptrace is restricted, ENOSYS where the kernel or a seccomp
 * filter lacks the call): the caller then takes the rings.
 */
JNIEXPORT jlong JNICALL Java_io_jcomm_cpu_internal_NativeCopy_readPeer0(JNIEnv *env, jclass cls, jint pid, jlong remote,
                                                                         jobject dst, jlong dstOff, jlong n) {
    (void) cls;
    char *d = (char *) ADDRESS(env, dst);
    if (d == NULL || dstOff < 0 || n < 0 || remote == 0) {
        return -EINVAL;
    }
    size_t done = 0;
    while (done < (size_t) n) {
        struct iovec local = { d + dstOff + done, (size_t) n - done };
        struct iovec far = { (void *) (uintptr_t) (remote + (jlong) done), (size_t) n - done };
        ssize_t k = process_vm_readv((pid_t) pid, &local, 1, &far, 1, 0);
        if (k < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        if (k == 0) {
            return -EFAULT;
        }
        done += (size_t) k;
    }
    return (jlong) done;
}
