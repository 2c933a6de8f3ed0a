/*
 * relay.c — the minimal libevent relay used as the floor for the broker: plain
 * `event`s (no bufferevents), one read per readiness, frames forwarded by their
 * length prefix alone with an immediate write(2), and an output buffer only when
 * the kernel does not take a whole frame.
 *
 * Topology: every connection first sends one registration frame, "C" for a
 * client or "S<i>" for the i-th server of the chain (1-based), and gets the
 * one-frame ack "K". Afterwards a frame from a client goes to S1, a frame from
 * S<i> goes to S<i+1>, and a frame from the last server goes back to the client
 * that started it. Servers answer in order, so a FIFO of origins routes the
 * replies without looking inside the frames. In serial mode only one frame is
 * inside the chain at a time and the others wait in the relay, as events do in
 * the broker's single queue.
 */
#include "bench.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_INBUF 65536

typedef struct rconn {
    int fd;
    int role; /* -1 unregistered, 0 client, i >= 1 server i */
    int dead;
    struct event *rev, *wev;
    char *in;
    size_t in_start, in_end, in_cap;
    outbuf_t out;
    size_t out_sent;
} rconn_t;

typedef struct {
    rconn_t *from;
    char *frame;
    size_t len;
} waiting_t;

static struct {
    struct event_base *base;
    int nservers;
    int serial;
    rconn_t *servers[MAX_CHAIN + 1];
    rconn_t **fifo; /* origins of the frames inside the chain */
    size_t fifo_head, fifo_len, fifo_cap;
    waiting_t *wait; /* serial mode: frames waiting to enter the chain */
    size_t wait_head, wait_len, wait_cap;
    int inflight;
} R;

static void relay_fatal(const char *what)
{
    fprintf(stderr, "notifbus-bench relay: %s\n", what);
    exit(1);
}

static void on_write(evutil_socket_t fd, short ev, void *arg);

static void conn_send(rconn_t *c, const char *p, size_t n)
{
    if (c->dead)
        return;
    if (c->out.len == c->out_sent) {
        c->out.len = c->out_sent = 0;
        for (;;) {
            ssize_t w = write(c->fd, p, n);
            if (w == (ssize_t)n)
                return;
            if (w > 0) {
                p += w;
                n -= (size_t)w;
                break;
            }
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                break;
            c->dead = 1;
            return;
        }
        event_add(c->wev, NULL);
    }
    out_put(&c->out, p, n);
}

