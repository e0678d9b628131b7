# shellcheck shell=bash disable=SC2034,SC2054
# 4 sockets x 1 core x 2 threads = 8 CPUs, one socket per node, 256 MiB per
# node, default distances. QEMU numbers CPUs socket-major, thread-minor, so
# the SMT siblings are CPU pairs (0,1) (2,3) (4,5) (6,7) = node 0..3.
# The guest only sees the siblings because TOPO_CPU defaults to
# max,vendor=GenuineIntel (see topology-lib.sh); with plain TCG "max" (AMD,
# no topoext) every thread shows up as its own core.
TOPO_DESC="4 nodes, each one socket of 1 core x 2 SMT threads, 256 MiB each"
TOPO_MEM=1024M
TOPO_SMP=8,sockets=4,cores=1,threads=2
topo_socket_nodes 4 256M
TOPO_EXPECT_DISTANCE=$'10 20 20 20\n20 10 20 20\n20 20 10 20\n20 20 20 10\n'
TOPO_EXPECT_CPULIST="0-1 2-3 4-5 6-7"
TOPO_EXPECT_SIBLINGS="0-1 0-1 2-3 2-3 4-5 4-5 6-7 6-7"
