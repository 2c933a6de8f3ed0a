/*
 * wire.c — the wire layer of notifbus-bench: length-prefixed frames (4-byte
 * big-endian length, then the body) read through a per-connection buffer so
 * that one read usually yields a whole frame, batched output buffers, a minimal
 * scanner that finds members of a top-level JSON object without building any
 * tree, and request templates whose fixed-width ids are patched in place.
 */
#include "bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- frames ------------------------------------------------------------------ */

void put_be32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
}

uint32_t get_be32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return ((uint32_t)u[0] << 24) | ((uint32_t)u[1] << 16) | ((uint32_t)u[2] << 8) | u[3];
}

void conn_init(conn_t *c, int fd, size_t cap)
{
    c->fd = fd;
    c->cap = cap;
    c->buf = malloc(cap);
    if (!c->buf)
        fatal("out of memory");
    c->start = c->end = 0;
}

void conn_close(conn_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
    c->cap = c->start = c->end = 0;
}

int conn_buffered(conn_t *c, const char **body, uint32_t *len)
{
    size_t have = c->end - c->start;
    if (have < 4)
        return 0;
    uint32_t n = get_be32(c->buf + c->start);
    if (have - 4 < n)
        return 0;
    *body = c->buf + c->start + 4;
    *len = n;
    c->start += 4 + (size_t)n;
    if (c->start == c->end)
        c->start = c->end = 0;
    return 1;
}

/* Makes room for the frame being received: compacts, and grows the buffer when
 * the announced frame does not fit. */
static void conn_make_room(conn_t *c)
{
    size_t have = c->end - c->start;
    size_t need = 4;
    if (have >= 4)
        need = 4 + (size_t)get_be32(c->buf + c->start);
    if (c->start > 0 && (c->cap - c->end < 4096 || c->cap - c->start < need)) {
        memmove(c->buf, c->buf + c->start, have);
        c->start = 0;
        c->end = have;
    }
    if (need > c->cap - c->start) {
        size_t ncap = c->cap;
        while (ncap < need)
            ncap *= 2;
        char *nb = realloc(c->buf, ncap);
        if (!nb)
            fatal("out of memory");
        c->buf = nb;
        c->cap = ncap;
    }
}

int conn_fill(conn_t *c, char *err)
{
    conn_make_room(c);
    for (;;) {
        ssize_t n = read(c->fd, c->buf + c->end, c->cap - c->end);
        if (n > 0) {
            c->end += (size_t)n;
            return 1;
        }
        if (n == 0)
            return 0;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return -2;
        errf(err, "read: %s", strerror(errno));
        return -1;
    }
}

int conn_next(conn_t *c, const char **body, uint32_t *len, char *err)
{
    for (;;) {
        if (conn_buffered(c, body, len))
            return 1;
        int r = conn_fill(c, err);
        if (r == 1)
            continue;
        if (r == 0) {
            if (c->end != c->start)
                errf(err, "connection closed in the middle of a frame");
            else
                errf(err, "connection closed by peer");
            return 0;
        }
        if (r == -2)
            errf(err, "no reply within the timeout");
        return -1;
    }
}

int write_all(int fd, const void *p, size_t n, char *err)
{
    const char *s = p;
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w > 0) {
            s += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            errf(err, "write blocked past the timeout");
        else
            errf(err, "write: %s", w < 0 ? strerror(errno) : "no progress");
        return -1;
    }
    return 0;
}

int send_frame(int fd, const char *body, size_t len, char *err)
{
    char stackbuf[1024];
    char *f = len + 4 <= sizeof stackbuf ? stackbuf : malloc(len + 4);
    if (!f)
        fatal("out of memory");
    put_be32(f, (uint32_t)len);
    memcpy(f + 4, body, len);
    int r = write_all(fd, f, len + 4, err);
    if (f != stackbuf)
        free(f);
    return r;
}

/* ---- output buffers ---------------------------------------------------------------- */

void out_reserve(outbuf_t *o, size_t more)
{
    if (o->len + more <= o->cap)
        return;
    size_t ncap = o->cap ? o->cap : 4096;
    while (ncap < o->len + more)
        ncap *= 2;
    char *np = realloc(o->p, ncap);
    if (!np)
        fatal("out of memory");
    o->p = np;
    o->cap = ncap;
}

void out_put(outbuf_t *o, const void *p, size_t n)
{
    out_reserve(o, n);
    memcpy(o->p + o->len, p, n);
    o->len += n;
}

void out_str(outbuf_t *o, const char *s)
{
    out_put(o, s, strlen(s));
}

void out_u64(outbuf_t *o, uint64_t v)
{
    char tmp[24];
    int i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    out_put(o, tmp + i, sizeof tmp - (size_t)i);
}

size_t out_frame_begin(outbuf_t *o)
{
    out_reserve(o, 4);
    size_t at = o->len;
    o->len += 4;
    return at;
}

void out_frame_end(outbuf_t *o, size_t at)
{
    put_be32(o->p + at, (uint32_t)(o->len - at - 4));
}

void out_free(outbuf_t *o)
{
    free(o->p);
    o->p = NULL;
    o->len = o->cap = 0;
}

/* ---- minimal JSON scanner ------------------------------------------------------------- */

static size_t skip_ws(const char *p, size_t n, size_t i)
{
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
        i++;
    return i;
}

/* p[i] is '"': returns the index after the closing quote, or n if unterminated. */
static size_t skip_string(const char *p, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (p[i] == '\\')
            i++;
        else if (p[i] == '"')
            return i + 1;
    }
    return n + 1;
}

