/*
 * klab-arp: the kernel lab's ARP tool, built by tests/kernel-lab/run.sh with `gcc -static` and
 * copied into the guest (busybox has no way to send a crafted frame or to see VLAN tags).
 * Test tooling only; never packaged.
 *
 *   klab-arp send IFACE PORT_MAC CLIENT_MAC SERVER_IP [VLAN]
 *       Sends, out of IFACE, one unicast ARP reply in the gratuitous form (sender IP = target IP =
 *       SERVER_IP, sender MAC = target MAC = PORT_MAC) to CLIENT_MAC, with an 802.1Q tag when VLAN
 *       is given (an 802.1ad tag when it is written ad:ID): the update rlbd sends to move a client
 *       to the port whose MAC is PORT_MAC. The guest's stand-in for rlbd (STANDIN=1) is built on it.
 *
 *   klab-arp sniff SECONDS IFACE [IFACE...]
 *       Prints every ARP frame sent or received on the interfaces for SECONDS, one line each:
 *         ARP <uptime> <iface> <in|out> vlan=<id/frame|id/aux|-> <eth src> > <eth dst>
 *             <request|reply> sha=<mac> spa=<ip> tha=<mac> tpa=<ip>
 *       A tag is read from the frame ("/frame") or, when the kernel took it out (VLAN offload),
 *       from the packet's auxiliary data ("/aux"), so the driver's tagged ARPs show with their
 *       VLAN either way, and which way it came is seen. An 802.1ad tag adds "/ad" (a frame that
 *       is tagged 802.1Q where the VLAN is 802.1ad never reaches the client's interface).
 *
 *   klab-arp coalesce IFACE RX_USECS
 *       Sets the NIC's receive interrupt coalescing (ETHTOOL_SCOALESCE; busybox has no ethtool)
 *       and prints it before and after. The emulated Intel NICs throttle interrupts on QEMU
 *       timers, which under TCG hold a sparse queue's frames for a long while.
 *
 *   klab-arp stats IFACE
 *       Prints the driver's statistics that are not zero (ethtool -S), one "name=value" each.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/filter.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_IFS 8

static int parse_mac(const char *s, unsigned char *m)
{
    unsigned int b[6];
    char end;
    if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &end) != 6)
        return -1;
    for (int i = 0; i < 6; i++) {
        if (b[i] > 255)
            return -1;
        m[i] = (unsigned char)b[i];
    }
    return 0;
}

static int open_on(const char *ifname, int proto, int *ifindex)
{
    int fd = socket(AF_PACKET, SOCK_RAW, htons(proto));
    if (fd < 0) {
        fprintf(stderr, "klab-arp: AF_PACKET socket: %s\n", strerror(errno));
        return -1;
    }
    *ifindex = (int)if_nametoindex(ifname);
    if (*ifindex == 0) {
        fprintf(stderr, "klab-arp: no interface %s\n", ifname);
        close(fd);
        return -1;
    }
    struct sockaddr_ll sll = {0};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(proto);
    sll.sll_ifindex = *ifindex;
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0) {
        fprintf(stderr, "klab-arp: bind to %s: %s\n", ifname, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int do_send(int argc, char **argv)
{
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: klab-arp send IFACE PORT_MAC CLIENT_MAC SERVER_IP [VLAN|ad:VLAN]\n");
        return 64;
    }
    unsigned char port[6], client[6];
    struct in_addr ip;
    if (parse_mac(argv[3], port) || parse_mac(argv[4], client)) {
        fprintf(stderr, "klab-arp: bad MAC %s or %s\n", argv[3], argv[4]);
        return 64;
    }
    if (inet_pton(AF_INET, argv[5], &ip) != 1) {
        fprintf(stderr, "klab-arp: bad IPv4 address %s\n", argv[5]);
        return 64;
    }
    int vlan = -1;
    unsigned tpid = 0x8100;
    if (argc == 7) {
        const char *id = argv[6];
        if (strncmp(id, "ad:", 3) == 0)
            tpid = 0x88a8, id += 3;
        char *end;
        long v = strtol(id, &end, 10);
        if (*end || v < 1 || v > 4094) {
            fprintf(stderr, "klab-arp: bad VLAN id %s\n", argv[6]);
            return 64;
        }
        vlan = (int)v;
    }

    unsigned char f[64] = {0};
    size_t o = 0;
    memcpy(f + o, client, 6), o += 6;
    memcpy(f + o, port, 6), o += 6;
    if (vlan >= 0) {
        f[o++] = (unsigned char)(tpid >> 8), f[o++] = (unsigned char)tpid;
        f[o++] = (unsigned char)(vlan >> 8), f[o++] = (unsigned char)vlan;
    }
    f[o++] = 0x08, f[o++] = 0x06;                   /* ARP */
    f[o++] = 0x00, f[o++] = 0x01;                   /* Ethernet */
    f[o++] = 0x08, f[o++] = 0x00;                   /* IPv4 */
    f[o++] = 6, f[o++] = 4, f[o++] = 0, f[o++] = 2; /* reply */
    memcpy(f + o, port, 6), o += 6;
    memcpy(f + o, &ip, 4), o += 4;
    memcpy(f + o, port, 6), o += 6;
    memcpy(f + o, &ip, 4), o += 4;
    size_t len = o < 60 ? 60 : o; /* Ethernet's minimum, padded with zeros */

    int ifindex;
    int fd = open_on(argv[2], 0, &ifindex); /* protocol 0: send only, receive nothing */
    if (fd < 0)
        return 1;
    struct sockaddr_ll to = {0};
    to.sll_family = AF_PACKET;
    to.sll_ifindex = ifindex;
    to.sll_halen = 6;
    memcpy(to.sll_addr, client, 6);
    if (sendto(fd, f, len, 0, (struct sockaddr *)&to, sizeof to) != (ssize_t)len) {
        fprintf(stderr, "klab-arp: send on %s: %s\n", argv[2], strerror(errno));
        return 1;
    }
    close(fd);
    return 0;
}

