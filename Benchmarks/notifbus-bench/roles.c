/*
 * roles.c — the notifbus protocol v1 clients of the bench, in C with no JSON
 * library: opening a greeted connection (hello), one-off requests, the request
 * templates and reply checks of the measured round trips (ping, invoke, post),
 * and the processes that serve the broker: observers in a chain (answer each
 * `event` with `next`, or `complete` when last, optionally holding events until
 * told to release them) and a method-channel handler (answer each `call` with
 * a `return` carrying the call's arguments as its result).
 */
#include "bench.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAD75 "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvw"

/* ---- replies ------------------------------------------------------------------------ */

/* Checks that body is the successful reply to request id; returns its result. */
int nb_reply_result(const char *body, uint32_t len, uint64_t id, const char **res,
                        size_t *rlen, char *err)
{
    const char *v;
    size_t vl;
    uint64_t got;
    if (json_member(body, len, "op", &v, &vl) != 1 || !json_is_str(v, vl, "reply")) {
        char d[200];
        describe_frame(body, len, d, sizeof d);
        errf(err, "expected a reply: %s", d);
        return -1;
    }
    if (json_member(body, len, "id", &v, &vl) != 1 || !json_uint(v, vl, &got) || got != id) {
        char d[200];
        describe_frame(body, len, d, sizeof d);
        errf(err, "reply to id %llu expected, got %s", (unsigned long long)id, d);
        return -1;
    }
    if (json_member(body, len, "result", res, rlen) != 1) {
        char d[200];
        describe_frame(body, len, d, sizeof d);
        errf(err, "%s", d);
        return -1;
    }
    return 0;
}

int nb_request(conn_t *c, const char *body, uint64_t id, const char **res, size_t *rlen,
               char *err)
{
    if (send_frame(c->fd, body, strlen(body), err) < 0)
        return -1;
    for (;;) {
        const char *f, *v;
        uint32_t len;
        size_t vl;
        if (conn_next(c, &f, &len, err) != 1)
            return -1;
        uint64_t got;
        if (json_member(f, len, "op", &v, &vl) != 1 || !json_is_str(v, vl, "reply"))
            continue;
        if (json_member(f, len, "id", &v, &vl) == 1 && json_is_null(v, vl)) {
            char d[200];
            describe_frame(f, len, d, sizeof d);
            errf(err, "broker sent an error frame: %s", d);
            return 0;
        }
        if (json_member(f, len, "id", &v, &vl) != 1 || !json_uint(v, vl, &got) || got != id)
            continue;
        if (nb_reply_result(f, len, id, res, rlen, err) < 0)
            return 0;
        return 1;
    }
}

int nb_open(const char *sock, conn_t *c, const char *name, char *err)
{
    int fd = unix_connect(sock, 0, err);
    if (fd < 0)
        return -1;
    set_io_timeouts(fd, g_cfg.op_timeout_ms);
    conn_init(c, fd, 65536);
    char body[160];
    snprintf(body, sizeof body, "{\"op\":\"hello\",\"id\":1,\"protocol\":1,\"name\":\"%s\"}", name);
    const char *res, *v;
    size_t rl, vl;
    int r = nb_request(c, body, 1, &res, &rl, err);
    if (r == 1 && json_member(res, rl, "client", &v, &vl) != 1) {
        errf(err, "hello result has no client id: %.*s", (int)(rl > 120 ? 120 : rl), res);
        r = 0;
    }
    if (r == 1 && !g_server[0] && json_member(res, rl, "server", &v, &vl) == 1 && vl >= 2 &&
        v[0] == '"')
        snprintf(g_server, sizeof g_server, "%.*s", (int)(vl - 2 > 60 ? 60 : vl - 2), v + 1);
    if (r != 1) {
        err_prefix(err, "hello: ");
        conn_close(c);
        return -1;
    }
    return 0;
}

/* ---- measured requests -------------------------------------------------------------- */

int check_ping(const workload_t *w, uint64_t id, const char *body, uint32_t len, char *err)
{
    (void)w;
    const char *res;
    size_t rl;
    if (nb_reply_result(body, len, id, &res, &rl, err) < 0)
        return -1;
    if (rl < 2 || res[0] != '{') {
        errf(err, "ping result is not an object: %.*s", (int)(rl > 80 ? 80 : rl), res);
        return -1;
    }
    return 0;
}

int check_invoke(const workload_t *w, uint64_t id, const char *body, uint32_t len, char *err)
{
    (void)w;
    const char *res;
    size_t rl;
    if (nb_reply_result(body, len, id, &res, &rl, err) < 0)
        return -1;
    char digits[ID_DIGITS];
    fmt_id(digits, id);
    if (rl < 2 || res[0] != '{' || !memmem(res, rl, digits, ID_DIGITS) ||
        !memmem(res, rl, PAD75, sizeof PAD75 - 1)) {
        errf(err, "invoke %llu returned a result that is not its arguments: %.*s",
             (unsigned long long)id, (int)(rl > 120 ? 120 : rl), res);
        return -1;
    }
    return 0;
}

