/*
 * measure.c — the measurement drivers of notifbus-bench, shared by floors and
 * broker rows: the round-trip loop (patch id, write, read the reply, validate),
 * one-client latency rounds with warm-up, n-client throughput rounds run by
 * forked client processes that report samples through shared memory, and the
 * statistics (median and p99 per round, medians across rounds).
 */
#include "bench.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- statistics ---------------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void stats_sorted(uint32_t *v, long n, double *med_us, double *p99_us)
{
    qsort(v, (size_t)n, sizeof *v, cmp_u32);
    double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + (double)v[n / 2]) / 2.0;
    long k = (long)((double)n * 0.99 + 0.999999) - 1;
    if (k < 0)
        k = 0;
    if (k >= n)
        k = n - 1;
    *med_us = med / 1000.0;
    *p99_us = v[k] / 1000.0;
}

double median_of(double *v, int n)
{
    double tmp[64];
    if (n <= 0)
        return 0;
    if (n > 64)
        n = 64;
    memcpy(tmp, v, sizeof(double) * (size_t)n);
    qsort(tmp, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2.0;
}

/* ---- the round-trip loop ------------------------------------------------------------ */

int check_echo(const workload_t *w, uint64_t id, const char *body, uint32_t len, char *err)
{
    (void)id;
    if (len != w->t.len - 4 || memcmp(body, w->t.frame + 4, len) != 0) {
        errf(err, "echo mismatch (%u bytes back, %zu sent)", len, w->t.len - 4);
        return -1;
    }
    return 0;
}

long rt_loop(conn_t *c, workload_t *w, uint64_t *next_id, uint32_t *samples, long n,
             uint64_t budget_ns, char *err)
{
    if (w->rt)
        return w->rt(c, w, next_id, samples, n, budget_ns, err);
    uint64_t start = now_ns();
    uint64_t deadline = start + budget_ns;
    long i;
    for (i = 0; i < n; i++) {
        uint64_t id = (*next_id)++;
        tmpl_set_id(&w->t, id);
        uint64_t t0 = now_ns();
        if (t0 >= deadline && i > 0)
            break;
        if (write_all(c->fd, w->t.frame, w->t.len, err) < 0)
            return -1;
        const char *body;
        uint32_t len;
        int r = conn_next(c, &body, &len, err);
        uint64_t t1 = now_ns();
        if (r != 1)
            return -1;
        if (w->check(w, id, body, len, err) < 0)
            return -1;
        uint64_t d = t1 - t0;
        if (samples)
            samples[i] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
    }
    return i;
}

/* ---- one client ---------------------------------------------------------------------------- */

int measure_single(conn_t *c, workload_t *w, row_t *r)
{
    char err[ERRLEN];
    uint64_t next_id = ID_BASE + 1;
    long n = g_cfg.iterations;
    uint32_t *samples = malloc(sizeof(uint32_t) * (size_t)n);
    if (!samples)
        fatal("out of memory");
    if (rt_loop(c, w, &next_id, NULL, g_cfg.warmup, g_cfg.round_budget_ns / 4, err) < 0) {
        row_fail(r, "warm-up: %s", err);
        free(samples);
        return -1;
    }
    double med[64], p99[64], rate[64], done[64];
    int rounds = g_cfg.rounds;
    for (int k = 0; k < rounds; k++) {
        uint64_t t0 = now_ns();
        long got = rt_loop(c, w, &next_id, samples, n, g_cfg.round_budget_ns, err);
        uint64_t t1 = now_ns();
        if (got <= 0) {
            row_fail(r, "round %d: %s", k + 1, got == 0 ? "no round trip done" : err);
            free(samples);
            return -1;
        }
        stats_sorted(samples, got, &med[k], &p99[k]);
        rate[k] = (double)got * 1e9 / (double)(t1 - t0);
        done[k] = (double)got;
    }
    free(samples);
    for (int k = 0; k < rounds; k++) {
        r->round_med_us[k] = med[k];
        r->round_rate[k] = rate[k];
    }
    r->med_us = median_of(med, rounds);
    r->p99_us = median_of(p99, rounds);
    r->rate = median_of(rate, rounds);
    r->per_round = (long)median_of(done, rounds);
    r->rounds = rounds;
    r->ok = 1;
    return 0;
}

/* ---- one client on each of several sides, rounds alternating ------------------------------- */

#define MAX_SIDES 4

int measure_paired(side_t *sides, row_t **rows, int n)
{
    char err[ERRLEN];
    if (n > MAX_SIDES)
        fatal("too many sides");
    long iters = g_cfg.iterations;
    int rounds = g_cfg.rounds;
    uint32_t *samples = malloc(sizeof(uint32_t) * (size_t)iters);
    if (!samples)
        fatal("out of memory");
    uint64_t next_id[MAX_SIDES];
    int live[MAX_SIDES];
    double med[MAX_SIDES][64], p99[MAX_SIDES][64], rate[MAX_SIDES][64], done[MAX_SIDES][64];
    for (int i = 0; i < n; i++) {
        next_id[i] = ID_BASE + 1;
        live[i] = rt_loop(&sides[i].c, &sides[i].w, &next_id[i], NULL, g_cfg.warmup,
                          g_cfg.round_budget_ns / 4, err) >= 0;
        if (!live[i])
            row_fail(rows[i], "warm-up: %s", err);
    }
    for (int k = 0; k < rounds; k++) {
        for (int i = 0; i < n; i++) {
            if (!live[i])
                continue;
            uint64_t t0 = now_ns();
            long got = rt_loop(&sides[i].c, &sides[i].w, &next_id[i], samples, iters,
                               g_cfg.round_budget_ns, err);
            uint64_t t1 = now_ns();
            if (got <= 0) {
                row_fail(rows[i], "round %d: %s", k + 1, got == 0 ? "no round trip done" : err);
                live[i] = 0;
                continue;
            }
            stats_sorted(samples, got, &med[i][k], &p99[i][k]);
            rate[i][k] = (double)got * 1e9 / (double)(t1 - t0);
            done[i][k] = (double)got;
        }
    }
    free(samples);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        if (!live[i]) {
            failed = 1;
            continue;
        }
        row_t *r = rows[i];
        for (int k = 0; k < rounds; k++) {
            r->round_med_us[k] = med[i][k];
            r->round_rate[k] = rate[i][k];
        }
        r->med_us = median_of(med[i], rounds);
        r->p99_us = median_of(p99[i], rounds);
        r->rate = median_of(rate[i], rounds);
        r->per_round = (long)median_of(done[i], rounds);
        r->rounds = rounds;
        r->ok = 1;
    }
    return failed ? -1 : 0;
}

