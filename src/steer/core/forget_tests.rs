//! The per-client records' bound.

use super::*;

#[test]
fn the_oldest_are_forgotten_an_eighth_at_a_time() {
    let mut m: HashMap<ClientKey, u64> = HashMap::new();
    let mut passes = 0;
    for i in 0..10_000u64 {
        let [.., a, b, c, d] = i.to_be_bytes();
        m.insert(ClientKey::untagged(Mac(2, 0, a, b, c, d)), i);
        let before = m.len();
        forget_oldest(&mut m, 64, |v| *v);
        passes += usize::from(m.len() < before);
        assert!(m.len() <= 64);
        // The newest always survive: everything kept is younger than everything dropped.
        let oldest_kept = m.values().min().copied().unwrap_or(0);
        assert!(i + 1 - oldest_kept <= 64, "{i}: kept {oldest_kept}");
    }
    assert!(passes <= 10_000 / 8 + 1, "{passes} passes");
    let mut one: HashMap<ClientKey, u64> = HashMap::new();
    for i in 0..3u8 {
        one.insert(ClientKey::untagged(Mac(2, 0, 0, 0, 0, i)), u64::from(i));
        forget_oldest(&mut one, 0, |v| *v);
        assert_eq!(
            one.values().copied().collect::<Vec<_>>(),
            vec![u64::from(i)]
        );
    }
}
