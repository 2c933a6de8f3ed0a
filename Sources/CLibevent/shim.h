/* The C surface notifbus's transport uses: libevent core, Unix sockets, peer credentials.
 * System headers come before event2/ so that event-config.h's _GNU_SOURCE does not clash
 * with SwiftGlibc's fd_set. Only wrappers for macros and hidden structs live here. */
#ifndef NOTIFBUS_CLIBEVENT_SHIM_H
#define NOTIFBUS_CLIBEVENT_SHIM_H

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/select.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <stdio.h>
#include <signal.h>
#include <pthread.h>

#include <event2/event.h>
#include <event2/util.h>

/* struct ucred is hidden without __USE_GNU; this mirrors its layout for SO_PEERCRED. */
typedef struct {
    pid_t pid;
    uid_t uid;
    gid_t gid;
} notifbus_peer_credentials;

static inline int notifbus_get_peer_credentials(int fd, notifbus_peer_credentials *out) {
    socklen_t len = sizeof(*out);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, out, &len);
}

/* accept4 is declared only under _GNU_SOURCE; glibc always exports it. */
extern int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);

static inline int notifbus_accept_nonblocking(int fd) {
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

/* Socket type flags, spelled here because Glibc's enum members do not always import. */
static inline int notifbus_stream_cloexec(void) { return SOCK_STREAM | SOCK_CLOEXEC; }
static inline int notifbus_stream_cloexec_nonblocking(void) { return SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK; }

static inline struct event *notifbus_evsignal_new(struct event_base *base, int signum,
                                                  event_callback_fn cb, void *arg) {
    return evsignal_new(base, signum, cb, arg);
}

static inline struct event *notifbus_evtimer_new(struct event_base *base,
                                                 event_callback_fn cb, void *arg) {
    return evtimer_new(base, cb, arg);
}

/* Unblocks SIGINT and SIGTERM: threads started by test runners may have them blocked,
 * and a child inherits the mask, which would make the broker deaf to terminate(). */
static inline int notifbus_unblock_termination_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    return pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

#endif
