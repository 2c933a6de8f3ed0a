#!/usr/bin/env python3
"""The MailClick app in Python: the Flutter side of ``mailclick-app`` with the same flags
and printed lines, on Clients/python, so the native host cannot tell the two apart. It must
do nothing the Swift app does not.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Optional

_ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(_ROOT / "Clients" / "python" / "src"))
sys.path.insert(0, str(_ROOT / "Examples"))

import notifbus  # noqa: E402  (importable only once the paths above are in place)

from example_support import connection_lost, run_client, say  # noqa: E402

CHANNEL = "notification_interaction"
#: Host -> app: a click arrived while the app runs. Arguments: the notification's userInfo.
OPEN_CLICKED_EMAIL = "current_email_id_in_notification_click_when_app_foreground_or_background"
#: App -> host: the id of the email whose click launched the app, or null.
LAUNCH_EMAIL_ID = "current_email_id_in_notification_click_when_app_terminated"


class MailApp:
    """The Flutter side of the mail app, on one broker connection."""

    def __init__(self, bus: notifbus.Client, ask_timeout: float) -> None:
        self.bus = bus
        self.channel = bus.method_channel(CHANNEL)
        self.ask_timeout = ask_timeout

    def handle_clicks(self) -> None:
        """From now on, clicks relayed by the host open their email here."""
        self.channel.set_method_call_handler(self._open_clicked_email, OPEN_CLICKED_EMAIL)
        say(f"ready: handling {OPEN_CLICKED_EMAIL}")

    @staticmethod
    def _open_clicked_email(_method: str, arguments: Any) -> Any:
        email_id = arguments.get("emailId") if isinstance(arguments, dict) else None
        if not isinstance(email_id, str):
            raise notifbus.MethodCallError("bad_arguments", f"no emailId in {arguments!r}")
        say(f"opening email {email_id} (app in foreground/background)")
        return {"opened": email_id}

    def ask_launch_click(self, again: bool) -> None:
        """Ask the host which click launched the app and print the answer. A second ask
        gets null: the host hands a launch click out once."""
        say(f"asking the native host {LAUNCH_EMAIL_ID}")
        try:
            answer: Optional[Any] = self.channel.invoke_method(LAUNCH_EMAIL_ID, timeout=self.ask_timeout)
        except notifbus.MissingPluginError:
            say(f"no native host answers {LAUNCH_EMAIL_ID}: launched normally")
            return
        except notifbus.NotifbusError as exc:
            say(f"asking for the launch click failed: {exc}")
            return
        email_id = answer if isinstance(answer, str) else None
        if not again:
            say(f"launched by a click on email {email_id}" if email_id else "launched normally (no click)")
        else:
            say(
                f"asked again: email {email_id}" if email_id else "asked again: nil (a launch click is handed out once)"
            )


def main() -> int:
    parser = argparse.ArgumentParser(
        description="The Flutter side of the MailClick example, in Python. The socket comes "
        "from NOTIFBUS_SOCKET as for every notifbus client."
    )
    parser.add_argument("--ask-first", action="store_true", help="ask for the launch click before handling clicks")
    parser.add_argument("--ask-twice", action="store_true", help="ask a second time, which gets null")
    parser.add_argument(
        "--ask-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="bound on the launch question; it must outlast the host's wait (default 30)",
    )
    parser.add_argument(
        "--run-for", type=float, default=60.0, metavar="SECONDS", help="exit after this long (default 60)"
    )
    options = parser.parse_args()
    return run_client("mailclick_app.py", "app", "mailclick-app.py", lambda bus: serve(bus, options))


def serve(bus: notifbus.Client, options: argparse.Namespace) -> int:
    """Ask and handle as the flags say, then stay until --run-for has passed."""
    say(f"app {bus.client_id} started")
    app = MailApp(bus, options.ask_timeout)
    if options.ask_first:
        app.ask_launch_click(again=False)
    app.handle_clicks()
    if not options.ask_first:
        app.ask_launch_click(again=False)
    if options.ask_twice:
        app.ask_launch_click(again=True)
    deadline = time.monotonic() + options.run_for
    while bus.connected and time.monotonic() < deadline:
        time.sleep(0.1)
    if bus.connected:
        say("app: --run-for has passed, closing")
        return 0
    return connection_lost("mailclick_app.py")


if __name__ == "__main__":
    sys.exit(main())
