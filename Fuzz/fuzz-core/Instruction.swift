// The program a fuzz-core input encodes: one byte of configuration, then instructions, each
// an opcode byte and a fixed number of operand bytes. Every byte string is a valid program
// (missing operands read as zero), so mutations never waste an input on a parse error.
// Decoding and encoding live side by side so that seed programs stay in step with the reader.

/// A reader over the input; past the end it yields zeros and reports exhaustion.
struct ProgramReader {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset >= bytes.count }

    mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        let end = Swift.min(bytes.count, offset + count)
        defer { offset = end }
        return Array(bytes[Swift.min(offset, end)..<end])
    }
}

/// One step of a program. Connection operands select among connections already made (see
/// `Session.connection(_:)`); other operands index the pools in `FrameTemplates`.
enum Instruction: Equatable {
    /// Accept a socket from uid `Session.uids[uid % 4]`; flag bit 0 greets it at once.
    case connect(uid: UInt8, flags: UInt8)
    /// A request built from template `template % 16` with id choice `id` and operands; for
    /// post, put, take and setCategories `template / 16` picks an idempotency key
    /// (`FrameTemplates.onceKey`).
    case send(connection: UInt8, template: UInt8, id: UInt8, a: UInt8, b: UInt8, c: UInt8)
    /// A frame body of raw fuzz bytes.
    case raw(connection: UInt8, body: [UInt8])
    /// Answer an `event` this connection received (`pick` chooses which) with kind `kind % 8`.
    case answer(connection: UInt8, pick: UInt8, kind: UInt8)
    /// Return a `call` this connection received with kind `kind % 6`.
    case `return`(connection: UInt8, pick: UInt8, kind: UInt8)
    /// The peer hangs up.
    case disconnect(connection: UInt8)
    /// The clock moves `ms` milliseconds (255 means ten minutes); flag bit 0 also fires the timer.
    case advance(ms: UInt8, flags: UInt8)
    /// The clock moves to exactly the broker's next deadline, and the timer fires.
    case tickAtDeadline
    /// A length prefix of 0 or above maxFrame arrives.
    case oversized(connection: UInt8, choice: UInt8)
    /// SIGTERM.
    case shutdown
    /// How the transport reports durable writes: flag bit 0 holds them in flight across
    /// steps (else each is reported after the step that asked for it), bit 1 reports them
    /// failed, bit 2 reports the oldest one in flight now.
    case storage(flags: UInt8)
    /// The broker is SIGKILLed and started again on what is on disk: every connection is
    /// gone; writes in flight are lost, or with flag bit 0 landed (synced, never reported).
    case restart(flags: UInt8)

    /// Opcodes are a byte modulo 32; several values map to the common instructions so that
    /// random programs are mostly traffic, and shutdown, which ends the traffic, is rare.
    static func decode(_ r: inout ProgramReader) -> Instruction {
        switch r.byte() % 32 {
        case 0...11:
            return .send(connection: r.byte(), template: r.byte(), id: r.byte(), a: r.byte(), b: r.byte(), c: r.byte())
        case 30: return .restart(flags: r.byte())
        case 12, 13: return .connect(uid: r.byte(), flags: r.byte())
        case 14, 15:
            let connection = r.byte()
            let length = Int(r.byte())
            return .raw(connection: connection, body: r.bytes(length))
        case 16...19: return .answer(connection: r.byte(), pick: r.byte(), kind: r.byte())
        case 20, 21: return .return(connection: r.byte(), pick: r.byte(), kind: r.byte())
        case 22, 23: return .disconnect(connection: r.byte())
        case 24...26: return .advance(ms: r.byte(), flags: r.byte())
        case 27: return .tickAtDeadline
        case 28: return .oversized(connection: r.byte(), choice: r.byte())
        case 31: return .storage(flags: r.byte())
        default: return .shutdown
        }
    }

    /// The bytes `decode` reads back as this instruction.
    var encoded: [UInt8] {
        switch self {
        case .send(let connection, let template, let id, let a, let b, let c): return [0, connection, template, id, a, b, c]
        case .connect(let uid, let flags): return [12, uid, flags]
        case .raw(let connection, let body): return [14, connection, UInt8(body.count)] + body
        case .answer(let connection, let pick, let kind): return [16, connection, pick, kind]
        case .return(let connection, let pick, let kind): return [20, connection, pick, kind]
        case .disconnect(let connection): return [22, connection]
        case .advance(let ms, let flags): return [24, ms, flags]
        case .tickAtDeadline: return [27]
        case .oversized(let connection, let choice): return [28, connection, choice]
        case .shutdown: return [29]
        case .storage(let flags): return [31, flags]
        case .restart(let flags): return [30, flags]
        }
    }
}