static void on_write(evutil_socket_t fd, short ev, void *arg)
{
    (void)ev;
    rconn_t *c = arg;
    while (c->out_sent < c->out.len) {
        ssize_t w = write(fd, c->out.p + c->out_sent, c->out.len - c->out_sent);
        if (w > 0) {
            c->out_sent += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        c->dead = 1;
        break;
    }
    c->out.len = c->out_sent = 0;
    event_del(c->wev);
}

static void fifo_push(rconn_t *c)
{
    if (R.fifo_len == R.fifo_cap) {
        size_t ncap = R.fifo_cap ? R.fifo_cap * 2 : 256;
        rconn_t **n = malloc(sizeof *n * ncap);
        if (!n)
            relay_fatal("out of memory");
        for (size_t i = 0; i < R.fifo_len; i++)
            n[i] = R.fifo[(R.fifo_head + i) % R.fifo_cap];
        free(R.fifo);
        R.fifo = n;
        R.fifo_head = 0;
        R.fifo_cap = ncap;
    }
    R.fifo[(R.fifo_head + R.fifo_len++) % R.fifo_cap] = c;
}

static rconn_t *fifo_pop(void)
{
    if (R.fifo_len == 0)
        return NULL;
    rconn_t *c = R.fifo[R.fifo_head];
    R.fifo_head = (R.fifo_head + 1) % R.fifo_cap;
    R.fifo_len--;
    return c;
}

static void wait_push(rconn_t *from, const char *frame, size_t len)
{
    if (R.wait_len == R.wait_cap) {
        size_t ncap = R.wait_cap ? R.wait_cap * 2 : 64;
        waiting_t *n = malloc(sizeof *n * ncap);
        if (!n)
            relay_fatal("out of memory");
        for (size_t i = 0; i < R.wait_len; i++)
            n[i] = R.wait[(R.wait_head + i) % R.wait_cap];
        free(R.wait);
        R.wait = n;
        R.wait_head = 0;
        R.wait_cap = ncap;
    }
    waiting_t *w = &R.wait[(R.wait_head + R.wait_len++) % R.wait_cap];
    w->from = from;
    w->len = len;
    w->frame = malloc(len);
    if (!w->frame)
        relay_fatal("out of memory");
    memcpy(w->frame, frame, len);
}

static void enter_chain(rconn_t *from, const char *frame, size_t len)
{
    fifo_push(from);
    R.inflight++;
    conn_send(R.servers[1], frame, len);
}

static void registration(rconn_t *c, const char *body, uint32_t len)
{
    static const char ack[5] = {0, 0, 0, 1, 'K'};
    if (len == 1 && body[0] == 'C') {
        c->role = 0;
    } else if (len >= 2 && body[0] == 'S') {
        int i = atoi(body + 1);
        if (i < 1 || i > R.nservers || R.servers[i])
            relay_fatal("bad server registration");
        c->role = i;
        R.servers[i] = c;
    } else {
        relay_fatal("bad registration frame");
    }
    conn_send(c, ack, sizeof ack);
}

/* Routes one whole frame (prefix included). */
static void route(rconn_t *c, const char *frame, size_t len)
{
    if (c->role == 0) {
        for (int i = 1; i <= R.nservers; i++)
            if (!R.servers[i])
                relay_fatal("client frame before every server registered");
        if (R.serial && R.inflight > 0)
            wait_push(c, frame, len);
        else
            enter_chain(c, frame, len);
        return;
    }
    if (c->role < R.nservers) {
        conn_send(R.servers[c->role + 1], frame, len);
        return;
    }
    rconn_t *origin = fifo_pop();
    if (!origin)
        relay_fatal("reply with no frame in flight");
    R.inflight--;
    conn_send(origin, frame, len);
    if (R.serial && R.wait_len > 0) {
        waiting_t w = R.wait[R.wait_head];
        R.wait_head = (R.wait_head + 1) % R.wait_cap;
        R.wait_len--;
        enter_chain(w.from, w.frame, w.len);
        free(w.frame);
    }
}

static void on_read(evutil_socket_t fd, short ev, void *arg)
{
    (void)ev;
    rconn_t *c = arg;
    if (c->in_cap - c->in_end < 4096 && c->in_start > 0) {
        memmove(c->in, c->in + c->in_start, c->in_end - c->in_start);
        c->in_end -= c->in_start;
        c->in_start = 0;
    }
    if (c->in_end == c->in_cap) {
        char *n = realloc(c->in, c->in_cap * 2);
        if (!n)
            relay_fatal("out of memory");
        c->in = n;
        c->in_cap *= 2;
    }
    ssize_t r = read(fd, c->in + c->in_end, c->in_cap - c->in_end);
    if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (r <= 0) {
        /* A client going away is normal; a server going away ends the relay. */
        if (c->role >= 1)
            exit(0);
        event_del(c->rev);
        event_del(c->wev);
        close(c->fd);
        c->dead = 1;
        return;
    }
    c->in_end += (size_t)r;
    while (c->in_end - c->in_start >= 4) {
        uint32_t n = get_be32(c->in + c->in_start);
        if (c->in_end - c->in_start - 4 < n)
            break;
        const char *frame = c->in + c->in_start;
        c->in_start += 4 + (size_t)n;
        if (c->role < 0)
            registration(c, frame + 4, n);
        else
            route(c, frame, 4 + (size_t)n);
    }
    if (c->in_start == c->in_end)
        c->in_start = c->in_end = 0;
}

static void on_accept(evutil_socket_t lfd, short ev, void *arg)
{
    (void)ev;
    (void)arg;
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        rconn_t *c = calloc(1, sizeof *c);
        if (!c)
            relay_fatal("out of memory");
        c->fd = fd;
        c->role = -1;
        c->in_cap = RELAY_INBUF;
        c->in = malloc(c->in_cap);
        c->rev = event_new(R.base, fd, EV_READ | EV_PERSIST, on_read, c);
        c->wev = event_new(R.base, fd, EV_WRITE | EV_PERSIST, on_write, c);
        if (!c->in || !c->rev || !c->wev)
            relay_fatal("out of memory");
        event_add(c->rev, NULL);
    }
}

int relay_main(const char *path, int nservers, int serial, int ready_fd)
{
    char err[ERRLEN];
    memset(&R, 0, sizeof R);
    R.nservers = nservers;
    R.serial = serial;
    int lfd = unix_listen(path, 128, err);
    if (lfd < 0) {
        fprintf(stderr, "notifbus-bench relay: %s\n", err);
        return 1;
    }
    R.base = event_base_new();
    if (!R.base)
        relay_fatal("event_base_new failed");
    struct event *lev = event_new(R.base, lfd, EV_READ | EV_PERSIST, on_accept, NULL);
    event_add(lev, NULL);
    pipe_put_byte(ready_fd, 'R');
    close(ready_fd);
    event_base_dispatch(R.base);
    return 0;
}
