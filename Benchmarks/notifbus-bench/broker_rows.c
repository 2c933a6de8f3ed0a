/*
 * broker_rows.c — the broker measurements of notifbus-bench, each on a fresh
 * broker so one failure cannot spoil the next row: ping, invoke through a
 * handler process, post through observer chains of 1, 3 and 8, throughput with
 * 8 invoking clients and with 8 posters over a 3-observer chain, and memory
 * (RSS at idle, with many idle greeted clients, and with many queued posts).
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ROLE_SLOT 16 /* failure slots of observers and handlers; 0..7 are clients */

static const char *const HOP30[] = {"--hop-timeout", "30s", NULL};

/* A broker with the processes serving it. */
typedef struct {
    broker_t b;
    pid_t roles[MAX_CHAIN + 1];
    int nroles;
    int ready[2]; /* roles -> parent */
    int ctl[2];   /* parent -> the controllable observer */
    observer_args_t oargs[MAX_CHAIN];
    handler_args_t hargs;
} stage_t;

static int stage_begin(stage_t *s, const char *const *extra, row_t *r)
{
    char err[ERRLEN];
    memset(s, 0, sizeof *s);
    s->ctl[0] = s->ctl[1] = -1;
    slots_reset();
    if (pipe(s->ready) != 0)
        fatal("pipe: %s", strerror(errno));
    if (broker_start(&s->b, extra, err) < 0) {
        row_fail(r, "%s", err);
        close(s->ready[0]);
        close(s->ready[1]);
        s->ready[0] = s->ready[1] = -1;
        return -1;
    }
    return 0;
}

/* Waits for a role's first byte: 'R' when it is registered with the broker. */
static int stage_wait_role(stage_t *s, const char *what, row_t *r)
{
    char b, err[ERRLEN];
    int w = pipe_wait_byte(s->ready[0], g_cfg.op_timeout_ms * 2, &b);
    if (w == 1 && b == 'R')
        return 0;
    if (!slots_first_failure(err))
        errf(err, "%s did not register in time", what);
    row_fail(r, "%s", err);
    return -1;
}

static int stage_observers(stage_t *s, int n, int controllable, row_t *r)
{
    if (controllable && pipe(s->ctl) != 0)
        fatal("pipe: %s", strerror(errno));
    for (int i = 0; i < n; i++) {
        s->oargs[i] = (observer_args_t){s->b.sock, 10 * (i + 1), i == n - 1, ROLE_SLOT + i,
                                        s->ready[1], controllable ? s->ctl[0] : -1};
        pid_t pid = spawn(observer_main, &s->oargs[i]);
        if (pid < 0) {
            row_fail(r, "fork: %s", strerror(errno));
            return -1;
        }
        s->roles[s->nroles++] = pid;
        if (stage_wait_role(s, "observer", r) < 0)
            return -1;
    }
    return 0;
}

static int stage_handler(stage_t *s, row_t *r)
{
    s->hargs = (handler_args_t){s->b.sock, ROLE_SLOT, s->ready[1]};
    pid_t pid = spawn(handler_main, &s->hargs);
    if (pid < 0) {
        row_fail(r, "fork: %s", strerror(errno));
        return -1;
    }
    s->roles[s->nroles++] = pid;
    return stage_wait_role(s, "handler", r);
}

/* Folds role failures and a dead broker into the row, then tears down. */
static void stage_end(stage_t *s, row_t *r)
{
    char err[ERRLEN];
    if (slots_first_failure(err))
        row_fail(r, "%s", err);
    if (s->b.pid > 0 && broker_died(&s->b, r->ok ? 0 : 300, err))
        row_fail(r, "%s", err);
    if (s->b.pid > 0) {
        broker_check_affinity(&s->b);
        broker_thread_report(&s->b, r->label[0] ? r->label : "memory");
    }
    for (int i = 0; i < s->nroles; i++)
        kill(s->roles[i], SIGKILL);
    for (int i = 0; i < s->nroles; i++)
        child_reap(s->roles[i], 1000);
    broker_stop(&s->b);
    for (int i = 0; i < 2; i++) {
        if (s->ready[i] >= 0)
            close(s->ready[i]);
        if (s->ctl[i] >= 0)
            close(s->ctl[i]);
    }
}

static int broker_client_setup(void *ctx, int index, conn_t *c, char *err)
{
    char name[32];
    snprintf(name, sizeof name, "bench-client-%d", index + 1);
    return nb_open(ctx, c, name, err);
}

