//! A small typed assembler for eBPF instructions: registers and sizes are types, jumps go to
//! labels, and `finish` resolves them (refusing an unbound label or a jump that does not fit the
//! 16-bit offset). Pure code; the encoding follows the kernel's `struct bpf_insn`.

use std::fmt;

/// A register. `R10` is the read-only frame pointer; `R1`..`R5` are clobbered by calls and by
/// `LD_ABS`/`LD_IND`; `R6`..`R9` survive calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reg {
    R0 = 0,
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    R8,
    R9,
    R10,
}

/// Access size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    B,
    H,
    W,
    DW,
}

impl Size {
    const fn code(self) -> u8 {
        match self {
            Size::W => 0x00,
            Size::H => 0x08,
            Size::B => 0x10,
            Size::DW => 0x18,
        }
    }

    /// Bytes accessed.
    pub const fn bytes(self) -> usize {
        match self {
            Size::B => 1,
            Size::H => 2,
            Size::W => 4,
            Size::DW => 8,
        }
    }
}

/// 64-bit ALU operations used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alu {
    Add,
    Sub,
    Mul,
    Lsh,
    And,
    Rsh,
    Xor,
    Mov,
}

impl Alu {
    const fn code(self) -> u8 {
        match self {
            Alu::Add => 0x00,
            Alu::Sub => 0x10,
            Alu::Mul => 0x20,
            Alu::Lsh => 0x60,
            Alu::And => 0x50,
            Alu::Rsh => 0x70,
            Alu::Xor => 0xa0,
            Alu::Mov => 0xb0,
        }
    }
}

/// Conditional jumps used here (unsigned comparisons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    Eq,
    Ne,
    Lt,
    Ge,
    Gt,
    Le,
}

impl Cond {
    const fn code(self) -> u8 {
        match self {
            Cond::Eq => 0x10,
            Cond::Gt => 0x20,
            Cond::Ge => 0x30,
            Cond::Ne => 0x50,
            Cond::Lt => 0xa0,
            Cond::Le => 0xb0,
        }
    }
}

/// Kernel helper functions (their numbers are ABI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Helper {
    MapLookupElem = 1,
    MapUpdateElem = 2,
    GetPrandomU32 = 7,
    /// `bpf_skb_vlan_push(skb, proto, tci)`: the tag into `vlan_tci` (the guests' live tests).
    SkbVlanPush = 18,
    /// `bpf_redirect(ifindex, flags)`: out of `ifindex` (flags 0) once the program returns.
    Redirect = 23,
    SkbLoadBytes = 26,
    SkbPullData = 39,
    RingbufReserve = 131,
    RingbufSubmit = 132,
}

pub const CLASS_LD: u8 = 0x00;
pub const CLASS_LDX: u8 = 0x01;
pub const CLASS_ST: u8 = 0x02;
pub const CLASS_STX: u8 = 0x03;
pub const CLASS_ALU: u8 = 0x04;
pub const CLASS_JMP: u8 = 0x05;
pub const CLASS_JMP32: u8 = 0x06;
pub const CLASS_ALU64: u8 = 0x07;
pub const MODE_IMM: u8 = 0x00;
pub const MODE_ABS: u8 = 0x20;
pub const MODE_IND: u8 = 0x40;
pub const MODE_MEM: u8 = 0x60;
/// `BPF_ATOMIC` (called `BPF_XADD` before Linux 5.12; an immediate of 0 is the add both know).
pub const MODE_ATOMIC: u8 = 0xc0;
pub const SRC_K: u8 = 0x00;
pub const SRC_X: u8 = 0x08;
pub const OP_JA: u8 = 0x00;
pub const OP_CALL: u8 = 0x80;
pub const OP_EXIT: u8 = 0x90;
/// Byte swap (`BPF_END`; with `SRC_X`, `BPF_TO_BE`).
pub const OP_END: u8 = 0xd0;
/// `src_reg` of a 64-bit immediate load that names a map by file descriptor.
pub const PSEUDO_MAP_FD: u8 = 1;
/// `ld_imm64`'s source for the address of an array map's first value (+ the second half's imm).
pub const PSEUDO_MAP_VALUE: u8 = 2;