/* ---- n clients ------------------------------------------------------------------------------- */

typedef struct {
    volatile long count;
    uint32_t samples[];
} mslot_t;

typedef struct {
    int index;
    client_setup_fn setup;
    void *ctx;
    workload_t *w;
    int ctl_fd;     /* parent -> child: 'G' run a round, 'Q' quit */
    int status_fd;  /* child -> parent: 'R' ready, 'D' round done, 'E' failed */
    mslot_t *slot;
    long per_round;
} mclient_t;

static int mclient_main(void *arg)
{
    mclient_t *m = arg;
    char err[ERRLEN];
    conn_t c;
    c.fd = -1;
    c.buf = NULL;
    if (m->setup(m->ctx, m->index, &c, err) < 0) {
        slot_fail(m->index, "client %d setup: %s", m->index + 1, err);
        pipe_put_byte(m->status_fd, 'E');
        return 1;
    }
    pipe_put_byte(m->status_fd, 'R');
    uint64_t next_id = ID_BASE + 1;
    int warm = 1;
    for (;;) {
        char b;
        int r = pipe_wait_byte(m->ctl_fd, 60000, &b);
        if (r != 1 || b == 'Q')
            break;
        long n = warm ? g_cfg.warmup : m->per_round;
        uint64_t budget = warm ? g_cfg.round_budget_ns / 4 : g_cfg.round_budget_ns;
        long got = rt_loop(&c, m->w, &next_id, warm ? NULL : m->slot->samples, n, budget, err);
        warm = 0;
        if (got < 0) {
            slot_fail(m->index, "client %d: %s", m->index + 1, err);
            pipe_put_byte(m->status_fd, 'E');
            conn_close(&c);
            return 1;
        }
        m->slot->count = got;
        pipe_put_byte(m->status_fd, 'D');
    }
    conn_close(&c);
    return 0;
}

