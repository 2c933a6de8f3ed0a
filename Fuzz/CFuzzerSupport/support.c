// libFuzzer's driver and the sanitizer allocator hooks, reached through weak references so
// that an ordinary build (no -sanitize flags) links without them and replays corpora instead.
// Nothing here is thread-safe: the fuzz programs run inputs on one thread.
#include "CFuzzerSupport.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// Defined by libFuzzer (compiler-rt/lib/fuzzer/FuzzerDriver.cpp).
extern int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size))
    __attribute__((weak));

// Defined by the sanitizer runtimes (compiler-rt/include/sanitizer/allocator_interface.h).
extern int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                                     void (*free_hook)(const volatile void *)) __attribute__((weak));
extern size_t __sanitizer_get_allocated_size(const volatile void *p) __attribute__((weak));

int notifbus_fuzzer_linked(void) { return LLVMFuzzerRunDriver != NULL; }

int notifbus_fuzzer_run(int *argc, char ***argv, notifbus_fuzz_target target) {
    if (LLVMFuzzerRunDriver == NULL) {
        fprintf(stderr, "libFuzzer is not linked in: build with -sanitize=fuzzer\n");
        return 2;
    }
    return LLVMFuzzerRunDriver(argc, argv, target);
}

// Reads a whole file into a fresh buffer; a zero-byte file gives a 1-byte buffer and size 0.
static int read_file(const char *path, uint8_t **data, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return -1;
    size_t capacity = 4096, used = 0;
    uint8_t *buffer = malloc(capacity);
    while (buffer != NULL) {
        size_t n = fread(buffer + used, 1, capacity - used, f);
        used += n;
        if (used < capacity) break;
        capacity *= 2;
        uint8_t *grown = realloc(buffer, capacity);
        if (grown == NULL) free(buffer);
        buffer = grown;
    }
    int failed = buffer == NULL || ferror(f);
    fclose(f);
    if (failed) {
        free(buffer);
        return -1;
    }
    *data = buffer;
    *size = used;
    return 0;
}

static int run_file(const char *path, notifbus_fuzz_target target) {
    uint8_t *data = NULL;
    size_t size = 0;
    if (read_file(path, &data, &size) != 0) {
        fprintf(stderr, "cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    target(data, size);
    free(data);
    return 0;
}

static int skip_hidden(const struct dirent *entry) { return entry->d_name[0] != '.'; }

long notifbus_replay_paths(int count, char *const *paths, notifbus_fuzz_target target) {
    long ran = 0;
    for (int i = 0; i < count; i++) {
        struct stat st;
        if (stat(paths[i], &st) != 0) {
            fprintf(stderr, "cannot read %s: %s\n", paths[i], strerror(errno));
            return -1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(paths[i], target) != 0) return -1;
            ran++;
            continue;
        }
        struct dirent **entries = NULL;
        int n = scandir(paths[i], &entries, skip_hidden, alphasort);
        if (n < 0) {
            fprintf(stderr, "cannot list %s: %s\n", paths[i], strerror(errno));
            return -1;
        }
        int failed = 0;
        for (int k = 0; k < n; k++) {
            if (!failed) {
                char path[4096];
                snprintf(path, sizeof path, "%s/%s", paths[i], entries[k]->d_name);
                if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                    if (run_file(path, target) != 0) failed = 1; else ran++;
                }
            }
            free(entries[k]);
        }
        free(entries);
        if (failed) return -1;
    }
    return ran;
}

// Allocation measurement. The hooks run inside the allocator, so they only do arithmetic.
static long long live_bytes;
static long long peak_bytes;
static int hooks_installed;

static void on_malloc(const volatile void *p, size_t size) {
    (void)p;
    live_bytes += (long long)size;
    if (live_bytes > peak_bytes) peak_bytes = live_bytes;
}

static void on_free(const volatile void *p) {
    if (p != NULL) live_bytes -= (long long)__sanitizer_get_allocated_size(p);
}

int notifbus_alloc_tracking_available(void) {
    if (hooks_installed) return 1;
    if (__sanitizer_install_malloc_and_free_hooks == NULL || __sanitizer_get_allocated_size == NULL) return 0;
    hooks_installed = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) != 0;
    return hooks_installed;
}

void notifbus_alloc_tracking_reset(void) {
    live_bytes = 0;
    peak_bytes = 0;
}

size_t notifbus_alloc_peak_bytes(void) { return peak_bytes > 0 ? (size_t)peak_bytes : 0; }
