// Fixture for scripts/lib/layering.py --self-test: another module's tests may not.
import CLibevent
import NotifBusClient
import NotifBusProtocol
