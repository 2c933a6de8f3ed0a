# Sourced by the desktop scripts: a virtual display on the first free number and a private
# session bus that activates nothing (so no server starts behind the script's back).
# Needs WORK (a folder) and PIDS (an array); exports DISPLAY and DBUS_SESSION_BUS_ADDRESS.

# start_private_desktop WIDTHxHEIGHT
start_private_desktop() {
    exec 3> >(cat > "$WORK/display")
    Xvfb -displayfd 3 -screen 0 "$1x24" -nolisten tcp >"$WORK/xvfb.log" 2>&1 &
    PIDS+=($!)
    exec 3>&-
    for _ in $(seq 1 100); do [ -s "$WORK/display" ] && break; sleep 0.05; done
    [ -s "$WORK/display" ] || { echo "Xvfb did not start: $(cat "$WORK/xvfb.log")" >&2; return 1; }
    export DISPLAY=":$(head -1 "$WORK/display")"
    cat > "$WORK/bus.conf" <<CONF
<busconfig><type>session</type><listen>unix:dir=$WORK</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>
CONF
    dbus-daemon --config-file="$WORK/bus.conf" --nofork --print-address=1 >"$WORK/address" 2>/dev/null &
    PIDS+=($!)
    for _ in $(seq 1 100); do [ -s "$WORK/address" ] && break; sleep 0.05; done
    [ -s "$WORK/address" ] || { echo "the session bus did not start" >&2; return 1; }
    export DBUS_SESSION_BUS_ADDRESS=$(head -1 "$WORK/address")
}
