/*
 * broker.c — the notifbus broker's lifecycle under the bench: exec it in a fresh
 * temporary directory, pinned like every other process (the affinity and the
 * raised open-file limit are inherited), time exec → first successful connect,
 * detect an early exit, read its RSS from /proc, and stop it with SIGTERM
 * (SIGKILL after a bound), checking the shutdown the protocol promises.
 */
#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define START_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS 3000

static volatile uint64_t *g_exec_stamp; /* written by the child right before execv */

static void describe_status(int status, char *out, size_t outlen)
{
    if (WIFEXITED(status))
        snprintf(out, outlen, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, outlen, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(out, outlen, "ended (status 0x%x)", status);
}

void broker_log_tail(const broker_t *b, char *out, size_t outlen)
{
    out[0] = 0;
    int fd = open(b->log, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[400];
    off_t size = lseek(fd, 0, SEEK_END);
    off_t from = size > (off_t)sizeof buf - 1 ? size - (off_t)sizeof buf + 1 : 0;
    ssize_t n = pread(fd, buf, sizeof buf - 1, from);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = 0;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = 0;
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\n')
            buf[i] = '|';
    snprintf(out, outlen, "%s", buf);
}

int broker_alive(broker_t *b, char *err)
{
    int status;
    if (b->pid <= 0) {
        errf(err, "broker not running");
        return 0;
    }
    if (waitpid(b->pid, &status, WNOHANG) == b->pid) {
        char how[64], tail[200];
        describe_status(status, how, sizeof how);
        broker_log_tail(b, tail, sizeof tail);
        errf(err, "broker %s; its output: %s", how, tail[0] ? tail : "(none)");
        child_untrack(b->pid);
        b->pid = -1;
        return 0;
    }
    return 1;
}

int broker_died(broker_t *b, int wait_ms, char *err)
{
    uint64_t deadline = now_ns() + (uint64_t)wait_ms * 1000000ULL;
    for (;;) {
        if (!broker_alive(b, err))
            return 1;
        if (now_ns() >= deadline)
            return 0;
        sleep_us(2000);
    }
}

int broker_start(broker_t *b, const char *const *extra, char *err)
{
    memset(b, 0, sizeof *b);
    b->pid = -1;
    if (!g_exec_stamp) {
        g_exec_stamp = shm_alloc(4096);
        if (!g_exec_stamp)
            fatal("cannot map shared memory");
    }
    if (tempdir_make(b->dir, sizeof b->dir, err) < 0)
        return -1;
    snprintf(b->sock, sizeof b->sock, "%s/s", b->dir);
    snprintf(b->log, sizeof b->log, "%s/broker.log", b->dir);

    const char *argv[40];
    int argc = 0;
    argv[argc++] = g_cfg.broker;
    argv[argc++] = "broker";
    argv[argc++] = "--socket";
    argv[argc++] = b->sock;
    for (int i = 0; extra && extra[i] && argc < 38; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;

    *g_exec_stamp = 0;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        errf(err, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        int logfd = open(b->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int nullfd = open("/dev/null", O_RDONLY);
        if (logfd >= 0) {
            dup2(logfd, 1);
            dup2(logfd, 2);
        }
        if (nullfd >= 0)
            dup2(nullfd, 0);
        close_range(3, ~0U, 0); /* the broker gets no descriptor of the bench */
        *g_exec_stamp = now_ns();
        execv(g_cfg.broker, (char *const *)argv);
        dprintf(2, "exec %s: %s\n", g_cfg.broker, strerror(errno));
        _exit(127);
    }
    child_track(pid);
    b->pid = pid;

    uint64_t deadline = now_ns() + (uint64_t)START_TIMEOUT_MS * 1000000ULL;
    char cerr[ERRLEN];
    for (;;) {
        int fd = unix_connect(b->sock, 1, cerr);
        if (fd >= 0) {
            uint64_t t = now_ns();
            close(fd);
            uint64_t stamp = *g_exec_stamp;
            b->startup_ms = stamp && t > stamp ? (double)(t - stamp) / 1e6 : 0;
            if (g_life.count < 32)
                g_life.ms[g_life.count++] = b->startup_ms;
            return 0;
        }
        if (!broker_alive(b, err))
            return -1;
        if (now_ns() > deadline) {
            char tail[200];
            broker_log_tail(b, tail, sizeof tail);
            errf(err, "broker did not accept on %s within %d ms (last: %s); its output: %s",
                 b->sock, START_TIMEOUT_MS, cerr, tail[0] ? tail : "(none)");
            broker_stop(b);
            return -1;
        }
        sleep_us(100);
    }
}

void broker_stop(broker_t *b)
{
    if (b->pid > 0) {
        uint64_t t0 = now_ns();
        kill(b->pid, SIGTERM);
        int status = 0, exited = 0;
        uint64_t deadline = t0 + (uint64_t)STOP_TIMEOUT_MS * 1000000ULL;
        while (now_ns() < deadline) {
            pid_t r = waitpid(b->pid, &status, WNOHANG);
            if (r == b->pid) {
                exited = 1;
                break;
            }
            sleep_us(200);
        }
        double ms = (double)(now_ns() - t0) / 1e6;
        if (!exited) {
            kill(b->pid, SIGKILL);
            waitpid(b->pid, &status, 0);
            note("broker pid %d did not exit within %d ms of SIGTERM (killed)", (int)b->pid,
                 STOP_TIMEOUT_MS);
        } else {
            if (g_life.stop_count < 32)
                g_life.stop_ms[g_life.stop_count++] = ms;
            if (ms > 2000)
                note("broker took %.0f ms to exit after SIGTERM (the protocol allows 2 s)", ms);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                char how[64];
                describe_status(status, how, sizeof how);
                note("broker %s after SIGTERM (expected exit 0)", how);
            }
            struct stat st;
            if (stat(b->sock, &st) == 0)
                note("broker left its socket file behind after SIGTERM");
        }
        child_untrack(b->pid);
        b->pid = -1;
    }
    if (b->dir[0])
        tempdir_remove(b->dir);
    b->dir[0] = 0;
}

/* Reads one field of a /proc status file into out (without leading blanks). */
static int proc_field(const char *path, const char *field, char *out, size_t outlen)
{
    char line[512];
    size_t fl = strlen(field);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int found = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, fl) == 0) {
            char *v = line + fl;
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = 0;
            snprintf(out, outlen, "%s", v);
            found = 0;
            break;
        }
    fclose(f);
    return found;
}

int broker_threads(const broker_t *b)
{
    char path[64], v[32];
    snprintf(path, sizeof path, "/proc/%d/status", (int)b->pid);
    if (proc_field(path, "Threads:", v, sizeof v) < 0)
        return -1;
    return atoi(v);
}

void broker_check_affinity(const broker_t *b)
{
    char dir[64], path[384], want[16], got[64];
    snprintf(want, sizeof want, "%d", g_cfg.cpu);
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)b->pid);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s/status", dir, e->d_name);
        if (proc_field(path, "Cpus_allowed_list:", got, sizeof got) == 0 && strcmp(got, want) != 0)
            note("a broker thread runs on CPUs %s, not pinned to CPU %s: its figures are not "
                 "comparable with the floors",
                 got, want);
    }
    closedir(d);
}

