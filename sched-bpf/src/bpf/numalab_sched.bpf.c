/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * numalab's node-affine scheduler, a sched_ext BPF scheduler.
 *
 * The design is the node-affine scheduler's (2002): every task may have a
 * homenode; the scheduler keeps it there, brings it back when it ran away,
 * and lets another node take it only when that node would otherwise idle,
 * after a wait that grows with the NUMA distance. Each mechanism has a bit in
 * cfg.mechanisms (abi.h) so that its effect can be measured alone:
 *
 *  PLACE      select_cpu(): a waking homed task goes to an idle CPU of its
 *             homenode (its previous CPU first, a whole idle core next).
 *  QUEUE      enqueue(): a homed task that found no idle home CPU waits in
 *             its homenode's queue (one vtime-ordered DSQ per node), not on
 *             the CPU the fair class would have picked.
 *  STEAL_DELAY dispatch(): a CPU whose own node's queue is empty looks at the
 *             other nodes' queues nearest first, and takes a task homed there
 *             only once it has waited the steal delay of the pair of nodes,
 *             which grows with their distance and with the machine's load
 *             (steal_delay()); tasks without a homenode it takes at once.
 *             Without the bit the delay is zero (work-conserving at the first
 *             idle moment).
 *  REATTRACT  a homed task running on another node is preempted as soon as
 *             a CPU of its homenode is idle, so it is queued at home again.
 *
 * Idle CPUs do not look for work by themselves, so a timer (cfg.timer_ns)
 * wakes an idle CPU where a queued task has become stealable and where a
 * runaway's home has an idle CPU.
 *
 * Tasks without a homenode (the rest of the system) share the same per-node
 * queues by vtime, queued on the node they last ran on, and any idle CPU
 * takes them at once: a weighted-fair, work-conserving scheduler for them.
 *
 * Homenodes: explicit (numalab writes tgid -> node into `homes`; threads
 * and children inherit), or chosen by cfg.node_policy at exec, at a fork
 * with a new mm, or at every fork, as the node with the most spare CPU.
 */
#include "kernel.h"
#include "abi.h"
#include "compat.h"

char _license[] SEC("license") = "Dual MIT/GPL";

#include "state.h"
#include "cpus.h"

s32 BPF_STRUCT_OPS(nl_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	struct task_ctx *tctx = tctx_of(p);
	bool is_idle = false;
	s32 home, cpu;

	if (tctx && (home = effective_home(p, tctx)) >= 0) {
		if (MECH(PLACE)) {
			cpu = claim_idle_in_node(p, home, prev_cpu);
			if (cpu >= 0) {
				struct nl_node_acct *na = nacct(home);
				struct nl_task_acct *ta = task_acct_of(p, home);

				if (na)
					na->placed_idle++;
				if (ta)
					ta->placed_idle++;
				nl_insert(p, SCX_DSQ_LOCAL, cfg.slice_ns, 0);
				return cpu;
			}
		}
		if (MECH(QUEUE))
			return any_cpu_in_node(p, home, prev_cpu);
	}
	cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);
	if (is_idle)
		nl_insert(p, SCX_DSQ_LOCAL, cfg.slice_ns, 0);
	return cpu;
}

