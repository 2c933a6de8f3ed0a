/*
 * main.c — entry point of notifbus-bench: parses the command line, pins the
 * bench (and so every process it forks or execs) to one CPU, raises the
 * open-file limit the broker inherits, runs the floors, the broker rows and the
 * memory rows in one run, prints the table or the JSON report, and exits
 * non-zero when any row failed. Also holds the result rows and notes.
 */
#include "bench.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

config_t g_cfg;
row_t g_rows[MAX_ROWS];
int g_nrows;
mem_row_t g_mem[MAX_MEM_ROWS];
int g_nmem;
lifecycle_t g_life;
char g_notes[MAX_NOTES][ERRLEN];
int g_nnotes;
char g_server[64];
double g_foreign_share = -1;
double g_other_busy = -1;

row_t *row_new(const char *group, const char *key, const char *label, int clients, int hops,
               const char *floor_key)
{
    if (g_nrows >= MAX_ROWS)
        fatal("too many rows");
    row_t *r = &g_rows[g_nrows++];
    memset(r, 0, sizeof *r);
    r->group = group;
    snprintf(r->key, sizeof r->key, "%s", key);
    snprintf(r->label, sizeof r->label, "%s", label);
    r->clients = clients;
    r->hops = hops;
    r->floor_key = floor_key;
    if (!g_cfg.json)
        fprintf(stderr, "notifbus-bench: %s: %s\n", group, label);
    return r;
}