/// One instruction, laid out as `struct bpf_insn` (the register nibbles in little-endian
/// bit-field order: `dst_reg` low).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Insn {
    pub code: u8,
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    const fn new(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: regs(dst as u8, src as u8),
            off,
            imm,
        }
    }

    pub fn dst(&self) -> u8 {
        if cfg!(target_endian = "little") {
            self.regs & 0x0f
        } else {
            self.regs >> 4
        }
    }

    pub fn src(&self) -> u8 {
        if cfg!(target_endian = "little") {
            self.regs >> 4
        } else {
            self.regs & 0x0f
        }
    }

    pub fn class(&self) -> u8 {
        self.code & 0x07
    }
}

const fn regs(dst: u8, src: u8) -> u8 {
    if cfg!(target_endian = "little") {
        dst | (src << 4)
    } else {
        (dst << 4) | src
    }
}

impl fmt::Debug for Insn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:02x} r{} r{} {:+} {}",
            self.code,
            self.dst(),
            self.src(),
            self.off,
            self.imm
        )
    }
}

/// A jump target, bound to a position with [`Asm::bind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label(usize);

/// The assembler: appends instructions, records jumps to labels, resolves them in `finish`.
#[derive(Debug, Default)]
pub struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    /// (instruction index, label) of every jump.
    fixups: Vec<(usize, Label)>,
    /// Labels bound twice or not made here.
    bad_labels: Vec<usize>,
}

impl Asm {
    pub fn new() -> Asm {
        Asm::default()
    }

    /// Instructions so far.
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Binds `l` to the next instruction. Binding a label twice, or one this assembler did not
    /// make, is a bug in the program builder: `finish` reports it.
    pub fn bind(&mut self, l: Label) {
        match self.labels.get_mut(l.0) {
            Some(slot @ None) => *slot = Some(self.insns.len()),
            _ => self.bad_labels.push(l.0),
        }
    }

    fn push(&mut self, i: Insn) -> &mut Self {
        self.insns.push(i);
        self
    }

    /// `dst = src` (64-bit).
    pub fn mov(&mut self, dst: Reg, src: Reg) -> &mut Self {
        self.alu_reg(Alu::Mov, dst, src)
    }

    /// `dst = imm` (64-bit, sign-extended).
    pub fn mov_imm(&mut self, dst: Reg, imm: i32) -> &mut Self {
        self.alu_imm(Alu::Mov, dst, imm)
    }

    pub fn alu_imm(&mut self, op: Alu, dst: Reg, imm: i32) -> &mut Self {
        self.push(Insn::new(
            CLASS_ALU64 | op.code() | SRC_K,
            dst,
            Reg::R0,
            0,
            imm,
        ))
    }

    /// `dst = htobe{bits}(dst)`: the packet's byte order again after an `LD_ABS` (which returns
    /// the bytes read as a big-endian number in host order). `bits`: 16, 32 or 64.
    pub fn to_be(&mut self, dst: Reg, bits: i32) -> &mut Self {
        self.push(Insn::new(CLASS_ALU | OP_END | SRC_X, dst, Reg::R0, 0, bits))
    }

    pub fn alu_reg(&mut self, op: Alu, dst: Reg, src: Reg) -> &mut Self {
        self.push(Insn::new(CLASS_ALU64 | op.code() | SRC_X, dst, src, 0, 0))
    }

    /// `R0 = packet[off]` in host byte order (the packet's bytes read as big-endian); the program
    /// returns 0 when the packet is shorter. Needs the context in `R6`; clobbers `R1`..`R5`.
    pub fn ld_abs(&mut self, size: Size, off: i32) -> &mut Self {
        self.push(Insn::new(
            CLASS_LD | MODE_ABS | size.code(),
            Reg::R0,
            Reg::R0,
            0,
            off,
        ))
    }

    /// `R0 = packet[src + off]`, like [`ld_abs`](Self::ld_abs).
    pub fn ld_ind(&mut self, size: Size, src: Reg, off: i32) -> &mut Self {
        self.push(Insn::new(
            CLASS_LD | MODE_IND | size.code(),
            Reg::R0,
            src,
            0,
            off,
        ))
    }

    /// `dst = *(size *)(src + off)`.
    pub fn ldx(&mut self, size: Size, dst: Reg, src: Reg, off: i16) -> &mut Self {
        self.push(Insn::new(
            CLASS_LDX | MODE_MEM | size.code(),
            dst,
            src,
            off,
            0,
        ))
    }

    /// `*(size *)(dst + off) = src`.
    pub fn stx(&mut self, size: Size, dst: Reg, off: i16, src: Reg) -> &mut Self {
        self.push(Insn::new(
            CLASS_STX | MODE_MEM | size.code(),
            dst,
            src,
            off,
            0,
        ))
    }