/* Waits for `want` bytes equal to `ok` on fd; any 'E' or a timeout fails. */
static int collect(int fd, int want, char ok, int timeout_ms, char *err)
{
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    for (int got = 0; got < want;) {
        uint64_t now = now_ns();
        int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000ULL) + 1;
        char b;
        int r = left > 0 ? pipe_wait_byte(fd, left, &b) : 0;
        if (r != 1) {
            if (!slots_first_failure(err))
                errf(err, "%s (%d of %d clients reported)",
                     r == 0 ? "clients did not finish in time" : "a client process died", got,
                     want);
            return -1;
        }
        if (b == 'E') {
            if (!slots_first_failure(err))
                errf(err, "a client failed");
            return -1;
        }
        if (b == ok)
            got++;
    }
    return 0;
}

int measure_multi(int n, client_setup_fn setup, void *ctx, workload_t *w, row_t *r)
{
    char err[ERRLEN];
    long per = g_cfg.client_iterations;
    size_t slot_size = sizeof(mslot_t) + sizeof(uint32_t) * (size_t)per;
    slot_size = (slot_size + 63) & ~(size_t)63;
    char *shm = shm_alloc(slot_size * (size_t)n);
    uint32_t *all = malloc(sizeof(uint32_t) * (size_t)per * (size_t)n);
    if (!shm || !all)
        fatal("out of memory");
    int status[2];
    if (pipe(status) != 0)
        fatal("pipe: %s", strerror(errno));
    mclient_t m[MAX_CLIENTS];
    pid_t pids[MAX_CLIENTS];
    int nspawned = 0, rc = -1;
    for (int i = 0; i < n; i++) {
        int ctl[2];
        if (pipe(ctl) != 0)
            fatal("pipe: %s", strerror(errno));
        m[i] = (mclient_t){.index = i,
                           .setup = setup,
                           .ctx = ctx,
                           .w = w,
                           .ctl_fd = ctl[0],
                           .status_fd = status[1],
                           .slot = (mslot_t *)(shm + slot_size * (size_t)i),
                           .per_round = per};
        pids[i] = spawn(mclient_main, &m[i]);
        close(ctl[0]);
        m[i].ctl_fd = ctl[1];
        if (pids[i] < 0) {
            close(ctl[1]);
            row_fail(r, "fork: %s", strerror(errno));
            goto out;
        }
        nspawned++;
    }
    close(status[1]);
    status[1] = -1;
    if (collect(status[0], n, 'R', g_cfg.op_timeout_ms * 2, err) < 0) {
        row_fail(r, "%s", err);
        goto out;
    }
    double med[64], p99[64], rate[64], done[64];
    int rounds = g_cfg.rounds;
    int timeout = (int)(g_cfg.round_budget_ns / 1000000ULL) + g_cfg.op_timeout_ms * 2;
    for (int k = -1; k < rounds; k++) { /* round -1 is the warm-up */
        uint64_t t0 = now_ns();
        for (int i = 0; i < n; i++)
            pipe_put_byte(m[i].ctl_fd, 'G');
        if (collect(status[0], n, 'D', timeout, err) < 0) {
            row_fail(r, "%s%s", k < 0 ? "warm-up: " : "", err);
            goto out;
        }
        uint64_t t1 = now_ns();
        if (k < 0)
            continue;
        long total = 0;
        for (int i = 0; i < n; i++) {
            mslot_t *s = m[i].slot;
            memcpy(all + total, s->samples, sizeof(uint32_t) * (size_t)s->count);
            total += s->count;
        }
        if (total == 0) {
            row_fail(r, "round %d: no round trip done", k + 1);
            goto out;
        }
        stats_sorted(all, total, &med[k], &p99[k]);
        rate[k] = (double)total * 1e9 / (double)(t1 - t0);
        done[k] = (double)total;
    }
    for (int k = 0; k < rounds; k++) {
        r->round_med_us[k] = med[k];
        r->round_rate[k] = rate[k];
    }
    r->med_us = median_of(med, rounds);
    r->p99_us = median_of(p99, rounds);
    r->rate = median_of(rate, rounds);
    r->per_round = (long)median_of(done, rounds);
    r->rounds = rounds;
    r->ok = 1;
    rc = 0;
out:
    for (int i = 0; i < nspawned; i++) {
        pipe_put_byte(m[i].ctl_fd, 'Q');
        close(m[i].ctl_fd);
    }
    for (int i = 0; i < nspawned; i++)
        child_reap(pids[i], 2000);
    if (status[1] >= 0)
        close(status[1]);
    close(status[0]);
    shm_free(shm, slot_size * (size_t)n);
    free(all);
    return rc;
}
