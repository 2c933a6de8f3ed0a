// Fixture for scripts/lib/layering.py --self-test: the transport may use libevent and
// the system, but not a module it does not declare.
import CLibevent
import Foundation
import Glibc
import NotifBusCore
import NotifBusClient

func pump(_ fd: Int32) { _ = read(fd, nil, 0) }
