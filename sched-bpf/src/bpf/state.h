/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * The scheduler's state: its configuration (read-only, from numalab), its
 * account, the per-task context, and the homenode of each task (explicit
 * from numalab's `homes` map, or chosen by the node policy). Included once,
 * by numalab_sched.bpf.c.
 */
#ifndef NUMALAB_STATE_H
#define NUMALAB_STATE_H

const volatile struct nl_config cfg;

/*
 * The account numalab reads: alone in .bss, so the section is exactly this
 * struct. The scheduler's own state lives in .data.sched.
 */
struct nl_stats stats;

#define PRIVATE __attribute__((section(".data.sched")))
static u64 vtime_now PRIVATE;
/* Runnable tasks counted on each node (homenode, else the CPU's node). */
static s64 node_runnable[NL_MAX_NODES] PRIVATE;
/* Live tasks homed on each node. */
static s64 node_homed[NL_MAX_NODES] PRIVATE;
/*
 * Per node: since when it has been backlogged (0: it is not), and how
 * saturated the scan has found it lately (scan()). Tasks in a queue that
 * rotates by vtime each wait at most a few slices, so a task's own wait
 * alone would never reach a long steal delay while a node stays overloaded
 * and another idles; the backlog does.
 */
static u64 backlog_since[NL_MAX_NODES] PRIVATE;
static u32 sat_score[NL_MAX_NODES] PRIVATE;
/*
 * Per node: its runnable tasks x1024, averaged over time by the scan
 * (update_load_avg()), and when the scan last ran. A duty-cycled load
 * makes a node's count swing every few milliseconds; whether a steal
 * evens the load out is judged on the average, as the kernel's balancer
 * judges PELT's, not on the moment's count.
 */
static u64 load_avg[NL_MAX_NODES] PRIVATE;
static u64 last_scan_ns PRIVATE;
/* The average's time constant: PELT's half-life. */
#define LOAD_TAU_NS (32ULL * 1000 * 1000)

/* Per CPU: the homenode of the running task while it runs away from it (-1: none). */
static s32 cpu_running_home[NL_MAX_CPUS] PRIVATE;

struct task_ctx {
	s32 home;		/* -1: none */
	s32 counted_node;	/* where node_runnable counts it; -1: not runnable */
	u64 seq;		/* homes_seq when `homes` was last consulted */
	u64 enq_at;		/* when it was queued (ns), 0 when not queued */
	u64 run_at;		/* when it started running */
	bool away;		/* last ran on another node than its homenode */
	bool explicit_home;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

/* Explicit homenodes, written by numalab: tgid -> node. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u32);
	__type(value, s32);
} homes SEC(".maps");

/* [0]: bumped by numalab after each change of `homes`. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} homes_seq SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NL_MAX_NODES);
	__type(key, u32);
	__type(value, struct nl_node_acct);
} node_acct SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NL_MAX_TASKS);
	__type(key, u32);
	__type(value, struct nl_task_acct);
} task_acct SEC(".maps");

struct timer_slot {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct timer_slot);
} scan_timer SEC(".maps");

#define MECH(m) (cfg.mechanisms & NL_MECH_##m)

/*
 * Bounded reads of the configuration. Each index is checked against its
 * array right where it is used: the verifier tracks bounds through the
 * check, where a check made elsewhere (valid_node) is often lost across
 * sign extension and spills.
 */
static __always_inline u32 nfirst(u32 n)
{
	return n <= NL_MAX_NODES ? cfg.node_first[n] : 0;
}

static __always_inline s32 ncpu(u32 i)
{
	return i < NL_MAX_CPUS ? cfg.node_cpus[i] : -1;
}

static __always_inline u32 dist(u32 a, u32 b)
{
	return a < NL_MAX_NODES && b < NL_MAX_NODES ? cfg.distance[a][b] : 255;
}

/* Runnable tasks on the machine, per 1024 online CPUs, at most 1024. */
static __always_inline u64 load_per_1024(void)
{
	s64 sum = 0;
	u32 n;

	bpf_for(n, 0, cfg.nr_nodes) {
		if (n >= NL_MAX_NODES)
			break;
		sum += node_runnable[n];
	}
	if (sum <= 0 || !cfg.nr_online)
		return 0;
	/* Unsigned: BPF before cpu v4 has no signed division. */
	u64 per = (u64)sum * 1024 / cfg.nr_online;

	return per > 1024 ? 1024 : per;
}

/* How long a task homed on a must have waited before node b may take it, now. */
static __always_inline u64 steal_delay(u32 a, u32 b)
{
	u64 lo, hi;

	if (a >= NL_MAX_NODES || b >= NL_MAX_NODES)
		return ~0ULL;
	lo = cfg.steal_delay_ns[a][b];
	hi = cfg.steal_delay_busy_ns[a][b];
	if (hi <= lo)
		return lo;
	return lo + (hi - lo) * load_per_1024() / 1024;
}

static __always_inline u32 steal_order(u32 n, u32 i)
{
	return n < NL_MAX_NODES && i < NL_MAX_NODES ? cfg.steal_order[n][i] : NL_MAX_NODES;
}

static __always_inline s64 *runnable_of(u32 n)
{
	return n < NL_MAX_NODES ? &node_runnable[n] : NULL;
}

static __always_inline s64 *homed_of(u32 n)
{
	return n < NL_MAX_NODES ? &node_homed[n] : NULL;
}

static __always_inline u64 backlog_of(u32 n)
{
	return n < NL_MAX_NODES ? backlog_since[n] : 0;
}

/* CPUs of node n. */
static __always_inline s64 cpus_of(u32 n)
{
	return n < NL_MAX_NODES ? (s64)nfirst(n + 1) - (s64)nfirst(n) : 0;
}

/*
 * Whether moving one task from node `from` to node `to` evens their load
 * out (runnable tasks per CPU, the mover counted on `from`): the steal of a
 * homed task must buy the task more CPU, not trade one queue for another.
 */
static __always_inline bool evens_out(u32 from, u32 to)
{
	s64 *rf = runnable_of(from), *rt = runnable_of(to);
	s64 cf = cpus_of(from), ct = cpus_of(to);

	if (!rf || !rt || cf <= 0 || ct <= 0)
		return false;
	return (*rf - 1) * ct >= (*rt + 1) * cf;
}

/* One step of node n's load average towards its count now, after dt ns. */
static __always_inline void update_load_avg(u32 n, u64 dt, bool first)
{
	s64 *r = runnable_of(n);
	u64 x, avg;

	if (!r || n >= NL_MAX_NODES)
		return;
	x = *r > 0 ? (u64)*r * 1024 : 0;
	avg = load_avg[n];
	if (first)
		avg = x;
	else if (x >= avg)
		avg += (x - avg) * dt / LOAD_TAU_NS;
	else
		avg -= (avg - x) * dt / LOAD_TAU_NS;
	load_avg[n] = avg;
}

/*
 * evens_out() on the nodes' load averages: true when moving one task from
 * `from` to `to` leaves `from` at least as loaded per CPU as `to`. A node
 * that is over its CPUs only part of the time, beside a node busy the rest
 * of it (the RFC's duty-cycled load), would only trade its overload for the
 * other's: no steal. A node whose load stays over another's (jobs piled on
 * one node, or the others' jobs done) still gives up tasks.
 */
static __always_inline bool evens_out_on_average(u32 from, u32 to)
{
	s64 cf = cpus_of(from), ct = cpus_of(to);
	u64 af, at;

	if (from >= NL_MAX_NODES || to >= NL_MAX_NODES || cf <= 0 || ct <= 0)
		return false;
	af = load_avg[from];
	at = load_avg[to];
	if (af < 1024)
		return false;
	return (af - 1024) * (u64)ct >= (at + 1024) * (u64)cf;
}

/* Whether some other node could take a task from node n on average. */
static bool could_give(u32 n)
{
	u32 i;

	bpf_for(i, 0, cfg.nr_nodes - 1) {
		u32 to = steal_order(n, i);

		if (to >= NL_MAX_NODES)
			break;
		if (evens_out_on_average(n, to))
			return true;
	}
	return false;
}

static __always_inline s32 *running_home_of(u32 cpu)
{
	return cpu < NL_MAX_CPUS ? &cpu_running_home[cpu] : NULL;
}

static __always_inline bool vtime_before(u64 a, u64 b)
{
	return (s64)(a - b) < 0;
}

static __always_inline s32 node_of_cpu(s32 cpu)
{
	if (cpu < 0 || cpu >= NL_MAX_CPUS)
		return -1;
	return cfg.cpu_node[cpu];
}

static __always_inline bool valid_node(s32 n)
{
	return n >= 0 && n < NL_MAX_NODES && (u32)n < cfg.nr_nodes;
}

static __always_inline struct nl_node_acct *nacct(s32 node)
{
	u32 key = node;

	if (!valid_node(node))
		return NULL;
	return bpf_map_lookup_elem(&node_acct, &key);
}

static __always_inline struct task_ctx *tctx_of(struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctxs, p, 0, 0);
}

/* The first CPU of node n that p may run on; -1 when none. */
static s32 first_allowed_cpu(struct task_struct *p, s32 n)
{
	u32 i, first, last;

	if (!valid_node(n))
		return -1;
	first = nfirst(n);
	last = nfirst(n + 1);
	bpf_for(i, first, last) {
		if (i >= NL_MAX_CPUS)
			break;
		if (bpf_cpumask_test_cpu(ncpu(i), p->cpus_ptr))
			return ncpu(i);
	}
	return -1;
}

/* The node with the most spare CPU, leaving out `self_node`'s count of the caller. */
static s32 pick_spare_node(s32 self_node)
{
	s32 best = -1;
	s64 best_spare = 0, best_homed = 0, best_cpus = 1;
	u32 n;

	bpf_for(n, 0, cfg.nr_nodes) {
		s64 cpus, spare, homed;

		if (n >= NL_MAX_NODES)
			break;
		cpus = nfirst(n + 1) - nfirst(n);
		if (cpus <= 0)
			continue; /* a memory-only node: nothing can run there */
		s64 *r = runnable_of(n), *h = homed_of(n);

		if (!r || !h)
			break;
		spare = cpus - *r + ((s32)n == self_node ? 1 : 0);
		homed = *h;
		/* spare/cpus larger wins; ties: fewer homed tasks per CPU, then lower id. */
		if (best < 0 || spare * best_cpus > best_spare * cpus ||
		    (spare * best_cpus == best_spare * cpus && homed * best_cpus < best_homed * cpus)) {
			best = n;
			best_spare = spare;
			best_homed = homed;
			best_cpus = cpus;
		}
	}
	return best;
}

static void set_home(struct task_struct *p, struct task_ctx *tctx, s32 node)
{
	s64 *h;

	if (tctx->home == node)
		return;
	if (valid_node(tctx->home) && (h = homed_of(tctx->home)))
		__sync_fetch_and_sub(h, 1);
	tctx->home = node;
	if (valid_node(node) && (h = homed_of(node)))
		__sync_fetch_and_add(h, 1);
	/*
	 * A runnable task is counted on its homenode (nl_runnable()): move the
	 * count with the home, or the spare CPU the node policy reads would
	 * still show it where it became runnable (programs exec'd together all
	 * went to one node).
	 */
	if (valid_node(tctx->counted_node) && valid_node(node) && tctx->counted_node != node) {
		s64 *from = runnable_of(tctx->counted_node), *to = runnable_of(node);

		if (from && to) {
			__sync_fetch_and_sub(from, 1);
			__sync_fetch_and_add(to, 1);
			tctx->counted_node = node;
		}
	}
}

/* Picks up an explicit homenode numalab set (or cleared) since we last looked. */
static void refresh_home(struct task_struct *p, struct task_ctx *tctx)
{
	u32 zero = 0, tgid = p->tgid;
	u64 *seq = bpf_map_lookup_elem(&homes_seq, &zero);
	s32 *node;

	if (!seq || *seq == tctx->seq)
		return;
	tctx->seq = *seq;
	node = bpf_map_lookup_elem(&homes, &tgid);
	if (node && valid_node(*node)) {
		set_home(p, tctx, *node);
		tctx->explicit_home = true;
	} else if (tctx->explicit_home) {
		set_home(p, tctx, -1);
		tctx->explicit_home = false;
	}
}

/* The homenode that applies now: -1 when none, or when p may not run there. */
static s32 effective_home(struct task_struct *p, struct task_ctx *tctx)
{
	refresh_home(p, tctx);
	if (!valid_node(tctx->home) || (!MECH(QUEUE) && !MECH(PLACE)))
		return -1;
	if (p->nr_cpus_allowed < (int)cfg.nr_cpus && first_allowed_cpu(p, tctx->home) < 0)
		return -1;
	return tctx->home;
}

static struct nl_task_acct *task_acct_of(struct task_struct *p, s32 home)
{
	u32 pid = p->pid;
	struct nl_task_acct *ta = bpf_map_lookup_elem(&task_acct, &pid);

	if (ta) {
		ta->home = home;
		return ta;
	}
	struct nl_task_acct fresh = { .tgid = p->tgid, .home = home };
	bpf_probe_read_kernel_str(fresh.comm, sizeof(fresh.comm), p->comm);
	if (bpf_map_update_elem(&task_acct, &pid, &fresh, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&task_acct, &pid)) {
		__sync_fetch_and_add(&stats.tasks_untracked, 1);
		return NULL;
	}
	return bpf_map_lookup_elem(&task_acct, &pid);
}

/* An idle CPU of node n that p may use, claimed; -1 when none. */

#endif /* NUMALAB_STATE_H */
