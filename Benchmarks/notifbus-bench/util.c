/*
 * util.c — process and system plumbing for notifbus-bench: clocks, CPU pinning,
 * the open-file limit, forking tracked children that die with the bench, killing
 * and reaping them on exit or error, temporary directories, shared memory,
 * AF_UNIX sockets with bounded waits, and the shared failure slots children
 * report through.
 */
#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pid_t g_main_pid;
static volatile pid_t g_children[MAX_CHILDREN];
static char g_tempdirs[MAX_CHILDREN][96];
static int g_ntempdirs;
slot_t *g_slots;

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void errf(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, ERRLEN, fmt, ap);
    va_end(ap);
}

void err_prefix(char *err, const char *fmt, ...)
{
    char prefix[ERRLEN], tmp[2 * ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t pl = strlen(prefix), el = strnlen(err, ERRLEN - 1);
    memcpy(tmp, prefix, pl);
    memcpy(tmp + pl, err, el);
    tmp[pl + el] = 0;
    str_copy(err, tmp, ERRLEN);
}

void str_copy(char *dst, const char *src, size_t cap)
{
    size_t n = strnlen(src, cap - 1);
    memmove(dst, src, n);
    dst[n] = 0;
}

void fatal(const char *fmt, ...)
{
    va_list ap;
    fputs("notifbus-bench: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1); /* the atexit handler kills the children */
}

/* ---- children ------------------------------------------------------------- */

void children_kill_all(void)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        pid_t p = g_children[i];
        if (p > 0)
            kill(p, SIGKILL);
    }
    for (int i = 0; i < MAX_CHILDREN; i++) {
        pid_t p = g_children[i];
        if (p > 0) {
            waitpid(p, NULL, 0);
            g_children[i] = 0;
        }
    }
}

void child_track(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (g_children[i] == 0) {
            g_children[i] = pid;
            return;
        }
    kill(pid, SIGKILL);
    fatal("too many child processes");
}

void child_untrack(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (g_children[i] == pid)
            g_children[i] = 0;
}

int child_reap(pid_t pid, int timeout_ms)
{
    int status = 0;
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD)) {
            child_untrack(pid);
            return r == pid ? status : 0;
        }
        if (now_ns() >= deadline)
            break;
        sleep_us(500);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    child_untrack(pid);
    return -1;
}

pid_t spawn(int (*fn)(void *), void *arg)
{
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        for (int i = 0; i < MAX_CHILDREN; i++)
            g_children[i] = 0;
        g_ntempdirs = 0;
        int rc = fn(arg);
        _exit(rc);
    }
    child_track(pid);
    return pid;
}

/* ---- temporary directories ------------------------------------------------- */

static void rmtree_flat(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

int tempdir_make(char *out, size_t outlen, char *err)
{
    char tmpl[] = "/tmp/nbb.XXXXXX";
    if (!mkdtemp(tmpl)) {
        errf(err, "mkdtemp: %s", strerror(errno));
        return -1;
    }
    snprintf(out, outlen, "%s", tmpl);
    if (g_ntempdirs < MAX_CHILDREN)
        snprintf(g_tempdirs[g_ntempdirs++], sizeof g_tempdirs[0], "%s", tmpl);
    return 0;
}

void tempdir_remove(const char *dir)
{
    rmtree_flat(dir);
    for (int i = 0; i < g_ntempdirs; i++)
        if (strcmp(g_tempdirs[i], dir) == 0)
            g_tempdirs[i][0] = 0;
}

/* ---- exit and signals --------------------------------------------------------- */

static void cleanup_at_exit(void)
{
    if (getpid() != g_main_pid)
        return;
    children_kill_all();
    for (int i = 0; i < g_ntempdirs; i++)
        if (g_tempdirs[i][0])
            rmtree_flat(g_tempdirs[i]);
}

static void on_signal(int sig)
{
    if (getpid() == g_main_pid) {
        for (int i = 0; i < MAX_CHILDREN; i++)
            if (g_children[i] > 0)
                kill(g_children[i], SIGKILL);
        static const char msg[] = "notifbus-bench: interrupted, children killed\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
    }
    _exit(128 + sig);
}

void process_init(void)
{
    g_main_pid = getpid();
    atexit(cleanup_at_exit);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    g_slots = shm_alloc(sizeof(slot_t) * MAX_CHILDREN);
    if (!g_slots)
        fatal("cannot map shared memory");
}

int pin_to_cpu(int cpu, char *err)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        int e = errno;
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        if (e == EINVAL)
            errf(err, "cannot pin to CPU %d: not available to this process (%ld CPUs online)", cpu,
                 online);
        else
            errf(err, "cannot pin to CPU %d: %s", cpu, strerror(e));
        return -1;
    }
    return 0;
}