int check_post(const workload_t *w, uint64_t id, const char *body, uint32_t len, char *err)
{
    const char *res, *v;
    size_t rl, vl;
    if (nb_reply_result(body, len, id, &res, &rl, err) < 0)
        return -1;
    if (json_member(res, rl, "outcome", &v, &vl) != 1 || !json_is_str(v, vl, "completed")) {
        errf(err, "post %llu did not complete: %.*s", (unsigned long long)id,
             (int)(rl > 160 ? 160 : rl), res);
        return -1;
    }
    if (json_member(res, rl, "trace", &v, &vl) != 1 ||
        count_occurrences(v, vl, "\"next\"") != (size_t)(w->chain - 1) ||
        count_occurrences(v, vl, "\"complete\"") != 1) {
        errf(err, "post %llu: trace is not %d hops ending in complete: %.*s",
             (unsigned long long)id, w->chain, (int)(rl > 160 ? 160 : rl), res);
        return -1;
    }
    return 0;
}

void workload_ping(workload_t *w)
{
    memset(w, 0, sizeof *w);
    tmpl_build(&w->t, "{\"op\":\"ping\",\"id\":##########}");
    w->check = check_ping;
}

void workload_invoke(workload_t *w)
{
    memset(w, 0, sizeof *w);
    tmpl_build(&w->t, "{\"op\":\"invoke\",\"id\":##########,\"channel\":\"bench\","
                      "\"method\":\"echo\",\"arguments\":{\"n\":##########,\"pad\":\"" PAD75
                      "\"}}");
    w->check = check_invoke;
}

void workload_post(workload_t *w, int chain)
{
    memset(w, 0, sizeof *w);
    tmpl_build(&w->t, "{\"op\":\"post\",\"id\":##########,\"name\":\"bench\","
                      "\"payload\":{\"n\":##########,\"pad\":\"" PAD75 "\"}}");
    w->check = check_post;
    w->chain = chain;
}

/* ---- observers ------------------------------------------------------------------------ */

static void answer_event(outbuf_t *o, uint64_t event, int last)
{
    size_t at = out_frame_begin(o);
    out_str(o, last ? "{\"op\":\"complete\",\"event\":" : "{\"op\":\"next\",\"event\":");
    out_u64(o, event);
    out_str(o, last ? ",\"value\":null}" : "}");
    out_frame_end(o, at);
}

/* Handles one frame an observer received: returns the event id to answer, 0 if
 * nothing to answer. Unexpected frames are recorded as failures. */
static uint64_t observer_frame(const observer_args_t *a, const char *f, uint32_t len)
{
    const char *v;
    size_t vl;
    uint64_t ev;
    if (json_member(f, len, "op", &v, &vl) == 1 && json_is_str(v, vl, "event")) {
        if (json_member(f, len, "event", &v, &vl) == 1 && json_uint(v, vl, &ev) && ev > 0)
            return ev;
        slot_fail(a->slot, "observer %d: event frame without an event id: %.*s", a->priority,
                  (int)(len > 120 ? 120 : len), f);
        return 0;
    }
    char d[200];
    describe_frame(f, len, d, sizeof d);
    slot_fail(a->slot, "observer %d received %s", a->priority, d);
    return 0;
}

