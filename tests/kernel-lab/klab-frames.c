/*
 * klab-frames: the kernel lab's frame counter for guests behind the bond (the guests scenarios of
 * guest-test.sh), built by tests/kernel-lab/run.sh with `gcc -static` beside klab-arp. Test
 * tooling only; never packaged.
 *
 *   klab-frames SECONDS IP=MAC[,IP=MAC...] IFACE [IFACE...]
 *       Counts, for SECONDS (or until a TERM or INT signal), the IPv4 frames received on the interfaces (802.1Q-tagged or not,
 *       the tag in the frame or taken out by the kernel; frames sent from this namespace are not
 *       counted) whose IP source or destination is one of the listed guests, and prints at the end:
 *         FRAMES <iface> from=<ip> own=<n> other=<n> [<mac>=<n>...]
 *             frames whose IP source is the guest's: with its own MAC as Ethernet source, or
 *             with another (each other MAC and its count, at most 4): a frame the bond rewrote
 *         FRAMES <iface> to=<ip> frames=<n> dup=<n>
 *             frames whose IP destination is the guest's, and how many of them repeated a frame
 *             already counted on any of the interfaces within the last second: the same first
 *             KEY_LEN bytes of the IP packet but its TTL and checksum (for TCP: addresses, length,
 *             IP identification, ports, sequence and acknowledgement numbers, flags, window and
 *             the timestamp option; for ICMP echo: identifier, sequence and its timestamp). A
 *             sender's retransmission differs (a new IP identification where the sender counts
 *             them, a new TCP timestamp), so what repeats is one frame delivered twice.
 *         DUP <iface> <uptime> <src> > <dst> id=<n> len=<n>
 *             each of the first 20 duplicates, as it is seen
 *         FRAMES <iface> dropped=<n>
 *             frames the socket could not queue (the counts are short by as many)
 *       Only the first 96 bytes of a packet are copied (a socket filter), so bulk TCP costs one
 *       small copy per packet. Counts are of wire frames: a TCP packet not yet cut into frames
 *       (GSO, which veths, bridges and the bond pass whole) counts as the frames of a 1500-byte
 *       MTU its length makes.
 */
#define _GNU_SOURCE /* recvmmsg */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_IFS 8
#define MAX_GUESTS 16
#define MAX_OTHER 4
#define SLOTS (1u << 16)
#define KEY_LEN 60

struct other {
    unsigned char mac[6];
    unsigned long n;
};
struct per_if { /* one guest on one interface */
    unsigned long own, other, to, dup;
    struct other macs[MAX_OTHER];
};
struct guest {
    uint32_t ip; /* network order */
    unsigned char mac[6];
    char name[16];
};
struct seen { /* a frame to a guest, for the duplicate test */
    unsigned char key[KEY_LEN];
    double at;
};

static struct guest guests[MAX_GUESTS];
static int nguests;
static struct per_if counts[MAX_IFS][MAX_GUESTS];
static struct seen *table;
static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int parse_guests(char *s)
{
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        unsigned int b[6];
        char end;
        if (!eq || nguests == MAX_GUESTS)
            return -1;
        *eq = 0;
        struct guest *g = &guests[nguests];
        if (inet_pton(AF_INET, tok, &g->ip) != 1 ||
            sscanf(eq + 1, "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &end) != 6)
            return -1;
        for (int i = 0; i < 6; i++)
            g->mac[i] = (unsigned char)b[i];
        snprintf(g->name, sizeof g->name, "%s", tok);
        nguests++;
    }
    return nguests ? 0 : -1;
}

static int guest_of(const unsigned char *ip)
{
    for (int i = 0; i < nguests; i++)
        if (memcmp(&guests[i].ip, ip, 4) == 0)
            return i;
    return -1;
}

static void count_other(struct per_if *c, const unsigned char *mac, unsigned long segs)
{
    c->other += segs;
    for (int i = 0; i < MAX_OTHER; i++) {
        if (c->macs[i].n && memcmp(c->macs[i].mac, mac, 6) == 0) {
            c->macs[i].n += segs;
            return;
        }
        if (!c->macs[i].n) {
            memcpy(c->macs[i].mac, mac, 6);
            c->macs[i].n = segs;
            return;
        }
    }
}

/* true when the same frame (key) was counted within the last second */
static int repeated(const unsigned char *key)
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < KEY_LEN; i++)
        h = (h ^ key[i]) * 16777619u;
    struct seen *s = &table[h & (SLOTS - 1)];
    double t = now();
    int dup = s->at > 0 && t - s->at < 1.0 && memcmp(s->key, key, KEY_LEN) == 0;
    memcpy(s->key, key, KEY_LEN);
    s->at = t;
    return dup;
}

