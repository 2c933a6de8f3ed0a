"""Talks to the session bus for the desktop tests; run with Debian's /usr/bin/python3,
which has the dbus module python-dbusmock needs. Prints JSON on stdout, one document.
It only reads and drives the fake server; it never touches notifbus.

    dbus_tool.py calls MEMBER          the mock's recorded calls of MEMBER, oldest first
    dbus_tool.py clear                 forgets the recorded calls
    dbus_tool.py emit NAME SIG JSON    the mock emits signal NAME with those arguments
    dbus_tool.py clicks ID...          the mock emits ActionInvoked(ID, "default") for each, back to back;
                                       prints when the first was sent (time.monotonic())
    dbus_tool.py owner                 the unique name owning org.freedesktop.Notifications, or null
    dbus_tool.py reload                the bus daemon reads its service files again
    dbus_tool.py has-owner NAME        whether a connection owns NAME
    dbus_tool.py name-of PID           the unique name of the connection process PID holds, or null
    dbus_tool.py forge-owner DEST OLD NEW
                                       this connection (a third party) sends NameOwnerChanged for
                                       org.freedesktop.Notifications from OLD to NEW ("self": this
                                       connection), addressed to DEST, on the bus daemon's own path
                                       and interface; prints this connection's unique name
"""

import json
import sys
import time

import dbus

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
MOCK = "org.freedesktop.DBus.Mock"


def plain(value):
    """D-Bus values as JSON; bytes become {"byte": n} so that types stay visible."""
    if isinstance(value, dbus.Byte):
        return {"byte": int(value)}
    if isinstance(value, dbus.Boolean):
        return bool(value)
    if isinstance(value, (dbus.Int16, dbus.Int32, dbus.Int64, dbus.UInt16, dbus.UInt32, dbus.UInt64)):
        return int(value)
    if isinstance(value, (dbus.String, dbus.ObjectPath, dbus.Signature)):
        return str(value)
    if isinstance(value, dbus.Dictionary):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (dbus.Array, dbus.Struct, list, tuple)):
        return [plain(v) for v in value]
    return value


def typed(signature, values):
    out = []
    for code, value in zip(signature, values):
        out.append(dbus.UInt32(value) if code == "u" else dbus.String(value))
    return out


def main(argv):
    bus = dbus.SessionBus()
    command = argv[1]
    if command == "owner":
        try:
            print(json.dumps(str(bus.get_name_owner(NAME))))
        except dbus.exceptions.DBusException:
            print("null")
        return 0
    daemon = dbus.Interface(
        bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus", introspect=False), "org.freedesktop.DBus"
    )
    if command == "reload":
        daemon.ReloadConfig()
        print("null")
        return 0
    if command == "has-owner":
        print(json.dumps(bool(daemon.NameHasOwner(argv[2]))))
        return 0
    if command == "name-of":
        found = None
        for name in daemon.ListNames():
            if name.startswith(":") and name != bus.get_unique_name():
                try:
                    if int(daemon.GetConnectionUnixProcessID(name)) == int(argv[2]):
                        found = str(name)
                except dbus.exceptions.DBusException:
                    pass
        print(json.dumps(found))
        return 0
    if command == "forge-owner":
        forged = dbus.lowlevel.SignalMessage("/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged")
        forged.set_destination(argv[2])
        new = bus.get_unique_name() if argv[4] == "self" else argv[4]
        forged.append(NAME, argv[3], new, signature="sss")
        bus.send_message(forged)
        bus.flush()
        print(json.dumps(bus.get_unique_name()))
        return 0
    mock = dbus.Interface(bus.get_object(NAME, PATH, introspect=False), MOCK)
    if command == "calls":
        calls = mock.GetMethodCalls(argv[2], timeout=5)
        print(json.dumps([plain(args) for _, args in calls]))
    elif command == "clear":
        mock.ClearCalls(timeout=5)
        print("null")
    elif command == "emit":
        name, signature, args = argv[2], argv[3], json.loads(argv[4])
        mock.EmitSignal(
            "org.freedesktop.Notifications",
            name,
            signature,
            dbus.Array(typed(signature, args), signature="v"),
            signature="sssav",
            timeout=5,
        )
        print("null")
    elif command == "clicks":
        # Printed: when the first click was sent, in time.monotonic() (which all processes share).
        sent = time.monotonic()
        for id in argv[2:]:
            mock.EmitSignal(
                "org.freedesktop.Notifications",
                "ActionInvoked",
                "us",
                dbus.Array([dbus.UInt32(int(id)), dbus.String("default")], signature="v"),
                signature="sssav",
                timeout=5,
            )
        print(json.dumps(sent))
    else:
        print(f"unknown command {command}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
