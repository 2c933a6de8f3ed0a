// fuzz-decoder: arbitrary bytes against the framing layer, the message decoder and the JSON
// tree, checking what each promises. Built with -sanitize=fuzzer it is a libFuzzer target;
// otherwise it replays corpus files, so the corpus runs as a regression test in every build.
import CFuzzerSupport
import FuzzDriver
import NotifBusProtocol

@main
enum DecoderFuzzer {
    static let name = "fuzz-decoder"
    static let defaultCorpus = "Fuzz/corpus/decoder"

    /// Peak live heap during one input may be this many times the input's size (trees of
    /// 511 nested arrays or objects, built three times over, measured at about 72)...
    static let bytesPerInputByte = 128
    /// ...plus this much. Far below the 1 MiB a length prefix may announce, so a buffer
    /// sized from a header instead of from the bytes received is caught.
    static let allocationAllowance = 64 * 1024

    static func main() {
        let target: notifbus_fuzz_target = { data, size in
            DecoderFuzzer.check(UnsafeRawBufferPointer(start: data, count: size))
            return 0
        }
        warmUp()
        FuzzDriver.run(name, defaultCorpus: defaultCorpus, inputs: "inputs", target: target)
    }

    /// One input: a byte stream for the frame decoder, each frame body and the whole input
    /// for the message decoder and the JSON tree.
    static func check(_ input: UnsafeRawBufferPointer) {
        FuzzDriver.boundingPeakHeap(
            size: input.count, bytesPerInputByte: bytesPerInputByte, allowance: allocationAllowance, input: "input"
        ) {
            let bytes = [UInt8](input)
            for body in FramingCheck.run(bytes) { BodyCheck.run(body) }
            BodyCheck.run(bytes)
        }
    }

    /// Runs each code path once before measuring, so that the runtime's one-time caches
    /// (type metadata, protocol conformances) are not charged to the first input.
    static func warmUp() {
        let frames = [
            #"{"op":"hello","id":1,"protocol":1,"name":"n"}"#,
            #"{"op":"subscribe","id":"s","events":["a","b"],"priority":1.5,"key":"k"}"#,
            #"{"op":"post","id":2,"name":"didReceive","payload":{"actionIdentifier":"x","notification":{"identifier":"i","content":{}}}}"#,
            #"{"op":"setCategories","id":3,"categories":[{"identifier":"C","actions":[{"identifier":"A","title":"T"}]}]}"#,
            #"{"op":"complete","event":1,"value":["badge"]}"#,
            #"{"op":"return","call":1,"error":{"code":"c","message":"m"}}"#,
            #"{"op":"nope","id":1e3,"x":[1,-2.5e-3,true,false,null,"\u00e9\ud83d\ude00"]}"#,
            #"[1]"#,
        ]
        for text in frames {
            let body = Array(text.utf8)
            BodyCheck.run(body)
            _ = FramingCheck.run(FrameHeader.encode(length: body.count) + body)
        }
    }
}
