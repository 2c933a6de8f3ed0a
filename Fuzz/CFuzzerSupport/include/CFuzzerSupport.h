// The C side of the fuzz programs: finds out whether libFuzzer is linked in, runs it, replays
// corpus files when it is not, and measures allocations during one input under a sanitizer.
// It holds no fuzz logic of its own; the Swift programs decide what an input means.
#ifndef NOTIFBUS_CFUZZERSUPPORT_H
#define NOTIFBUS_CFUZZERSUPPORT_H

#include <stddef.h>
#include <stdint.h>

/// One fuzz input. Returns 0 (libFuzzer's convention).
typedef int (*notifbus_fuzz_target)(const uint8_t *data, size_t size);

/// 1 when the program was linked with libFuzzer (built with -sanitize=fuzzer), else 0.
int notifbus_fuzzer_linked(void);

/// Hands control to libFuzzer with the program's own arguments; returns its exit status.
/// Call only when `notifbus_fuzzer_linked()` is 1.
int notifbus_fuzzer_run(int *argc, char ***argv, notifbus_fuzz_target target);

/// Runs `target` once on every regular file named in `paths`, or found directly inside a
/// folder named there (in name order). Returns the number of inputs run, or -1 after
/// printing why a path could not be read.
long notifbus_replay_paths(int count, char *const *paths, notifbus_fuzz_target target);

/// 1 when allocations can be measured (a sanitizer runtime provides malloc hooks), else 0.
int notifbus_alloc_tracking_available(void);

/// Starts a measurement: live bytes count from zero again.
void notifbus_alloc_tracking_reset(void);

/// The most bytes allocated and not yet freed at any moment since the last reset.
size_t notifbus_alloc_peak_bytes(void);

#endif
