/*
 * bench.h — shared declarations of notifbus-bench: configuration, result rows,
 * process management, framed I/O over AF_UNIX, the minimal JSON scanner, request
 * templates, the measurement drivers, and the entry points of each benchmark part
 * (floors, libevent relay, broker control, broker client roles, report).
 *
 * Every .c file of the benchmark includes this header first.
 */
#ifndef NOTIFBUS_BENCH_H
#define NOTIFBUS_BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define ERRLEN 256
#define MAX_ROWS 32
#define MAX_MEM_ROWS 16
#define MAX_NOTES 32
#define MAX_CHILDREN 64
#define MAX_CLIENTS 8
#define MAX_CHAIN 8

/* Width of the decimal ids patched into request templates (ids start at 10^9). */
#define ID_DIGITS 10
#define ID_BASE 1000000000ULL

/* ---- configuration ---------------------------------------------------- */

typedef struct {
    const char *broker;       /* path of the notifbus binary */
    int quick;
    int json;
    int cpu;
    int rounds;
    long iterations;          /* max round trips per round, one client */
    long client_iterations;   /* max round trips per round, per client, 8 clients */
    long warmup;              /* warm-up round trips before the rounds */
    uint64_t round_budget_ns; /* a round also ends when this much time passed */
    int op_timeout_ms;        /* bound on any single reply */
    int mem_clients;          /* idle clients for the memory run */
    int mem_posts;            /* queued posts for the memory run */
    const char *only;         /* comma-separated row keys or groups to run; NULL for all */
    const char *json_file;    /* also write the JSON report there */
} config_t;

extern config_t g_cfg;

/* ---- results ------------------------------------------------------------ */

typedef struct {
    char key[40];
    char label[64];
    const char *group;     /* "floor" or "broker" */
    int clients;
    int hops;              /* observers/servers/handlers visited per round trip */
    int ok;
    int skipped;           /* not run here (a peer not installed); err says why */
    char err[ERRLEN];
    long per_round;        /* round trips actually done per round (median) */
    int rounds;
    double med_us, p99_us, rate;
    double round_med_us[64], round_rate[64]; /* per round, for spotting noise */
    const char *floor_key; /* the floor row this row is compared with */
} row_t;

typedef struct {
    char key[40];
    char label[64];
    int ok;
    char err[ERRLEN];
    double value;
    const char *unit;      /* "bytes", "bytes/conn", "posts/s", ... */
} mem_row_t;

typedef struct {
    int count;
    double ms[32];
    int stop_count;
    double stop_ms[32];
} lifecycle_t;

extern row_t g_rows[MAX_ROWS];
extern int g_nrows;
extern mem_row_t g_mem[MAX_MEM_ROWS];
extern int g_nmem;
extern lifecycle_t g_life;
extern char g_notes[MAX_NOTES][ERRLEN];
extern char g_server[64]; /* the broker's hello `server` string */
extern double g_foreign_share; /* share of the bench CPU other work used, or -1 */
extern double g_other_busy;    /* busy share of the other CPUs, or -1 */
extern int g_nnotes;

row_t *row_new(const char *group, const char *key, const char *label, int clients, int hops,
               const char *floor_key);
