// Refused: a decoded request assigned to a variable that outlives the frame's buffer.
// expect: escapes its scope
import NotifBusProtocol

func keepBeyond(_ frames: [[UInt8]]) -> Int {
    var last = DecodeResult.badJSON("")
    for frame in frames {
        let body = UnsafeRawBufferPointer(start: frame.withUnsafeBytes { $0.baseAddress }, count: frame.count)
        last = MessageDecoder.decode(body)
    }
    if case .decoded = last { return 1 }
    return 0
}