void BPF_STRUCT_OPS(nl_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = tctx_of(p);
	u64 vtime = p->scx.dsq_vtime;
	s32 home = -1, node;

	/* Per-CPU kernel threads (kworkers, ksoftirqd...) run where they must, at once. */
	if ((p->nr_cpus_allowed == 1 && (p->flags & PF_KTHREAD)) || !tctx) {
		nl_insert(p, SCX_DSQ_LOCAL, cfg.slice_ns, enq_flags);
		return;
	}
	/*
	 * The last runnable task of its CPU ending its slice (SCX_OPS_ENQ_LAST:
	 * without it sched_ext would keep it running without asking): it goes
	 * on running here, unless it is a runaway whose homenode now has an
	 * idle CPU; then it is queued at home below (re-attraction of a task
	 * that runs alone, or that was homed while it ran).
	 */
	if (enq_flags & SCX_ENQ_LAST) {
		s32 h = effective_home(p, tctx);

		if (!(h >= 0 && MECH(QUEUE) && node_of_cpu(scx_bpf_task_cpu(p)) != h &&
		      has_idle_in_node(h))) {
			nl_insert(p, SCX_DSQ_LOCAL, cfg.slice_ns, enq_flags);
			return;
		}
	}
	/* An idle task may bank at most one slice of credit. */
	if (vtime_before(vtime, vtime_now - cfg.slice_ns))
		vtime = vtime_now - cfg.slice_ns;
	tctx->enq_at = bpf_ktime_get_ns();

	/*
	 * A user task pinned to one CPU waits in that CPU's node queue in vtime
	 * order like everyone else (a local insert would put it ahead of every
	 * queued task: strict priority, not fairness); only its CPU takes it.
	 */
	if (p->nr_cpus_allowed == 1) {
		s32 cpu = scx_bpf_task_cpu(p);

		node = node_of_cpu(cpu);
		if (valid_node(node)) {
			nl_insert_vtime(p, node, cfg.slice_ns, vtime, enq_flags);
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
			return;
		}
		nl_insert(p, SCX_DSQ_LOCAL, cfg.slice_ns, enq_flags);
		return;
	}

	home = effective_home(p, tctx);
	if (home >= 0 && MECH(QUEUE)) {
		struct nl_node_acct *na = nacct(home);
		s32 here = node_of_cpu(scx_bpf_task_cpu(p));

		/*
		 * A runaway whose slice ended while its home is still full stays
		 * a guest where it runs (queued there, where any CPU, its home's
		 * first of all, may take it at once): sending it home now would
		 * only queue it behind the backlog it was taken from. It goes
		 * back when a home CPU is idle (re-attraction), and at once when
		 * the node it runs on has a backlog of its own: it was taken
		 * there because that node would have idled, and it no longer
		 * would (no guest displaces the node's own tasks).
		 */
		if (!(enq_flags & SCX_ENQ_WAKEUP) && valid_node(here) && here != home &&
		    !has_idle_in_node(home) && scx_bpf_dsq_nr_queued(here) <= 0) {
			struct nl_task_acct *ta = task_acct_of(p, home);

			if (na)
				na->guest_kept++;
			if (ta)
				ta->guest_kept++;
			nl_insert_vtime(p, here, cfg.slice_ns, vtime, enq_flags);
			return;
		}

		if (na)
			na->queued_home++;
		nl_insert_vtime(p, home, cfg.slice_ns, vtime, enq_flags);
		/* An idle home CPU (one appeared since select_cpu) takes it now. */
		kick_idle_in_node(home);
		return;
	}
	node = node_of_cpu(scx_bpf_task_cpu(p));
	if (!valid_node(node))
		node = 0;
	nl_insert_vtime(p, node, cfg.slice_ns, vtime, enq_flags);
	/* No homenode: any idle CPU may run it at once. */
	if (!kick_idle_in_node(node)) {
		s32 cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);

		if (cpu >= 0)
			scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	}
}

void BPF_STRUCT_OPS(nl_dispatch, s32 cpu, struct task_struct *prev)
{
	s32 node = node_of_cpu(cpu);
	u64 now;
	u32 i;

	if (!valid_node(node))
		return;
	if (nl_move_to_local(node))
		return;
	now = bpf_ktime_get_ns();
	bpf_for(i, 0, cfg.nr_nodes - 1) {
		if (i >= NL_MAX_NODES)
			break;
		if (steal_from(steal_order(node, i), node, now))
			return;
	}
	/*
	 * Nothing to run here: call a runaway home (it queues here and we take
	 * it). Not while prev is still runnable: sched_ext then keeps running
	 * it, so this CPU is not about to idle.
	 */
	if (MECH(REATTRACT) && !(prev && (prev->scx.flags & SCX_TASK_QUEUED)))
		reattract_to(node);
}

/*
 * Every tick of a running task. A homenode can arrive while a task runs
 * (numalab sets it from outside; a task that forks picks its own up then),
 * and a task that runs alone on its CPU is never queued again, so neither
 * placement nor the queue would ever see it. Here a task running away from
 * its homenode is marked as a runaway (so that the scan and idle home CPUs
 * can call it back), and when its home has an idle CPU its slice ends now:
 * it is queued at home (nl_enqueue(), SCX_ENQ_LAST).
 */
