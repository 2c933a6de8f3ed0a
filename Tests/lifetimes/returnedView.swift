// Refused: a decoded request handed out beyond the frame it was decoded from.
// expect: escapes its scope
import NotifBusProtocol

@_lifetime(immortal)
func decodeAndKeep(_ frame: [UInt8]) -> DecodeResult {
    let body = UnsafeRawBufferPointer(start: frame.withUnsafeBytes { $0.baseAddress }, count: frame.count)
    return MessageDecoder.decode(body)
}
