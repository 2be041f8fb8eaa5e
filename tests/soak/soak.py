#!/usr/bin/env python3
"""rlbd soak: many clients coming and going, ports failing, a port removed and re-added, and
reloads, for minutes; prints figures (not a pass/fail timing test; it fails only on a panic,
a dead daemon or a broken lab). Run by tests/soak/run.sh, as root.

Topology (namespaces PREFIX-srv, PREFIX-sw, PREFIX-cl0..3, all removed at the end):

  srv: p0, p1 (198.18.0.1/22 on both; rlbd --ports p0,p1)    clN: eth0 + 50 macvlans m0..m49
        |    |                                                 (one client each: own MAC, own IP
  sw:  s-p0 s-p1 --- br0 --- s-cl0 .. s-cl3                    198.18.1.x-198.18.2.x, own ARP
       (tbf CAP toward the server)                             entry for the server)

Each client sends UDP to the server from its own macvlan (SO_BINDTODEVICE), so its own ARP entry
decides the port its frames arrive on, and rlbd can move it alone. The server's neighbour entries
for the clients are permanent (as in the namespace lab), so the server never broadcasts an ARP
request that would scatter them. A receiver in srv counts each client's bytes per second.
"""
import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER_IP = "198.18.0.1"
UDP_PORT = 5009
PER_NS = 50


