//! The programs as the packaged unit loads them: a user with CAP_BPF and CAP_NET_ADMIN but not
//! CAP_SYS_ADMIN nor CAP_PERFMON, for whom the verifier refuses what it lets root do (pointer
//! arithmetic with a variable offset on a packet pointer, a scalar stored over a spilled
//! pointer). Root only: the test drops the two capabilities from its own thread.

use super::*;

pub(crate) const CAP_SYS_ADMIN: u32 = 21;
pub(crate) const CAP_PERFMON: u32 = 38;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Drops `caps` from this thread's effective set (capabilities are per thread).
pub(crate) fn drop_effective(caps: &[u32]) -> io::Result<()> {
    let mut h = CapHeader {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut d = [CapData::default(); 2];
    // SAFETY: capget/capset with a version-3 header and the two data words it reads/writes.
    if unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut CapHeader, d.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    for &c in caps {
        d[(c / 32) as usize].effective &= !(1 << (c % 32));
    }
    // SAFETY: as above.
    if unsafe { libc::syscall(libc::SYS_capset, &mut h as *mut CapHeader, d.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn load_all() -> Result<(), String> {
    drop_effective(&[CAP_SYS_ADMIN, CAP_PERFMON]).map_err(|e| format!("capset: {e}"))?;
    let macs = [Mac(2, 0, 0, 0, 0, 9)];
    for hook in [Hook::socket(96), Hook::tc(96)] {
        for m in [&[][..], &macs[..]] {
            let c = KernelCounter::new(m, hook, 16_384, "unpriv")
                .map_err(|e| format!("{hook:?}: {e}"))?;
            if let Some(e) = c.slot_error() {
                return Err(format!("{hook:?}: no slot table: {e}"));
            }
            KernelCounter::with_hash(m, hook, 16_384, "unpriv")
                .map_err(|e| format!("{hook:?}, hash: {e}"))?;
        }
    }
    Ok(())
}

#[test]
fn live_programs_load_without_sys_admin_or_perfmon() {
    if !crate::test_support::root_or_skip("live_programs_load_without_sys_admin_or_perfmon") {
        return;
    }
    match std::thread::spawn(load_all).join().unwrap() {
        Ok(()) => {}
        Err(e) => panic!("{}", &e[e.len().saturating_sub(3000)..]),
    }
}
