"""The soak's figures (tests/soak/soak.py): read what the run left behind and print them.
`python3 tests/soak/figures.py target/soak` prints them again from a finished run's files.

Every second a client was sending but received nothing is accounted for one by one: which
client, which port event came before it and how long before, where the client's neighbour entry
sent its frames, whether that port was up, and whether the switch's queue toward it dropped frames
that second. Moves are counted per client per hold-down, split by reason: chosen (overload,
placement) or forced (failover).
"""
import json
import os
import re
import sys
import types
from datetime import datetime

LIVE_NUD = ("REACHABLE", "STALE", "DELAY", "PROBE", "PERMANENT", "NOARP")


def parse_ts(s):
    # 2026-12-01T04:16:50.193Z
    return datetime.strptime(s + "+0000", "%Y-%m-%dT%H:%M:%S.%fZ%z").timestamp()


def port_of_mac(mac):
    # The lab's port MACs are 02:00:c6:12:01:0N for pN.
    if mac and mac.startswith("02:00:c6:12:01:"):
        return f"p{int(mac[-2:], 16)}"
    return None


class Timeline:
    """Whether each port was up at a time (seconds since t0), from the soak's events."""

    def __init__(self, events):
        self.changes = []  # (t, port, up)
        for _, what, t in events:
            m = re.match(r"s-(p\d) (down|up)", what)
            if m:
                self.changes.append((t, m.group(1), m.group(2) == "up"))
            m = re.match(r"(p\d) (removed|added back)", what)
            if m:
                self.changes.append((t, m.group(1), m.group(2) == "added back"))
        self.changes.sort()

    def up(self, port, t):
        state = True
        for ct, p, u in self.changes:
            if ct > t:
                break
            if p == port:
                state = u
        return state

    def ports(self):
        return sorted({p for _, p, _ in self.changes} | {"p0", "p1"})

    def failures(self, port):
        return [t for t, p, u in self.changes if p == port and not u]

    def last_before(self, t):
        """The latest port event at or before `t`: (what, seconds before t)."""
        best = None
        for ct, p, u in self.changes:
            if ct <= t:
                best = (f"{p} {'up' if u else 'down'}", t - ct)
        return best


def moves_from_log(log, t0):
    """ip -> [(t, from, to, forced)] from the daemon's move lines."""
    moves = {}
    for line in log.splitlines():
        m = re.search(r"^(\S+) INFO\s+move (\S+) \(\S+\) (\S+) -> (\S+): (.*)$", line)
        if m:
            forced = "; failover:" in m.group(5)
            moves.setdefault(m.group(2), []).append(
                (parse_ts(m.group(1)) - t0, m.group(3), m.group(4), forced))
    for v in moves.values():
        v.sort()
    return moves


def within(dt, window):
    # A move exactly a hold-down after another is not within it. The daemon measures the
    # hold-down on its monotonic clock; the log's wall-clock milliseconds can put two decisions
    # a hold-down apart a millisecond or two closer.
    return dt < window - 0.05


def most_in_window(times, window):
    best = 0
    for i, t in enumerate(times):
        best = max(best, sum(1 for u in times[i:] if within(u - t, window)))
    return best


