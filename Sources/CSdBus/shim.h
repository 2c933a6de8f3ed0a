/* The C surface the desktop bridge uses: sd-bus from libsystemd, plus eventfd and poll for
 * its own loop, and posix_spawn's GNU extensions for starting the app. Only the desktop
 * bridge imports this module; the broker never links it. Swift cannot call C variadic
 * functions, so the bridge builds messages with the typed calls. */
#ifndef NOTIFBUS_CSDBUS_SHIM_H
#define NOTIFBUS_CSDBUS_SHIM_H

#include <poll.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <systemd/sd-bus.h>

/* Starting the app (`--app-id`): glibc (2.34 and later) declares these only under
 * _GNU_SOURCE, which Swift's Glibc module is not built with; they are glibc's own. */
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *, int);
extern int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *, const char *);
/* glibc's POSIX_SPAWN_SETSID: the child starts a session of its own. */
#define NOTIFBUS_POSIX_SPAWN_SETSID 0x80

/* SD_BUS_ERROR_NULL is a macro initializer; this spells it as a value. */
static inline sd_bus_error notifbus_sd_bus_error_null(void) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    return e;
}

#endif