static void fmt_mac(char *out, const unsigned char *m)
{
    sprintf(out, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

static double uptime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void show(const char *ifname, const unsigned char *f, size_t n, const struct tpacket_auxdata *aux,
                 int outgoing)
{
    if (n < 14)
        return;
    size_t o = 12;
    int vlan = -1, in_frame = 0;
    unsigned tpid = 0x8100;
    unsigned type = (unsigned)(f[o] << 8 | f[o + 1]);
    if ((type == 0x8100 || type == 0x88a8) && n >= 18) {
        vlan = (f[14] << 8 | f[15]) & 0x0fff;
        in_frame = 1;
        tpid = type;
        o += 4;
        type = (unsigned)(f[o] << 8 | f[o + 1]);
    }
    if (vlan < 0 && aux && (aux->tp_status & TP_STATUS_VLAN_VALID)) {
        vlan = aux->tp_vlan_tci & 0x0fff;
        if (aux->tp_status & TP_STATUS_VLAN_TPID_VALID)
            tpid = aux->tp_vlan_tpid;
    }
    o += 2;
    if (type != 0x0806 || n < o + 28)
        return;
    const unsigned char *a = f + o;
    char src[18], dst[18], sha[18], tha[18], spa[16], tpa[16], vl[16];
    fmt_mac(dst, f);
    fmt_mac(src, f + 6);
    fmt_mac(sha, a + 8);
    fmt_mac(tha, a + 18);
    inet_ntop(AF_INET, a + 14, spa, sizeof spa);
    inet_ntop(AF_INET, a + 24, tpa, sizeof tpa);
    if (vlan >= 0)
        snprintf(vl, sizeof vl, "%d/%s%s", vlan, in_frame ? "frame" : "aux", tpid == 0x88a8 ? "/ad" : "");
    else
        strcpy(vl, "-");
    int op = a[6] << 8 | a[7];
    printf("ARP %.2f %s %s vlan=%s %s > %s %s sha=%s spa=%s tha=%s tpa=%s\n", uptime(), ifname,
           outgoing ? "out" : "in", vl, src, dst, op == 1 ? "request" : op == 2 ? "reply" : "op?", sha,
           spa, tha, tpa);
    fflush(stdout);
}

static int do_sniff(int argc, char **argv)
{
    if (argc < 4 || argc - 3 > MAX_IFS) {
        fprintf(stderr, "usage: klab-arp sniff SECONDS IFACE [IFACE...] (at most %d)\n", MAX_IFS);
        return 64;
    }
    double secs = atof(argv[2]);
    /* Only ARP reaches user space (the labs run bulk TCP; copying it out would load the CPU):
     * ethertype ARP, or an in-frame 802.1Q or 802.1ad tag followed by ARP. A tag the kernel has
     * taken out is invisible to this filter, and the frame then reads as plain ARP. */
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x0806, 4, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x8100, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x88a8, 0, 3),
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 16),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x0806, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 0xffff),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    struct pollfd pfd[MAX_IFS];
    int nif = argc - 3;
    for (int i = 0; i < nif; i++) {
        int ifindex, one = 1;
        pfd[i].fd = open_on(argv[3 + i], ETH_P_ALL, &ifindex);
        if (pfd[i].fd < 0)
            return 1;
        pfd[i].events = POLLIN;
        if (setsockopt(pfd[i].fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) < 0 ||
            setsockopt(pfd[i].fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof one) < 0) {
            fprintf(stderr, "klab-arp: socket options on %s: %s\n", argv[3 + i], strerror(errno));
            return 1;
        }
    }
    double end = uptime() + secs;
    for (;;) {
        double left = end - uptime();
        if (left <= 0)
            break;
        int r = poll(pfd, (nfds_t)nif, (int)(left * 1000) + 1);
        if (r < 0 && errno != EINTR)
            return 1;
        for (int i = 0; r > 0 && i < nif; i++) {
            if (!(pfd[i].revents & POLLIN))
                continue;
            unsigned char buf[2048];
            union {
                char c[CMSG_SPACE(sizeof(struct tpacket_auxdata))];
                struct cmsghdr align;
            } ctl;
            struct sockaddr_ll from;
            struct iovec iov = {buf, sizeof buf};
            struct msghdr msg = {&from, sizeof from, &iov, 1, ctl.c, sizeof ctl.c, 0};
            ssize_t n = recvmsg(pfd[i].fd, &msg, MSG_DONTWAIT);
            if (n <= 0)
                continue;
            struct tpacket_auxdata *aux = NULL;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                if (c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_AUXDATA)
                    aux = (struct tpacket_auxdata *)CMSG_DATA(c);
            show(argv[3 + i], buf, (size_t)n, aux, from.sll_pkttype == PACKET_OUTGOING);
        }
    }
    return 0;
}

