"""Reads bench/lab_load_shape.sh's guest output: each phase's load epoch
(CLOCK_MONOTONIC, s) and vCPU count, and the load workers' wake-ups (W)
and sleeps (S) per CPU in the same clock. Prints the load's shape against
its plan (see the shell script's header).

    python3 bench/lab_load_shape.py DIR TOPOLOGY...
"""

import sys

PERIOD = 20.618e-3
BUSY = 0.6 * PERIOD
QS = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]


def quantiles(v, qs=QS):
    v = sorted(v)
    if not v:
        return [float("nan")] * len(qs)
    return [v[min(len(v) - 1, round(q * (len(v) - 1)))] for q in qs]


def transitions(ev):
    """The worker's real transitions, in order: a sleep (S) ends a busy
    part; a wake-up (W) ends an idle part only after a sleep (the tracer
    also reports wake-ups of a task still on its runqueue, which ran on)."""
    out, busy = [], None
    for t, k in sorted(ev):
        if k == "S" and busy is not False:
            out.append((t, "S"))
            busy = False
        elif k == "W" and busy is not True:
            out.append((t, "W"))
            busy = True
    return out


def shape(events, epoch, n):
    """Pooled over CPUs: each stop past its period's planned busy end (U:
    a worker that sees the end only after the next period began spins on
    through that period's busy part, so a stop always falls in an idle
    part, and a negative U would be a plan laid wrong), each wake-up past
    its period's start (W), idle parts, periods with no idle part, busy
    time."""
    o = {"U": [], "W": [], "idle": [], "blips": 0, "periods": 0, "skips": 0, "span": 0.0, "busy": 0.0}
    for c, raw in events.items():
        ev = transitions(raw)
        if len(ev) < 4:
            continue
        s = epoch + PERIOD * c / n
        period = lambda t: int((t - s) // PERIOD)
        lo, hi = ev[0][0], ev[-1][0]
        slept = set()
        for i in range(1, len(ev)):
            (t0, k0), (t, k) = ev[i - 1], ev[i]
            if k == "S":
                o["busy"] += t - t0
                j = period(t)
                slept.add(j)
                # A worker woken past its busy part's end sleeps at once:
                # that stop is not a busy part's end seen late.
                if t0 - (s + period(t0) * PERIOD) >= BUSY and period(t0) == j:
                    o["blips"] += 1
                else:
                    o["U"].append(t - (s + j * PERIOD + BUSY))
            else:
                o["idle"].append(t - t0)
                o["W"].append(t - (s + period(t) * PERIOD))
        j0, j1 = period(lo) + 1, period(hi) - 1
        o["periods"] += max(0, j1 - j0 + 1)
        o["skips"] += sum(1 for j in range(j0, j1 + 1) if j not in slept)
        o["span"] += hi - lo
    return o


def main():
    tmp, topos = sys.argv[1], sys.argv[2:]
    print("per guest and phase: the workers' busy share, idle parts a second and their mean;")
    print("U: a busy part's end past its plan, W: a wake-up past its period's start, ms,")
    print("quantiles 0/10/25/50/75/90/100; wake-ups past the busy part (the worker")
    print("slept again at once); periods with no idle part")
    profile = {}
    for t in topos:
        phases, epoch, n = {}, {}, {}
        for line in open(f"{tmp}/{t}.out"):
            f = line.split()
            if len(f) < 4 or f[0] != "@@":
                continue
            if f[1] == "phase":
                n[f[2]] = int(f[3])
            elif f[1] == "epoch":
                epoch[f[2]] = float(f[3])
            elif f[1] in ("W", "S") and len(f) == 5:
                phases.setdefault(f[2], {}).setdefault(int(f[3]), []).append((float(f[4]), f[1]))
        for ph, events in phases.items():
            if ph not in epoch or ph not in n:
                print(f"{t:<12} {ph:<6} no load epoch or vCPU count in the guest's output", file=sys.stderr)
                sys.exit(1)
            o = shape(events, epoch[ph], n[ph])
            if not o["span"]:
                print(f"{t:<12} {ph:<6} nothing traced")
                continue
            ms = lambda v: " ".join(f"{x * 1e3:6.2f}" for x in quantiles(v))
            idle = o["idle"]
            print(
                f"{t:<12} {ph:<6} vCPUs {n[ph]}: busy {o['busy'] / o['span']:.3f}, "
                f"{len(idle) / o['span']:5.1f} idle/s (mean {sum(idle) / max(1, len(idle)) * 1e3:.2f} ms); "
                f"woken past the busy part {o['blips']}/{len(o['W'])}; "
                f"no idle part in {o['skips']}/{o['periods']} periods"
            )
            print(f"{'':<12} {'':<6} U {ms(o['U'])}")
            print(f"{'':<12} {'':<6} W {ms(o['W'])}")
            if ph == "probe":
                profile.setdefault(n[ph], []).append(o)
    # The lab profile's form (profiles/lab-tcg.toml, [emulator.load."N"]):
    # quantiles every 5%, pooled over the guests of each size, with the
    # probe beside the load (as in the lab's comparisons). A period with no
    # idle part counts as a stop a whole period late.
    qs = [i / 20 for i in range(21)]
    fmt = lambda v: "[" + ", ".join(f"{x * 1e3:.2f}" for x in quantiles(v, qs)) + "]"
    for size, os in sorted(profile.items()):
        stops = [max(0.0, u) for o in os for u in o["U"]] + [PERIOD] * sum(o["skips"] for o in os)
        wakes = [w for o in os for w in o["W"]]
        print(f'[emulator.load."{size}"]')
        print(f"stop_late_ms = {fmt(stops)}")
        print(f"wake_late_ms = {fmt(wakes)}")


main()