def sh(*args, check=True, quiet=False):
    r = subprocess.run(args, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


class Soak:
    def __init__(self, a):
        self.a = a
        self.prefix = f"rlbd-soak-{os.getpid()}"
        self.nss = []
        self.procs = []
        self.clients = []  # (ns, iface, ip, mac)
        self.t0 = None

    def ns(self, node):
        return f"{self.prefix}-{node}"

    def ip(self, node, *args):
        return sh("ip", "-n", self.ns(node), *args)

    def sysctl(self, node, key, value):
        sh("ip", "netns", "exec", self.ns(node), "sh", "-c", f"echo {value} > /proc/sys/{key}")

    # ---- the lab ----------------------------------------------------------------------------
    def build(self):
        n_ns = (self.a.clients + PER_NS - 1) // PER_NS
        nodes = ["srv", "sw"] + [f"cl{i}" for i in range(n_ns)]
        for node in nodes:
            sh("ip", "netns", "add", self.ns(node))
            self.nss.append(self.ns(node))
            self.ip(node, "link", "set", "lo", "up")
            for k in ("all", "default"):
                self.sysctl(node, f"net/ipv6/conf/{k}/disable_ipv6", 1)
        self.ip("sw", "link", "add", "br0", "type", "bridge")
        self.ip("sw", "link", "set", "br0", "up")
        for k in ("all", "default"):
            self.sysctl("srv", f"net/ipv4/conf/{k}/rp_filter", 0)
        for i in range(2):
            self.add_port(i, neighbours=False)
        batch = []
        c = 0
        for n in range(n_ns):
            node = f"cl{n}"
            sh("ip", "-n", self.ns("sw"), "link", "add", f"s-{node}", "type", "veth", "peer",
               "name", "eth0", "netns", self.ns(node))
            self.ip("sw", "link", "set", f"s-{node}", "master", "br0", "up")
            self.ip(node, "link", "set", "eth0", "up")
            for k in ("all", "default"):
                self.sysctl(node, f"net/ipv4/conf/{k}/rp_filter", 0)
                # Each macvlan answers and asks ARP for its own address only.
                self.sysctl(node, f"net/ipv4/conf/{k}/arp_ignore", 1)
                self.sysctl(node, f"net/ipv4/conf/{k}/arp_announce", 2)
                self.sysctl(node, f"net/ipv4/conf/{k}/arp_filter", 1)
            cmds = []
            for j in range(PER_NS):
                if c >= self.a.clients:
                    break
                mac = f"02:50:00:00:{c >> 8:02x}:{c & 255:02x}"
                addr = f"198.18.{1 + c // 250}.{1 + c % 250}"
                cmds.append(f"link add m{j} link eth0 address {mac} type macvlan mode bridge")
                cmds.append(f"addr add {addr}/22 dev m{j}")
                cmds.append(f"link set m{j} up")
                self.clients.append((node, f"m{j}", addr, mac))
                c += 1
            self.batch(node, cmds)
        self.neighbours(0)
        self.neighbours(1)

    def batch(self, node, cmds):
        path = f"/tmp/{self.prefix}-batch"
        with open(path, "w") as f:
            f.write("\n".join(cmds) + "\n")
        sh("ip", "-n", self.ns(node), "-batch", path)
        os.unlink(path)

    def neighbours(self, i):
        self.batch("srv", [f"neigh replace {ip} lladdr {mac} dev p{i} nud permanent"
                           for (_, _, ip, mac) in self.clients])

    def add_port(self, i, neighbours=True):
        mac = f"02:00:c6:12:01:{i:02x}"
        sh("ip", "-n", self.ns("sw"), "link", "add", f"s-p{i}", "type", "veth", "peer", "name",
           f"p{i}", "address", mac, "netns", self.ns("srv"))
        self.ip("sw", "link", "set", f"s-p{i}", "master", "br0", "up")
        self.ip("srv", "addr", "add", f"{SERVER_IP}/22", "dev", f"p{i}")
        self.ip("srv", "link", "set", f"p{i}", "up")
        sh("tc", "-n", self.ns("sw"), "qdisc", "replace", "dev", f"s-p{i}", "root", "tbf", "rate",
           f"{self.a.cap}mbit", "burst", "64kb", "latency", "50ms")
        sh("bridge", "-n", self.ns("sw"), "fdb", "replace", mac, "dev", f"s-p{i}", "master",
           "static")
        if neighbours:
            self.neighbours(i)

    def teardown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for ns in self.nss:
            pids = sh("ip", "netns", "pids", ns, check=False).split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            sh("ip", "netns", "del", ns, check=False)

    def spawn(self, node, args, **kw):
        p = subprocess.Popen(["ip", "netns", "exec", self.ns(node), *args], **kw)
        self.procs.append(p)
        return p

    # ---- the run ----------------------------------------------------------------------------
    def schedule(self):
        """Per client: its rate (bit/s) and, per second, whether it sends (seeded)."""
        rng = random.Random(self.a.seed)
        plan = []
        for _ in self.clients:
            rate = rng.uniform(0.2, 1.2) * 1e6 * self.a.load
            on = rng.random() < 0.5
            secs = []
            for _ in range(self.a.seconds):
                # A client stays on or off for 8 s on average.
                if rng.random() < 1 / 8:
                    on = not on
                secs.append(on)
            plan.append((rate, secs))
        return plan

    def run(self):
        a = self.a
        self.build()
        plan = self.schedule()
        self.t0 = time.time() + 4
        out_dir = a.out
        os.makedirs(out_dir, exist_ok=True)
        recv_out = os.path.join(out_dir, "received.json")
        recv = self.spawn("srv", [sys.executable, os.path.join(HERE, "traffic.py"), "recv",
                                  str(UDP_PORT), str(self.t0), recv_out])
        log_path = os.path.join(out_dir, "rlbd.log")
        sock = os.path.join(out_dir, "rlbd.sock")
        conf = os.path.join(out_dir, "rlbd.toml")
        with open(conf, "w") as f:
            f.write("log_level = \"info\"\n")
        logf = open(log_path, "w")
        daemon = self.spawn("srv", [a.rlbd, "run", "--ports", "p0,p1", "--capacity",
                                    f"p0={a.cap}", "--capacity", f"p1={a.cap}", "--config", conf,
                                    "--control-socket", sock], stdout=logf, stderr=logf)
        by_ns = {}
        for (node, iface, ip, mac), (rate, secs) in zip(self.clients, plan):
            by_ns.setdefault(node, []).append({"iface": iface, "ip": ip, "rate": rate,
                                               "on": secs})
        for node, cl in by_ns.items():
            path = os.path.join(out_dir, f"plan-{node}.json")
            with open(path, "w") as f:
                json.dump({"t0": self.t0, "server": SERVER_IP, "port": UDP_PORT,
                           "clients": cl}, f)
            self.spawn(node, [sys.executable, os.path.join(HERE, "traffic.py"), "send", path])
        events = []  # (second, what)
        rss = {}
        statuses = []
        removed_at = a.seconds // 2 + 5
        while time.time() < self.t0:
            time.sleep(0.05)
        for s in range(a.seconds):
            target = self.t0 + s
            while time.time() < target:
                time.sleep(0.01)
            if daemon.poll() is not None:
                raise RuntimeError(f"rlbd exited ({daemon.returncode}) at t={s} s")
            # A port down every 30 s (p0 and p1 in turn), up again 10 s later.
            if s % 30 == 20:
                port = (s // 30) % 2
                self.ip("sw", "link", "set", f"s-p{port}", "down")
                events.append((s, f"s-p{port} down (p{port} loses carrier)"))
            if s % 30 == 0 and s > 0:
                port = ((s - 10) // 30) % 2
                self.ip("sw", "link", "set", f"s-p{port}", "up")
                events.append((s, f"s-p{port} up"))
            if s == removed_at:
                self.ip("srv", "link", "del", "p1")
                events.append((s, "p1 removed"))
            if s == removed_at + 5:
                self.add_port(1)
                events.append((s, "p1 added back"))
            if s % 60 == 45:
                os.kill(daemon.pid, signal.SIGHUP)
                events.append((s, "SIGHUP"))
            if s == a.warmup:
                rss["warm"] = rss_kib(daemon.pid)
            if s % 1 == 0:
                st = status(sock)
                if st:
                    statuses.append((s, st))
        rss["end"] = rss_kib(daemon.pid)
        final = status(sock)
        alive = daemon.poll() is None
        os.kill(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=5)
        recv.send_signal(signal.SIGTERM)
        recv.wait(timeout=10)
        logf.close()
        return self.report(plan, events, rss, statuses, final, alive, log_path, recv_out)

    # ---- figures ----------------------------------------------------------------------------
    def report(self, plan, events, rss, statuses, final, alive, log_path, recv_out):
        a = self.a
        with open(recv_out) as f:
            got = json.load(f)  # ip -> {second: bytes}
        fail_secs = [s for s, e in events if "down" in e or "removed" in e]
        gaps, gaps_all, sending = 0, 0, 0
        gap_list = []
        for (node, iface, ip, mac), (rate, on) in zip(self.clients, plan):
            rx = got.get(ip, {})
            for s in range(1, a.seconds - 1):
                # Sending the whole second and the ones around it (a start's ARP, a stop's tail).
                if not (on[s - 1] and on[s] and on[s + 1]):
                    continue
                sending += 1
                if rx.get(str(s), 0) > 0:
                    continue
                gaps_all += 1
                if any(f <= s <= f + 1 for f in fail_secs):
                    continue
                gaps += 1
                gap_list.append((s, ip))
        log = open(log_path).read()
        per_client = {}
        for line in log.splitlines():
            m = re.search(r"^(\S+) INFO\s+move (\S+) \((\S+)\) \S+ -> \S+: ", line)
            if m:
                per_client.setdefault(m.group(3), []).append(parse_ts(m.group(1)))
        hold = final["hold_down_secs"] if final else 30
        max_in_hold = 0
        for ts in per_client.values():
            ts.sort()
            for i, t in enumerate(ts):
                n = sum(1 for u in ts[i:] if u - t < hold)
                max_in_hold = max(max_in_hold, n)
        minutes = a.seconds / 60
        t = final["totals"] if final else {}
        moves_total = t.get("moves_overload", 0) + t.get("moves_failover", 0)
        panics = log.count("panicked")
        print()
        print(f"soak: {a.clients} clients, {a.seconds} s, seed {a.seed}, caps {a.cap} Mbit/s")
        print(f"events: {', '.join(f'{s}s {e}' for s, e in events)}")
        print(f"daemon RSS: {rss.get('warm')} KiB after warm-up ({a.warmup} s), "
              f"{rss.get('end')} KiB at the end (+{(rss.get('end', 0) - rss.get('warm', 0))} KiB)")
        print(f"client-seconds sending: {sending}; without delivery: {gaps_all} in all, "
              f"{gaps} outside the second after a port failure"
              + (f" (first: {gap_list[:8]})" if gap_list else ""))
        print(f"moves: {moves_total} ({t.get('moves_overload', 0)} overload, "
              f"{t.get('moves_failover', 0)} failover) = {moves_total / minutes:.1f}/min; "
              f"re-assertions {t.get('reasserts', 0)} = {t.get('reasserts', 0) / minutes:.1f}/min")
        # Any reason: the log's move lines do not say it reliably (a failover re-move made by
        # the planner carries the overload explanation); the status totals do, above.
        print(f"most moves of one client within a hold-down ({hold} s), any reason: {max_in_hold}")
        print(f"ARP/ND frames sent: {t.get('updates_sent', 0)} = "
              f"{t.get('updates_sent', 0) / a.clients / minutes:.2f} per client per minute; "
              f"suppressed {t.get('updates_suppressed', 0)}; send errors {t.get('send_errors', 0)}")
        print(f"log lines: {len(log.splitlines())}; daemon alive at the end: {alive}; panics: {panics}")
        ok = alive and panics == 0
        return 0 if ok else 1


def parse_ts(s):
    # 2026-12-01T04:16:50.193Z
    from datetime import datetime
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def status(path):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(path)
        s.sendall(b"status top=0\n")
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        return json.loads(data)
    except (OSError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlbd", required=True)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--cap", type=int, default=40)
    ap.add_argument("--load", type=float, default=1.0)
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--out", default="/tmp/rlbd-soak")
    a = ap.parse_args()
    soak = Soak(a)
    stop = lambda *_: (_ for _ in ()).throw(KeyboardInterrupt())
    signal.signal(signal.SIGTERM, stop)
    try:
        rc = soak.run()
    except KeyboardInterrupt:
        print("soak: interrupted", file=sys.stderr)
        rc = 130
    except Exception as e:  # the lab broke: say so, tear down, fail
        print(f"soak: {e}", file=sys.stderr)
        rc = 1
    finally:
        soak.teardown()
    sys.exit(rc)


if __name__ == "__main__":
    main()
