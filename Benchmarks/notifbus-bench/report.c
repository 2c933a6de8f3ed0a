/*
 * report.c — output of notifbus-bench: the human table (median and p99 per
 * round trip, round trips per second, and each broker row's ratios to its
 * floor, and notifbus against the D-Bus peers), the JSON report read by
 * Benchmarks/plot.py, and the failure summary on stderr.
 */
#include "bench.h"

#include <stdio.h>
#include <string.h>

static double ratio_median(const row_t *r, const row_t **floor_out)
{
    const row_t *f = r->floor_key ? row_find(r->floor_key) : NULL;
    *floor_out = f;
    if (!r->ok || !f || !f->ok || f->med_us <= 0)
        return -1;
    return r->med_us / f->med_us;
}

static double ratio_rate(const row_t *r)
{
    const row_t *f = r->floor_key ? row_find(r->floor_key) : NULL;
    if (!r->ok || !f || !f->ok || f->rate <= 0)
        return -1;
    return r->rate / f->rate;
}

static void human_bytes(double v, char *out, size_t n)
{
    if (v >= 1024 * 1024)
        snprintf(out, n, "%.2f MiB", v / (1024.0 * 1024.0));
    else if (v >= 10 * 1024)
        snprintf(out, n, "%.1f KiB", v / 1024.0);
    else
        snprintf(out, n, "%.0f B", v);
}

/* notifbus against one D-Bus peer: how many times faster the invoke round trip is at one
 * client, and the 8-client throughput ratio; -1 where a row is missing. */
typedef struct {
    const char *peer_key, *peer_label;
    double speedup, throughput;
    const row_t *invoke, *peer, *invoke_x8, *peer_x8;
} peer_cmp_t;

static int peer_comparisons(peer_cmp_t *out)
{
    static const char *const keys[][2] = {{"dbus_broker", "dbus-broker"},
                                          {"dbus_daemon", "dbus-daemon"}};
    int n = 0;
    for (int i = 0; i < 2; i++) {
        char k8[48];
        snprintf(k8, sizeof k8, "%s_x8", keys[i][0]);
        peer_cmp_t c = {keys[i][0], keys[i][1], -1, -1, row_find("invoke"), row_find(keys[i][0]),
                        row_find("invoke_x8"), row_find(k8)};
        if (!c.peer && !c.peer_x8)
            continue;
        if (c.invoke && c.invoke->ok && c.peer && c.peer->ok && c.invoke->med_us > 0)
            c.speedup = c.peer->med_us / c.invoke->med_us;
        if (c.invoke_x8 && c.invoke_x8->ok && c.peer_x8 && c.peer_x8->ok && c.peer_x8->rate > 0)
            c.throughput = c.invoke_x8->rate / c.peer_x8->rate;
        out[n++] = c;
    }
    return n;
}