static unsigned long dups_shown;

/* The wire frames a packet stands for: a TCP packet that the sender's stack has not cut into
 * frames yet (GSO: veths, bridges and the bond pass it whole) is as many frames of a 1500-byte MTU
 * as its payload needs; anything else is one. wire: the packet's length, n: the bytes copied. */
static unsigned long segments(const unsigned char *ip, size_t n, size_t wire)
{
    size_t ihl = (size_t)(ip[0] & 15) * 4;
    if (ip[9] != 6 || n < ihl + 13)
        return 1;
    size_t thl = (size_t)(ip[ihl + 12] >> 4) * 4;
    if (wire <= 1500 || wire < ihl + thl)
        return 1;
    size_t mss = 1500 - ihl - thl, payload = wire - ihl - thl;
    return (unsigned long)((payload + mss - 1) / mss);
}

/* f: the frame's first n bytes, wire: its whole length */
static void take(const char *ifname, int ifi, const unsigned char *f, size_t n, size_t wire)
{
    size_t o = 12;
    if (n < 14)
        return;
    unsigned type = (unsigned)(f[o] << 8 | f[o + 1]);
    if (type == 0x8100 && n >= 18)
        o += 4, type = (unsigned)(f[o] << 8 | f[o + 1]);
    o += 2;
    if (type != 0x0800 || n < o + 20)
        return;
    const unsigned char *ip = f + o;
    unsigned long segs = segments(ip, n - o, wire - o);
    int from = guest_of(ip + 12), to = guest_of(ip + 16);
    if (from >= 0) {
        struct per_if *c = &counts[ifi][from];
        if (memcmp(f + 6, guests[from].mac, 6) == 0)
            c->own += segs;
        else
            count_other(c, f + 6, segs);
    }
    if (to >= 0) {
        unsigned char key[KEY_LEN] = {0};
        memcpy(key, ip, n - o < KEY_LEN ? n - o : KEY_LEN);
        key[8] = 0;              /* TTL */
        key[10] = key[11] = 0;   /* header checksum */
        counts[ifi][to].to += segs;
        if (repeated(key)) {
            counts[ifi][to].dup += segs;
            if (dups_shown++ < 20) {
                char a[16], b[16];
                inet_ntop(AF_INET, ip + 12, a, sizeof a);
                inet_ntop(AF_INET, ip + 16, b, sizeof b);
                printf("DUP %s %.2f %s > %s id=%u len=%u\n", ifname, now(), a, b, (unsigned)(ip[4] << 8 | ip[5]),
                       (unsigned)(ip[2] << 8 | ip[3]));
                fflush(stdout);
            }
        }
    }
}

static int open_on(const char *ifname)
{
    /* IPv4, or an in-frame 802.1Q tag followed by IPv4: the first 96 bytes */
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x0800, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x8100, 0, 3),
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 16),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x0800, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, 96),
        BPF_STMT(BPF_RET | BPF_K, 0),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    unsigned idx = if_nametoindex(ifname);
    if (fd < 0 || idx == 0) {
        fprintf(stderr, "klab-frames: %s: %s\n", ifname, fd < 0 ? strerror(errno) : "no such interface");
        return -1;
    }
    struct sockaddr_ll sll = {0};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = (int)idx;
    int big = 64 << 20;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) < 0 ||
        setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0) {
        fprintf(stderr, "klab-frames: %s: filter or bind: %s\n", ifname, strerror(errno));
        return -1;
    }
    /* past rmem_max (root): a burst of bulk TCP must not overflow the queue between polls */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    return fd;
}

