//! What a run is made of: its seed, its length, its clients and the kinds of fault it suffers.
//! A failure is shrunk by switching faults off and halving the clients (`shrink.rs`); the
//! result is given as the environment that reproduces it.

use super::checks::Mutation;

/// The kinds of fault and operation a run suffers, each at its own rate (`run.rs`'s `chaos`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    PortFailure,
    Restart,
    Reload,
    Overrun,
    ForeignClaim,
    Refusal,
    RingDrops,
    Calm,
    Flap,
    Relink,
    /// The server's broadcast ARP and its re-announcements (`server_arp.rs`).
    ServerArp,
}

impl Fault {
    pub const ALL: [Fault; 11] = [
        Fault::PortFailure,
        Fault::Restart,
        Fault::Reload,
        Fault::Overrun,
        Fault::ForeignClaim,
        Fault::Refusal,
        Fault::RingDrops,
        Fault::Calm,
        Fault::Flap,
        Fault::Relink,
        Fault::ServerArp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::PortFailure => "port-failure",
            Fault::Restart => "restart",
            Fault::Reload => "reload",
            Fault::Overrun => "overrun",
            Fault::ForeignClaim => "foreign-claim",
            Fault::Refusal => "refusal",
            Fault::RingDrops => "ring-drops",
            Fault::Calm => "calm",
            Fault::Flap => "flap",
            Fault::Relink => "relink",
            Fault::ServerArp => "server-arp",
        }
    }

    fn bit(self) -> u16 {
        1 << Fault::ALL.iter().position(|f| *f == self).unwrap_or(0)
    }
}

/// A set of faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Faults(u16);

impl Faults {
    pub fn all() -> Faults {
        Faults(Fault::ALL.iter().fold(0, |m, f| m | f.bit()))
    }

    pub fn has(self, f: Fault) -> bool {
        self.0 & f.bit() != 0
    }

    pub fn without(self, f: Fault) -> Faults {
        Faults(self.0 & !f.bit())
    }

    /// `port-failure,restart` (as `RLBD_SIM_FAULTS` takes it); `none` for the empty set.
    pub fn parse(s: &str) -> Result<Faults, String> {
        let mut set = Faults(0);
        for word in s
            .split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty() && *w != "none")
        {
            let f = Fault::ALL
                .into_iter()
                .find(|f| f.name() == word)
                .ok_or_else(|| format!("RLBD_SIM_FAULTS: no fault called {word:?}"))?;
            set.0 |= f.bit();
        }
        Ok(set)
    }
}

impl std::fmt::Display for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let names: Vec<_> = Fault::ALL
            .into_iter()
            .filter(|x| self.has(*x))
            .map(Fault::name)
            .collect();
        if names.is_empty() {
            return f.write_str("none");
        }
        f.write_str(&names.join(","))
    }
}

/// One run.
#[derive(Clone, Debug)]
pub struct Setup {
    pub seed: u64,
    pub seconds: u64,
    pub clients: usize,
    pub faults: Faults,
    /// A rule switched off or weakened in the engine (mutation runs: its check must catch it).
    pub mutate: Option<Mutation>,
}

impl Setup {
    /// The seed's own population (30 to 300 clients) and every fault.
    pub fn new(seed: u64, days: f64) -> Setup {
        Setup {
            seed,
            seconds: (days * 86_400.0) as u64,
            clients: population(seed),
            faults: Faults::all(),
            mutate: None,
        }
    }

    /// `RLBD_SIM_CLIENTS` and `RLBD_SIM_FAULTS` (a shrunk failure's reproduction) override the
    /// seed's own; `RLBD_SIM_RULE_OFF=HoldDown` switches a rule off, `HoldDownShort` weakens
    /// one (to see what catches it).
    pub fn with_env(mut self) -> Setup {
        if let Ok(name) = std::env::var("RLBD_SIM_RULE_OFF") {
            let m = Mutation::parse(&name);
            let all = Mutation::ALL.map(Mutation::name);
            self.mutate = Some(m.unwrap_or_else(|| panic!("RLBD_SIM_RULE_OFF: one of {all:?}")));
        }
        if let Ok(n) = std::env::var("RLBD_SIM_CLIENTS") {
            self.clients = n.trim().parse().expect("RLBD_SIM_CLIENTS: a number");
        }
        if let Ok(f) = std::env::var("RLBD_SIM_FAULTS") {
            self.faults = Faults::parse(&f).unwrap_or_else(|e| panic!("{e}"));
        }
        self
    }

    /// The environment that runs exactly this.
    pub fn env(&self) -> String {
        let off = self
            .mutate
            .map(|m| format!(" RLBD_SIM_RULE_OFF={}", m.name()))
            .unwrap_or_default();
        format!(
            "RLBD_SIM_SEED={} RLBD_SIM_DAYS={:.6} RLBD_SIM_CLIENTS={} RLBD_SIM_FAULTS={}{off}",
            self.seed,
            self.seconds as f64 / 86_400.0,
            self.clients,
            self.faults
        )
    }
}

/// Every seed has its own number of clients: most 30 to 75, every fifth a few hundred.
fn population(seed: u64) -> usize {
    if seed % 5 == 0 {
        200 + (seed % 3) as usize * 50
    } else {
        30 + (seed % 4) as usize * 15
    }
}