void report_table(void)
{
    printf("\nnotifbus-bench: every process pinned to CPU %d; %d round%s of up to %ld round trips "
           "(8-client rows: %ld per client), median of rounds\n",
           g_cfg.cpu, g_cfg.rounds, g_cfg.rounds == 1 ? "" : "s", g_cfg.iterations,
           g_cfg.client_iterations);
    printf("broker: %s%s%s%s\n\n", g_cfg.broker, g_server[0] ? " (" : "",
           g_server[0] ? g_server : "", g_server[0] ? ")" : "");
    if (g_cfg.quick)
        printf("--quick: few round trips and small memory runs; the figures are rough\n\n");
    printf("%-7s %-38s %7s %10s %10s %12s   %-36s %7s %7s\n", "", "", "n/round", "median us",
           "p99 us", "round trip/s", "floor", "med x", "rate x");
    const char *last_group = "";
    for (int i = 0; i < g_nrows; i++) {
        const row_t *r = &g_rows[i];
        if (strcmp(r->group, last_group) != 0 && i > 0)
            printf("\n");
        last_group = r->group;
        if (r->skipped) {
            printf("%-7s %-38s %s\n", r->group, r->label, r->err);
            continue;
        }
        if (!r->ok) {
            printf("%-7s %-38s FAILED: %s\n", r->group, r->label, r->err);
            continue;
        }
        printf("%-7s %-38s %7ld %10.1f %10.1f %12.0f", r->group, r->label, r->per_round, r->med_us,
               r->p99_us, r->rate);
        const row_t *f;
        double rm = ratio_median(r, &f), rr = ratio_rate(r);
        if (r->floor_key) {
            printf("   %-36s", f ? f->label : r->floor_key);
            if (rm > 0)
                printf(" %7.2f %7.2f", rm, rr);
            else
                printf(" %7s %7s", "-", "-");
        }
        printf("\n");
    }
    printf("\nmed x: broker median / floor median (1.00 = as fast as the floor). "
           "rate x: broker round trips/s / floor round trips/s.\n");
    peer_cmp_t cmp[2];
    int ncmp = peer_comparisons(cmp);
    for (int i = 0; i < ncmp; i++) {
        const peer_cmp_t *c = &cmp[i];
        if (i == 0)
            printf("\nnotifbus against D-Bus (target: >= 1.5 against dbus-broker)\n");
        printf("  invoke vs %s, 1 client:  ", c->peer_label);
        if (c->speedup > 0)
            printf("%.1f us vs %.1f us: notifbus %.2fx faster\n", c->invoke->med_us,
                   c->peer->med_us, c->speedup);
        else
            printf("-\n");
        printf("  invoke vs %s, %d clients: ", c->peer_label, MAX_CLIENTS);
        if (c->throughput > 0)
            printf("%.0f/s vs %.0f/s: notifbus %.2fx the throughput\n", c->invoke_x8->rate,
                   c->peer_x8->rate, c->throughput);
        else
            printf("-\n");
    }
    const row_t *pi = row_find("paired_invoke"), *pd = row_find("paired_dbus_broker");
    if (pi && pd) {
        printf("  paired rows (set up at once, rounds alternating), 1 client: ");
        if (pi->ok && pd->ok && pi->med_us > 0)
            printf("%.1f us vs %.1f us: notifbus %.2fx faster\n", pi->med_us, pd->med_us,
                   pd->med_us / pi->med_us);
        else
            printf("-\n");
    }
    if (g_nmem)
        printf("\nmemory\n");
    for (int i = 0; i < g_nmem; i++) {
        const mem_row_t *m = &g_mem[i];
        if (!m->ok) {
            printf("  %-46s FAILED: %s\n", m->label, m->err);
            continue;
        }
        char v[32];
        if (strcmp(m->unit, "bytes") == 0)
            human_bytes(m->value, v, sizeof v);
        else
            snprintf(v, sizeof v, "%.0f %s", m->value, m->unit);
        printf("  %-46s %14s\n", m->label, v);
    }
    int broker_rows = g_nmem;
    for (int i = 0; i < g_nrows; i++)
        broker_rows += strcmp(g_rows[i].group, "broker") == 0;
    if (g_life.count) {
        double lo = g_life.ms[0], hi = g_life.ms[0];
        for (int i = 1; i < g_life.count; i++) {
            lo = g_life.ms[i] < lo ? g_life.ms[i] : lo;
            hi = g_life.ms[i] > hi ? g_life.ms[i] : hi;
        }
        printf("\nbroker start-up (exec -> first connect): median %.1f ms, min %.1f, max %.1f "
               "over %d starts\n",
               median_of(g_life.ms, g_life.count), lo, hi, g_life.count);
    } else if (broker_rows) {
        printf("\nbroker start-up (exec -> first connect): no successful start\n");
    }
    if (g_life.stop_count)
        printf("broker stop (SIGTERM -> exit):           median %.1f ms over %d stops\n",
               median_of(g_life.stop_ms, g_life.stop_count), g_life.stop_count);
    if (g_foreign_share >= 0)
        printf("machine during the run: other work took %.1f%% of CPU %d; the other CPUs were "
               "%.1f%% busy\n",
               g_foreign_share * 100, g_cfg.cpu, g_other_busy * 100);
    if (g_nnotes) {
        printf("\nnotes\n");
        for (int i = 0; i < g_nnotes; i++)
            printf("  - %s\n", g_notes[i]);
    }
}

/* ---- JSON ---------------------------------------------------------------------------- */

static FILE *J;

static void jstr(const char *s)
{
    fputc('"', J);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(J, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(J, "\\u%04x", ch);
        else
            fputc(ch, J);
    }
    fputc('"', J);
}

static void jnum(double v, const char *fmt)
{
    if (v < 0)
        fputs("null", J);
    else
        fprintf(J, fmt, v);
}

