#!/usr/bin/env bash
# Runs the Categories example and checks its story: categories registered and read back,
# clicks routed by action to the right process, refused clicks, launch retention.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/check-output.sh
run_example Categories 60 Examples/Categories/run.sh
check "registered 3 categories: INVITE: ACCEPT [foreground], DECLINE [destructive]; MESSAGE {customDismissAction, hiddenPreviewsShowTitle}: REPLY [text input]; REMINDER: SNOOZE, OPEN [foreground]"
check "read back from the bus: identical"
check "the bus holds INVITE, MESSAGE, REMINDER"
check "willPresent inv-1: present with list, banner (completed by"
check "willPresent msg-1: present with badge, sound, banner (completed by"
check "willPresent news-1: not presented (unhandled: no observer decided"
check "[invites] didReceive ACCEPT on inv-1: accepted the invitation 'Team lunch' and opened the calendar"
check "didReceive ACCEPT on inv-1: handled by"
check '"handledBy":"invites"}; not retained'
check "[invites] didReceive DECLINE on inv-2: declined the invitation 'Board meeting' in the background"
check "[invites] didReceive REPLY on msg-1: not mine, passing it on"
check "[messages] didReceive REPLY on msg-1: sent the reply: Sounds good, see you at noon"
check '"handledBy":"messages","userText":"Sounds good, see you at noon"}; not retained'
check "[messages] didReceive dismiss on msg-2: marked msg-2 as read (dismissed)"
check "refused at the bus: invalid_action: action 'REPLY' takes text input"
check "refused at the bus: invalid_action: the dismiss action needs a category with 'customDismissAction'"
check "refused at the bus: invalid_action: category 'INVITE' has no action 'REPLY'"
check "no observer saw them"
check "[reminders] didReceive SNOOZE on rem-1: snoozed rem-1 for 10 minutes"
check "[reminders] didReceive OPEN on rem-1: not mine, passing it on"
check "didReceive OPEN on rem-1: unhandled; retained for launch in slot 'launch'"
check 'notifbus take launch: {"actionIdentifier":"OPEN","notification":{"content":{"categoryIdentifier":"REMINDER","title":"Water the plants"},"identifier":"rem-1"}}'
check "asking again: null"
check "didReceive SNOOZE on rem-2: unhandled; not retained: the action does not launch the app"
check "the launch slot after the background Snooze: null"
check "didReceive OPEN on rem-2: unhandled; retained for launch in slot 'launch'"
check "didReceive default on msg-4: unhandled; retained for launch in slot 'launch'"
check "the launch slot holds the newest launching click: msg-4 com.apple.UNNotificationDefaultActionIdentifier"
if grep -qF "UNEXPECTED" "$OUT"; then
    echo "Categories example reported something unexpected"
    cat "$OUT"
    exit 1
fi
echo "Categories: ok"