/* ---- latency and throughput rows ---------------------------------------------------------- */

enum { W_PING, W_INVOKE, W_POST };

static void broker_row(const char *key, const char *label, const char *floor_key, int kind,
                       int chain, int clients)
{
    if (!selected("broker", key))
        return;
    int hops = kind == W_PING ? 0 : kind == W_INVOKE ? 1 : chain;
    row_t *r = row_new("broker", key, label, clients, hops, floor_key);
    stage_t s;
    char err[ERRLEN];
    if (stage_begin(&s, HOP30, r) < 0) {
        stage_end(&s, r);
        return;
    }
    int ok = 0;
    if (kind == W_INVOKE)
        ok = stage_handler(&s, r);
    else if (kind == W_POST)
        ok = stage_observers(&s, chain, 0, r);
    if (ok == 0) {
        workload_t w;
        if (kind == W_PING)
            workload_ping(&w);
        else if (kind == W_INVOKE)
            workload_invoke(&w);
        else
            workload_post(&w, chain);
        if (clients == 1) {
            conn_t c;
            if (nb_open(s.b.sock, &c, "bench-client", err) < 0) {
                row_fail(r, "%s", err);
            } else {
                measure_single(&c, &w, r);
                conn_close(&c);
            }
        } else {
            measure_multi(clients, broker_client_setup, s.b.sock, &w, r);
        }
        tmpl_free(&w.t);
    }
    stage_end(&s, r);
}

/* notifbus invoke -> handler as a side of the paired rows: the invoke row's set-up. */
static stage_t g_side_stage;

int invoke_side_open(side_t *side, row_t *r, char *err)
{
    memset(side, 0, sizeof *side);
    side->c.fd = -1;
    if (stage_begin(&g_side_stage, HOP30, r) < 0) {
        errf(err, "%s", r->err);
        stage_end(&g_side_stage, r);
        return -1;
    }
    if (stage_handler(&g_side_stage, r) < 0) {
        errf(err, "%s", r->err);
        stage_end(&g_side_stage, r);
        return -1;
    }
    if (nb_open(g_side_stage.b.sock, &side->c, "bench-client", err) < 0) {
        stage_end(&g_side_stage, r);
        return -1;
    }
    workload_invoke(&side->w);
    return 0;
}

void invoke_side_close(side_t *side, row_t *r)
{
    tmpl_free(&side->w.t);
    conn_close(&side->c);
    stage_end(&g_side_stage, r);
}

void run_broker_rows(void)
{
    broker_row("ping", "ping", "raw_pingpong", W_PING, 0, 1);
    broker_row("invoke", "invoke -> handler", "relay_1", W_INVOKE, 0, 1);
    broker_row("post_1", "post, chain of 1", "relay_1", W_POST, 1, 1);
    broker_row("post_3", "post, chain of 3", "relay_3", W_POST, 3, 1);
    broker_row("post_8", "post, chain of 8", "relay_8", W_POST, 8, 1);
    broker_row("invoke_x8", "invoke, 8 clients -> 1 handler", "relay_x8", W_INVOKE, 0, MAX_CLIENTS);
    broker_row("post_x8_chain3", "post, 8 posters -> chain 3", "relay_x8_chain3", W_POST, 3,
               MAX_CLIENTS);
}

/* ---- memory: idle clients ------------------------------------------------------------------- */

