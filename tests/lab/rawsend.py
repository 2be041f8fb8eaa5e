#!/usr/bin/env python3
"""Raw frames for the hostile-LAN tests (tests/hostile.rs), sent from inside a lab namespace.

  rawsend.py claim IFACE MAC IPV4 IPV6 SECONDS RATE
      another host claiming the server's addresses: gratuitous ARP requests and unsolicited
      ARP replies (broadcast) for IPV4, unsolicited Neighbor Advertisements (Override set, to
      all nodes) for IPV6, all with MAC, RATE frames a second of each kind.
  rawsend.py ask IFACE MAC IPV4 TARGET
      one broadcast ARP request from MAC/IPV4 for TARGET (a client resolving the server, whose
      own kernel then ignores the answers: it asked for none).
  rawsend.py solicit IFACE MAC IPV6 TARGET
      one Neighbor Solicitation from MAC/IPV6 for TARGET, to TARGET's solicited-node group (a
      client resolving the server's IPv6 address; its kernel ignores the advertisements).
  rawsend.py udp IFACE SRC_MAC SRC_IP DST_MAC DST_IP MBIT SECONDS
      UDP frames of 1400 bytes from SRC_MAC/SRC_IP, whatever the interface's own addresses are
      (a client that changed its MAC, or one that took another's address).
"""
import socket
import struct
import sys
import time


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def arp(src, ip, op):
    eth = b"\xff" * 6 + src + b"\x08\x06"
    a = socket.inet_aton(ip)
    tha = b"\xff" * 6 if op == 2 else b"\0" * 6
    return eth + struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, op, src, a, tha, a)


def ask(src, ip, target):
    eth = b"\xff" * 6 + src + b"\x08\x06"
    return eth + struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, src, socket.inet_aton(ip),
                             b"\0" * 6, socket.inet_aton(target))


def na(src, ip6, own6):
    dst6 = socket.inet_pton(socket.AF_INET6, "ff02::1")
    s6 = socket.inet_pton(socket.AF_INET6, own6)
    target = socket.inet_pton(socket.AF_INET6, ip6)
    body = struct.pack("!BBHI", 136, 0, 0, 0x20000000) + target + b"\x02\x01" + src
    pseudo = s6 + dst6 + struct.pack("!I3xB", len(body), 58)
    body = body[:2] + struct.pack("!H", csum(pseudo + body)) + body[4:]
    ip = struct.pack("!IHBB", 6 << 28, len(body), 58, 255) + s6 + dst6
    return b"\x33\x33\x00\x00\x00\x01" + src + b"\x86\xdd" + ip + body


def solicit(src, own6, target6):
    target = socket.inet_pton(socket.AF_INET6, target6)
    dst6 = socket.inet_pton(socket.AF_INET6, "ff02::1:ff00:0")[:13] + target[13:]
    s6 = socket.inet_pton(socket.AF_INET6, own6)
    body = struct.pack("!BBHI", 135, 0, 0, 0) + target + b"\x01\x01" + src
    pseudo = s6 + dst6 + struct.pack("!I3xB", len(body), 58)
    body = body[:2] + struct.pack("!H", csum(pseudo + body)) + body[4:]
    ip = struct.pack("!IHBB", 6 << 28, len(body), 58, 255) + s6 + dst6
    return b"\x33\x33\xff" + target[13:] + src + b"\x86\xdd" + ip + body


def udp(src, sip, dst, dip):
    payload = b"\0" * 1400
    u = struct.pack("!HHHH", 40000, 9, 8 + len(payload), 0) + payload
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(u), 0, 0, 64, 17, 0,
                    socket.inet_aton(sip), socket.inet_aton(dip))
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return dst + src + b"\x08\x00" + h + u


def main():
    mode, iface = sys.argv[1], sys.argv[2]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    if mode == "claim":
        m, ip4, ip6, secs, rate = mac(sys.argv[3]), sys.argv[4], sys.argv[5], float(sys.argv[6]), int(sys.argv[7])
        own6 = sys.argv[8] if len(sys.argv) > 8 else "fe80::1"
        frames = [arp(m, ip4, 1), arp(m, ip4, 2), na(m, ip6, own6)]
        end = time.time() + secs
        n = 0
        while time.time() < end:
            for f in frames:
                s.send(f)
                n += 1
            time.sleep(1.0 / rate)
        print(n)
    elif mode == "ask":
        s.send(ask(mac(sys.argv[3]), sys.argv[4], sys.argv[5]))
    elif mode == "solicit":
        s.send(solicit(mac(sys.argv[3]), sys.argv[4], sys.argv[5]))
    elif mode == "udp":
        src, sip, dst, dip = mac(sys.argv[3]), sys.argv[4], mac(sys.argv[5]), sys.argv[6]
        mbit, secs = float(sys.argv[7]), float(sys.argv[8])
        f = udp(src, sip, dst, dip)
        per_sec = mbit * 1e6 / 8 / len(f)
        start = time.time()
        sent = 0
        while True:
            now = time.time() - start
            if now >= secs:
                break
            due = int(now * per_sec)
            while sent < due:
                try:
                    s.send(f)
                except OSError:
                    pass
                sent += 1
            time.sleep(0.002)
        print(sent)


if __name__ == "__main__":
    main()
