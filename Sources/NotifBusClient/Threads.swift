// The two threading primitives the client needs, on pthreads, so that programs built on
// the client (the `notifbus` binary, which is also the broker) need not load Foundation.
// They are `package`: the package's own modules share them, and the client's public API,
// which applications see, shows no lock and no thread.

import Glibc

/// A mutual-exclusion lock.
package final class Lock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    /// A new, unlocked lock.
    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Waits for the lock and takes it.
    package func lock() { pthread_mutex_lock(mutex) }
    /// Releases the lock taken by `lock()` on this thread.
    package func unlock() { pthread_mutex_unlock(mutex) }

    /// Runs `body` holding the lock and returns what it returns.
    @discardableResult
    package func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// Starts a detached thread running `body`, for blocking work kept off the cooperative pool.
package enum DetachedThread {
    private final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// Starts the thread; false when the system refused to create it.
    package static func start(_ body: @escaping @Sendable () -> Void) -> Bool {
        let context = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                box.body()
                return nil
            }, context)
        guard rc == 0 else {
            Unmanaged<Box>.fromOpaque(context).release()
            return false
        }
        pthread_detach(thread)
        return true
    }
}
