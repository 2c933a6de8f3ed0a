// Fixture for scripts/lib/layering.py --self-test: the client leaning on the broker.
@_exported import NotifBusProtocol
import Dispatch
import NotifBusCore
