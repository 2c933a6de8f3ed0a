/* The C surface the desktop bridge uses: sd-bus from libsystemd, plus eventfd and poll for
 * its own loop. Only the desktop bridge imports this module; the broker never links it.
 * Swift cannot call C variadic functions, so the bridge builds messages with the typed calls. */
#ifndef NOTIFBUS_CSDBUS_SHIM_H
#define NOTIFBUS_CSDBUS_SHIM_H

#include <poll.h>
#include <sys/eventfd.h>
#include <systemd/sd-bus.h>

/* SD_BUS_ERROR_NULL is a macro initializer; this spells it as a value. */
static inline sd_bus_error notifbus_sd_bus_error_null(void) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    return e;
}

#endif
