/*
 * floors.c — the floors notifbus-bench measures itself, in forked processes
 * pinned to the bench's CPU: raw AF_UNIX ping-pong with blocking I/O, the
 * libevent relay to a serial chain of 1, 3 and 8 echo servers, and the relay
 * under 8 concurrent clients (to one server, and to a chain of 3 with one frame
 * in the chain at a time, as the broker's single event queue runs).
 */
#include "bench.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A ~150-byte frame: the floor requests carry an id like broker requests do. */
static const char FLOOR_BODY[] =
    "{\"op\":\"bench\",\"id\":##########,\"pad\":\"abcdefghijklmnopqrstuvwxyz"
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrst\"}";

/* ---- echo server ------------------------------------------------------------------ */

typedef struct {
    int fd;           /* a connected socket, or -1 to connect to the relay */
    const char *path; /* relay socket */
    int index;        /* server position in the chain, 1-based */
    int ready_fd;
    int slot;
} echo_args_t;

/* Sends the registration frame and waits for the relay's ack. */
static int relay_register(conn_t *c, const char *name, char *err)
{
    if (send_frame(c->fd, name, strlen(name), err) < 0)
        return -1;
    const char *body;
    uint32_t len;
    if (conn_next(c, &body, &len, err) != 1)
        return -1;
    if (len != 1 || body[0] != 'K') {
        errf(err, "relay did not acknowledge the registration");
        return -1;
    }
    return 0;
}

/* Echoes every frame back; all frames of one read go out in one write. */
static int echo_main(void *arg)
{
    echo_args_t *a = arg;
    char err[ERRLEN];
    conn_t c;
    int fd = a->fd;
    if (fd < 0) {
        fd = unix_connect(a->path, 0, err);
        if (fd < 0) {
            slot_fail(a->slot, "echo server %d: %s", a->index, err);
            pipe_put_byte(a->ready_fd, 'E');
            return 1;
        }
    }
    set_io_timeouts(fd, 1000);
    conn_init(&c, fd, 65536);
    if (a->fd < 0) {
        char name[8];
        snprintf(name, sizeof name, "S%d", a->index);
        if (relay_register(&c, name, err) < 0) {
            slot_fail(a->slot, "echo server %d: %s", a->index, err);
            pipe_put_byte(a->ready_fd, 'E');
            return 1;
        }
    }
    pipe_put_byte(a->ready_fd, 'R');
    outbuf_t out = {0};
    for (;;) {
        int r = conn_fill(&c, err);
        if (r == 0)
            return 0;
        if (r == -2) {
            if (getppid() == 1)
                return 0;
            continue;
        }
        if (r < 0) {
            slot_fail(a->slot, "echo server %d: %s", a->index, err);
            return 1;
        }
        const char *body;
        uint32_t len;
        out.len = 0;
        while (conn_buffered(&c, &body, &len))
            out_put(&out, body - 4, (size_t)len + 4);
        if (out.len && write_all(fd, out.p, out.len, err) < 0) {
            slot_fail(a->slot, "echo server %d: %s", a->index, err);
            return 1;
        }
    }
}

/* ---- raw ping-pong ----------------------------------------------------------------------- */

static void floor_raw(void)
{
    if (!selected("floor", "raw_pingpong"))
        return;
    row_t *r = row_new("floor", "raw_pingpong", "raw AF_UNIX ping-pong", 1, 0, NULL);
    char err[ERRLEN];
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        row_fail(r, "socketpair: %s", strerror(errno));
        return;
    }
    int ready[2];
    if (pipe(ready) != 0)
        fatal("pipe: %s", strerror(errno));
    slots_reset();
    echo_args_t ea = {sv[1], NULL, 1, ready[1], 16};
    pid_t pid = spawn(echo_main, &ea);
    close(sv[1]);
    close(ready[1]);
    char b;
    if (pid < 0 || pipe_wait_byte(ready[0], g_cfg.op_timeout_ms, &b) != 1 || b != 'R') {
        if (!slots_first_failure(err))
            errf(err, "echo server did not start");
        row_fail(r, "%s", err);
    } else {
        conn_t c;
        set_io_timeouts(sv[0], g_cfg.op_timeout_ms);
        conn_init(&c, sv[0], 65536);
        workload_t w = {.check = check_echo};
        tmpl_build(&w.t, FLOOR_BODY);
        measure_single(&c, &w, r);
        tmpl_free(&w.t);
        conn_close(&c);
        sv[0] = -1;
    }
    if (sv[0] >= 0)
        close(sv[0]);
    close(ready[0]);
    if (pid > 0)
        child_reap(pid, 2000);
}

/* ---- relay rows ------------------------------------------------------------------------------ */

typedef struct {
    char dir[96];
    char path[128];
    pid_t relay;
    pid_t servers[MAX_CHAIN];
    int nservers;
} relay_setup_t;

typedef struct {
    const char *path;
    int nservers;
    int serial;
    int ready_fd;
} relay_args_t;

static int relay_child(void *arg)
{
    relay_args_t *a = arg;
    return relay_main(a->path, a->nservers, a->serial, a->ready_fd);
}