/* Connects count clients in batches, each sending hello and reading its reply. */
static int open_idle_clients(broker_t *b, int count, int *fds, char *err)
{
    static const char hello[] = "{\"op\":\"hello\",\"id\":1,\"protocol\":1}";
    char frame[64];
    put_be32(frame, (uint32_t)(sizeof hello - 1));
    memcpy(frame + 4, hello, sizeof hello - 1);
    size_t flen = sizeof hello - 1 + 4;

    enum { BATCH = 256, RBUF = 1024 };
    static char rbuf[BATCH][RBUF];
    size_t rlen[BATCH];
    struct pollfd p[BATCH];
    for (int base = 0; base < count; base += BATCH) {
        int k = count - base < BATCH ? count - base : BATCH;
        uint64_t deadline = now_ns() + (uint64_t)g_cfg.op_timeout_ms * 2 * 1000000ULL;
        for (int j = 0; j < k; j++) {
            int fd;
            for (;;) {
                fd = unix_connect(b->sock, 1, err);
                if (fd >= 0)
                    break;
                if (errno != EAGAIN || now_ns() > deadline) {
                    err_prefix(err, "client %d: ", base + j + 1);
                    return -1;
                }
                sleep_us(200); /* the listen backlog is full: let the broker accept */
            }
            fds[base + j] = fd;
            if (write(fd, frame, flen) != (ssize_t)flen) {
                errf(err, "client %d: hello write failed: %s", base + j + 1, strerror(errno));
                return -1;
            }
            rlen[j] = 0;
            p[j] = (struct pollfd){fd, POLLIN, 0};
        }
        int left = k;
        while (left > 0) {
            uint64_t now = now_ns();
            if (now > deadline) {
                errf(err, "%d of %d hello replies missing after %d ms (clients %d..%d)", left, k,
                     g_cfg.op_timeout_ms * 2, base + 1, base + k);
                return -1;
            }
            int pr = poll(p, (nfds_t)k, (int)((deadline - now) / 1000000ULL) + 1);
            if (pr < 0 && errno != EINTR) {
                errf(err, "poll: %s", strerror(errno));
                return -1;
            }
            for (int j = 0; j < k && pr > 0; j++) {
                if (p[j].fd < 0 || !p[j].revents)
                    continue;
                ssize_t n = read(p[j].fd, rbuf[j] + rlen[j], RBUF - rlen[j]);
                if (n <= 0) {
                    if (n < 0 && errno == EAGAIN)
                        continue;
                    errf(err, "client %d: connection closed before the hello reply%s%.*s",
                         base + j + 1, rlen[j] ? ": " : "", (int)(rlen[j] > 4 ? rlen[j] - 4 : 0),
                         rbuf[j] + 4);
                    return -1;
                }
                rlen[j] += (size_t)n;
                if (rlen[j] < 4 || rlen[j] - 4 < get_be32(rbuf[j]))
                    continue;
                const char *res;
                size_t rl;
                if (nb_reply_result(rbuf[j] + 4, get_be32(rbuf[j]), 1, &res, &rl, err) < 0) {
                    err_prefix(err, "client %d: hello: ", base + j + 1);
                    return -1;
                }
                p[j].fd = -1;
                left--;
            }
        }
    }
    return 0;
}

/* Records a failure on two memory rows, with the broker's exit if it died. */
static void memory_failure(broker_t *b, const char *err, mem_row_t *a, mem_row_t *c)
{
    char dead[ERRLEN];
    str_copy(a->err, err, ERRLEN);
    if (broker_died(b, 300, dead)) {
        str_copy(a->err, dead, ERRLEN);
        err_prefix(a->err, "%.100s; ", err);
    }
    str_copy(c->err, a->err, ERRLEN);
}

