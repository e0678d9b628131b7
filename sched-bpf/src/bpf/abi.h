/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * What the scheduler and numalab share: its configuration (read-only data,
 * set before load) and its account (maps numalab reads). src/lib.rs mirrors
 * every struct here with #[repr(C)]; its tests hold the sizes equal to the
 * ones this object's BTF gives, so a field added on one side only fails a
 * test instead of shifting every field after it.
 */
#ifndef NUMALAB_SCHED_ABI_H
#define NUMALAB_SCHED_ABI_H

/* Sized for the machines numalab models; loading refuses a bigger one. */
#define NL_MAX_CPUS 1024
#define NL_MAX_NODES 16
/* Tasks whose account is kept (homed ones only). */
#define NL_MAX_TASKS 16384

/* When a task without an explicit homenode gets one (the document's node_policy). */
enum nl_node_policy {
	NL_POLICY_NONE = 0,	/* never: only tasks numalab homes explicitly */
	NL_POLICY_EXEC = 1,	/* node_policy 0: at exec; forks inherit */
	NL_POLICY_FORK_MM = 2,	/* node_policy 1: at fork, when the child has its own mm */
	NL_POLICY_FORK = 3,	/* node_policy 2: at every fork, threads too */
};

/* Mechanisms, each switchable (cfg.mechanisms bits). */
enum nl_mechanism {
	NL_MECH_PLACE = 1 << 0,		/* an idle CPU of the homenode first */
	NL_MECH_QUEUE = 1 << 1,		/* else queue on the homenode */
	NL_MECH_REATTRACT = 1 << 2,	/* bring a runaway back when a home CPU is free */
	NL_MECH_STEAL_DELAY = 1 << 3,	/* other nodes take it only after a distance delay */
};

/*
 * Ordered widest first, with an explicit tail pad, so that neither C nor Rust
 * adds hidden padding (the Rust mirror is plain old data).
 */
struct nl_config {
	u32 nr_cpus;	/* CPU ids 0..nr_cpus-1 */
	u32 nr_nodes;	/* node ids 0..nr_nodes-1 */
	u32 node_policy;
	u32 mechanisms;
	u64 slice_ns;
	u64 timer_ns;	/* period of the steal / re-attraction scan */
	/*
	 * The wait after which node `to` may take a task homed on `from`:
	 * [from][to], on an idle machine and on a busy one (as many runnable
	 * tasks as CPUs); in between it grows with the load. The document gives
	 * both columns: 2/3/4 ms at low load, 132/199/265 ms at average load.
	 */
	u64 steal_delay_ns[NL_MAX_NODES][NL_MAX_NODES];
	u64 steal_delay_busy_ns[NL_MAX_NODES][NL_MAX_NODES];
	/* The node of each CPU; -1 for a CPU that does not exist or is offline. */
	s32 cpu_node[NL_MAX_CPUS];
	/*
	 * The CPUs of each node in the compressed-row form of the document's
	 * pool_ptr[] / pool_cpus[]: node n's CPUs are
	 * node_cpus[node_first[n] .. node_first[n + 1]).
	 */
	s32 node_cpus[NL_MAX_CPUS];
	/* SLIT distance [from][to]. */
	u32 distance[NL_MAX_NODES][NL_MAX_NODES];
	/* For each node, the other nodes nearest first (nr_nodes - 1 entries). */
	u32 steal_order[NL_MAX_NODES][NL_MAX_NODES];
	u32 node_first[NL_MAX_NODES + 1];
	u32 nr_online;	/* online CPUs with a node */
};

/* Per node, summed over CPUs by numalab (a per-CPU array, no atomics). */
struct nl_node_acct {
	u64 home_ns;		/* tasks homed here, running here */
	u64 away_ns;		/* tasks homed here, running on another node */
	u64 guest_ns;		/* tasks homed elsewhere, running here */
	u64 free_ns;		/* tasks without a homenode, running here */
	u64 runs_home;		/* times a task homed here started running here */
	u64 runs_away;		/* ... started running elsewhere */
	u64 placed_idle;	/* wake-ups placed on an idle CPU of the homenode */
	u64 queued_home;	/* enqueued on the homenode's queue */
	u64 reattract_kicks;	/* runaways homed here told to come back */
	u64 reattracted;	/* runaways that came back */
	u64 stolen_from;	/* homed tasks another node took from this node's queue */
	u64 stole;		/* tasks homed elsewhere this node's CPUs took */
	u64 stole_free;		/* tasks without a homenode taken from another node's queue */
	u64 wait_ns;		/* queueing delay of tasks homed here: enqueue to running */
	u64 waits;
	u64 wait_max_ns;
	u64 homed_at_exec;	/* homenodes chosen here by the node policy */
	u64 homed_at_fork;
	u64 stolen_backlog;	/* of stolen_from: taken before their own wait reached the
				 * delay, because their home had been backlogged that long */
	u64 guest_kept;		/* runaways homed here kept running as guests at slice end */
};

/* Per homed task (a hash map keyed by thread id). */
struct nl_task_acct {
	s32 tgid;
	s32 home;
	char comm[16];
	u64 node_ns[NL_MAX_NODES];	/* time running on each node */
	u64 runs;
	u64 runs_home;
	u64 wait_ns;
	u64 waits;
	u64 wait_max_ns;
	u64 reattracted;
	u64 stolen;		/* times another node took it from its home queue */
	u64 placed_idle;
	u64 stolen_backlog;	/* of stolen: allowed by its home's backlog, not its own wait */
	u64 guest_kept;		/* slices it went on running away from home, as a guest */
};

/* Global, in .bss. */
struct nl_stats {
	u64 steals_by_distance[256];	/* index: SLIT distance of thief to home */
	u64 tasks_untracked;		/* homed tasks the task map had no room for */
	u64 timer_runs;
	u64 exit_kind;			/* enum scx_exit_kind, 0 while loaded */
	s64 exit_code;
	char exit_reason[128];
	char exit_msg[1024];
};

#endif /* NUMALAB_SCHED_ABI_H */