void BPF_STRUCT_OPS(nl_tick, struct task_struct *p)
{
	struct task_ctx *tctx = tctx_of(p);
	s32 cpu, home, *rh;

	if (!tctx)
		return;
	home = effective_home(p, tctx);
	if (home < 0 || !MECH(QUEUE))
		return;
	cpu = scx_bpf_task_cpu(p);
	if (node_of_cpu(cpu) == home)
		return;
	rh = running_home_of(cpu);
	if (rh)
		*rh = home;
	if (MECH(REATTRACT) && has_idle_in_node(home))
		p->scx.slice = 0;
}

void BPF_STRUCT_OPS(nl_runnable, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = tctx_of(p);
	s32 n;

	if (!tctx)
		return;
	n = valid_node(tctx->home) ? tctx->home : node_of_cpu(scx_bpf_task_cpu(p));
	if (!valid_node(n))
		return;
	s64 *r = runnable_of(n);

	if (!r)
		return;
	tctx->counted_node = n;
	__sync_fetch_and_add(r, 1);
}

void BPF_STRUCT_OPS(nl_quiescent, struct task_struct *p, u64 deq_flags)
{
	struct task_ctx *tctx = tctx_of(p);

	s64 *r;

	if (!tctx || !valid_node(tctx->counted_node))
		return;
	r = runnable_of(tctx->counted_node);
	if (r)
		__sync_fetch_and_sub(r, 1);
	tctx->counted_node = -1;
}

void BPF_STRUCT_OPS(nl_running, struct task_struct *p)
{
	struct task_ctx *tctx = tctx_of(p);
	s32 cpu = scx_bpf_task_cpu(p), node = node_of_cpu(cpu), home;
	u64 now = bpf_ktime_get_ns();

	if (vtime_before(vtime_now, p->scx.dsq_vtime))
		vtime_now = p->scx.dsq_vtime;
	if (!tctx)
		return;
	tctx->run_at = now;
	home = valid_node(tctx->home) ? tctx->home : -1;
	s32 *rh = running_home_of(cpu);

	if (rh)
		*rh = home;
	if (home < 0) {
		tctx->enq_at = 0;
		return;
	}

	struct nl_node_acct *na = nacct(home);
	struct nl_task_acct *ta = task_acct_of(p, home);
	bool at_home = node == home;

	if (na) {
		if (at_home)
			na->runs_home++;
		else
			na->runs_away++;
	}
	if (ta) {
		ta->runs++;
		if (at_home)
			ta->runs_home++;
	}
	if (at_home) {
		if (rh)
			*rh = -1; /* not a runaway */
		/* Back home after running away, however it came (called back or taken). */
		if (tctx->away) {
			if (na)
				na->reattracted++;
			if (ta)
				ta->reattracted++;
		}
		tctx->away = false;
	} else {
		tctx->away = true;
	}
	if (tctx->enq_at) {
		u64 w = now - tctx->enq_at;

		if (na) {
			na->wait_ns += w;
			na->waits++;
			if (w > na->wait_max_ns)
				na->wait_max_ns = w;
		}
		if (ta) {
			ta->wait_ns += w;
			ta->waits++;
			if (w > ta->wait_max_ns)
				ta->wait_max_ns = w;
		}
		tctx->enq_at = 0;
	}
}

void BPF_STRUCT_OPS(nl_stopping, struct task_struct *p, bool runnable)
{
	struct task_ctx *tctx = tctx_of(p);
	s32 cpu = scx_bpf_task_cpu(p), node = node_of_cpu(cpu);
	u64 now = bpf_ktime_get_ns(), ran;

	/* Charge the time used, scaled by the inverse of the weight (as scx_simple). */
	if (p->scx.weight)
		p->scx.dsq_vtime += (cfg.slice_ns - p->scx.slice) * 100 / p->scx.weight;
	s32 *rh = running_home_of(cpu);

	if (rh)
		*rh = -1;
	if (!tctx || !tctx->run_at || !valid_node(node))
		return;
	ran = now - tctx->run_at;
	tctx->run_at = 0;

	if (!valid_node(tctx->home)) {
		struct nl_node_acct *na = nacct(node);

		if (na)
			na->free_ns += ran;
		return;
	}
	struct nl_node_acct *home_na = nacct(tctx->home);
	struct nl_task_acct *ta = task_acct_of(p, tctx->home);

	if (node == tctx->home) {
		if (home_na)
			home_na->home_ns += ran;
	} else {
		struct nl_node_acct *here = nacct(node);

		if (home_na)
			home_na->away_ns += ran;
		if (here)
			here->guest_ns += ran;
	}
	if (ta && node < NL_MAX_NODES)
		ta->node_ns[node] += ran;
}

