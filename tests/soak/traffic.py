#!/usr/bin/env python3
"""Soak traffic and probes (tests/soak/soak.py), run inside the lab's namespaces.

  traffic.py recv PORT T0 OUT.json   count UDP bytes per source address, per second since T0
                                     and per arrival interface (IP_PKTINFO); written to OUT.json
                                     on SIGTERM
  traffic.py send PLAN.json OUT.json every client of the plan sends UDP from its own interface
                                     (SO_BINDTODEVICE) at its rate in the seconds it is on;
                                     frames handed to the kernel per client per second go to
                                     OUT.json at the end
  traffic.py arp T0 OUT.json         (in the switch) count the ARP frames the server's ports send
                                     (src MAC 02:00:c6:12:01:xx, seen entering s-p*), per
                                     destination MAC and minute, gratuitous form apart; written to
                                     OUT.json on SIGTERM
"""
import ctypes
import json
import random
import signal
import socket
import struct
import sys
import time

SO_BINDTODEVICE = 25
SO_ATTACH_FILTER = 26
IP_PKTINFO = 8
ETH_P_ALL = 3
PACKET_OUTGOING = 4
SIZE = 1000
SERVER_MAC_PREFIX = bytes.fromhex("0200c61201")


def recv(port, t0, out):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    s.bind(("0.0.0.0", port))
    s.settimeout(0.5)
    counts = {}
    names = {}
    done = []
    signal.signal(signal.SIGTERM, lambda *_: done.append(1))
    while not done:
        try:
            data, anc, _, (ip, _) = s.recvmsg(65536, 64)
        except socket.timeout:
            continue
        except InterruptedError:
            continue
        ifindex = 0
        for level, kind, cdata in anc:
            if level == socket.IPPROTO_IP and kind == IP_PKTINFO:
                ifindex = struct.unpack_from("i", cdata)[0]
        name = names.get(ifindex)
        if name is None:
            try:
                name = socket.if_indextoname(ifindex)
            except OSError:
                name = f"if{ifindex}"
            names[ifindex] = name
        sec = str(int(time.time() - t0))
        per = counts.setdefault(ip, {}).setdefault(sec, {})
        per[name] = per.get(name, 0) + len(data)
    with open(out, "w") as f:
        json.dump(counts, f)


def send(plan_path, out):
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
    seconds = len(socks[0][2])
    handed = [[0] * seconds for _ in socks]
    refused = [[0] * seconds for _ in socks]
    order = list(range(len(socks)))
    rng = random.Random(plan_path) if plan.get("shuffle", True) else None
    while time.time() < t0:
        time.sleep(0.01)
    while True:
        now = time.time() - t0
        sec = int(now)
        if sec >= seconds:
            break
        # A fixed order would put the same clients last into a full queue every round, and a
        # congested port would then starve those clients alone: the order is shuffled.
        if rng:
            rng.shuffle(order)
        for i in order:
            s, pps, on = socks[i]
            if not on[sec]:
                sent[i] = now * pps
                continue
            while sent[i] < now * pps:
                sent[i] += 1
                try:
                    s.sendto(payload, (server, port))
                    handed[i][sec] += 1
                except OSError:
                    refused[i][sec] += 1
        time.sleep(0.01)
    with open(out, "w") as f:
        json.dump({"handed": handed, "refused": refused}, f)


def arp(t0, out):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    # ARP only (ldh [12]; jeq #0x806; ret all; ret 0): the data frames stay in the kernel.
    prog = [(0x28, 0, 0, 12), (0x15, 0, 1, 0x0806), (0x06, 0, 0, 0xFFFF), (0x06, 0, 0, 0)]
    buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in prog))
    fprog = struct.pack("HL", len(prog), ctypes.addressof(buf))
    s.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
    s.settimeout(0.5)
    counts = {}  # dst mac -> minute -> [gratuitous-form replies, other]
    done = []
    signal.signal(signal.SIGTERM, lambda *_: done.append(1))
    while not done:
        try:
            data, (ifname, _, pkttype, _, _) = s.recvfrom(2048)
        except socket.timeout:
            continue
        except InterruptedError:
            continue
        if pkttype == PACKET_OUTGOING or not ifname.startswith("s-p") or len(data) < 42:
            continue
        if data[6:11] != SERVER_MAC_PREFIX:
            continue
        dst = data[0:6].hex(":")
        op = int.from_bytes(data[20:22], "big")
        gratuitous = op == 2 and data[28:32] == data[38:42]
        minute = str(int((time.time() - t0) // 60))
        c = counts.setdefault(dst, {}).setdefault(minute, [0, 0])
        c[0 if gratuitous else 1] += 1
    with open(out, "w") as f:
        json.dump(counts, f)


if __name__ == "__main__":
    if sys.argv[1] == "recv":
        recv(int(sys.argv[2]), float(sys.argv[3]), sys.argv[4])
    elif sys.argv[1] == "arp":
        arp(float(sys.argv[2]), sys.argv[3])
    else:
        send(sys.argv[2], sys.argv[3])