/* CPU ticks (user + system) a thread used so far, and its name. */
static long thread_ticks(const char *statpath, char *comm, size_t commlen)
{
    char buf[1024];
    FILE *f = fopen(statpath, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    if (!open || !close || close < open)
        return -1;
    snprintf(comm, commlen, "%.*s", (int)(close - open - 1), open + 1);
    /* after ") " come: state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt
     * cmajflt utime(14) stime(15) */
    char *p = close + 2;
    long v[13] = {0};
    for (int i = 0; i < 13 && *p; i++) {
        v[i] = strtol(p, &p, 10);
        if (i == 0) { /* the state is a letter */
            while (*p == ' ')
                p++;
            p++;
        }
        while (*p == ' ')
            p++;
    }
    return v[11] + v[12];
}

void broker_thread_report(const broker_t *b, const char *row)
{
    char dir[64], path[384], comm[64], top_comm[2][64] = {"", ""};
    long top[2] = {0, 0}, total = 0;
    int top_is_main = 0;
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)b->pid);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
        long t = thread_ticks(path, comm, sizeof comm);
        if (t < 0)
            continue;
        total += t;
        if (t > top[0]) {
            top[1] = top[0];
            memcpy(top_comm[1], top_comm[0], sizeof top_comm[0]);
            top[0] = t;
            snprintf(top_comm[0], sizeof top_comm[0], "%s", comm);
            top_is_main = atoi(e->d_name) == (int)b->pid;
        } else if (t > top[1]) {
            top[1] = t;
            snprintf(top_comm[1], sizeof top_comm[1], "%s", comm);
        }
    }
    closedir(d);
    if (total >= 5 && top[1] * 10 > total)
        note("%s: the broker's CPU time is spread over threads (%s %ld%%, %s %ld%%): work hops "
             "between threads",
             row, top_comm[0], top[0] * 100 / total, top_comm[1], top[1] * 100 / total);
    else if (total >= 5 && !top_is_main)
        note("the broker's work runs on a thread named '%s', not on its main thread", top_comm[0]);
}

long broker_rss_bytes(const broker_t *b)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)b->pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kb = strtol(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}