void BPF_STRUCT_OPS(nl_enable, struct task_struct *p)
{
	p->scx.dsq_vtime = vtime_now;
}

s32 BPF_STRUCT_OPS(nl_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	struct task_ctx *tctx;
	struct task_struct *parent;
	struct task_ctx *pctx;

	tctx = bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tctx)
		return -12; /* -ENOMEM */
	tctx->home = -1;
	tctx->counted_node = -1;
	if (p->flags & PF_KTHREAD)
		return 0; /* kernel threads never get a homenode */
	if (!args->fork) {
		/* A task that existed before we loaded: only an explicit homenode. */
		refresh_home(p, tctx);
		return 0;
	}
	/* The parent is the forking task. */
	parent = bpf_get_current_task_btf();
	pctx = bpf_task_storage_get(&task_ctxs, parent, 0, 0);
	if (pctx) {
		refresh_home(parent, pctx);
		tctx->seq = pctx->seq;
		tctx->explicit_home = pctx->explicit_home;
		if (valid_node(pctx->home))
			set_home(p, tctx, pctx->home);
	}
	/* An explicit homenode is inherited whatever the policy. */
	if (tctx->explicit_home)
		return 0;
	if (cfg.node_policy == NL_POLICY_FORK ||
	    (cfg.node_policy == NL_POLICY_FORK_MM && p->mm != parent->mm)) {
		s32 n = pick_spare_node(-1);
		struct nl_node_acct *na = nacct(n);

		set_home(p, tctx, n);
		if (na)
			na->homed_at_fork++;
	}
	return 0;
}

void BPF_STRUCT_OPS(nl_exit_task, struct task_struct *p, struct scx_exit_task_args *args)
{
	struct task_ctx *tctx = tctx_of(p);

	if (tctx)
		set_home(p, tctx, -1);
}

/* node_policy exec: a new program gets the node with the most spare CPU. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(nl_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct task_ctx *tctx;
	s32 n;

	if (cfg.node_policy != NL_POLICY_EXEC)
		return 0;
	tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);
	if (!tctx || tctx->explicit_home)
		return 0;
	n = pick_spare_node(tctx->counted_node);
	if (!valid_node(n))
		return 0;
	set_home(p, tctx, n);
	struct nl_node_acct *na = nacct(n);

	if (na)
		na->homed_at_exec++;
	return 0;
}

/*
 * The periodic scan: for each node, update how saturated it has been and
 * since when it is backlogged; where tasks wait, wake an idle CPU of the
 * nearest node whose steal delay has passed for the oldest waiter or the
 * backlog; where a CPU is idle and nothing waits, call one runaway home.
 */
/*
 * scan()'s note that a task without a homenode (or a guest) waits in the
 * node's queue. A global, not a local: the verifier does not track its
 * value, so the queue walk's states do not double with it (a local made
 * the timer callback exceed the verifier's budget).
 */
static bool free_waits PRIVATE;