static void memory_clients(void)
{
    int count = g_cfg.mem_clients;
    mem_row_t *idle = mem_new("rss_idle", "broker RSS at idle", "bytes");
    mem_row_t *threads = mem_new("threads_idle", "broker threads at idle", "threads");
    mem_row_t *full = mem_new("rss_clients", "", "bytes");
    mem_row_t *per = mem_new("bytes_per_client", "broker bytes per idle greeted client", "bytes");
    snprintf(full->label, sizeof full->label, "broker RSS with %d idle clients", count);
    char err[ERRLEN], maxc[16];
    snprintf(maxc, sizeof maxc, "%d", count * 2 > 1024 ? count * 2 : 1024);
    const char *extra[] = {"--hop-timeout", "30s", "--max-clients", maxc, NULL};
    broker_t b;
    if (broker_start(&b, extra, err) < 0) {
        snprintf(idle->err, ERRLEN, "%s", err);
        snprintf(threads->err, ERRLEN, "%s", err);
        snprintf(full->err, ERRLEN, "%s", err);
        snprintf(per->err, ERRLEN, "%s", err);
        return;
    }
    sleep_us(100000);
    long rss_idle = broker_rss_bytes(&b);
    idle->value = (double)rss_idle;
    idle->ok = rss_idle > 0;
    if (!idle->ok)
        snprintf(idle->err, ERRLEN, "cannot read /proc/%d/status", (int)b.pid);
    threads->value = broker_threads(&b);
    threads->ok = threads->value > 0;
    if (!threads->ok)
        snprintf(threads->err, ERRLEN, "cannot read /proc/%d/status", (int)b.pid);

    /* One greeted client that pings first, so one-time setup is not counted per client. */
    conn_t c = {.fd = -1};
    int *fds = calloc((size_t)count, sizeof(int));
    if (!fds)
        fatal("out of memory");
    for (int i = 0; i < count; i++)
        fds[i] = -1;
    const char *res;
    size_t rl;
    if (nb_open(b.sock, &c, "bench-memory", err) < 0 ||
        nb_request(&c, "{\"op\":\"ping\",\"id\":2}", 2, &res, &rl, err) != 1) {
        err_prefix(err, "first client: ");
        memory_failure(&b, err, full, per);
        goto out;
    }
    sleep_us(50000);
    long rss_warm = broker_rss_bytes(&b);
    if (open_idle_clients(&b, count, fds, err) < 0) {
        memory_failure(&b, err, full, per);
        goto out;
    }
    sleep_us(100000);
    long rss_full = broker_rss_bytes(&b);
    if (nb_request(&c, "{\"op\":\"ping\",\"id\":3}", 3, &res, &rl, err) != 1) {
        err_prefix(err, "ping after %d clients: ", count);
        memory_failure(&b, err, full, per);
        goto out;
    }
    full->value = (double)rss_full;
    full->ok = rss_full > 0;
    per->value = (double)(rss_full - rss_warm) / count;
    per->ok = rss_full > 0 && rss_warm > 0;
out:
    if (c.buf)
        conn_close(&c);
    for (int i = 0; i < count; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    if (b.pid > 0)
        broker_check_affinity(&b);
    broker_stop(&b);
}

/* ---- memory: queued posts -------------------------------------------------------------------- */

/* Polls status until the broker holds `want` posts waiting. */
static int wait_pending(conn_t *mon, long want, char *err)
{
    uint64_t deadline = now_ns() + (uint64_t)g_cfg.op_timeout_ms * 2 * 1000000ULL;
    uint64_t id = 100;
    long pending = -1;
    while (now_ns() < deadline) {
        char body[64];
        snprintf(body, sizeof body, "{\"op\":\"status\",\"id\":%llu}", (unsigned long long)id);
        const char *res, *q, *v;
        size_t rl, ql, vl;
        int r = nb_request(mon, body, id++, &res, &rl, err);
        if (r != 1)
            return r == 0 ? -2 : -1; /* -2: status unavailable */
        uint64_t p;
        if (json_member(res, rl, "queue", &q, &ql) != 1 ||
            json_member(q, ql, "pending", &v, &vl) != 1 || !json_uint(v, vl, &p)) {
            errf(err, "status result has no queue.pending");
            return -2;
        }
        pending = (long)p;
        if (pending >= want)
            return 0;
        sleep_us(20000);
    }
    errf(err, "broker queued only %ld of %ld posts in time", pending, want);
    return -1;
}

/* Writes the whole buffer without blocking on the socket, failing if the
 * broker answers anything meanwhile (the observer holds every event). */
static int write_pipelined(conn_t *c, const char *p, size_t n, char *err)
{
    int fl = fcntl(c->fd, F_GETFL);
    fcntl(c->fd, F_SETFL, fl | O_NONBLOCK);
    uint64_t deadline = now_ns() + (uint64_t)g_cfg.op_timeout_ms * 4 * 1000000ULL;
    int rc = 0;
    while (n > 0) {
        if (now_ns() > deadline) {
            errf(err, "broker did not read the pipelined posts in time (%zu bytes left)", n);
            rc = -1;
            break;
        }
        struct pollfd pf = {c->fd, POLLOUT | POLLIN, 0};
        if (poll(&pf, 1, 100) < 0 && errno != EINTR) {
            errf(err, "poll: %s", strerror(errno));
            rc = -1;
            break;
        }
        if (pf.revents & POLLIN) {
            int r = conn_fill(c, err);
            const char *f;
            uint32_t len;
            if (r == 0 || r == -1) {
                if (r == 0)
                    errf(err, "broker closed the connection during pipelined posts");
                rc = -1;
                break;
            }
            if (conn_buffered(c, &f, &len)) {
                char d[200];
                describe_frame(f, len, d, sizeof d);
                errf(err, "reply while the chain was held: %s", d);
                rc = -1;
                break;
            }
        }
        if (pf.revents & (POLLOUT | POLLERR | POLLHUP)) {
            ssize_t w = write(c->fd, p, n);
            if (w > 0) {
                p += w;
                n -= (size_t)w;
            } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                errf(err, "write: %s", strerror(errno));
                rc = -1;
                break;
            }
        }
    }
    fcntl(c->fd, F_SETFL, fl);
    return rc;
}