void report_json(FILE *out)
{
    J = out;
    fprintf(J, "{\n  \"tool\": \"notifbus-bench\",\n  \"config\": {\"cpu\": %d, \"quick\": %s, "
           "\"rounds\": %d, \"iterations\": %ld, \"clientIterations\": %ld, \"warmup\": %ld, "
           "\"roundBudgetMs\": %llu, \"memoryClients\": %d, \"memoryPosts\": %d, \"broker\": ",
           g_cfg.cpu, g_cfg.quick ? "true" : "false", g_cfg.rounds, g_cfg.iterations,
           g_cfg.client_iterations, g_cfg.warmup,
           (unsigned long long)(g_cfg.round_budget_ns / 1000000ULL), g_cfg.mem_clients,
           g_cfg.mem_posts);
    jstr(g_cfg.broker);
    fprintf(J, ", \"foreignCpuShare\": ");
    jnum(g_foreign_share, "%.4f");
    fprintf(J, ", \"otherCpusBusyShare\": ");
    jnum(g_other_busy, "%.4f");
    fprintf(J, ", \"server\": ");
    if (g_server[0])
        jstr(g_server);
    else
        fputs("null", J);
    fprintf(J, "},\n  \"rows\": [\n");
    for (int i = 0; i < g_nrows; i++) {
        const row_t *r = &g_rows[i];
        const row_t *f;
        double rm = ratio_median(r, &f), rr = ratio_rate(r);
        fprintf(J, "    {\"key\": ");
        jstr(r->key);
        fprintf(J, ", \"group\": ");
        jstr(r->group);
        fprintf(J, ", \"label\": ");
        jstr(r->label);
        fprintf(J, ", \"clients\": %d, \"hops\": %d, \"ok\": %s, \"skipped\": %s, \"error\": ",
                r->clients, r->hops, r->ok ? "true" : "false", r->skipped ? "true" : "false");
        if (r->ok)
            fputs("null", J);
        else
            jstr(r->err);
        fprintf(J, ", \"perRound\": %ld, \"rounds\": %d, \"medianUs\": ", r->per_round, r->rounds);
        jnum(r->ok ? r->med_us : -1, "%.3f");
        fprintf(J, ", \"p99Us\": ");
        jnum(r->ok ? r->p99_us : -1, "%.3f");
        fprintf(J, ", \"rate\": ");
        jnum(r->ok ? r->rate : -1, "%.1f");
        fprintf(J, ", \"floor\": ");
        if (r->floor_key)
            jstr(r->floor_key);
        else
            fputs("null", J);
        fprintf(J, ", \"roundMedianUs\": [");
        for (int k = 0; r->ok && k < r->rounds; k++)
            fprintf(J, "%s%.3f", k ? ", " : "", r->round_med_us[k]);
        fprintf(J, "], \"roundRate\": [");
        for (int k = 0; r->ok && k < r->rounds; k++)
            fprintf(J, "%s%.1f", k ? ", " : "", r->round_rate[k]);
        fprintf(J, "]");
        fprintf(J, ", \"ratioMedian\": ");
        jnum(rm, "%.4f");
        fprintf(J, ", \"ratioRate\": ");
        jnum(rr, "%.4f");
        fprintf(J, "}%s\n", i + 1 < g_nrows ? "," : "");
    }
    fprintf(J, "  ],\n  \"peers\": [");
    peer_cmp_t cmp[2];
    int ncmp = peer_comparisons(cmp);
    for (int i = 0; i < ncmp; i++) {
        fprintf(J, "%s\n    {\"peer\": ", i ? "," : "");
        jstr(cmp[i].peer_key);
        fprintf(J, ", \"invokeSpeedup1\": ");
        jnum(cmp[i].speedup, "%.4f");
        fprintf(J, ", \"invokeThroughputRatio8\": ");
        jnum(cmp[i].throughput, "%.4f");
        fprintf(J, "}");
    }
    fprintf(J, "%s],\n  \"memory\": [\n", ncmp ? "\n  " : "");
    for (int i = 0; i < g_nmem; i++) {
        const mem_row_t *m = &g_mem[i];
        fprintf(J, "    {\"key\": ");
        jstr(m->key);
        fprintf(J, ", \"label\": ");
        jstr(m->label);
        fprintf(J, ", \"unit\": ");
        jstr(m->unit);
        fprintf(J, ", \"ok\": %s, \"value\": ", m->ok ? "true" : "false");
        jnum(m->ok ? m->value : -1, "%.1f");
        fprintf(J, ", \"error\": ");
        if (m->ok)
            fputs("null", J);
        else
            jstr(m->err);
        fprintf(J, "}%s\n", i + 1 < g_nmem ? "," : "");
    }
    fprintf(J, "  ],\n  \"startup\": {\"count\": %d, \"medianMs\": ", g_life.count);
    jnum(g_life.count ? median_of(g_life.ms, g_life.count) : -1, "%.3f");
    fprintf(J, ", \"samplesMs\": [");
    for (int i = 0; i < g_life.count; i++)
        fprintf(J, "%s%.3f", i ? ", " : "", g_life.ms[i]);
    fprintf(J, "], \"stopMedianMs\": ");
    jnum(g_life.stop_count ? median_of(g_life.stop_ms, g_life.stop_count) : -1, "%.3f");
    fprintf(J, "},\n  \"notes\": [");
    for (int i = 0; i < g_nnotes; i++) {
        fprintf(J, "%s", i ? ", " : "");
        jstr(g_notes[i]);
    }
    fprintf(J, "],\n  \"ok\": %s\n}\n", report_failures_count() == 0 ? "true" : "false");
}

int report_failures_count(void)
{
    int n = 0;
    for (int i = 0; i < g_nrows; i++)
        n += !g_rows[i].ok && !g_rows[i].skipped;
    for (int i = 0; i < g_nmem; i++)
        n += !g_mem[i].ok;
    return n;
}

int report_failures(void)
{
    int n = report_failures_count();
    if (n == 0)
        return 0;
    fprintf(stderr, "notifbus-bench: %d row%s failed:\n", n, n == 1 ? "" : "s");
    for (int i = 0; i < g_nrows; i++)
        if (!g_rows[i].ok && !g_rows[i].skipped)
            fprintf(stderr, "  %s %s: %s\n", g_rows[i].group, g_rows[i].label, g_rows[i].err);
    for (int i = 0; i < g_nmem; i++)
        if (!g_mem[i].ok)
            fprintf(stderr, "  memory %s: %s\n", g_mem[i].label, g_mem[i].err);
    return n;
}
