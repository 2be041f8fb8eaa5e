#!/usr/bin/env python3
"""Captures real rtnetlink datagrams from this machine's kernel as seeds for the `netlink` fuzz
target: link, address and neighbour dumps and notifications, made in a throwaway network
namespace (root). Each datagram is written as one file under fuzz/seeds/netlink/ (committed).

    sudo fuzz/seeds/capture-netlink.py            # makes the namespace, captures, removes it
"""
import hashlib
import os
import socket
import struct
import subprocess
import sys
import time

NS = f"rlbd-seed-{os.getpid()}"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netlink")

RTM_GETLINK, RTM_GETADDR, RTM_GETNEIGH = 18, 22, 30
NLM_F_REQUEST, NLM_F_DUMP = 1, 0x300
GROUPS = (1 << 0) | (1 << 2) | (1 << 4) | (1 << 8)  # LINK, NEIGH, IPV4_IFADDR, IPV6_IFADDR


def sh(*args):
    subprocess.run(["ip", "-n", NS, *args], check=True)


def save(datagram, seen):
    name = hashlib.sha1(datagram).hexdigest()
    if name in seen:
        return
    seen.add(name)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(datagram)


def dump(sock, msg_type, family, seen):
    # struct rtgenmsg padded to the size of the family's header (ifinfomsg: 16 bytes).
    body = struct.pack("B", family) + b"\0" * 15
    hdr = struct.pack("=LHHLL", 16 + len(body), msg_type, NLM_F_REQUEST | NLM_F_DUMP, 1, 0)
    sock.send(hdr + body)
    sock.settimeout(5)
    while True:
        data = sock.recv(1 << 16)
        save(data, seen)
        pos, done = 0, False
        while pos + 16 <= len(data):
            length, kind = struct.unpack_from("=LH", data, pos)
            done |= kind in (2, 3)  # NLMSG_ERROR, NLMSG_DONE (may share the last datagram)
            pos += max(16, (length + 3) & ~3)
        if done:
            return


def inner():
    os.makedirs(OUT, exist_ok=True)
    seen = set()
    notes = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    notes.bind((0, GROUPS))
    notes.setblocking(False)
    run = lambda *a: subprocess.run(["ip", *a], check=True)
    run("link", "set", "lo", "up")
    run("link", "add", "p0", "type", "veth", "peer", "name", "s0")
    run("link", "add", "br0", "type", "bridge")
    run("link", "add", "d0", "type", "veth", "peer", "name", "d1")
    run("link", "set", "s0", "master", "br0")
    for l in ("p0", "s0", "br0", "d0"):
        run("link", "set", l, "up")
    run("addr", "add", "198.18.0.1/24", "dev", "p0")
    run("addr", "add", "10.9.0.1", "peer", "10.9.0.2/32", "dev", "d0")
    run("-6", "addr", "add", "2001:db8:77::1/64", "dev", "p0", "nodad")
    run("neigh", "add", "198.18.0.11", "lladdr", "02:00:c6:12:00:01", "dev", "p0", "nud", "reachable")
    run("neigh", "add", "198.18.0.12", "lladdr", "02:00:c6:12:00:02", "dev", "p0", "nud", "stale")
    run("neigh", "add", "198.18.0.13", "dev", "p0", "nud", "incomplete")
    run("-6", "neigh", "add", "2001:db8:77::11", "lladdr", "02:00:c6:12:00:01", "dev", "p0", "nud", "permanent")
    run("neigh", "del", "198.18.0.12", "dev", "p0")
    run("addr", "del", "10.9.0.1", "peer", "10.9.0.2/32", "dev", "d0")
    run("link", "set", "p0", "down")
    run("link", "del", "d0")
    time.sleep(0.2)
    while True:
        try:
            save(notes.recv(1 << 16), seen)
        except BlockingIOError:
            break
    req = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    req.bind((0, 0))
    run("link", "set", "p0", "up")
    dump(req, RTM_GETLINK, 0, seen)
    dump(req, RTM_GETADDR, 0, seen)
    dump(req, RTM_GETNEIGH, 0, seen)
    print(f"{len(seen)} datagrams")


if __name__ == "__main__":
    if sys.argv[1:] == ["--inner"]:
        inner()
        sys.exit(0)
    if os.geteuid() != 0:
        sys.exit("fuzz/seeds/capture-netlink.py: run as root (it makes a network namespace)")
    subprocess.run(["ip", "netns", "add", NS], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", NS, sys.executable, __file__, "--inner"], check=True)
    finally:
        subprocess.run(["ip", "netns", "del", NS])
