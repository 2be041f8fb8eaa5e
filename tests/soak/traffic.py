#!/usr/bin/env python3
"""Soak traffic (tests/soak/soak.py), run inside the lab's namespaces.

  traffic.py recv PORT T0 OUT.json   count UDP bytes per source address per second since T0;
                                     written to OUT.json on SIGTERM
  traffic.py send PLAN.json          every client of the plan sends UDP from its own interface
                                     (SO_BINDTODEVICE) at its rate in the seconds it is on
"""
import json
import signal
import socket
import sys
import time

SO_BINDTODEVICE = 25
SIZE = 1000


def recv(port, t0, out):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("0.0.0.0", port))
    s.settimeout(0.5)
    counts = {}
    done = []
    signal.signal(signal.SIGTERM, lambda *_: done.append(1))
    while not done:
        try:
            data, (ip, _) = s.recvfrom(65536)
        except socket.timeout:
            continue
        except InterruptedError:
            continue
        sec = str(int(time.time() - t0))
        per = counts.setdefault(ip, {})
        per[sec] = per.get(sec, 0) + len(data)
    with open(out, "w") as f:
        json.dump(counts, f)


def send(plan_path):
    plan = json.load(open(plan_path))
    t0, server, port = plan["t0"], plan["server"], plan["port"]
    socks = []
    for c in plan["clients"]:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, SO_BINDTODEVICE, c["iface"].encode())
        s.bind((c["ip"], 0))
        s.setblocking(False)
        socks.append((s, c["rate"] / 8 / SIZE, c["on"]))
    payload = b"\0" * SIZE
    sent = [0.0] * len(socks)
    while time.time() < t0:
        time.sleep(0.01)
    while True:
        now = time.time() - t0
        sec = int(now)
        if sec >= len(socks[0][2]):
            break
        for i, (s, pps, on) in enumerate(socks):
            if not on[sec]:
                sent[i] = now * pps
                continue
            while sent[i] < now * pps:
                sent[i] += 1
                try:
                    s.sendto(payload, (server, port))
                except OSError:
                    pass
        time.sleep(0.01)


if __name__ == "__main__":
    if sys.argv[1] == "recv":
        recv(int(sys.argv[2]), float(sys.argv[3]), sys.argv[4])
    else:
        send(sys.argv[2])
