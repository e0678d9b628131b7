# shellcheck shell=bash
# Shared by lab/guest and lab/checktopos: loading lab/topologies/NAME.sh.
#
# A topology file is bash, sourced with these variables preset to empty:
#   TOPO_DESC             one-line description
#   TOPO_MEM              QEMU -m value; must equal the sum of the node memdevs
#   TOPO_SMP              QEMU -smp value. Always give sockets/cores/threads
#                         and keep each socket inside one node: a bare
#                         `-smp N` is ONE socket (one L3) in QEMU >= 6.2, and
#                         a node boundary inside it makes the guest kernel
#                         WARN (topology_sane: llc-sibling not on same node).
#   TOPO_CPU              QEMU -cpu value; default "max,vendor=GenuineIntel"
#                         (TCG's plain "max" claims to be AMD without topoext,
#                         and the guest then shows no SMT siblings at all)
#   TOPO_ARGS             array of extra QEMU arguments (-object, -numa ...)
#   TOPO_EXPECT_DISTANCE  expected `cat /sys/devices/system/node/node*/distance`
#                         (one line per node, newline-terminated)
#   TOPO_EXPECT_CPULIST   expected node*/cpulist, space-separated, in node order
#   TOPO_EXPECT_SIBLINGS  expected cpu*/topology/thread_siblings_list,
#                         space-separated, in CPU order
# and may call topo_distances to describe a SLIT.

# topo_distances "ROW0" "ROW1" ...: append one `-numa dist` per ordered pair of
# distinct nodes to TOPO_ARGS and set TOPO_EXPECT_DISTANCE to the matrix.
topo_distances() {
    local -a rows=("$@") row
    local n=${#rows[@]} i j
    TOPO_EXPECT_DISTANCE=''
    for ((i = 0; i < n; i++)); do
        read -r -a row <<<"${rows[i]}"
        if ((${#row[@]} != n)); then
            echo "topo_distances: row $i has ${#row[@]} entries, want $n" >&2
            return 1
        fi
        for ((j = 0; j < n; j++)); do
            if ((i != j)); then
                TOPO_ARGS+=(-numa "dist,src=$i,dst=$j,val=${row[j]}")
            fi
        done
        TOPO_EXPECT_DISTANCE+="${row[*]}"$'\n'
    done
}

# topo_socket_nodes N SIZE: nodes 0..N-1, node I one memory-backend-ram of
# SIZE and socket I (CPUs numbered socket-major), appended to TOPO_ARGS.
topo_socket_nodes() {
    local n=$1 size=$2 i
    for ((i = 0; i < n; i++)); do
        TOPO_ARGS+=(
            -object "memory-backend-ram,id=m$i,size=$size"
            -numa "node,nodeid=$i,memdev=m$i"
            -numa "cpu,node-id=$i,socket-id=$i"
        )
    done
}

# load_topology FILE: source FILE into the TOPO_* variables.
load_topology() {
    # shellcheck disable=SC2034 # read by the callers
    {
        TOPO_DESC='' TOPO_MEM='' TOPO_SMP='' TOPO_ARGS=()
        TOPO_CPU='max,vendor=GenuineIntel'
        TOPO_EXPECT_DISTANCE='' TOPO_EXPECT_CPULIST='' TOPO_EXPECT_SIBLINGS=''
    }
    # shellcheck source=/dev/null
    source "$1" || return 1
    if [[ -z $TOPO_MEM || -z $TOPO_SMP ]]; then
        echo "$1 must set TOPO_MEM and TOPO_SMP" >&2
        return 1
    fi
}
