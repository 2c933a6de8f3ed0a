// A trait for tests whose bodies block: they run on threads of their own, never on the
// cooperative pool. All suites share one process, whose pool has one thread per core; two
// bodies sleeping in `Child.waitFor` or reading a socket would hold all of it, and an async
// test in another suite would wait for a thread until its bounds ran out.
import Foundation
import NotifBusClient
import Testing

extension Trait where Self == OwnThread {
    /// The test's body runs on a thread of its own (for synchronous, blocking bodies only:
    /// the body's child tasks would run on that thread too).
    static var ownThread: Self { OwnThread() }
}

/// Runs each test case it covers on a fresh thread, as its task's executor; at most one such
/// body per core runs at a time, as many as the pool ran before.
struct OwnThread: TestTrait, SuiteTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard testCase != nil else { return try await function() }
        await OwnThread.gate.enter()
        let executor = ThreadExecutor()
        defer {
            executor.finish()
            OwnThread.gate.leave()
        }
        try await withTaskExecutorPreference(executor) { try await function() }
    }

    static let gate = TestGate(width: max(1, ProcessInfo.processInfo.activeProcessorCount))
}

/// A counting gate whose waiters are suspended tasks, not blocked threads.
final class TestGate: @unchecked Sendable {
    private let lock = NSLock()
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(width: Int) { free = width }

    func enter() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = lock.withLock {
                if free > 0 {
                    free -= 1
                    return true
                }
                waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func leave() {
        let next = lock.withLock {
            if waiting.isEmpty {
                free += 1
                return nil as CheckedContinuation<Void, Never>?
            }
            return waiting.removeFirst()
        }
        next?.resume()
    }
}

/// A task executor with one thread that runs its jobs in order. After `finish` the thread
/// ends once its queue is empty; a job that still arrives goes to the global executor.
final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var finished = false
    private var running = true

    init() {
        let started = DetachedThread.start { [self] in run() }
        precondition(started, "cannot start a test thread")
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let queued = condition.withLock {
            guard running else { return false }
            jobs.append(job)
            condition.signal()
            return true
        }
        if !queued { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
    }

    func finish() {
        condition.withLock {
            finished = true
            condition.signal()
        }
    }

    private func run() {
        while true {
            let job: UnownedJob? = condition.withLock {
                while jobs.isEmpty && !finished { condition.wait() }
                if jobs.isEmpty {
                    running = false
                    return nil
                }
                return jobs.removeFirst()
            }
            guard let job else { return }
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
