// Fixture for scripts/lib/layering.py --self-test: the core reaching for the system.
// Never compiled.
import NotifBusProtocol
import Glibc
import CLibevent

struct Core {
    func close(_ id: Int) {}
    func shutDown() {
        close(3)
        _ = Glibc.read(0, nil, 0)
        let t = Date()
        _ = t
    }
}
