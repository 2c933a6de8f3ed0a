#!/usr/bin/env bash
# The desktop bridge (`notifbus desktop`): its pytest suite against python-dbusmock on a
# private session bus (with D-Bus activation of a test app) and against dunst on Xvfb, then
# the MailClick flow on that desktop, the terminated state included.
# Every service is started by the tests themselves, in temporary folders.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/venv.sh
for exe in notifbus notifbus-desktop mailclick-app; do
    [ -x ".build/debug/$exe" ] || { echo "55-desktop: .build/debug/$exe is not built"; exit 1; }
done
timeout 300 python3 -m pytest -q Tests/desktop
source scripts/lib/check-output.sh
run_example Desktop 120 Examples/Desktop/run.sh
check "dunst displays 1 notification"
check "[app] [mail app] opening email e-1 (app in foreground/background)"
check "didReceive com.apple.UNNotificationDefaultActionIdentifier on mail-e-1: completed by"
# The terminated state: the click starts the app from its desktop file, which opens the mail.
check "didReceive com.apple.UNNotificationDefaultActionIdentifier on mail-e-2: unhandled, retained for launch"
check "starting org.example.MailClick for didReceive com.apple.UNNotificationDefaultActionIdentifier on mail-e-2: Exec "
check "[bridge] [mail app] launched by a click on email e-2: opening it"
check "org.example.MailClick observes didReceive"
check "slot launch holds: null (the app took the click)"
check "[read-state] dismissed mail-e-3: marked email e-3 as read"
check "didReceive com.apple.UNNotificationDismissActionIdentifier on mail-e-3: completed by"
check 'Still on the desktop: {"notifications":[]}'
check_count 1 "starting org.example.MailClick"
# Three responses posted, and the start that one of them made.
check_count 4 "didReceive com."
check "==> Done"
echo "Desktop: ok"
