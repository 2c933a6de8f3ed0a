// Compiles: a decoded request's user data are read while the frame they are views of lives.
import NotifBusProtocol

func payloadCount(_ frame: [UInt8]) -> Int {
    frame.withUnsafeBytes { body in
        guard case .decoded(.request(_, .post(_, let payload?, _)), _) = MessageDecoder.decode(body) else { return -1 }
        return payload.count
    }
}