int selected(const char *group, const char *key)
{
    if (!g_cfg.only)
        return 1;
    const char *p = g_cfg.only;
    while (*p) {
        size_t n = strcspn(p, ",");
        if ((strlen(key) == n && strncmp(p, key, n) == 0) ||
            (strlen(group) == n && strncmp(p, group, n) == 0))
            return 1;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

row_t *row_find(const char *key)
{
    for (int i = 0; i < g_nrows; i++)
        if (strcmp(g_rows[i].key, key) == 0)
            return &g_rows[i];
    return NULL;
}

mem_row_t *mem_new(const char *key, const char *label, const char *unit)
{
    if (g_nmem >= MAX_MEM_ROWS)
        fatal("too many memory rows");
    mem_row_t *m = &g_mem[g_nmem++];
    memset(m, 0, sizeof *m);
    snprintf(m->key, sizeof m->key, "%s", key);
    snprintf(m->label, sizeof m->label, "%s", label);
    m->unit = unit;
    return m;
}

/* The first failure of a row is kept; later ones (a dead broker, say) are
 * appended as context. */
void row_fail(row_t *r, const char *fmt, ...)
{
    char msg[ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->ok = 0;
    size_t have = strlen(r->err);
    if (have == 0)
        snprintf(r->err, ERRLEN, "%s", msg);
    else if (!strstr(r->err, msg) && have + 4 < ERRLEN) {
        memcpy(r->err + have, "; ", 2);
        str_copy(r->err + have + 2, msg, ERRLEN - have - 2);
    }
}

void note(const char *fmt, ...)
{
    char msg[ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (int i = 0; i < g_nnotes; i++)
        if (strcmp(g_notes[i], msg) == 0)
            return;
    if (g_nnotes < MAX_NOTES)
        snprintf(g_notes[g_nnotes++], ERRLEN, "%s", msg);
}

/* Busy and total time of one CPU (all CPUs if cpu < 0) from /proc/stat, in clock ticks. */
static int cpu_times(int cpu, double *busy, double *total)
{
    char want[16], line[512];
    if (cpu < 0)
        snprintf(want, sizeof want, "cpu ");
    else
        snprintf(want, sizeof want, "cpu%d ", cpu);
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return -1;
    int found = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, want, strlen(want)) == 0) {
            double v[8] = {0};
            if (sscanf(line + strlen(want), "%lf %lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2],
                       &v[3], &v[4], &v[5], &v[6], &v[7]) >= 4) {
                /* user nice system idle iowait irq softirq steal */
                *busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
                *total = *busy + v[3] + v[4];
                found = 0;
            }
            break;
        }
    fclose(f);
    return found;
}

/* CPU seconds used by the bench and its reaped children. */
static double own_cpu_seconds(void)
{
    struct rusage self, kids;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    double s = 0;
    struct rusage *r[2] = {&self, &kids};
    for (int i = 0; i < 2; i++)
        s += (double)r[i]->ru_utime.tv_sec + r[i]->ru_utime.tv_usec / 1e6 +
             (double)r[i]->ru_stime.tv_sec + r[i]->ru_stime.tv_usec / 1e6;
    return s;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: notifbus-bench --broker PATH_TO_notifbus [--quick] [--json] [--cpu N]\n"
            "                      [--rounds N] [--iterations N] [--only LIST] [--json-file PATH]\n"
            "\n"
            "Measures, in one run and with every process pinned to one CPU, the IPC floors\n"
            "(raw AF_UNIX ping-pong, a minimal libevent relay through chains of 1, 3 and 8\n"
            "servers, and under 8 clients) beside the notifbus broker (ping, invoke, post\n"
            "through observer chains, 8-client throughput, memory, start-up time) and D-Bus\n"
            "peers on a private bus (dbus-daemon, dbus-broker: sd-bus Ping(s)->s with a\n"
            "150-byte string, 1 and 8 clients; rows say \"not installed\" when absent).\n"
            "The paired rows measure the relay with one server, notifbus invoke and\n"
            "dbus-broker's Ping again, all three set up at once, in alternating rounds.\n"
            "\n"
            "  --broker PATH   the notifbus executable (started as `PATH broker --socket ...`)\n"
            "  --quick         a few seconds in all: few round trips, 1000-item memory runs\n"
            "  --json          print the report as JSON (for Benchmarks/plot.py)\n"
            "  --json-file P   also write the JSON report to P (with the table on stdout)\n"
            "  --cpu N         the CPU every process is pinned to (default 0)\n"
            "  --rounds N      measured rounds per row; figures are medians of rounds (default 3)\n"
            "  --iterations N  round trips per round for one client (default 10000, quick 300)\n"
            "  --only LIST     run only these rows or groups, comma-separated: floor, broker,\n"
            "                  memory, raw_pingpong, relay_1, relay_3, relay_8, relay_x8,\n"
            "                  relay_x8_chain3, ping, invoke, post_1, post_3, post_8, invoke_x8,\n"
            "                  post_x8_chain3, dbus, dbus_daemon, dbus_daemon_x8, dbus_broker,\n"
            "                  dbus_broker_x8, paired, memory_clients, memory_queue\n");
}

static long parse_long(const char *s, const char *flag, long min, long max)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < min || v > max) {
        fprintf(stderr, "notifbus-bench: %s wants an integer in [%ld, %ld], not '%s'\n", flag, min,
                max, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"broker", required_argument, 0, 'b'}, {"quick", no_argument, 0, 'q'},
        {"json", no_argument, 0, 'j'},         {"cpu", required_argument, 0, 'c'},
        {"rounds", required_argument, 0, 'r'}, {"iterations", required_argument, 0, 'i'},
        {"only", required_argument, 0, 'o'},   {"json-file", required_argument, 0, 'J'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    long rounds = 0, iterations = 0;
    g_cfg.cpu = 0;
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'b': g_cfg.broker = optarg; break;
        case 'q': g_cfg.quick = 1; break;
        case 'j': g_cfg.json = 1; break;
        case 'c': g_cfg.cpu = (int)parse_long(optarg, "--cpu", 0, 1023); break;
        case 'r': rounds = parse_long(optarg, "--rounds", 1, 64); break;
        case 'i': iterations = parse_long(optarg, "--iterations", 10, 1000000); break;
        case 'o': g_cfg.only = optarg; break;
        case 'J': g_cfg.json_file = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "notifbus-bench: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (!g_cfg.broker) {
        fprintf(stderr, "notifbus-bench: --broker PATH is required\n");
        usage(stderr);
        return 2;
    }
    if (access(g_cfg.broker, X_OK) != 0) {
        fprintf(stderr, "notifbus-bench: broker '%s' is not an executable file (build it with "
                        "`swift build -c release --product notifbus`)\n",
                g_cfg.broker);
        return 2;
    }

    g_cfg.rounds = rounds ? (int)rounds : 3;
    if (g_cfg.quick) {
        g_cfg.iterations = 300;
        g_cfg.client_iterations = 100;
        g_cfg.warmup = 50;
        g_cfg.round_budget_ns = 200000000ULL;
        g_cfg.mem_clients = 1000;
        g_cfg.mem_posts = 1000;
    } else {
        g_cfg.iterations = 10000;
        g_cfg.client_iterations = 2000;
        g_cfg.warmup = 1000;
        g_cfg.round_budget_ns = 1500000000ULL;
        g_cfg.mem_clients = 10000;
        g_cfg.mem_posts = 10000;
    }
    if (iterations) {
        g_cfg.iterations = iterations;
        g_cfg.client_iterations = iterations / 5 > 10 ? iterations / 5 : 10;
    }
    g_cfg.op_timeout_ms = 5000;

    process_init();
    char err[ERRLEN];
    if (pin_to_cpu(g_cfg.cpu, err) < 0) {
        fprintf(stderr, "notifbus-bench: %s\n", err);
        return 2;
    }
    /* The broker inherits this limit: it must hold mem_clients connections. */
    long want = g_cfg.mem_clients + 1024, got;
    raise_nofile(want, &got);
    if (got < want) {
        int fit = (int)(got - 1024);
        if (fit < 100)
            fit = 100;
        note("open-file limit is %ld: the idle-client memory run uses %d clients instead of %d",
             got, fit, g_cfg.mem_clients);
        g_cfg.mem_clients = fit;
    }

    double busy0 = 0, total0 = 0, busy1 = 0, total1 = 0;
    double abusy0 = 0, atotal0 = 0, abusy1 = 0, atotal1 = 0;
    int have_stat = cpu_times(g_cfg.cpu, &busy0, &total0) == 0 &&
                    cpu_times(-1, &abusy0, &atotal0) == 0;
    double own0 = own_cpu_seconds();
    run_floors();
    run_broker_rows();
    run_dbus_rows();
    run_paired_rows();
    run_memory_rows();
    children_kill_all();
    /* Work on the bench's CPU that was not the bench's own (other processes, the hypervisor). */
    if (have_stat && cpu_times(g_cfg.cpu, &busy1, &total1) == 0 &&
        cpu_times(-1, &abusy1, &atotal1) == 0 && total1 > total0) {
        double hz = (double)sysconf(_SC_CLK_TCK);
        double foreign = (busy1 - busy0) / hz - (own_cpu_seconds() - own0);
        g_foreign_share = foreign > 0 ? foreign / ((total1 - total0) / hz) : 0;
        if (g_foreign_share > 0.05)
            note("CPU %d spent %.0f%% of the run on work other than the bench's (other processes, "
                 "or the hypervisor): expect noisy figures, p99 above all",
                 g_cfg.cpu, g_foreign_share * 100);
        /* The other CPUs run nothing of the bench; their load can still slow this one
         * (shared core or caches, the hypervisor). */
        double obusy = (abusy1 - abusy0) - (busy1 - busy0);
        double ototal = (atotal1 - atotal0) - (total1 - total0);
        g_other_busy = ototal > 0 && obusy > 0 ? obusy / ototal : 0;
        if (g_other_busy > 0.10)
            note("the other CPUs were %.0f%% busy during the run (work there can slow CPU %d "
                 "too): expect noisy figures",
                 g_other_busy * 100, g_cfg.cpu);
    }

    if (g_cfg.json)
        report_json(stdout);
    else
        report_table();
    if (g_cfg.json_file) {
        FILE *f = fopen(g_cfg.json_file, "w");
        if (!f) {
            fprintf(stderr, "notifbus-bench: cannot write %s\n", g_cfg.json_file);
            return 1;
        }
        report_json(f);
        fclose(f);
    }
    int failed = report_failures();
    return failed ? 1 : 0;
}
