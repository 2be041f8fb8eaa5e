use super::*;

fn bytes(i: &Insn) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = i.code;
    b[1] = i.regs;
    b[2..4].copy_from_slice(&i.off.to_le_bytes());
    b[4..].copy_from_slice(&i.imm.to_le_bytes());
    b
}

#[test]
#[cfg(target_endian = "little")]
fn encodings_match_the_kernel_headers() {
    let mut a = Asm::new();
    let l = a.label();
    a.mov(Reg::R6, Reg::R1) // bf 16
        .mov_imm(Reg::R0, -1) // b7 00 .. ff ff ff ff
        .ld_abs(Size::H, 12) // 28
        .ld_ind(Size::B, Reg::R7, 14) // 50 70
        .ldx(Size::W, Reg::R9, Reg::R6, 20) // 61 69 1400
        .stx(Size::H, Reg::R10, -18, Reg::R8) // 6b 8a eeff
        .st(Size::DW, Reg::R10, -16, 0) // 7a 0a f0ff
        .jmp32_imm(Cond::Ne, Reg::R0, 0x8000_0001, l) // 56
        .jmp_imm(Cond::Lt, Reg::R0, 5, l) // a5
        .call(Helper::SkbLoadBytes) // 85 .. 1a
        .ld_map_fd(Reg::R1, 7); // 18 11 .. 07, then zeros
    a.bind(l);
    a.exit(); // 95
    let p = a.finish().unwrap();
    let got: Vec<[u8; 8]> = p.iter().map(bytes).collect();
    let want: Vec<[u8; 8]> = vec![
        [0xbf, 0x16, 0, 0, 0, 0, 0, 0],
        [0xb7, 0x00, 0, 0, 0xff, 0xff, 0xff, 0xff],
        [0x28, 0x00, 0, 0, 12, 0, 0, 0],
        [0x50, 0x70, 0, 0, 14, 0, 0, 0],
        [0x61, 0x69, 20, 0, 0, 0, 0, 0],
        [0x6b, 0x8a, 0xee, 0xff, 0, 0, 0, 0],
        [0x7a, 0x0a, 0xf0, 0xff, 0, 0, 0, 0],
        [0x56, 0x00, 4, 0, 1, 0, 0, 0x80],
        [0xa5, 0x00, 3, 0, 5, 0, 0, 0],
        [0x85, 0x00, 0, 0, 26, 0, 0, 0],
        [0x18, 0x11, 0, 0, 7, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 0],
        [0x95, 0, 0, 0, 0, 0, 0, 0],
    ];
    assert_eq!(got, want);
    assert_eq!(std::mem::size_of::<Insn>(), 8);
    // be32 r0: BPF_ALU | BPF_END | BPF_TO_BE, the width in imm.
    let mut a = Asm::new();
    a.to_be(Reg::R0, 32);
    assert_eq!(
        bytes(&a.finish().unwrap()[0]),
        [0xdc, 0x00, 0, 0, 32, 0, 0, 0]
    );
}

#[test]
fn labels_resolve_forward_and_back() {
    let mut a = Asm::new();
    let (top, end) = (a.label(), a.label());
    a.bind(top);
    a.mov_imm(Reg::R0, 0);
    a.jmp_imm(Cond::Eq, Reg::R0, 1, end);
    a.ja(top);
    a.bind(end);
    a.exit();
    let p = a.finish().unwrap();
    assert_eq!(p[1].off, 1);
    assert_eq!(p[2].off, -3);
}

#[test]
fn bad_labels_are_errors_not_panics() {
    let mut a = Asm::new();
    let l = a.label();
    a.ja(l);
    assert!(a.finish().unwrap_err().contains("never bound"));

    let mut a = Asm::new();
    let l = a.label();
    a.bind(l);
    a.exit();
    a.bind(l);
    assert!(a.finish().unwrap_err().contains("twice"));

    let mut a = Asm::new();
    let l = a.label();
    a.ja(l);
    a.bind(l);
    assert!(a.finish().unwrap_err().contains("past the last"));

    let mut a = Asm::new();
    let l = a.label();
    a.ja(l);
    for _ in 0..40_000 {
        a.mov_imm(Reg::R0, 0);
    }
    a.bind(l);
    a.exit();
    assert!(a.finish().unwrap_err().contains("out of range"));
}

#[test]
#[cfg(target_endian = "little")]
fn slot_counting_encodings_match_the_kernel_headers() {
    let mut a = Asm::new();
    let l = a.label();
    a.alu_imm(Alu::Mul, Reg::R1, 0x1234_5679) // 27 01
        .alu_reg(Alu::Xor, Reg::R1, Reg::R2) // af 21
        .jmp_reg(Cond::Ne, Reg::R1, Reg::R2, l) // 5d 21
        .atomic_add(Reg::R0, 24, Reg::R1); // db 10 1800 (BPF_STX | BPF_ATOMIC | BPF_DW, BPF_ADD)
    a.bind(l);
    a.exit();
    let got: Vec<[u8; 8]> = a.finish().unwrap().iter().map(bytes).collect();
    assert_eq!(
        got,
        vec![
            [0x27, 0x01, 0, 0, 0x79, 0x56, 0x34, 0x12],
            [0xaf, 0x21, 0, 0, 0, 0, 0, 0],
            [0x5d, 0x21, 1, 0, 0, 0, 0, 0],
            [0xdb, 0x10, 24, 0, 0, 0, 0, 0],
            [0x95, 0, 0, 0, 0, 0, 0, 0],
        ]
    );
}