def report(soak, plan, events, rss, final, alive, log_path, recv_out, handed, samples, arp):
    a = soak.a
    t0 = soak.t0
    with open(recv_out) as f:
        got = json.load(f)  # ip -> {second: {arrival interface: bytes}}
    log = open(log_path).read()
    timeline = Timeline(events)
    moves = moves_from_log(log, t0)
    index_in_ns = {}
    for node, iface, _, _ in soak.clients:
        index_in_ns[(node, iface)] = len([k for k in index_in_ns if k[0] == node])

    def drops(port, s):
        dev = f"s-{port}"
        now = samples.get(s, {}).get("drops", {}).get(dev)
        before = samples.get(s - 1, {}).get("drops", {}).get(dev)
        if now is None:
            return None
        if before is None or now < before:  # re-created: the counter started again
            return now
        return now - before

    sending, gaps_all = 0, 0
    gaps = []  # dicts, outside the second after the client's port failed
    for (node, iface, ip, mac), (rate, on) in zip(soak.clients, plan):
        rx = got.get(ip, {})
        last_port = None
        for s in range(1, a.seconds - 1):
            here = rx.get(str(s - 1), {})
            if here:
                last_port = max(here, key=here.get)
            # Sending the whole second and the ones around it (a start's ARP, a stop's tail).
            if not (on[s - 1] and on[s] and on[s + 1]):
                continue
            sending += 1
            if sum(rx.get(str(s), {}).values()) > 0:
                continue
            gaps_all += 1
            lladdr, state = samples.get(s, {}).get("neigh", {}).get(f"{node}/{iface}",
                                                                    [None, "none"])
            to_port = port_of_mac(lladdr)
            own = last_port or to_port
            if own and any(int(f) <= s <= int(f) + 1 for f in timeline.failures(own)):
                continue
            n_handed = handed[node][index_in_ns[(node, iface)]][s]
            mv = [m for m in moves.get(ip, []) if m[0] < s + 1]
            g = {
                "second": s, "client": ip, "mac": mac, "handed": n_handed,
                "neigh": f"{lladdr} {state}", "to_port": to_port,
                "to_port_up": to_port is not None and timeline.up(to_port, s + 0.5),
                "drops": drops(to_port, s) if to_port else None,
                "last_event": timeline.last_before(s + 1),
                "last_move": (f"{mv[-1][1]}->{mv[-1][2]} {'forced' if mv[-1][3] else 'chosen'} "
                              f"{s - mv[-1][0]:+.1f} s before the second") if mv else None,
                "last_arrival_port": last_port,
            }
            if n_handed == 0:
                g["cause"] = "the sender handed no frame to the kernel (host load)"
            elif state not in LIVE_NUD or to_port is None:
                g["cause"] = f"the client's neighbour entry was {state}"
            elif not any(timeline.up(p, s + 0.5) for p in timeline.ports()):
                g["cause"] = "no port was up"
            elif not g["to_port_up"]:
                g["cause"] = f"the client sent to {to_port}, which was down"
            elif g["drops"]:
                g["cause"] = (f"congestion: {to_port} was up and the switch's queue toward it "
                              f"dropped {g['drops']} frames that second")
            else:
                g["cause"] = "unexplained"
            gaps.append(g)
    with open(f"{a.out}/gaps.json", "w") as f:
        json.dump(gaps, f, indent=1)

    hold = final["hold_down_secs"] if final else 30
    forced_all = [t for v in moves.values() for t in v if t[3]]
    chosen_all = [t for v in moves.values() for t in v if not t[3]]
    max_chosen = max((most_in_window([m[0] for m in v if not m[3]], hold)
                      for v in moves.values()), default=0)
    max_forced = max((most_in_window([m[0] for m in v if m[3]], hold)
                      for v in moves.values()), default=0)
    max_any = max((most_in_window([m[0] for m in v], hold) for v in moves.values()), default=0)
    # A chosen move within a hold-down of any earlier move of the same client.
    chosen_in_hold = sum(1 for v in moves.values() for i, m in enumerate(v)
                         if not m[3] and any(within(m[0] - p[0], hold) for p in v[:i]))
    # A forced move off a port that had not just failed, or of a client whose frames were
    # arriving on another, live port the second before.
    # Or of a client rlbd had already put on a port that was up.
    forced_bad_port = 0
    forced_not_there = 0
    forced_again = 0
    for ip, v in moves.items():
        for i, (t, frm, to, forced) in enumerate(v):
            if not forced:
                continue
            if timeline.up(frm, t + 0.5) and not any(-1.0 <= t - f <= 2.0
                                                     for f in timeline.failures(frm)):
                forced_bad_port += 1
            before = got.get(ip, {}).get(str(int(t) - 1), {})
            if before and frm not in before and any(timeline.up(p, t) for p in before):
                forced_not_there += 1
            if i > 0 and v[i - 1][2] != frm and timeline.up(v[i - 1][2], t):
                forced_again += 1

    minutes = a.seconds / 60
    tot = final["totals"] if final else {}
    moves_total = tot.get("moves_overload", 0) + tot.get("moves_failover", 0)
    panics = log.count("panicked")

    # ARP frames the server's ports sent, per client per minute (whole minutes only).
    whole = int(a.seconds // 60)
    per_cm = []
    per_cm_grat = []
    for _, _, _, mac in soak.clients:
        c = arp.get(mac, {})
        for m in range(whole):
            g, o = c.get(str(m), [0, 0])
            per_cm.append(g + o)
            per_cm_grat.append(g)

    print()
    print(f"soak: {a.clients} clients, {a.seconds} s, seed {a.seed}, caps {a.cap} Mbit/s, "
          f"senders {'in a fixed order' if a.fixed_order else 'shuffled'}")
    print(f"load average (1, 5, 15 min) at the start: {soak.load[0]}; at the end: "
          f"{soak.load[-1]}")
    print(f"events: {', '.join(f'{t:.1f}s {e}' for _, e, t in events)}")
    print(f"daemon RSS: {rss.get('warm')} KiB after warm-up ({a.warmup} s), "
          f"{rss.get('end')} KiB at the end (+{(rss.get('end') or 0) - (rss.get('warm') or 0)} KiB)")
    print(f"client-seconds sending: {sending}; without delivery: {gaps_all} in all, "
          f"{len(gaps)} outside the second after the client's own port failed")
    causes = {}
    for g in gaps:
        key = re.sub(r"\d+ frames", "N frames", g["cause"])
        key = re.sub(r"\bp\d\b", "pN", key)
        causes[key] = causes.get(key, 0) + 1
    for k, n in sorted(causes.items(), key=lambda x: -x[1]):
        print(f"  {n:5d}  {k}")
    # Episodes: consecutive seconds of one client without delivery.
    episodes = []
    for g in sorted(gaps, key=lambda g: (g["client"], g["second"])):
        e = episodes[-1] if episodes else None
        if e and e["client"] == g["client"] and e["last"] + 1 == g["second"]:
            e["last"] = g["second"]
        else:
            episodes.append({"client": g["client"], "first": g["second"], "last": g["second"]})
    if episodes:
        longest = max(e["last"] - e["first"] + 1 for e in episodes)
        print(f"  in {len(episodes)} episodes (a client's consecutive seconds), the longest "
              f"{longest} s")
    for g in gaps[:40]:
        ev = g["last_event"]
        print(f"    {g['second']:4d}s {g['client']:>13} handed {g['handed']:3d}, neighbour "
              f"{g['neigh']}, drops {g['drops']}, last event "
              f"{f'{ev[0]} {ev[1]:.1f} s before' if ev else 'none'}, last move "
              f"{g['last_move']}: {g['cause']}")
    if len(gaps) > 40:
        print(f"    ... {len(gaps) - 40} more in {a.out}/gaps.json")
    print(f"moves: {moves_total} ({tot.get('moves_overload', 0)} overload, "
          f"{tot.get('moves_failover', 0)} failover) = {moves_total / minutes:.1f}/min; "
          f"re-assertions {tot.get('reasserts', 0)} = {tot.get('reasserts', 0) / minutes:.1f}/min")
    print(f"moves in the log: {len(chosen_all)} chosen, {len(forced_all)} forced (failover); "
          f"most of one client within a hold-down ({hold} s): chosen {max_chosen}, "
          f"forced {max_forced}, any {max_any}")
    per_min = max((sum(1 for u in v if 0 <= u[0] - m[0] < 60) for v in moves.values()
                   for m in v), default=0)
    print(f"most moves of one client within a minute: {per_min}")
    print(f"chosen moves within a hold-down of the client's previous move: {chosen_in_hold}; "
          f"forced moves off a port that was up and had not just failed: {forced_bad_port}; "
          f"forced moves of a client whose frames arrived on another live port: "
          f"{forced_not_there}, of a client rlbd had put on a live port: {forced_again}")
    print(f"ARP/ND frames sent (daemon's count): {tot.get('updates_sent', 0)} = "
          f"{tot.get('updates_sent', 0) / a.clients / minutes:.2f} per client per minute; "
          f"suppressed {tot.get('updates_suppressed', 0)}; send errors "
          f"{tot.get('send_errors', 0)}")
    if per_cm:
        print(f"ARP frames from the server's ports seen at the switch, per client per minute "
              f"({whole} whole minutes): avg {sum(per_cm) / len(per_cm):.2f}, max {max(per_cm)};"
              f" gratuitous-form (rlbd's) avg {sum(per_cm_grat) / len(per_cm_grat):.2f}, "
              f"max {max(per_cm_grat)}")
    print(f"log lines: {len(log.splitlines())}; daemon alive at the end: {alive}; "
          f"panics: {panics}")
    # Rules of rlbd's, not figures that ride on the host's load: broken, the soak fails.
    broken = []
    if chosen_in_hold:
        broken.append(f"{chosen_in_hold} chosen moves within a hold-down")
    if forced_bad_port or forced_again:
        broken.append(f"{forced_bad_port + forced_again} forced moves without a failure of the "
                      f"client's port")
    to_down = sum(1 for g in gaps if "which was down" in g["cause"])
    if to_down:
        broken.append(f"{to_down} client-seconds lost to a down port after its failover")
    for b in broken:
        print(f"soak: {b}")
    ok = alive and panics == 0 and not broken
    return 0 if ok else 1


def main(out):
    with open(os.path.join(out, "run.json")) as f:
        r = json.load(f)
    a = types.SimpleNamespace(**{**r["args"], "out": out})
    soak = types.SimpleNamespace(a=a, t0=r["t0"], clients=[tuple(c) for c in r["clients"]],
                                 load=r["load"])
    samples = {int(k): v for k, v in r["samples"].items()}
    with open(os.path.join(out, "arp.json")) as f:
        arp = json.load(f)
    return report(soak, r["plan"], [tuple(e) for e in r["events"]], r["rss"], r["final"],
                  r["alive"], os.path.join(out, "rlbd.log"), os.path.join(out, "received.json"),
                  r["handed"], samples, arp)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "target/soak"))
