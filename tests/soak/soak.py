#!/usr/bin/env python3
"""rlbd soak: many clients coming and going, ports failing, a port removed and re-added, and
reloads, for minutes; prints figures (figures.py; not a pass/fail timing test: it fails on a
panic, a dead daemon, a broken lab or a broken rule of rlbd's). Run by tests/soak/run.sh, as
root.

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
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figures  # noqa: E402

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
        arp_out = os.path.join(out_dir, "arp.json")
        sniffer = self.spawn("sw", [sys.executable, os.path.join(HERE, "traffic.py"), "arp",
                                    str(self.t0), arp_out])
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
        senders = []
        for node, cl in by_ns.items():
            path = os.path.join(out_dir, f"plan-{node}.json")
            with open(path, "w") as f:
                json.dump({"t0": self.t0, "server": SERVER_IP, "port": UDP_PORT,
                           "shuffle": not a.fixed_order, "clients": cl}, f)
            sent = os.path.join(out_dir, f"sent-{node}.json")
            senders.append((node, sent, self.spawn(node, [
                sys.executable, os.path.join(HERE, "traffic.py"), "send", path, sent])))
        monitor = Monitor(self, a.seconds)
        monitor.start()
        events = []  # (second, what, seconds since t0 exactly)
        rss = {}
        removed_at = a.seconds // 2 + 5
        while time.time() < self.t0:
            time.sleep(0.05)
        self.load = [loadavg()]
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
                events.append((s, f"s-p{port} down (p{port} loses carrier)", time.time() - self.t0))
            if s % 30 == 0 and s > 0:
                port = ((s - 10) // 30) % 2
                self.ip("sw", "link", "set", f"s-p{port}", "up")
                events.append((s, f"s-p{port} up", time.time() - self.t0))
            if s == removed_at:
                self.ip("srv", "link", "del", "p1")
                events.append((s, "p1 removed", time.time() - self.t0))
            if s == removed_at + 5:
                self.add_port(1)
                events.append((s, "p1 added back", time.time() - self.t0))
            if s % 60 == 45:
                os.kill(daemon.pid, signal.SIGHUP)
                events.append((s, "SIGHUP", time.time() - self.t0))
            if s == a.warmup:
                rss["warm"] = rss_kib(daemon.pid)
        rss["end"] = rss_kib(daemon.pid)
        self.load.append(loadavg())
        final = status(sock)
        alive = daemon.poll() is None
        os.kill(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=5)
        monitor.join(timeout=10)
        for node, _, p in senders:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"the sender in {node} did not finish")
        for p in (recv, sniffer):
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=10)
        logf.close()
        handed = {}
        for node, path, _ in senders:
            with open(path) as f:
                handed[node] = json.load(f)["handed"]
        with open(arp_out) as f:
            arp = json.load(f)
        # Everything the figures rest on, so that `figures.py OUT` can print them again.
        with open(os.path.join(out_dir, "run.json"), "w") as f:
            json.dump({"args": vars(a), "t0": self.t0, "clients": self.clients, "plan": plan,
                       "events": events, "rss": rss, "final": final, "alive": alive,
                       "handed": handed, "samples": self.monitor_samples(monitor),
                       "load": self.load}, f)
        return self.report(plan, events, rss, final, alive, log_path, recv_out, handed,
                           monitor.samples, arp)

    @staticmethod
    def monitor_samples(monitor):
        return {str(k): v for k, v in monitor.samples.items()}

    # ---- figures: see figures.py
    def report(self, *args):
        return figures.report(self, *args)


class Monitor(threading.Thread):
    """Once a second, mid-second (away from the events at its start): every client's neighbour
    entry for the server (which port's MAC it sends to, and in which state), and the drops of
    the switch's queues toward the server's ports."""

    def __init__(self, soak, seconds):
        super().__init__(daemon=True)
        self.soak = soak
        self.seconds = seconds
        self.samples = {}  # second -> {"neigh": {"ns/dev": [mac, state]}, "drops": {dev: n}}

    def run(self):
        soak = self.soak
        nodes = sorted({c[0] for c in soak.clients})
        for s in range(self.seconds):
            target = soak.t0 + s + 0.5
            while time.time() < target:
                time.sleep(0.01)
            neigh = {}
            for node in nodes:
                out = sh("ip", "-n", soak.ns(node), "-j", "neigh", "show", SERVER_IP,
                         check=False)
                try:
                    for e in json.loads(out or "[]"):
                        state = (e.get("state") or ["?"])[0]
                        neigh[f"{node}/{e['dev']}"] = [e.get("lladdr"), state]
                except ValueError:
                    pass
            drops = {}
            out = sh("tc", "-n", soak.ns("sw"), "-s", "-j", "qdisc", "show", check=False)
            try:
                for q in json.loads(out or "[]"):
                    if q.get("dev", "").startswith("s-p") and q.get("kind") == "tbf":
                        drops[q["dev"]] = q.get("drops", 0)
            except ValueError:
                pass
            self.samples[s] = {"neigh": neigh, "drops": drops}


def loadavg():
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


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
    ap.add_argument("--fixed-order", action="store_true",
                    help="senders serve their clients in a fixed order (starves the last ones "
                         "on a congested port; for comparison)")
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