void raise_nofile(long want, long *got)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur < want) {
        struct rlimit nrl = rl;
        nrl.rlim_cur = (rlim_t)want;
        if (nrl.rlim_max != RLIM_INFINITY && nrl.rlim_max < nrl.rlim_cur)
            nrl.rlim_max = nrl.rlim_cur; /* works for root */
        if (setrlimit(RLIMIT_NOFILE, &nrl) != 0 && rl.rlim_max != RLIM_INFINITY) {
            nrl.rlim_cur = rl.rlim_max;
            nrl.rlim_max = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &nrl);
        }
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    *got = rl.rlim_cur == RLIM_INFINITY ? want : (long)rl.rlim_cur;
}

/* ---- shared memory and failure slots ------------------------------------------ */

void *shm_alloc(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void shm_free(void *p, size_t size)
{
    if (p)
        munmap(p, size);
}

void slots_reset(void)
{
    memset(g_slots, 0, sizeof(slot_t) * MAX_CHILDREN);
}

void slot_fail(int slot, const char *fmt, ...)
{
    if (slot < 0 || slot >= MAX_CHILDREN)
        return;
    if (g_slots[slot].failed)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_slots[slot].msg, ERRLEN, fmt, ap);
    va_end(ap);
    __atomic_store_n(&g_slots[slot].failed, 1, __ATOMIC_RELEASE);
}

int slots_first_failure(char *err)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (__atomic_load_n(&g_slots[i].failed, __ATOMIC_ACQUIRE)) {
            errf(err, "%s", g_slots[i].msg);
            return 1;
        }
    return 0;
}

/* ---- sockets and pipes ------------------------------------------------------------- */

void set_io_timeouts(int fd, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int fill_addr(struct sockaddr_un *a, const char *path, char *err)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a->sun_path) {
        errf(err, "socket path too long: %s", path);
        return -1;
    }
    strcpy(a->sun_path, path);
    return 0;
}

int unix_connect(const char *path, int nonblock, char *err)
{
    struct sockaddr_un a;
    if (fill_addr(&a, path, err) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) {
        errf(err, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        errf(err, "connect %s: %s", path, strerror(errno));
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int unix_listen(const char *path, int backlog, char *err)
{
    struct sockaddr_un a;
    if (fill_addr(&a, path, err) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        errf(err, "socket: %s", strerror(errno));
        return -1;
    }
    unlink(path);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, backlog) != 0) {
        errf(err, "bind/listen %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int pipe_wait_byte(int fd, int timeout_ms, char *out)
{
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    for (;;) {
        uint64_t now = now_ns();
        if (now >= deadline)
            return 0;
        struct pollfd p = {fd, POLLIN, 0};
        int left = (int)((deadline - now + 999999) / 1000000);
        int r = poll(&p, 1, left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        ssize_t n = read(fd, out, 1);
        if (n == 1)
            return 1;
        if (n == 0)
            return -1; /* writer closed: the child is gone */
        if (errno != EINTR && errno != EAGAIN)
            return -1;
    }
}

int pipe_put_byte(int fd, char b)
{
    for (;;) {
        ssize_t n = write(fd, &b, 1);
        if (n == 1)
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        return -1;
    }
}