/* every frame queued on fd */
static void drain(const char *ifname, int ifi, int fd)
{
    enum { BATCH = 32 };
    static unsigned char buf[BATCH][128];
    static union {
        char c[CMSG_SPACE(sizeof(struct tpacket_auxdata))];
        struct cmsghdr align;
    } ctl[BATCH];
    struct mmsghdr m[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_ll from[BATCH];
    for (;;) {
        memset(m, 0, sizeof m);
        for (int i = 0; i < BATCH; i++) {
            iov[i].iov_base = buf[i];
            iov[i].iov_len = sizeof buf[i];
            m[i].msg_hdr.msg_iov = &iov[i];
            m[i].msg_hdr.msg_iovlen = 1;
            m[i].msg_hdr.msg_name = &from[i];
            m[i].msg_hdr.msg_namelen = sizeof from[i];
            m[i].msg_hdr.msg_control = ctl[i].c;
            m[i].msg_hdr.msg_controllen = sizeof ctl[i].c;
        }
        int r = recvmmsg(fd, m, BATCH, MSG_DONTWAIT, NULL);
        if (r <= 0)
            return;
        for (int i = 0; i < r; i++) {
            if (from[i].sll_pkttype == PACKET_OUTGOING)
                continue;
            /* the packet's whole length (the filter cut what was queued to 96 bytes) */
            size_t n = m[i].msg_len, wire = n;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&m[i].msg_hdr); c; c = CMSG_NXTHDR(&m[i].msg_hdr, c))
                if (c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_AUXDATA)
                    wire = ((struct tpacket_auxdata *)CMSG_DATA(c))->tp_len;
            take(ifname, ifi, buf[i], n, wire);
        }
    }
}

static void report(char **ifs, const struct pollfd *pfd, int nif)
{
    char mac[18];
    for (int i = 0; i < nif; i++) {
        /* frames the socket could not queue: the counts above are short by as many */
        struct tpacket_stats st = {0};
        socklen_t len = sizeof st;
        if (getsockopt(pfd[i].fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0)
            printf("FRAMES %s dropped=%u\n", ifs[i], st.tp_drops);
        for (int g = 0; g < nguests; g++) {
            struct per_if *c = &counts[i][g];
            printf("FRAMES %s from=%s own=%lu other=%lu", ifs[i], guests[g].name, c->own, c->other);
            for (int k = 0; k < MAX_OTHER && c->macs[k].n; k++) {
                const unsigned char *a = c->macs[k].mac;
                snprintf(mac, sizeof mac, "%02x:%02x:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3], a[4], a[5]);
                printf(" %s=%lu", mac, c->macs[k].n);
            }
            printf("\nFRAMES %s to=%s frames=%lu dup=%lu\n", ifs[i], guests[g].name, c->to, c->dup);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc - 3 > MAX_IFS || parse_guests(argv[2]) < 0) {
        fprintf(stderr, "usage: klab-frames SECONDS IP=MAC[,IP=MAC...] IFACE [IFACE...] (at most %d, %d guests)\n",
                MAX_IFS, MAX_GUESTS);
        return 64;
    }
    table = calloc(SLOTS, sizeof *table);
    if (!table)
        return 1;
    int nif = argc - 3;
    struct pollfd pfd[MAX_IFS];
    for (int i = 0; i < nif; i++) {
        pfd[i].fd = open_on(argv[3 + i]);
        if (pfd[i].fd < 0)
            return 1;
        pfd[i].events = POLLIN;
    }
    /* TERM or INT ends the count early, and the report is still printed */
    struct sigaction sa = {0};
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    double end = now() + atof(argv[1]);
    while (!stop) {
        double left = end - now();
        if (left <= 0)
            break;
        int r = poll(pfd, (nfds_t)nif, (int)(left * 1000) + 1);
        if (r < 0 && errno != EINTR)
            return 1;
        for (int i = 0; r > 0 && i < nif; i++)
            if (pfd[i].revents & POLLIN)
                drain(argv[3 + i], i, pfd[i].fd);
    }
    report(argv + 3, pfd, nif);
    return 0;
}