row_t *row_find(const char *key);
/* Whether --only selects the row `key` of `group`. */
int selected(const char *group, const char *key);
mem_row_t *mem_new(const char *key, const char *label, const char *unit);
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void row_fail(row_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- util.c: time, processes, sockets ------------------------------------ */

uint64_t now_ns(void);
void sleep_us(long us);
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void errf(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Puts a formatted prefix before the message in err (ERRLEN bytes). */
void err_prefix(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Copies src into dst of cap bytes, truncating. */
void str_copy(char *dst, const char *src, size_t cap);

void process_init(void);        /* records the main pid, installs cleanup */
int pin_to_cpu(int cpu, char *err);
void raise_nofile(long want, long *got);

/* Forks a child that runs fn(arg) and exits with its return value. The child
 * dies with the parent (PR_SET_PDEATHSIG). Returns the pid, or -1. */
pid_t spawn(int (*fn)(void *), void *arg);
void child_track(pid_t pid);
void child_untrack(pid_t pid);
/* Waits up to timeout_ms for pid to exit, then SIGKILLs it. Returns the wait
 * status, or -1 if it had to be killed. */
int child_reap(pid_t pid, int timeout_ms);
void children_kill_all(void);

/* Temporary directories made with mkdtemp, emptied and removed on exit. */
int tempdir_make(char *out, size_t outlen, char *err);
void tempdir_remove(const char *dir);

void *shm_alloc(size_t size);
void shm_free(void *p, size_t size);

void set_io_timeouts(int fd, int ms);
int unix_connect(const char *path, int nonblock, char *err);
int unix_listen(const char *path, int backlog, char *err);

/* A small message channel from children to the parent: single bytes, read with
 * a deadline. */
int pipe_wait_byte(int fd, int timeout_ms, char *out);
int pipe_put_byte(int fd, char b);

/* Shared slots where children report failures. */
typedef struct {
    volatile int failed;
    char msg[ERRLEN];
} slot_t;

extern slot_t *g_slots; /* MAX_CHILDREN slots in shared memory */
void slots_reset(void);
void slot_fail(int slot, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int slots_first_failure(char *err);

/* ---- wire.c: frames, scanner, templates ---------------------------------- */

typedef struct {
    int fd;
    char *buf;
    size_t cap, start, end;
} conn_t;

void conn_init(conn_t *c, int fd, size_t cap);
void conn_close(conn_t *c);
/* Returns 1 with the next frame's body, 0 on end of stream, -1 on timeout or
 * error (err set). Blocking reads bounded by SO_RCVTIMEO. The body stays valid
 * until the next call on c. */
int conn_next(conn_t *c, const char **body, uint32_t *len, char *err);
/* Returns 1 with a frame only if one is already buffered. */
int conn_buffered(conn_t *c, const char **body, uint32_t *len);
/* One read into the buffer: >0 bytes, 0 end of stream, -1 error, -2 would block. */
int conn_fill(conn_t *c, char *err);

int write_all(int fd, const void *p, size_t n, char *err);
void put_be32(char *p, uint32_t v);
uint32_t get_be32(const char *p);
/* Writes body as one frame. */
int send_frame(int fd, const char *body, size_t len, char *err);

/* Growable output buffer for batched writes. */
typedef struct {
    char *p;
    size_t len, cap;
} outbuf_t;
void out_reserve(outbuf_t *o, size_t more);
void out_put(outbuf_t *o, const void *p, size_t n);
void out_str(outbuf_t *o, const char *s);
void out_u64(outbuf_t *o, uint64_t v);
/* Opens a frame: reserves its length prefix; frame_end patches it. */
size_t out_frame_begin(outbuf_t *o);
void out_frame_end(outbuf_t *o, size_t at);
void out_free(outbuf_t *o);

/* Minimal scanner: finds a member of the top-level object of p[0..n). Returns 1
 * with the raw value text, 0 if absent, -1 if the text is not an object. */
int json_member(const char *p, size_t n, const char *key, const char **val, size_t *vlen);
int json_uint(const char *v, size_t n, uint64_t *out);   /* 1 if v is a plain integer */
int json_is_str(const char *v, size_t n, const char *s); /* v is exactly "s" */
int json_is_null(const char *v, size_t n);
size_t count_occurrences(const char *p, size_t n, const char *needle);
/* Describes a reply: "error <code>: <message>" or a short excerpt of the frame. */
void describe_frame(const char *p, size_t n, char *out, size_t outlen);

/* A request frame with ID_DIGITS-wide id fields patched in place. */
typedef struct {
    char *frame;      /* length prefix + body */
    size_t len;
    size_t patch[4];  /* offsets of the id digits */
    int npatch;
} tmpl_t;

/* body contains one or more "##########" markers (ID_DIGITS '#') */
void tmpl_build(tmpl_t *t, const char *body);
void tmpl_set_id(tmpl_t *t, uint64_t id);
void tmpl_free(tmpl_t *t);
void fmt_id(char *dst, uint64_t id); /* ID_DIGITS digits, no terminator */

/* ---- measure.c: drivers --------------------------------------------------- */

struct workload;
typedef int (*check_fn)(const struct workload *w, uint64_t id, const char *body, uint32_t len,
                        char *err);
/* A round-trip loop with rt_loop's contract, for peers that do not speak notifbus frames. */
typedef long (*rt_fn)(conn_t *c, struct workload *w, uint64_t *next_id, uint32_t *samples,
                      long n, uint64_t budget_ns, char *err);
typedef struct workload {
    tmpl_t t;
    check_fn check;
    int chain; /* observers expected in a post's trace */
    rt_fn rt;  /* NULL: rt_loop */
} workload_t;

/* Runs up to n round trips, stopping early after budget_ns; stores each trip
 * in samples (ns). Returns the number done, or -1 (err set). */
long rt_loop(conn_t *c, workload_t *w, uint64_t *next_id, uint32_t *samples, long n,
             uint64_t budget_ns, char *err);

/* One client in this process: warm-up, then g_cfg.rounds rounds; fills r. */
int measure_single(conn_t *c, workload_t *w, row_t *r);

/* n client processes. setup runs in each child and leaves a ready conn. */
typedef int (*client_setup_fn)(void *ctx, int index, conn_t *c, char *err);
int measure_multi(int n, client_setup_fn setup, void *ctx, workload_t *w, row_t *r);

int check_echo(const workload_t *w, uint64_t id, const char *body, uint32_t len, char *err);

/* ---- floors.c / relay.c ----------------------------------------------------- */

void run_floors(void);
/* Runs the relay in this (child) process until killed. */
int relay_main(const char *path, int nservers, int serial, int ready_fd);

/* ---- broker.c: lifecycle ---------------------------------------------------- */

typedef struct {
    pid_t pid;
    char dir[96];
    char sock[128];
    char log[128];
    double startup_ms;
} broker_t;

/* extra: NULL-terminated extra arguments. */
int broker_start(broker_t *b, const char *const *extra, char *err);
void broker_stop(broker_t *b);
long broker_rss_bytes(const broker_t *b);
int broker_threads(const broker_t *b);
/* Notes any broker thread that is not pinned to the bench's CPU. */
void broker_check_affinity(const broker_t *b);
/* Notes when more than one broker thread did a tenth of the work so far. */
void broker_thread_report(const broker_t *b, const char *row);
int broker_alive(broker_t *b, char *err);
/* After a failure: gives the broker wait_ms to be seen exiting; returns 1 with
 * its exit status and last output in err if it is gone. */
int broker_died(broker_t *b, int wait_ms, char *err);
void broker_log_tail(const broker_t *b, char *out, size_t outlen);

/* ---- roles.c: broker protocol clients --------------------------------------- */

/* Checks that body is the successful reply to request id; returns its result. */
int nb_reply_result(const char *body, uint32_t len, uint64_t id, const char **res, size_t *rlen,
                    char *err);
int nb_open(const char *sock, conn_t *c, const char *name, char *err);
/* Sends a request whose body has id `id`, waits for its reply; returns 1 with
 * the result span, 0 if the broker replied with an error (err describes it),
 * -1 on I/O failure. Frames other than the reply are skipped. */
int nb_request(conn_t *c, const char *body, uint64_t id, const char **res, size_t *rlen,
               char *err);

typedef struct {
    const char *sock;
    int priority;
    int last;      /* answers complete instead of next */
    int slot;
    int ready_fd;  /* child -> parent bytes */
    int ctl_fd;    /* parent -> child: 'H' hold, 'G' release; -1 if uncontrolled */
} observer_args_t;
int observer_main(void *arg);

typedef struct {
    const char *sock;
    int slot;
    int ready_fd;
} handler_args_t;
int handler_main(void *arg);

int check_ping(const workload_t *w, uint64_t id, const char *body, uint32_t len, char *err);
int check_invoke(const workload_t *w, uint64_t id, const char *body, uint32_t len, char *err);
int check_post(const workload_t *w, uint64_t id, const char *body, uint32_t len, char *err);
void workload_ping(workload_t *w);
void workload_invoke(workload_t *w);
void workload_post(workload_t *w, int chain);

/* ---- broker_rows.c ---------------------------------------------------------- */

void run_broker_rows(void);
void run_memory_rows(void);

/* ---- dbus.c: D-Bus peers on a private bus ------------------------------------------ */

void run_dbus_rows(void);

/* ---- paired.c: the one-client rows with a target, measured side by side ---------- */

/* One side of the paired rows: a connection ready for its workload. */
typedef struct {
    conn_t c;
    workload_t w;
} side_t;

/* Each opens its side with the same set-up as its own row (0; -1 failed, err
 * set; -2 cannot run here, err says why) and closes it. The relay floor with one
 * server (floors.c), notifbus invoke with a handler (broker_rows.c), dbus-broker's
 * Ping (dbus.c); one of each at a time. */
int relay1_side_open(side_t *s, char *err);
void relay1_side_close(side_t *s);
int invoke_side_open(side_t *s, row_t *r, char *err);
void invoke_side_close(side_t *s, row_t *r);
int dbus_broker_side_open(side_t *s, char *err);
void dbus_broker_side_close(side_t *s);

/* measure.c: a warm-up on each side, then g_cfg.rounds rounds in which each side
 * runs one round in turn; fills rows[i] as measure_single does. */
int measure_paired(side_t *sides, row_t **rows, int n);

void run_paired_rows(void);

/* ---- report.c ------------------------------------------------------------------ */

void report_table(void);
void report_json(FILE *out);
int report_failures(void); /* prints failures to stderr; returns how many */
int report_failures_count(void);

/* ---- stats ----------------------------------------------------------------------- */

void stats_sorted(uint32_t *v, long n, double *med_us, double *p99_us);
double median_of(double *v, int n);

#endif