static int scan(void *map, int *key, struct bpf_timer *timer)
{
	u64 now = bpf_ktime_get_ns();
	u32 n, i;

	u64 dt = now - last_scan_ns;
	bool first = !last_scan_ns;

	__sync_fetch_and_add(&stats.timer_runs, 1);
	if (dt > LOAD_TAU_NS)
		dt = LOAD_TAU_NS;
	last_scan_ns = now;
	bpf_for(n, 0, cfg.nr_nodes) {
		struct task_struct *p;
		u64 oldest = 0; /* the longest-waiting task homed here */
		u32 depth = 0;
		bool idle, sat;

		if (n >= NL_MAX_NODES)
			break;
		/*
		 * Saturated: tasks wait and no CPU of the node is idle. Its share
		 * of the recent scans, a moving average (1/16 per scan, 1024 =
		 * every scan), decides the backlog: from when the average passes
		 * 3/4 and another node is less loaded by more than a task on
		 * average (could_give()), until either ends. A moment's idle CPU
		 * or empty queue then ends nothing; a node busy only part of the
		 * time (a duty-cycled load beside the task) never has one; and
		 * nodes equally overloaded (jobs homed evenly) have none until
		 * one of them runs out of work, so the delay counts from then.
		 */
		update_load_avg(n, dt, first);
		idle = has_idle_in_node(n);
		sat = scx_bpf_dsq_nr_queued(n) > 0 && !idle;
		sat_score[n] = sat_score[n] - sat_score[n] / 16 + (sat ? 64 : 0);
		if (sat_score[n] < 768 || !could_give(n))
			backlog_since[n] = 0;
		else if (!backlog_since[n])
			backlog_since[n] = now;
		free_waits = false;
		if (scx_bpf_dsq_nr_queued(n) > 0) {
			/* A timer runs outside the scheduler's RCU section; iterating needs one. */
			bpf_rcu_read_lock();
			bpf_for_each(scx_dsq, p, n, 0) {
				struct task_ctx *tctx = bpf_task_storage_get(&task_ctxs, p, 0, 0);

				if (++depth > 8)
					break;
				if (!tctx || !tctx->enq_at)
					continue;
				if (tctx->home == (s32)n) {
					if (!oldest || tctx->enq_at < oldest)
						oldest = tctx->enq_at;
				} else if (p->nr_cpus_allowed > 1) {
					free_waits = true; /* any node takes it at once */
				}
			}
			bpf_rcu_read_unlock();
			if (oldest && backlog_since[n] && backlog_since[n] < oldest)
				oldest = backlog_since[n];
			if (oldest || free_waits) {
				bpf_for(i, 0, cfg.nr_nodes - 1) {
					u32 to;

					if (i >= NL_MAX_NODES)
						break;
					to = steal_order(n, i);
					if (to >= NL_MAX_NODES)
						break;
					if (MECH(STEAL_DELAY) && !free_waits &&
					    (now - oldest < steal_delay(n, to) ||
					     !evens_out_on_average(n, to)))
						continue;
					if (kick_idle_in_node(to))
						break;
				}
			}
		}
		if (idle && MECH(REATTRACT) && scx_bpf_dsq_nr_queued(n) == 0)
			reattract_to(n);
	}
	bpf_timer_start(timer, cfg.timer_ns, 0);
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(nl_init)
{
	struct bpf_timer *timer;
	u32 n, zero = 0;
	s32 err;

	bpf_for(n, 0, NL_MAX_CPUS) {
		s32 *rh = running_home_of(n);

		if (rh)
			*rh = -1;
	}
	bpf_for(n, 0, cfg.nr_nodes) {
		err = scx_bpf_create_dsq(n, -1);
		if (err)
			return err;
	}
	timer = bpf_map_lookup_elem(&scan_timer, &zero);
	if (!timer)
		return -2; /* -ENOENT */
	bpf_timer_init(timer, &scan_timer, 1 /* CLOCK_MONOTONIC */);
	bpf_timer_set_callback(timer, scan);
	return bpf_timer_start(timer, cfg.timer_ns, 0);
}

void BPF_STRUCT_OPS(nl_exit, struct scx_exit_info *ei)
{
	bpf_probe_read_kernel_str(stats.exit_reason, sizeof(stats.exit_reason), ei->reason);
	bpf_probe_read_kernel_str(stats.exit_msg, sizeof(stats.exit_msg), ei->msg);
	stats.exit_code = ei->exit_code;
	stats.exit_kind = ei->kind;
}

SEC(".struct_ops.link")
struct sched_ext_ops numalab_ops = {
	.select_cpu = (void *)nl_select_cpu,
	.enqueue = (void *)nl_enqueue,
	.dispatch = (void *)nl_dispatch,
	.tick = (void *)nl_tick,
	.runnable = (void *)nl_runnable,
	.running = (void *)nl_running,
	.stopping = (void *)nl_stopping,
	.quiescent = (void *)nl_quiescent,
	.init_task = (void *)nl_init_task,
	.exit_task = (void *)nl_exit_task,
	.enable = (void *)nl_enable,
	.init = (void *)nl_init,
	.exit = (void *)nl_exit,
	.flags = SCX_OPS_ENQ_LAST,
	.name = "numalab",
};
