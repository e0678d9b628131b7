# shellcheck shell=bash disable=SC2034,SC2054
# 4 sockets x 2 cores = 8 CPUs, one socket per node, 256 MiB per node,
# default distances: the many-node guest with more than one CPU per node
# and no SMT (issue 28: NUMA balancing and a forced node acting on several
# nodes, each with a core to spare). QEMU numbers CPUs socket-major, so
# node N has CPUs 2N and 2N+1.
TOPO_DESC="4 nodes, each one socket of 2 cores, 256 MiB each"
TOPO_MEM=1024M
TOPO_SMP=8,sockets=4,cores=2,threads=1
topo_socket_nodes 4 256M
TOPO_EXPECT_DISTANCE=$'10 20 20 20\n20 10 20 20\n20 20 10 20\n20 20 20 10\n'
TOPO_EXPECT_CPULIST="0-1 2-3 4-5 6-7"
TOPO_EXPECT_SIBLINGS="0 1 2 3 4 5 6 7"