static int do_coalesce(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: klab-arp coalesce IFACE RX_USECS\n");
        return 64;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct ethtool_coalesce ec = { .cmd = ETHTOOL_GCOALESCE };
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", argv[2]);
    ifr.ifr_data = (void *)&ec;
    if (fd < 0 || ioctl(fd, SIOCETHTOOL, &ifr) < 0) {
        fprintf(stderr, "klab-arp: %s: reading its coalescing: %s\n", argv[2], strerror(errno));
        return 1;
    }
    printf("%s: rx-usecs %u", argv[2], ec.rx_coalesce_usecs);
    ec.cmd = ETHTOOL_SCOALESCE;
    ec.rx_coalesce_usecs = (unsigned)atoi(argv[3]);
    if (ioctl(fd, SIOCETHTOOL, &ifr) < 0) {
        printf("\n");
        fprintf(stderr, "klab-arp: %s: setting rx-usecs %s: %s\n", argv[2], argv[3], strerror(errno));
        return 1;
    }
    printf(" -> %u\n", ec.rx_coalesce_usecs);
    close(fd);
    return 0;
}

static int do_stats(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: klab-arp stats IFACE\n");
        return 64;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", argv[2]);
    struct {
        struct ethtool_sset_info hdr;
        __u32 len;
    } info = { .hdr = { .cmd = ETHTOOL_GSSET_INFO, .sset_mask = 1ULL << ETH_SS_STATS } };
    ifr.ifr_data = (void *)&info;
    if (fd < 0 || ioctl(fd, SIOCETHTOOL, &ifr) < 0 || !info.hdr.sset_mask) {
        fprintf(stderr, "klab-arp: %s: no statistics: %s\n", argv[2], strerror(errno));
        return 1;
    }
    __u32 n = info.len;
    struct ethtool_gstrings *names = calloc(1, sizeof *names + (size_t)n * ETH_GSTRING_LEN);
    struct ethtool_stats *vals = calloc(1, sizeof *vals + (size_t)n * sizeof(__u64));
    if (!names || !vals)
        return 1;
    names->cmd = ETHTOOL_GSTRINGS;
    names->string_set = ETH_SS_STATS;
    names->len = n;
    vals->cmd = ETHTOOL_GSTATS;
    vals->n_stats = n;
    ifr.ifr_data = (void *)names;
    int bad = ioctl(fd, SIOCETHTOOL, &ifr) < 0;
    ifr.ifr_data = (void *)vals;
    bad = bad || ioctl(fd, SIOCETHTOOL, &ifr) < 0;
    if (bad) {
        fprintf(stderr, "klab-arp: %s: reading its statistics: %s\n", argv[2], strerror(errno));
        return 1;
    }
    for (__u32 i = 0; i < n; i++)
        if (vals->data[i])
            printf("%.*s=%llu\n", ETH_GSTRING_LEN, (char *)names->data + (size_t)i * ETH_GSTRING_LEN,
                   (unsigned long long)vals->data[i]);
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "stats") == 0)
        return do_stats(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "coalesce") == 0)
        return do_coalesce(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "send") == 0)
        return do_send(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "sniff") == 0)
        return do_sniff(argc, argv);
    fprintf(stderr, "usage: klab-arp send IFACE PORT_MAC CLIENT_MAC SERVER_IP [VLAN|ad:VLAN]\n"
                    "       klab-arp sniff SECONDS IFACE [IFACE...]\n"
                    "       klab-arp coalesce IFACE RX_USECS\n");
    return 64;
}
