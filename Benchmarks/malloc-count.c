// Counts the heap allocations of a process, for `make bench-allocations` (Benchmarks/allocations.sh):
// run it with LD_PRELOAD=malloc-count.so; `kill -USR2 <pid>` appends "allocations <n>" to the
// file MALLOC_COUNT_FILE names. Only the allocating calls are counted (malloc, calloc, realloc
// and the aligned ones); each goes on to glibc.
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static atomic_ullong count;

void *malloc(size_t size) { atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); return __libc_malloc(size); }
void *calloc(size_t n, size_t size) { atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); return __libc_calloc(n, size); }
void *realloc(void *p, size_t size) { atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); return __libc_realloc(p, size); }
void *memalign(size_t alignment, size_t size) { atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); return __libc_memalign(alignment, size); }
void *aligned_alloc(size_t alignment, size_t size) { atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); return __libc_memalign(alignment, size); }
int posix_memalign(void **out, size_t alignment, size_t size) {
    atomic_fetch_add_explicit(&count, 1, memory_order_relaxed);
    void *p = __libc_memalign(alignment, size);
    if (p == NULL) return 12; /* ENOMEM */
    *out = p;
    return 0;
}

static void report(int signal) {
    (void)signal;
    const char *path = getenv("MALLOC_COUNT_FILE");
    if (path == NULL) return;
    char line[64] = "allocations ";
    char digits[24];
    unsigned long long n = atomic_load(&count);
    int length = 0;
    do { digits[length++] = (char)('0' + n % 10); n /= 10; } while (n > 0);
    size_t at = strlen(line);
    while (length > 0) line[at++] = digits[--length];
    line[at++] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    ssize_t ignored = write(fd, line, at);
    (void)ignored;
    close(fd);
}

__attribute__((constructor)) static void install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = report;
    action.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &action, NULL);
}
