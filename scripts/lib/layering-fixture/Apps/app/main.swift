// Fixture for scripts/lib/layering.py --self-test: an executable that may import what its
// dependency re-exports, but not a C library another module owns.
import NotifBusClient
import NotifBusProtocol
import CLibevent
