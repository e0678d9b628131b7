# shellcheck shell=bash disable=SC2034,SC2054
# 8 nodes x 1 CPU, 160 MiB per node, with the SLIT of an HP ProLiant DL980
# (8 sockets; pairs of sockets share a node controller, so 10/12/17/19).
# One socket (and L3) per node.
TOPO_DESC="HP DL980-like: 8 nodes x 1 CPU, 160 MiB each, distances 10/12/17/19"
TOPO_MEM=1280M
TOPO_SMP=8,sockets=8,cores=1,threads=1
TOPO_ARGS=()
for n in 0 1 2 3 4 5 6 7; do
    TOPO_ARGS+=(
        -object "memory-backend-ram,id=m$n,size=160M"
        -numa "node,nodeid=$n,memdev=m$n,cpus=$n"
    )
done
topo_distances \
    "10 12 17 17 19 19 19 19" \
    "12 10 17 17 19 19 19 19" \
    "17 17 10 12 19 19 19 19" \
    "17 17 12 10 19 19 19 19" \
    "19 19 19 19 10 12 17 17" \
    "19 19 19 19 12 10 17 17" \
    "19 19 19 19 17 17 10 12" \
    "19 19 19 19 17 17 12 10"
TOPO_EXPECT_CPULIST="0 1 2 3 4 5 6 7"
TOPO_EXPECT_SIBLINGS="0 1 2 3 4 5 6 7"
