// Which threads does automatic NUMA balancing put in one numa_group
// (issue #29)? N threads each write for S seconds, in one of four modes:
//   shared    all threads write one mmap'd buffer;
//   malloc    each its own malloc'd buffer (as a naive program does);
//   counters  malloc'd buffers, and each thread counts its batches in its
//             own slot of one global array (one page written by all);
//   mmap      each its own anonymous mapping, 2 MiB aligned,
//             MADV_NOHUGEPAGE, PROT_NONE guards between: nothing written
//             is shared.
// The loop writes only the thread's buffer (and, in `counters`, its slot)
// and its own stack; the deadline is on each thread's stack. At 80% of S
// the main thread prints every thread's /proc/self/task/TID/sched NUMA
// lines (numa_group_id 0: no group; a task's own tid: a group of one,
// made by a shared fault whose other side could not be joined).
//
//   numa_groups MODE [THREADS=4] [MIB=32] [SECONDS=25]
//
// bench/numa_groups.sh builds it statically and runs it in a 4-node lab
// guest on Debian's kernel and on the lab kernel.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

static int nthreads = 4;
static size_t size = 32UL << 20;
static double secs = 25;
static char *mode = "mmap";

struct arg { char *buf; size_t len; double deadline; pid_t *tid; volatile unsigned long *counter; };
// "counters": malloc buffers, and each thread counts its batches in its own
// slot of this global array: adjacent slots, one page, written by all.
static volatile unsigned long counters[64];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *worker(void *p) {
    struct arg a = *(struct arg *)p;   // copied to this thread's stack
    *a.tid = (pid_t)syscall(SYS_gettid);
    volatile char *b = a.buf;
    unsigned long x = 88172645463325252UL;
    for (size_t i = 0; i < a.len; i += 4096) b[i] = 1;   // first touch
    while (now() < a.deadline) {
        for (int k = 0; k < 100000; k++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            b[(x % a.len) & ~63UL] += 1;
        }
        if (a.counter) *a.counter += 1;
    }
    return NULL;
}

static void show(pid_t tid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/sched", tid);
    FILE *f = fopen(path, "r");
    if (!f) { printf("tid %d: no sched file\n", tid); return; }
    printf("tid %d (tid&0xff %d):", tid, tid & 0xff);
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "numa_group_id") || strstr(line, "numa_preferred_nid ") ||
            strstr(line, "numa_pages_migrated") || strstr(line, "total_numa_faults")) {
            line[strcspn(line, "\n")] = 0;
            char *s = line; while (*s == ' ') s++;
            printf(" | %s", s);
        }
    }
    printf("\n");
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc > 1) mode = argv[1];
    if (argc > 2) nthreads = atoi(argv[2]);
    if (argc > 3) size = strtoul(argv[3], 0, 10) << 20;
    if (argc > 4) secs = atof(argv[4]);
    pthread_t th[64];
    struct arg args[64];
    // The tids live in a page of their own that the workers write once, at
    // start (before any scan), and the main thread reads at the end.
    pid_t *tids = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *shared = NULL;
    if (!strcmp(mode, "shared"))
        shared = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    double deadline = now() + secs;
    for (int i = 0; i < nthreads; i++) {
        char *b;
        if (!strcmp(mode, "malloc") || !strcmp(mode, "counters")) {
            b = malloc(size);
        } else if (!strcmp(mode, "shared")) {
            b = shared;
        } else {
            // 2 MiB guard + buffer + 2 MiB guard, the buffer 2 MiB aligned.
            size_t span = size + (6UL << 20);
            char *r = mmap(0, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            char *a = (char *)(((unsigned long)r + (4UL << 20) - 1) & ~((2UL << 20) - 1));
            if (mprotect(a, size, PROT_READ | PROT_WRITE)) { perror("mprotect"); return 1; }
            madvise(a, size, MADV_NOHUGEPAGE);
            b = a;
        }
        args[i] = (struct arg){ b, size, deadline, &tids[i],
                                !strcmp(mode, "counters") ? &counters[i] : NULL };
        pthread_create(&th[i], 0, worker, &args[i]);
    }
    struct timespec t = { (time_t)(secs * 0.8), 0 };
    nanosleep(&t, 0);
    printf("mode %s, %d threads x %zu MiB, %.0f s; main tid %d\n", mode, nthreads, size >> 20, secs, getpid());
    show(getpid());
    for (int i = 0; i < nthreads; i++) show(tids[i]);
    fflush(stdout);
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], 0);
    return 0;
}
