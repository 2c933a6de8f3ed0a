// The decoders' tables of names against their text: every packed literal that `FieldName`,
// `OpName` and the direct path's `DirectKey` match is the packing of the name it stands for
// (and of no other), every name's bit is its place in the list, and the count the field
// table is allocated with is the list's.
import Testing

@testable import NotifBusProtocol

@Suite struct NameTableTests {
    @Test func everyFieldNameIsMatchedByThePackingOfItsText() {
        for name in FieldName.allCases {
            #expect(FieldName(PackedName(name.text)) == name, "'\(name.text)'")
            // The same bytes in a frame's buffer, where the decoder packs them.
            let bytes = Array(name.text.utf8) + [UInt8](repeating: UInt8(ascii: "\""), count: 16)
            let packed = bytes.withUnsafeBufferPointer { PackedName($0.baseAddress!, name.text.utf8.count, limit: $0.baseAddress! + $0.count) }
            #expect(FieldName(packed) == name, "'\(name.text)' packed in place")
        }
        #expect(Set(FieldName.allCases.map(\.text)).count == FieldName.allCases.count)
    }

    @Test func everyOpNameIsMatchedByThePackingOfItsText() {
        for op in OpName.allCases {
            let text = "\(op)"
            #expect(OpName(PackedName(text)) == op, "'\(text)'")
            #expect(FieldName(PackedName(text)) == nil || text == "name", "'\(text)' is also a field name")
        }
        // The ops the protocol names (`Op`), each an `OpName`, and no other.
        let wire = [
            Op.hello, Op.ping, Op.subscribe, Op.unsubscribe, Op.post, Op.handle, Op.unhandle, Op.invoke, Op.put, Op.take,
            Op.peek, Op.setCategories, Op.getCategories, Op.status, Op.monitor, Op.next, Op.complete, Op.stop, Op.return,
        ]
        #expect(Set(wire) == Set(OpName.allCases.map { "\($0)" }))
        for text in wire { #expect(OpName(PackedName(text)) != nil, "'\(text)'") }
    }

    @Test func namesThatAreNotKnownMatchNothing() {
        for name in FieldName.allCases.map(\.text) + OpName.allCases.map({ "\($0)" }) {
            for other in [name + "s", String(name.dropLast()), name.uppercased(), "x" + name] {
                #expect(FieldName(PackedName(other)) == nil || FieldName.allCases.contains { $0.text == other }, "'\(other)'")
                #expect(OpName(PackedName(other)) == nil || OpName.allCases.contains { "\($0)" == other }, "'\(other)'")
            }
        }
        #expect(FieldName(PackedName("")) == nil && OpName(PackedName("\u{0}op")) == nil)
    }

    @Test func everyDirectKeyIsThePackingOfItsTextAndQuote() {
        func packed(_ text: String) -> UInt64 {
            var word: UInt64 = 0
            for (i, byte) in text.utf8.prefix(8).enumerated() { word |= UInt64(byte) << UInt64(i * 8) }
            return word
        }
        let keys: [(FieldName, UInt64)] = [
            (.op, DirectKey.op), (.id, DirectKey.id), (.channel, DirectKey.channel), (.method, DirectKey.method),
            (.name, DirectKey.name), (.payload, DirectKey.payload), (.call, DirectKey.call), (.result, DirectKey.result),
            (.event, DirectKey.event), (.value, DirectKey.value), (.once, DirectKey.once),
        ]
        for (name, key) in keys {
            #expect(name.text.utf8.count < 8 && key == packed(name.text + "\""), "'\(name.text)'")
        }
        #expect(DirectKey.argument == packed("arguments") && FieldName.arguments.text == "arguments")
        #expect(Set(keys.map(\.1)).count == keys.count)
    }

    @Test func bitsAndCountFollowTheList() {
        #expect(FieldName.count == FieldName.allCases.count)
        for (place, name) in FieldName.allCases.enumerated() {
            #expect(name.rawValue == place && name.bit == 1 << UInt32(place), "'\(name.text)'")
            #expect(FieldSet(name).rawValue == name.bit)
        }
        #expect(FieldSet.channel == FieldSet(.channel) && FieldSet.once.rawValue == 1 << 23)
        #expect(FieldName.allCases.count <= 32, "a FieldSet holds 32 names")
    }
}