    /// `*(u64 *)(dst + off) += src`, atomically (other CPUs count into the same memory).
    pub fn atomic_add(&mut self, dst: Reg, off: i16, src: Reg) -> &mut Self {
        self.push(Insn::new(
            CLASS_STX | MODE_ATOMIC | Size::DW.code(),
            dst,
            src,
            off,
            0,
        ))
    }

    /// `*(size *)(dst + off) = imm`.
    pub fn st(&mut self, size: Size, dst: Reg, off: i16, imm: i32) -> &mut Self {
        self.push(Insn::new(
            CLASS_ST | MODE_MEM | size.code(),
            dst,
            Reg::R0,
            off,
            imm,
        ))
    }

    /// `dst = map` (the map's file descriptor, which the kernel turns into its address): two
    /// instruction slots.
    pub fn ld_map_fd(&mut self, dst: Reg, fd: i32) -> &mut Self {
        let mut first = Insn::new(CLASS_LD | MODE_IMM | Size::DW.code(), dst, Reg::R0, 0, fd);
        first.regs = regs(dst as u8, PSEUDO_MAP_FD);
        self.push(first);
        self.push(Insn::default())
    }

    /// `dst = &value[off]` of the array map `fd`'s first element, with no helper call (Linux
    /// >= 5.2).
    pub fn ld_map_value(&mut self, dst: Reg, fd: i32, off: i32) -> &mut Self {
        let mut first = Insn::new(CLASS_LD | MODE_IMM | Size::DW.code(), dst, Reg::R0, 0, fd);
        first.regs = regs(dst as u8, PSEUDO_MAP_VALUE);
        self.push(first);
        self.push(Insn {
            imm: off,
            ..Insn::default()
        })
    }

    /// `if dst <cond> imm goto to`.
    pub fn jmp_imm(&mut self, cond: Cond, dst: Reg, imm: i32, to: Label) -> &mut Self {
        self.fixups.push((self.insns.len(), to));
        self.push(Insn::new(
            CLASS_JMP | cond.code() | SRC_K,
            dst,
            Reg::R0,
            0,
            imm,
        ))
    }

    /// `if dst <cond> src goto to`.
    pub fn jmp_reg(&mut self, cond: Cond, dst: Reg, src: Reg, to: Label) -> &mut Self {
        self.fixups.push((self.insns.len(), to));
        self.push(Insn::new(CLASS_JMP | cond.code() | SRC_X, dst, src, 0, 0))
    }

    /// `if (u32)dst <cond> (u32)imm goto to`: compares the low 32 bits (a 64-bit compare would
    /// sign-extend an immediate of 0x8000_0000 or more).
    pub fn jmp32_imm(&mut self, cond: Cond, dst: Reg, imm: u32, to: Label) -> &mut Self {
        self.fixups.push((self.insns.len(), to));
        self.push(Insn::new(
            CLASS_JMP32 | cond.code() | SRC_K,
            dst,
            Reg::R0,
            0,
            imm as i32,
        ))
    }

    /// `goto to`.
    pub fn ja(&mut self, to: Label) -> &mut Self {
        self.fixups.push((self.insns.len(), to));
        self.push(Insn::new(CLASS_JMP | OP_JA, Reg::R0, Reg::R0, 0, 0))
    }

    pub fn call(&mut self, h: Helper) -> &mut Self {
        self.push(Insn::new(
            CLASS_JMP | OP_CALL,
            Reg::R0,
            Reg::R0,
            0,
            h as i32,
        ))
    }

    /// `return R0`.
    pub fn exit(&mut self) -> &mut Self {
        self.push(Insn::new(CLASS_JMP | OP_EXIT, Reg::R0, Reg::R0, 0, 0))
    }

    /// The program, every jump resolved.
    pub fn finish(self) -> Result<Vec<Insn>, String> {
        if let Some(l) = self.bad_labels.first() {
            return Err(format!("eBPF program: label {l} bound twice or unknown"));
        }
        let mut insns = self.insns;
        for (at, l) in self.fixups {
            let target = self
                .labels
                .get(l.0)
                .copied()
                .flatten()
                .ok_or_else(|| format!("eBPF program: label {} never bound", l.0))?;
            if target >= insns.len() {
                return Err(format!(
                    "eBPF program: label {} points past the last instruction",
                    l.0
                ));
            }
            let off = i16::try_from(target as i64 - at as i64 - 1)
                .map_err(|_| format!("eBPF program: jump at {at} out of range"))?;
            insns[at].off = off;
        }
        Ok(insns)
    }
}

#[cfg(test)]
mod tests;
