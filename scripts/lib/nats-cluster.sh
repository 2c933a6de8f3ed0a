# Sourced by the NATS test step, the Push example and the NATS benchmark: starts a 3-node
# nats-server cluster with JetStream on loopback, each node in its own folder under $1.
# It never binds anything but 127.0.0.1, and the caller's trap runs nats_cluster_stop.

NATS_PIDS=()
# The readiness check below, and its callers, use nats-py from the checkout's venv.
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
# Debian installs nats-server in /usr/sbin, which a normal user's PATH lacks: added (last),
# so that this script and the programs it serves find it.
if ! command -v nats-server >/dev/null && [ -x /usr/sbin/nats-server ]; then
    export PATH="$PATH:/usr/sbin"
fi

# nats_cluster_start DIR CLIENT_BASE CLUSTER_BASE: nodes n1..n3 listen on CLIENT_BASE+0..2
# (clients), CLUSTER_BASE+0..2 (routes) and CLIENT_BASE+10000+0..2 (HTTP monitoring, which
# the tests read when a check fails: each node's own view of its streams and consumers,
# replicas included), and take messages up to 8 MB (NATS's default is 1 MB), so that tests
# can publish bodies past the broker's 1 MiB maxFrame. Waits (bounded) until every node
# answers and JetStream has a meta leader. Sets and exports NATS_URLS, NATS_MONITOR_URLS
# (http://127.0.0.1:PORT of n1..n3, comma-separated) and NATS_CLUSTER_DIR (DIR: node I logs
# to DIR/nI/log).
# NOTIFBUS_NATS_PORT_OFFSET moves both bases, so that a second run on one machine (a CI
# run beside a developer's) takes ports of its own.
nats_cluster_start() {
    local dir=$1 cbase=$(($2 + ${NOTIFBUS_NATS_PORT_OFFSET:-0})) rbase=$(($3 + ${NOTIFBUS_NATS_PORT_OFFSET:-0})) i
    NATS_URLS=""
    NATS_MONITOR_URLS=""
    command -v nats-server >/dev/null || { echo "nats-server is not installed (Debian: apt-get install nats-server)" >&2; return 1; }
    python3 -c "import nats" 2>/dev/null || { echo "nats-py is missing: run scripts/setup.sh (it installs it into .build/venv)" >&2; return 1; }
    for i in 1 2 3; do
        mkdir -p "$dir/n$i/js"
        local routes="" j
        for j in 1 2 3; do
            [ "$j" = "$i" ] || routes="$routes nats-route://127.0.0.1:$((rbase + j - 1))"
        done
        cat >"$dir/n$i/server.conf" <<CONF
server_name: n$i
host: 127.0.0.1
port: $((cbase + i - 1))
http: "127.0.0.1:$((cbase + 10000 + i - 1))"
max_payload: 8MB
jetstream { store_dir: "$dir/n$i/js", max_memory_store: 64MB, max_file_store: 1GB }
cluster { name: notifbus-test, host: 127.0.0.1, port: $((rbase + i - 1)), routes: [$(echo $routes | tr ' ' ',')] }
CONF
        NATS_URLS="$NATS_URLS${NATS_URLS:+,}nats://127.0.0.1:$((cbase + i - 1))"
        NATS_MONITOR_URLS="$NATS_MONITOR_URLS${NATS_MONITOR_URLS:+,}http://127.0.0.1:$((cbase + 10000 + i - 1))"
        nats_node_start "$dir" "$i"
    done
    NATS_CLUSTER_DIR=$dir
    export NATS_URLS NATS_MONITOR_URLS NATS_CLUSTER_DIR
    local deadline=$((SECONDS + 30))
    until nats_cluster_ready "$cbase"; do
        for i in 1 2 3; do
            if ! kill -0 "${NATS_PIDS[$i]}" 2>/dev/null; then
                echo "nats-server n$i exited at start: $(tail -n 1 "$dir/n$i/log")" >&2
                return 1
            fi
        done
        if [ $SECONDS -ge $deadline ]; then echo "nats cluster did not come up"; tail -n 20 "$dir"/n*/log; return 1; fi
        sleep 0.3
    done
}

# nats_node_start DIR I: (re)starts node I with its configuration and store.
nats_node_start() {
    nats-server -c "$1/n$2/server.conf" >>"$1/n$2/log" 2>&1 &
    NATS_PIDS[$2]=$!
}

# nats_node_kill I: SIGKILLs node I.
nats_node_kill() {
    kill -KILL "${NATS_PIDS[$1]}" 2>/dev/null || true
    wait "${NATS_PIDS[$1]}" 2>/dev/null || true
}

# nats_cluster_ready CLIENT_BASE: every node accepts connections and JetStream answers.
nats_cluster_ready() {
    python3 - "$1" <<'PY'
import asyncio, sys
import nats
async def quiet(error):  # a node not up yet is the expected answer, not a traceback to print
    pass
async def main(base):
    for i in range(3):
        nc = await nats.connect(f"nats://127.0.0.1:{base + i}", connect_timeout=1, allow_reconnect=False,
                                max_reconnect_attempts=0, error_cb=quiet)
        try:
            await nc.jetstream().account_info()
        finally:
            await nc.close()
try:
    asyncio.run(asyncio.wait_for(main(int(sys.argv[1])), 5))
except Exception:
    sys.exit(1)
PY
}

nats_cluster_stop() {
    local pid
    for pid in "${NATS_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${NATS_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    NATS_PIDS=()
}