int observer_main(void *arg)
{
    observer_args_t *a = arg;
    char err[ERRLEN];
    conn_t c;
    char name[32];
    snprintf(name, sizeof name, "observer-%d", a->priority);
    if (nb_open(a->sock, &c, name, err) < 0) {
        slot_fail(a->slot, "observer %d: %s", a->priority, err);
        pipe_put_byte(a->ready_fd, 'E');
        return 1;
    }
    char body[160];
    snprintf(body, sizeof body,
             "{\"op\":\"subscribe\",\"id\":2,\"events\":[\"bench\"],\"priority\":%d}", a->priority);
    const char *res, *v;
    size_t rl, vl;
    int r = nb_request(&c, body, 2, &res, &rl, err);
    if (r == 1 && json_member(res, rl, "observer", &v, &vl) != 1) {
        errf(err, "subscribe result has no observer id");
        r = 0;
    }
    if (r != 1) {
        slot_fail(a->slot, "observer %d: subscribe: %s", a->priority, err);
        pipe_put_byte(a->ready_fd, 'E');
        return 1;
    }
    set_io_timeouts(c.fd, 1000); /* idle between rounds is normal: loop on timeouts */
    pipe_put_byte(a->ready_fd, 'R');

    outbuf_t out = {0};
    uint64_t *held = NULL;
    size_t nheld = 0, capheld = 0;
    int hold = 0;
    for (;;) {
        if (a->ctl_fd >= 0) {
            struct pollfd p[2] = {{c.fd, POLLIN, 0}, {a->ctl_fd, POLLIN, 0}};
            int pr = poll(p, 2, 1000);
            if (pr < 0 && errno != EINTR)
                return 1;
            if (getppid() == 1)
                return 0;
            if (p[1].revents) {
                char b;
                if (read(a->ctl_fd, &b, 1) != 1)
                    return 0;
                if (b == 'H') {
                    hold = 1;
                    pipe_put_byte(a->ready_fd, 'h');
                } else if (b == 'G') {
                    hold = 0;
                    out.len = 0;
                    for (size_t i = 0; i < nheld; i++)
                        answer_event(&out, held[i], a->last);
                    nheld = 0;
                    if (out.len && write_all(c.fd, out.p, out.len, err) < 0) {
                        slot_fail(a->slot, "observer %d: %s", a->priority, err);
                        return 1;
                    }
                    pipe_put_byte(a->ready_fd, 'g');
                }
                continue;
            }
            if (!p[0].revents)
                continue;
        }
        r = conn_fill(&c, err);
        if (r == 0)
            return 0; /* the broker closed the connection */
        if (r == -2) {
            if (getppid() == 1)
                return 0;
            continue;
        }
        if (r < 0) {
            slot_fail(a->slot, "observer %d: %s", a->priority, err);
            return 1;
        }
        const char *f;
        uint32_t len;
        out.len = 0;
        while (conn_buffered(&c, &f, &len)) {
            uint64_t ev = observer_frame(a, f, len);
            if (!ev)
                continue;
            if (hold) {
                if (nheld == capheld) {
                    capheld = capheld ? capheld * 2 : 1024;
                    held = realloc(held, capheld * sizeof *held);
                    if (!held)
                        fatal("out of memory");
                }
                held[nheld++] = ev;
            } else {
                answer_event(&out, ev, a->last);
            }
        }
        if (out.len && write_all(c.fd, out.p, out.len, err) < 0) {
            slot_fail(a->slot, "observer %d: %s", a->priority, err);
            return 1;
        }
    }
}

/* ---- method-channel handler -------------------------------------------------------------- */

int handler_main(void *arg)
{
    handler_args_t *a = arg;
    char err[ERRLEN];
    conn_t c;
    if (nb_open(a->sock, &c, "handler", err) < 0) {
        slot_fail(a->slot, "handler: %s", err);
        pipe_put_byte(a->ready_fd, 'E');
        return 1;
    }
    const char *res, *v;
    size_t rl, vl;
    int r = nb_request(&c,
                       "{\"op\":\"handle\",\"id\":2,\"channel\":\"bench\",\"method\":\"echo\"}",
                       2, &res, &rl, err);
    if (r == 1 && json_member(res, rl, "handler", &v, &vl) != 1) {
        errf(err, "handle result has no handler id");
        r = 0;
    }
    if (r != 1) {
        slot_fail(a->slot, "handler: handle: %s", err);
        pipe_put_byte(a->ready_fd, 'E');
        return 1;
    }
    set_io_timeouts(c.fd, 1000);
    pipe_put_byte(a->ready_fd, 'R');

    outbuf_t out = {0};
    for (;;) {
        r = conn_fill(&c, err);
        if (r == 0)
            return 0;
        if (r == -2) {
            if (getppid() == 1)
                return 0;
            continue;
        }
        if (r < 0) {
            slot_fail(a->slot, "handler: %s", err);
            return 1;
        }
        const char *f;
        uint32_t len;
        out.len = 0;
        while (conn_buffered(&c, &f, &len)) {
            uint64_t call;
            const char *args;
            size_t al;
            if (json_member(f, len, "op", &v, &vl) != 1 || !json_is_str(v, vl, "call")) {
                char d[200];
                describe_frame(f, len, d, sizeof d);
                slot_fail(a->slot, "handler received %s", d);
                continue;
            }
            if (json_member(f, len, "call", &v, &vl) != 1 || !json_uint(v, vl, &call)) {
                slot_fail(a->slot, "handler: call frame without a call id: %.*s",
                          (int)(len > 120 ? 120 : len), f);
                continue;
            }
            if (json_member(f, len, "arguments", &args, &al) != 1) {
                args = "null";
                al = 4;
            }
            size_t at = out_frame_begin(&out);
            out_str(&out, "{\"op\":\"return\",\"call\":");
            out_u64(&out, call);
            out_str(&out, ",\"result\":");
            out_put(&out, args, al);
            out_str(&out, "}");
            out_frame_end(&out, at);
        }
        if (out.len && write_all(c.fd, out.p, out.len, err) < 0) {
            slot_fail(a->slot, "handler: %s", err);
            return 1;
        }
    }
}
