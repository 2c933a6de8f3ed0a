// Fixture for scripts/lib/layering.py --self-test: the transport's own tests may drive
// libevent, as the transport does.
import CLibevent
import NotifBusTransport