static void relay_teardown(relay_setup_t *s)
{
    for (int i = 0; i < s->nservers; i++)
        if (s->servers[i] > 0)
            kill(s->servers[i], SIGKILL);
    if (s->relay > 0)
        kill(s->relay, SIGKILL);
    for (int i = 0; i < s->nservers; i++)
        if (s->servers[i] > 0)
            child_reap(s->servers[i], 1000);
    if (s->relay > 0)
        child_reap(s->relay, 1000);
    if (s->dir[0])
        tempdir_remove(s->dir);
}

/* Starts the relay and its chain of echo servers; every server is registered
 * when this returns 0. */
static int relay_setup(relay_setup_t *s, int nservers, int serial, char *err)
{
    memset(s, 0, sizeof *s);
    if (tempdir_make(s->dir, sizeof s->dir, err) < 0)
        return -1;
    snprintf(s->path, sizeof s->path, "%s/relay", s->dir);
    int ready[2];
    if (pipe(ready) != 0)
        fatal("pipe: %s", strerror(errno));
    slots_reset();
    relay_args_t ra = {s->path, nservers, serial, ready[1]};
    s->relay = spawn(relay_child, &ra);
    char b;
    if (s->relay < 0 || pipe_wait_byte(ready[0], g_cfg.op_timeout_ms, &b) != 1) {
        errf(err, "relay did not start");
        goto fail;
    }
    for (int i = 0; i < nservers; i++) {
        echo_args_t ea = {-1, s->path, i + 1, ready[1], 16 + i};
        s->servers[i] = spawn(echo_main, &ea);
        s->nservers = i + 1;
        if (s->servers[i] < 0 || pipe_wait_byte(ready[0], g_cfg.op_timeout_ms, &b) != 1 ||
            b != 'R') {
            if (!slots_first_failure(err))
                errf(err, "echo server %d did not start", i + 1);
            goto fail;
        }
    }
    close(ready[0]);
    close(ready[1]);
    return 0;
fail:
    close(ready[0]);
    close(ready[1]);
    relay_teardown(s);
    return -1;
}

static int relay_client_open(const char *path, conn_t *c, char *err)
{
    int fd = unix_connect(path, 0, err);
    if (fd < 0)
        return -1;
    set_io_timeouts(fd, g_cfg.op_timeout_ms);
    conn_init(c, fd, 65536);
    if (relay_register(c, "C", err) < 0) {
        conn_close(c);
        return -1;
    }
    return 0;
}

static int relay_client_setup(void *ctx, int index, conn_t *c, char *err)
{
    (void)index;
    return relay_client_open(ctx, c, err);
}

static void floor_relay(int nservers, const char *key, const char *label)
{
    if (!selected("floor", key))
        return;
    row_t *r = row_new("floor", key, label, 1, nservers, NULL);
    char err[ERRLEN];
    relay_setup_t s;
    if (relay_setup(&s, nservers, 0, err) < 0) {
        row_fail(r, "%s", err);
        return;
    }
    conn_t c;
    if (relay_client_open(s.path, &c, err) < 0) {
        row_fail(r, "%s", err);
    } else {
        workload_t w = {.check = check_echo};
        tmpl_build(&w.t, FLOOR_BODY);
        measure_single(&c, &w, r);
        if (r->ok && slots_first_failure(err))
            row_fail(r, "%s", err);
        tmpl_free(&w.t);
        conn_close(&c);
    }
    relay_teardown(&s);
}

/* The relay -> 1 server floor as a side of the paired rows. */
static relay_setup_t g_side_relay;

int relay1_side_open(side_t *side, char *err)
{
    memset(side, 0, sizeof *side);
    side->c.fd = -1;
    if (relay_setup(&g_side_relay, 1, 0, err) < 0)
        return -1;
    if (relay_client_open(g_side_relay.path, &side->c, err) < 0) {
        relay_teardown(&g_side_relay);
        return -1;
    }
    side->w.check = check_echo;
    tmpl_build(&side->w.t, FLOOR_BODY);
    return 0;
}

void relay1_side_close(side_t *side)
{
    tmpl_free(&side->w.t);
    conn_close(&side->c);
    relay_teardown(&g_side_relay);
}

static void floor_relay_multi(int nservers, int serial, const char *key, const char *label)
{
    if (!selected("floor", key))
        return;
    row_t *r = row_new("floor", key, label, MAX_CLIENTS, nservers, NULL);
    char err[ERRLEN];
    relay_setup_t s;
    if (relay_setup(&s, nservers, serial, err) < 0) {
        row_fail(r, "%s", err);
        return;
    }
    workload_t w = {.check = check_echo};
    tmpl_build(&w.t, FLOOR_BODY);
    measure_multi(MAX_CLIENTS, relay_client_setup, s.path, &w, r);
    tmpl_free(&w.t);
    relay_teardown(&s);
}

void run_floors(void)
{
    floor_raw();
    floor_relay(1, "relay_1", "relay -> 1 server");
    floor_relay(3, "relay_3", "relay -> chain of 3");
    floor_relay(8, "relay_8", "relay -> chain of 8");
    floor_relay_multi(1, 0, "relay_x8", "relay, 8 clients -> 1 server");
    floor_relay_multi(3, 1, "relay_x8_chain3", "relay, 8 clients -> chain 3, serial");
}
