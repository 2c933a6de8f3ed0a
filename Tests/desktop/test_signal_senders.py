"""Signals the bridge acts on are believed only from the sender that may send them: the
server's signals from the connection that owns org.freedesktop.Notifications, and
NameOwnerChanged from the bus itself (org.freedesktop.DBus), also when a third connection
addresses a forged one to the bridge directly. Against python-dbusmock on a private bus.
"""

from __future__ import annotations

from conftest import INVITE, MESSAGE, notification, wait_until

DEFAULT = "com.apple.UNNotificationDefaultActionIdentifier"


def ready(desktop):
    desktop.start_server()
    desktop.start_broker()
    desktop.client().set_notification_categories([MESSAGE, INVITE])
    desktop.start_bridge("--verbose")
    desktop.observe_clicks()
    return desktop.channel()


def test_a_forged_name_owner_changed_sent_to_the_bridge_changes_nothing(desktop):
    channel = ready(desktop)
    shown = channel.invoke_method("add", notification("m1", "INVITE"))
    server = desktop.tool("owner")
    bridge = desktop.tool("name-of", str(desktop.bridge.pid))
    assert server and bridge, (server, bridge)
    # A third connection claims, to the bridge alone, that it took the server's name over.
    # It is sent (and flushed) before the server's click, so the bridge reads it first.
    attacker = desktop.tool("forge-owner", bridge, server, "self")
    desktop.emit("ActionInvoked", "us", shown["desktopId"], "default")
    got = desktop.next_response()
    assert got["actionIdentifier"] == DEFAULT and got["notification"]["identifier"] == "m1"
    log = desktop.log()
    assert f"ignored NameOwnerChanged from {attacker}" in log and "notification server changed" not in log, log


def test_the_real_name_owner_changed_still_counts(desktop):
    channel = ready(desktop)
    channel.invoke_method("add", notification("m1", "INVITE"))
    desktop.stop_server()
    wait_until(lambda: "forgot 1 delivered" in desktop.log(), "the bridge to believe the bus's own NameOwnerChanged")
