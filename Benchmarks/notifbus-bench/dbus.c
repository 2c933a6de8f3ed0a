/*
 * dbus.c — the D-Bus peers of notifbus-bench: a private bus (dbus-daemon, or dbus-broker
 * through dbus-broker-launch) started in a temporary folder with its own configuration and
 * no service directories, an sd-bus service answering Ping(s)->s, and sd-bus clients
 * measured by the same drivers as the broker rows (1 and 8 clients). It never touches the
 * session or system bus, and is the only file of the bench that uses sd-bus.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#define BUS_START_TIMEOUT_MS 10000
#define SERVICE_NAME "org.notifbus.Bench"
#define SERVICE_PATH "/org/notifbus/Bench"
#define SERVICE_IFACE "org.notifbus.Bench"
/* The string each call carries, the size of the broker rows' invoke arguments. */
#define PAYLOAD_BYTES 150

typedef struct {
    const char *kind;  /* "dbus-daemon" or "dbus-broker" */
    const char *exe;   /* the daemon, or dbus-broker-launch */
    pid_t pid;         /* the daemon, or the process that keeps dbus-broker's namespace */
    pid_t service;
    char dir[96];
    char sock[128];
    char conf[128];
    char log[128];
    char address[160];
} dbus_peer_t;

static char g_payload[PAYLOAD_BYTES + 1];
static sd_bus *g_bus; /* this process's client connection */

/* ---- finding and configuring the daemons ------------------------------------------------ */

static const char *find_exe(const char *name)
{
    static char found[4][256];
    static int next;
    const char *path = getenv("PATH");
    char dirs[1024];
    snprintf(dirs, sizeof dirs, "%s", path ? path : "/usr/bin:/bin");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char *out = found[next % 4];
        snprintf(out, sizeof found[0], "%s/%s", d, name);
        if (*d && access(out, X_OK) == 0) {
            next++;
            return out;
        }
    }
    return NULL;
}

/* A session-type bus on one socket, everything allowed, no service directories (so nothing
 * is ever activated). */
static int write_config(dbus_peer_t *p, char *err)
{
    FILE *f = fopen(p->conf, "w");
    if (!f) {
        errf(err, "cannot write %s: %s", p->conf, strerror(errno));
        return -1;
    }
    fprintf(f,
            "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN\"\n"
            " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
            "<busconfig>\n"
            "  <type>session</type>\n"
            "  <listen>unix:path=%s</listen>\n"
            "  <auth>EXTERNAL</auth>\n"
            "  <policy context=\"default\">\n"
            "    <allow send_destination=\"*\"/>\n"
            "    <allow receive_sender=\"*\"/>\n"
            "    <allow own=\"*\"/>\n"
            "  </policy>\n"
            "</busconfig>\n",
            p->sock);
    return fclose(f) == 0 ? 0 : -1;
}

static void redirect_output(const char *log)
{
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0)
        dup2(null, 0);
}

/* ---- dbus-daemon -------------------------------------------------------------------------- */