/* Returns the index after the value starting at p[i], or n + 1 if malformed. */
static size_t skip_value(const char *p, size_t n, size_t i)
{
    if (i >= n)
        return n + 1;
    if (p[i] == '"')
        return skip_string(p, n, i);
    if (p[i] == '{' || p[i] == '[') {
        int depth = 0;
        while (i < n) {
            char ch = p[i];
            if (ch == '"') {
                i = skip_string(p, n, i);
                if (i > n)
                    return n + 1;
                continue;
            }
            if (ch == '{' || ch == '[')
                depth++;
            else if (ch == '}' || ch == ']') {
                if (--depth == 0)
                    return i + 1;
            }
            i++;
        }
        return n + 1;
    }
    size_t s = i;
    while (i < n && p[i] != ',' && p[i] != '}' && p[i] != ']' && p[i] != ' ' && p[i] != '\t' &&
           p[i] != '\n' && p[i] != '\r')
        i++;
    return i > s ? i : n + 1;
}

int json_member(const char *p, size_t n, const char *key, const char **val, size_t *vlen)
{
    size_t klen = strlen(key);
    size_t i = skip_ws(p, n, 0);
    if (i >= n || p[i] != '{')
        return -1;
    i = skip_ws(p, n, i + 1);
    if (i < n && p[i] == '}')
        return 0;
    while (i < n) {
        if (p[i] != '"')
            return -1;
        size_t ks = i + 1;
        size_t ke = skip_string(p, n, i);
        if (ke > n)
            return -1;
        int match = ke - 1 - ks == klen && memcmp(p + ks, key, klen) == 0;
        i = skip_ws(p, n, ke);
        if (i >= n || p[i] != ':')
            return -1;
        i = skip_ws(p, n, i + 1);
        size_t vs = i;
        size_t ve = skip_value(p, n, i);
        if (ve > n)
            return -1;
        if (match) {
            *val = p + vs;
            *vlen = ve - vs;
            return 1;
        }
        i = skip_ws(p, n, ve);
        if (i < n && p[i] == ',') {
            i = skip_ws(p, n, i + 1);
            continue;
        }
        if (i < n && p[i] == '}')
            return 0;
        return -1;
    }
    return -1;
}

int json_uint(const char *v, size_t n, uint64_t *out)
{
    if (n == 0 || n > 19)
        return 0;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return 0;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    *out = x;
    return 1;
}

int json_is_str(const char *v, size_t n, const char *s)
{
    size_t l = strlen(s);
    return n == l + 2 && v[0] == '"' && v[n - 1] == '"' && memcmp(v + 1, s, l) == 0;
}

int json_is_null(const char *v, size_t n)
{
    return n == 4 && memcmp(v, "null", 4) == 0;
}

size_t count_occurrences(const char *p, size_t n, const char *needle)
{
    size_t l = strlen(needle), c = 0;
    const char *end = p + n;
    while (p < end) {
        const char *f = memmem(p, (size_t)(end - p), needle, l);
        if (!f)
            break;
        c++;
        p = f + l;
    }
    return c;
}

void describe_frame(const char *p, size_t n, char *out, size_t outlen)
{
    const char *e, *v;
    size_t el, vl;
    if (json_member(p, n, "error", &e, &el) == 1 && !json_is_null(e, el)) {
        const char *code = "?", *msg = "";
        size_t cl = 1, ml = 0;
        if (json_member(e, el, "code", &v, &vl) == 1) {
            code = v;
            cl = vl;
            if (cl >= 2 && v[0] == '"') {
                code++;
                cl -= 2;
            }
        }
        if (json_member(e, el, "message", &v, &vl) == 1) {
            msg = v;
            ml = vl;
            if (ml >= 2 && v[0] == '"') {
                msg++;
                ml -= 2;
            }
        }
        snprintf(out, outlen, "error %.*s: %.*s", (int)(cl > 60 ? 60 : cl), code,
                 (int)(ml > 140 ? 140 : ml), msg);
        return;
    }
    snprintf(out, outlen, "unexpected frame %.*s%s", (int)(n > 160 ? 160 : n), p,
             n > 160 ? "..." : "");
}

/* ---- request templates ------------------------------------------------------------------- */

void fmt_id(char *dst, uint64_t id)
{
    for (int i = ID_DIGITS - 1; i >= 0; i--) {
        dst[i] = (char)('0' + id % 10);
        id /= 10;
    }
}

void tmpl_build(tmpl_t *t, const char *body)
{
    size_t bl = strlen(body);
    t->len = bl + 4;
    t->frame = malloc(t->len);
    if (!t->frame)
        fatal("out of memory");
    put_be32(t->frame, (uint32_t)bl);
    memcpy(t->frame + 4, body, bl);
    t->npatch = 0;
    static const char marker[] = "##########";
    const char *s = t->frame + 4, *end = t->frame + t->len;
    while (s < end && t->npatch < 4) {
        const char *f = memmem(s, (size_t)(end - s), marker, ID_DIGITS);
        if (!f)
            break;
        t->patch[t->npatch++] = (size_t)(f - t->frame);
        s = f + ID_DIGITS;
    }
    tmpl_set_id(t, ID_BASE);
}

void tmpl_set_id(tmpl_t *t, uint64_t id)
{
    for (int i = 0; i < t->npatch; i++)
        fmt_id(t->frame + t->patch[i], id);
}

void tmpl_free(tmpl_t *t)
{
    free(t->frame);
    t->frame = NULL;
}
