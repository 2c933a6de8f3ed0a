#!/usr/bin/env bash
# The desktop bridge (`notifbus desktop`): its pytest suite against python-dbusmock on a
# private session bus and against dunst on Xvfb, then the MailClick flow on that desktop.
# Every service is started by the tests themselves, in temporary folders.
set -euo pipefail
cd "$(dirname "$0")/../.."
for exe in notifbus notifbus-desktop mailclick-host mailclick-app; do
    [ -x ".build/debug/$exe" ] || { echo "55-desktop: .build/debug/$exe is not built"; exit 1; }
done
timeout 240 python3 -m pytest -q Tests/desktop
source scripts/lib/check-output.sh
run_example Desktop 120 Examples/Desktop/run.sh
check "dunst displays 1 notification"
check "[app] opening email e-1 (app in foreground/background)"
check "didReceive com.apple.UNNotificationDefaultActionIdentifier on mail-e-1: completed by"
check "didReceive com.apple.UNNotificationDefaultActionIdentifier on mail-e-2: unhandled, retained for launch"
check "[app] launched by a click on email e-2"
check "[app] asked again: nil (a launch click is handed out once)"
check "[read-state] dismissed mail-e-3: marked email e-3 as read"
check "didReceive com.apple.UNNotificationDismissActionIdentifier on mail-e-3: completed by"
check 'Still on the desktop: {"notifications":[]}'
check_count 3 "didReceive com."
check "==> Done"
echo "Desktop: ok"