/* Whether a connect to the socket at path succeeds now. */
static int can_connect(const char *path)
{
    char err[256];
    int fd = unix_connect(path, 0, err);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

static int daemon_main(void *arg)
{
    dbus_peer_t *p = arg;
    redirect_output(p->log);
    char conf[160];
    snprintf(conf, sizeof conf, "--config-file=%s", p->conf);
    execl(p->exe, p->exe, conf, "--nofork", "--nopidfile", "--nosyslog", (char *)NULL);
    fprintf(stderr, "exec %s: %s\n", p->exe, strerror(errno));
    return 127;
}

/* ---- dbus-broker ---------------------------------------------------------------------------- */

/*
 * dbus-broker-launch takes its listening socket as LISTEN_FDS and logs to the journal socket
 * at a fixed path. Without systemd, this process gives it both: a private mount namespace with
 * a tmpfs over /run/systemd holding a journal socket that it drains into the log, and the
 * listening socket at fd 3. The launcher connects to the bus it serves as its "user" bus, so
 * DBUS_SESSION_BUS_ADDRESS points at it.
 */
static int g_listen_fd = -1;
static volatile sig_atomic_t g_stop;

static void on_term(int sig)
{
    (void)sig;
    g_stop = 1;
}

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Enters a mount namespace of its own (through a user namespace when not root). */
static int private_mounts(char *err)
{
    uid_t uid = geteuid();
    gid_t gid = getegid();
    if (uid == 0) {
        if (unshare(CLONE_NEWNS) != 0) {
            errf(err, "unshare(CLONE_NEWNS): %s", strerror(errno));
            return -1;
        }
    } else {
        char map[64];
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
            errf(err, "unshare(CLONE_NEWUSER|CLONE_NEWNS): %s", strerror(errno));
            return -1;
        }
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
        if (write_file("/proc/self/uid_map", map) != 0) {
            errf(err, "uid_map: %s", strerror(errno));
            return -1;
        }
        write_file("/proc/self/setgroups", "deny\n");
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
        if (write_file("/proc/self/gid_map", map) != 0) {
            errf(err, "gid_map: %s", strerror(errno));
            return -1;
        }
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        errf(err, "making / private: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    const char *over = stat("/run/systemd", &st) == 0 ? "/run/systemd" : "/run";
    if (mount("tmpfs", over, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) {
        errf(err, "tmpfs over %s: %s", over, strerror(errno));
        return -1;
    }
    mkdir("/run/systemd", 0755);
    if (mkdir("/run/systemd/journal", 0755) != 0) {
        errf(err, "mkdir /run/systemd/journal: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static int broker_keeper_main(void *arg)
{
    dbus_peer_t *p = arg;
    redirect_output(p->log);
    char err[ERRLEN];
    if (private_mounts(err) < 0) {
        fprintf(stderr, "cannot start dbus-broker without systemd here: %s\n", err);
        return 3;
    }
    int j = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "/run/systemd/journal/socket");
    if (j < 0 || bind(j, (struct sockaddr *)&a, sizeof a) != 0) {
        fprintf(stderr, "journal socket: %s\n", strerror(errno));
        return 1;
    }
    signal(SIGTERM, on_term);
    pid_t launcher = fork();
    if (launcher < 0) {
        fprintf(stderr, "fork: %s\n", strerror(errno));
        return 1;
    }
    if (launcher == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGTERM, SIG_DFL);
        /* fd 3 without close-on-exec, whether or not it already is fd 3 */
        if (g_listen_fd == 3 ? fcntl(3, F_SETFD, 0) != 0 : dup2(g_listen_fd, 3) != 3)
            _exit(126);
        char pid[24];
        snprintf(pid, sizeof pid, "%d", (int)getpid());
        setenv("LISTEN_FDS", "1", 1);
        setenv("LISTEN_PID", pid, 1);
        unsetenv("LISTEN_FDNAMES");
        setenv("DBUS_SESSION_BUS_ADDRESS", p->address, 1);
        execl(p->exe, p->exe, "--scope", "user", "--config-file", p->conf, (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", p->exe, strerror(errno));
        _exit(127);
    }
    close(g_listen_fd);
    /* Drain the journal into the log until told to stop or the launcher ends. */
    char buf[8192];
    int status = 0;
    for (;;) {
        if (g_stop) {
            kill(launcher, SIGTERM);
            for (int i = 0; i < 300 && waitpid(launcher, &status, WNOHANG) == 0; i++)
                usleep(10000);
            kill(launcher, SIGKILL);
            waitpid(launcher, &status, 0);
            return 0;
        }
        if (waitpid(launcher, &status, WNOHANG) == launcher) {
            fprintf(stderr, "dbus-broker-launch ended (status 0x%x)\n", status);
            return 1;
        }
        struct pollfd pf = {j, POLLIN, 0};
        if (poll(&pf, 1, 100) > 0) {
            ssize_t n = recv(j, buf, sizeof buf - 1, 0);
            if (n > 0) {
                buf[n] = 0;
                char *m = strstr(buf, "MESSAGE=");
                if (m) {
                    m += 8;
                    fprintf(stderr, "journal: %.*s\n", (int)strcspn(m, "\n"), m);
                }
            }
        }
    }
}

/* ---- the service: Ping(s) -> s ---------------------------------------------------------------- */

static int method_ping(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
    (void)userdata;
    (void)error;
    const char *s;
    int r = sd_bus_message_read(m, "s", &s);
    if (r < 0)
        return r;
    return sd_bus_reply_method_return(m, "s", s);
}

static const sd_bus_vtable bench_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("Ping", "s", "s", method_ping, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END};

/* Connects to the private bus; method calls wait at most timeout_ms. */
static int bus_connect(const char *address, int timeout_ms, sd_bus **out, char *err)
{
    sd_bus *b = NULL;
    int r = sd_bus_new(&b);
    if (r >= 0)
        r = sd_bus_set_address(b, address);
    if (r >= 0)
        r = sd_bus_set_bus_client(b, 1);
    if (r >= 0)
        r = sd_bus_set_method_call_timeout(b, (uint64_t)timeout_ms * 1000ULL);
    if (r >= 0)
        r = sd_bus_start(b);
    if (r < 0) {
        errf(err, "connecting to %s: %s", address, strerror(-r));
        sd_bus_unref(b);
        return -1;
    }
    *out = b;
    return 0;
}

typedef struct {
    dbus_peer_t *peer;
    int ready_fd;
} service_args_t;

static int service_main(void *arg)
{
    service_args_t *a = arg;
    char err[ERRLEN];
    sd_bus *b;
    /* The first call also waits for the bus to be ready (the launcher starts the broker). */
    if (bus_connect(a->peer->address, BUS_START_TIMEOUT_MS, &b, err) < 0) {
        slot_fail(0, "service: %s", err);
        pipe_put_byte(a->ready_fd, 'E');
        return 1;
    }
    int r = sd_bus_add_object_vtable(b, NULL, SERVICE_PATH, SERVICE_IFACE, bench_vtable, NULL);
    if (r >= 0)
        r = sd_bus_request_name(b, SERVICE_NAME, 0);
    if (r < 0) {
        slot_fail(0, "service: registering %s: %s", SERVICE_NAME, strerror(-r));
        pipe_put_byte(a->ready_fd, 'E');
        return 1;
    }
    pipe_put_byte(a->ready_fd, 'R');
    for (;;) {
        r = sd_bus_process(b, NULL);
        if (r < 0) {
            slot_fail(0, "service: %s", strerror(-r));
            return 1;
        }
        if (r > 0)
            continue;
        r = sd_bus_wait(b, 1000000ULL);
        if (r < 0 && r != -EINTR) {
            slot_fail(0, "service: wait: %s", strerror(-r));
            return 1;
        }
    }
}

/* ---- clients -------------------------------------------------------------------------------- */

/* The drivers' round-trip loop, for sd-bus calls on this process's connection. */
static long dbus_rt_loop(conn_t *c, workload_t *w, uint64_t *next_id, uint32_t *samples, long n,
                         uint64_t budget_ns, char *err)
{
    (void)c;
    (void)w;
    uint64_t deadline = now_ns() + budget_ns;
    long i;
    for (i = 0; i < n; i++) {
        (*next_id)++;
        uint64_t t0 = now_ns();
        if (t0 >= deadline && i > 0)
            break;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        int r = sd_bus_call_method(g_bus, SERVICE_NAME, SERVICE_PATH, SERVICE_IFACE, "Ping",
                                   &error, &reply, "s", g_payload);
        uint64_t t1 = now_ns();
        if (r < 0) {
            errf(err, "Ping: %s", error.message ? error.message : strerror(-r));
            sd_bus_error_free(&error);
            return -1;
        }
        const char *back = NULL;
        r = sd_bus_message_read(reply, "s", &back);
        int same = r >= 0 && back && strcmp(back, g_payload) == 0;
        sd_bus_message_unref(reply);
        if (!same) {
            errf(err, "Ping: the reply is not the string sent");
            return -1;
        }
        uint64_t d = t1 - t0;
        if (samples)
            samples[i] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
    }
    return i;
}

static int dbus_client_setup(void *ctx, int index, conn_t *c, char *err)
{
    (void)index;
    dbus_peer_t *p = ctx;
    c->fd = -1;
    c->buf = NULL;
    return bus_connect(p->address, g_cfg.op_timeout_ms, &g_bus, err);
}

/* ---- a bus's lifecycle ------------------------------------------------------------------------ */

static void peer_stop(dbus_peer_t *p)
{
    if (p->service > 0) {
        kill(p->service, SIGTERM);
        child_reap(p->service, 2000);
        p->service = -1;
    }
    if (p->pid > 0) {
        kill(p->pid, SIGTERM);
        child_reap(p->pid, 4000);
        p->pid = -1;
    }
    if (g_listen_fd >= 0) {
        close(g_listen_fd);
        g_listen_fd = -1;
    }
    if (p->dir[0])
        tempdir_remove(p->dir);
}

static void log_tail(const char *log, char *out, size_t outlen)
{
    broker_t b;
    memset(&b, 0, sizeof b);
    snprintf(b.log, sizeof b.log, "%s", log);
    broker_log_tail(&b, out, outlen);
}

/* Starts the bus and the service. Returns 0, -1 on failure, -2 when it cannot run here. */
static int peer_start(dbus_peer_t *p, char *err)
{
    p->pid = p->service = -1;
    if (tempdir_make(p->dir, sizeof p->dir, err) < 0)
        return -1;
    snprintf(p->sock, sizeof p->sock, "%s/bus", p->dir);
    snprintf(p->conf, sizeof p->conf, "%s/bus.conf", p->dir);
    snprintf(p->log, sizeof p->log, "%s/%s.log", p->dir, p->kind);
    snprintf(p->address, sizeof p->address, "unix:path=%s", p->sock);
    if (write_config(p, err) < 0)
        return -1;
    int broker = strcmp(p->kind, "dbus-broker") == 0;
    if (broker) {
        g_listen_fd = unix_listen(p->sock, 512, err);
        if (g_listen_fd < 0)
            return -1;
        p->pid = spawn(broker_keeper_main, p);
        close(g_listen_fd); /* the keeper holds it now */
        g_listen_fd = -1;
    } else {
        p->pid = spawn(daemon_main, p);
    }
    if (p->pid < 0) {
        errf(err, "fork: %s", strerror(errno));
        return -1;
    }
    int ready[2];
    if (pipe(ready) != 0)
        fatal("pipe: %s", strerror(errno));
    /* dbus-daemon binds its socket, then listens: the file appears before a connect can
     * succeed, so it is ready once one does (a probe it closes unread). */
    uint64_t deadline = now_ns() + BUS_START_TIMEOUT_MS * 1000000ULL;
    while (!broker && !can_connect(p->sock) && now_ns() < deadline) {
        int status;
        if (waitpid(p->pid, &status, WNOHANG) == p->pid)
            break;
        sleep_us(2000);
    }
    slots_reset();
    service_args_t sa = {p, ready[1]};
    p->service = spawn(service_main, &sa);
    close(ready[1]);
    char b = 0;
    int r = p->service > 0 ? pipe_wait_byte(ready[0], BUS_START_TIMEOUT_MS + 1000, &b) : -1;
    close(ready[0]);
    if (r == 1 && b == 'R')
        return 0;
    int status, gone = waitpid(p->pid, &status, WNOHANG) == p->pid;
    if (gone) {
        child_untrack(p->pid);
        p->pid = -1;
    }
    char tail[200];
    log_tail(p->log, tail, sizeof tail);
    if (gone && WIFEXITED(status) && WEXITSTATUS(status) == 3) {
        errf(err, "%s", tail);
        return -2;
    }
    char why[ERRLEN];
    if (!slots_first_failure(why))
        snprintf(why, sizeof why, "the service did not become ready in %d ms",
                 BUS_START_TIMEOUT_MS);
    errf(err, "%.120s; %s output: %.100s", why, p->kind, tail[0] ? tail : "(none)");
    return -1;
}

static void peer_rows(const char *kind, const char *exe_name)
{
    char k1[40], k8[40], l1[64], l8[64];
    snprintf(k1, sizeof k1, "%s", strcmp(kind, "dbus-broker") == 0 ? "dbus_broker" : "dbus_daemon");
    snprintf(k8, sizeof k8, "%s_x8", k1);
    snprintf(l1, sizeof l1, "%s: Ping(s)->s via the bus", kind);
    snprintf(l8, sizeof l8, "%s: %d clients -> 1 service", kind, MAX_CLIENTS);
    int want1 = selected("dbus", k1), want8 = selected("dbus", k8);
    if (!want1 && !want8)
        return;
    row_t *r1 = want1 ? row_new("dbus", k1, l1, 1, 1, "relay_1") : NULL;
    row_t *r8 = want8 ? row_new("dbus", k8, l8, MAX_CLIENTS, 1, "relay_x8") : NULL;
    row_t *rows[2] = {r1, r8};
    dbus_peer_t p;
    memset(&p, 0, sizeof p);
    p.kind = kind;
    p.exe = find_exe(exe_name);
    if (!p.exe) {
        for (int i = 0; i < 2; i++)
            if (rows[i]) {
                rows[i]->skipped = 1;
                snprintf(rows[i]->err, ERRLEN, "not installed (no %s in PATH)", exe_name);
            }
        return;
    }
    char err[ERRLEN];
    int s = peer_start(&p, err);
    if (s < 0) {
        for (int i = 0; i < 2; i++)
            if (rows[i]) {
                if (s == -2) {
                    rows[i]->skipped = 1;
                    snprintf(rows[i]->err, ERRLEN, "%s", err);
                } else {
                    row_fail(rows[i], "%s", err);
                }
            }
        peer_stop(&p);
        return;
    }
    workload_t w;
    memset(&w, 0, sizeof w);
    w.rt = dbus_rt_loop;
    if (r1) {
        conn_t c = {.fd = -1};
        if (dbus_client_setup(&p, 0, &c, err) < 0) {
            row_fail(r1, "%s", err);
        } else {
            measure_single(&c, &w, r1);
            g_bus = sd_bus_flush_close_unref(g_bus);
        }
    }
    if (r8)
        measure_multi(MAX_CLIENTS, dbus_client_setup, &p, &w, r8);
    for (int i = 0; i < 2; i++)
        if (rows[i] && !rows[i]->ok && kill(p.service, 0) != 0)
            row_fail(rows[i], "the service process died");
    peer_stop(&p);
}

/* dbus-broker's Ping(s)->s as a side of the paired rows: its row's bus, service and client. */
static dbus_peer_t g_side_peer;

int dbus_broker_side_open(side_t *side, char *err)
{
    memset(side, 0, sizeof *side);
    side->c.fd = -1;
    for (int i = 0; i < PAYLOAD_BYTES; i++)
        g_payload[i] = (char)('a' + i % 26);
    g_payload[PAYLOAD_BYTES] = 0;
    memset(&g_side_peer, 0, sizeof g_side_peer);
    g_side_peer.kind = "dbus-broker";
    g_side_peer.exe = find_exe("dbus-broker-launch");
    if (!g_side_peer.exe) {
        errf(err, "not installed (no dbus-broker-launch in PATH)");
        return -2;
    }
    int s = peer_start(&g_side_peer, err);
    if (s < 0) {
        peer_stop(&g_side_peer);
        return s;
    }
    if (dbus_client_setup(&g_side_peer, 0, &side->c, err) < 0) {
        peer_stop(&g_side_peer);
        return -1;
    }
    side->w.rt = dbus_rt_loop;
    return 0;
}

void dbus_broker_side_close(side_t *side)
{
    (void)side;
    g_bus = sd_bus_flush_close_unref(g_bus);
    peer_stop(&g_side_peer);
}

void run_dbus_rows(void)
{
    for (int i = 0; i < PAYLOAD_BYTES; i++)
        g_payload[i] = (char)('a' + i % 26);
    g_payload[PAYLOAD_BYTES] = 0;
    peer_rows("dbus-daemon", "dbus-daemon");
    peer_rows("dbus-broker", "dbus-broker-launch");
}
