# shellcheck shell=bash disable=SC2034,SC2054
# 2 nodes, 4 CPUs, CPU numbers interleaved across nodes (as many BIOSes
# enumerate them): node0 CPUs 0,2; node1 CPUs 1,3. 512 MiB per node.
# QEMU numbers CPUs socket-major, so it cannot make CPUs 0 and 2 share a
# socket; each CPU is its own socket (own L3) and node0 holds sockets 0,2.
TOPO_DESC="2 nodes, CPUs interleaved (node0: 0,2; node1: 1,3), 512 MiB each"
TOPO_MEM=1024M
TOPO_SMP=4,sockets=4,cores=1,threads=1
TOPO_ARGS=(
    -object memory-backend-ram,id=m0,size=512M
    -object memory-backend-ram,id=m1,size=512M
    -numa node,nodeid=0,memdev=m0,cpus=0,cpus=2
    -numa node,nodeid=1,memdev=m1,cpus=1,cpus=3
)
TOPO_EXPECT_DISTANCE=$'10 20\n20 10\n'
TOPO_EXPECT_CPULIST="0,2 1,3"
TOPO_EXPECT_SIBLINGS="0 1 2 3"
