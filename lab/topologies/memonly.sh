# shellcheck shell=bash disable=SC2034,SC2054
# 3 nodes, 256 MiB each: node0 CPUs 0-1, node1 CPUs 2-3, node2 memory only
# (no CPUs, like a CXL/HBM expander or a CPU-less node after offlining).
# Distances: 0<->1 = 20, 0<->2 = 30, 1<->2 = 25 (node2 hangs off node1).
# Node0 = socket 0, node1 = socket 1.
TOPO_DESC="3 nodes: 2 with 2 CPUs each, 1 memory-only; distances 10/20/25/30"
TOPO_MEM=768M
TOPO_SMP=4,sockets=2,cores=2,threads=1
TOPO_ARGS=(
    -object memory-backend-ram,id=m0,size=256M
    -object memory-backend-ram,id=m1,size=256M
    -object memory-backend-ram,id=m2,size=256M
    -numa node,nodeid=0,memdev=m0,cpus=0-1
    -numa node,nodeid=1,memdev=m1,cpus=2-3
    -numa node,nodeid=2,memdev=m2
)
topo_distances \
    "10 20 30" \
    "20 10 25" \
    "30 25 10"
TOPO_EXPECT_CPULIST="0-1 2-3 "
TOPO_EXPECT_SIBLINGS="0 1 2 3"