static void memory_queue(void)
{
    int count = g_cfg.mem_posts;
    mem_row_t *full = mem_new("rss_queued", "", "bytes");
    mem_row_t *per = mem_new("bytes_per_queued_post", "broker bytes per queued post", "bytes");
    mem_row_t *drain = mem_new("drain_rate", "", "posts/s");
    snprintf(full->label, sizeof full->label, "broker RSS with %d queued posts", count);
    snprintf(drain->label, sizeof drain->label, "drain of %d pipelined posts, chain 1", count);
    char err[ERRLEN], maxq[16];
    snprintf(maxq, sizeof maxq, "%d", count * 2);
    /* One poster queues them all: its share of the queue must be the whole of it. */
    const char *extra[] = {"--hop-timeout", "10m", "--max-queue", maxq, "--max-queue-per-client", maxq, NULL};
    row_t scratch;
    memset(&scratch, 0, sizeof scratch);
    stage_t s;
    conn_t poster = {.fd = -1}, mon = {.fd = -1};
    outbuf_t all = {0};
    workload_t w;
    workload_post(&w, 1);
    if (stage_begin(&s, extra, &scratch) < 0 || stage_observers(&s, 1, 1, &scratch) < 0)
        goto fail;
    if (nb_open(s.b.sock, &poster, "bench-poster", err) < 0 ||
        nb_open(s.b.sock, &mon, "bench-monitor", err) < 0) {
        row_fail(&scratch, "%s", err);
        goto fail;
    }
    /* One post through the chain first, so one-time setup is not counted per post. */
    uint64_t next_id = ID_BASE + 1;
    if (rt_loop(&poster, &w, &next_id, NULL, 1, UINT64_MAX / 2, err) != 1) {
        row_fail(&scratch, "first post: %s", err);
        goto fail;
    }
    sleep_us(50000);
    long rss_base = broker_rss_bytes(&s.b);
    char b;
    pipe_put_byte(s.ctl[1], 'H');
    if (pipe_wait_byte(s.ready[0], g_cfg.op_timeout_ms, &b) != 1 || b != 'h') {
        row_fail(&scratch, "observer did not acknowledge hold");
        goto fail;
    }
    uint64_t first = next_id;
    for (int i = 0; i < count; i++) {
        tmpl_set_id(&w.t, next_id++);
        out_put(&all, w.t.frame, w.t.len);
    }
    if (write_pipelined(&poster, all.p, all.len, err) < 0) {
        row_fail(&scratch, "%s", err);
        goto fail;
    }
    int wp = wait_pending(&mon, count - 1, err);
    if (wp == -1) {
        row_fail(&scratch, "%s", err);
        goto fail;
    }
    if (wp == -2) {
        note("status unavailable (%s); queued-post RSS read after a 500 ms settle", err);
        sleep_us(500000);
    }
    sleep_us(50000);
    long rss_full = broker_rss_bytes(&s.b);
    full->value = (double)rss_full;
    full->ok = rss_full > 0;
    per->value = (double)(rss_full - rss_base) / count;
    per->ok = rss_full > 0 && rss_base > 0;

    uint64_t t0 = now_ns();
    pipe_put_byte(s.ctl[1], 'G');
    set_io_timeouts(poster.fd, g_cfg.op_timeout_ms * 2);
    for (int i = 0; i < count; i++) {
        const char *f;
        uint32_t len;
        if (conn_next(&poster, &f, &len, err) != 1 ||
            check_post(&w, first + (uint64_t)i, f, len, err) < 0) {
            err_prefix(err, "reply %d of %d: ", i + 1, count);
            row_fail(&scratch, "%s", err);
            goto fail;
        }
    }
    drain->value = (double)count * 1e9 / (double)(now_ns() - t0);
    drain->ok = 1;
fail:
    stage_end(&s, &scratch);
    if (!scratch.ok && scratch.err[0]) {
        mem_row_t *rows[] = {full, per, drain};
        for (int i = 0; i < 3; i++)
            if (!rows[i]->ok)
                snprintf(rows[i]->err, ERRLEN, "%s", scratch.err);
    }
    if (poster.fd >= 0)
        conn_close(&poster);
    if (mon.fd >= 0)
        conn_close(&mon);
    out_free(&all);
    tmpl_free(&w.t);
}

void run_memory_rows(void)
{
    if (selected("memory", "memory_clients"))
        memory_clients();
    if (selected("memory", "memory_queue"))
        memory_queue();
}
