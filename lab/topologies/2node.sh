# shellcheck shell=bash disable=SC2034,SC2054
# 2 nodes, 4 CPUs (node0: 0-1, node1: 2-3), 512 MiB per node, default
# distances (QEMU/ACPI SLIT default: 10 local, 20 remote). One socket per
# node, so the L3 (per socket) never spans nodes.
TOPO_DESC="2 nodes x 2 CPUs, 512 MiB each, default distances"
TOPO_MEM=1024M
TOPO_SMP=4,sockets=2,cores=2,threads=1
TOPO_ARGS=(
    -object memory-backend-ram,id=m0,size=512M
    -object memory-backend-ram,id=m1,size=512M
    -numa node,nodeid=0,memdev=m0,cpus=0-1
    -numa node,nodeid=1,memdev=m1,cpus=2-3
)
TOPO_EXPECT_DISTANCE=$'10 20\n20 10\n'
TOPO_EXPECT_CPULIST="0-1 2-3"
TOPO_EXPECT_SIBLINGS="0 1 2 3"
