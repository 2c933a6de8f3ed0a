// Refused: a payload seen in place kept in a record that outlives the frame.
// expect: has non-Escapable type
import NotifBusProtocol

struct Kept {
    var payload: JSONBytes?
}
