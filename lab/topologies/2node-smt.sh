# shellcheck shell=bash disable=SC2034,SC2054
# 2 nodes, each one socket (one LLC) of 2 cores x 2 SMT threads, 512 MiB
# each: the smallest machine on which the load balancer chooses between an
# SMT sibling, another core of the LLC and another node
# (docs/sim-validation.md, "Which balancer moves the probe within a node").
TOPO_DESC="2 nodes, each one socket of 2 cores x 2 SMT threads, 512 MiB each"
TOPO_MEM=1024M
TOPO_SMP=8,sockets=2,cores=2,threads=2
TOPO_ARGS=()
for n in 0 1; do
    TOPO_ARGS+=(
        -object "memory-backend-ram,id=m$n,size=512M"
        -numa "node,nodeid=$n,memdev=m$n"
        -numa "cpu,node-id=$n,socket-id=$n"
    )
done
TOPO_EXPECT_DISTANCE=$'10 20\n20 10\n'
TOPO_EXPECT_CPULIST="0-3 4-7"
TOPO_EXPECT_SIBLINGS="0-1 0-1 2-3 2-3 4-5 4-5 6-7 6-7"
