/*
 * paired.c — the one-client rows that carry a target, measured side by side: the
 * relay floor with one server, notifbus invoke -> handler and dbus-broker's
 * Ping(s)->s are all set up at once (each as its own row sets it up) and
 * measured in alternating rounds, one round of each in turn. A change in the
 * host's load during the run then falls on all three alike, where the rows
 * measured one after the other can each meet a different host. The idle sides
 * wait in blocking reads, so they take no CPU from the side being measured.
 */
#include "bench.h"

#include <string.h>

void run_paired_rows(void)
{
    if (!selected("paired", "paired"))
        return;
    row_t *rows[3] = {
        row_new("paired", "paired_relay_1", "relay -> 1 server", 1, 1, NULL),
        row_new("paired", "paired_invoke", "invoke -> handler", 1, 1, "paired_relay_1"),
        row_new("paired", "paired_dbus_broker", "dbus-broker: Ping(s)->s", 1, 1,
                "paired_relay_1"),
    };
    side_t sides[3];
    int open[3] = {0, 0, 0};
    char err[ERRLEN];
    if (relay1_side_open(&sides[0], err) == 0)
        open[0] = 1;
    else
        row_fail(rows[0], "%s", err);
    if (invoke_side_open(&sides[1], rows[1], err) == 0)
        open[1] = 1;
    else if (!rows[1]->err[0])
        row_fail(rows[1], "%s", err);
    int d = dbus_broker_side_open(&sides[2], err);
    if (d == 0) {
        open[2] = 1;
    } else if (d == -2) {
        rows[2]->skipped = 1;
        snprintf(rows[2]->err, ERRLEN, "%s", err);
    } else {
        row_fail(rows[2], "%s", err);
    }
    /* Only the sides that opened take part, in this order. */
    side_t live[3];
    row_t *live_rows[3];
    int n = 0;
    for (int i = 0; i < 3; i++)
        if (open[i]) {
            live[n] = sides[i];
            live_rows[n++] = rows[i];
        }
    if (n > 0)
        measure_paired(live, live_rows, n);
    for (int i = 0, j = 0; i < 3; i++)
        if (open[i])
            sides[i] = live[j++];
    if (open[2])
        dbus_broker_side_close(&sides[2]);
    if (open[1])
        invoke_side_close(&sides[1], rows[1]);
    if (open[0]) {
        if (rows[0]->ok && slots_first_failure(err))
            row_fail(rows[0], "%s", err);
        relay1_side_close(&sides[0]);
    }
}
