#!/usr/bin/env bash
# Runs Examples/MailClick/run.sh and checks the story it prints: the foreground, terminated
# (Swift and Python app) and early-ask paths of a notification click.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/check-output.sh
run_example MailClick 120 Examples/MailClick/run.sh
# (1) foreground/background: the host relays the click, the app opens it, nothing retained.
check "[app] launched normally (no click)"
check "[host] click on mail-e-1 (event 1, userInfo {\"emailId\":\"e-1\"}): asking the app to open it"
check "[app] opening email e-1 (app in foreground/background)"
check '"outcome":"completed","retained":null'
check "story: o1 said complete; the event was completed by o1 with {\"opened\": \"e-1\"}; retained: null"
# (2) terminated, Swift app and Python app: unhandled, retained, taken once.
check_count 3 '"outcome":"unhandled","retained":"launch"'
check_count 3 "the app has no handler for it (not_implemented"
check "[app] launched by a click on email e-2"
check "[app] asked again: nil (a launch click is handed out once)"
check "[app.py] launched by a click on email e-3"
check "[app.py] asked again: nil (a launch click is handed out once)"
# (3) early ask: the waiting take receives the click; the slot stays empty.
check "[host] the app was launched by a click on email e-4: answering \"e-4\""
check "[app] launched by a click on email e-4"
check "slot launch holds: null (the click went straight to the waiting take)"
check '"completed": 1, "gone": 0, "hopTimeouts": 0, "invalid": 0, "invokes": 10, "posted": 4, "skipped": 0, "stopped": 0, "unhandled": 3'
check "==> Done"
echo "MailClick: ok"
