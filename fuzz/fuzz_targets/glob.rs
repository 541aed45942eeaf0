//! The policy engine decides as globset's own matcher does, for any policy and path
//! made of the glob syntax's pieces (issue 13). The same check as
//! `tests/glob_differential.rs`, driven by libFuzzer:
//! `cargo +nightly fuzz run glob` in `fuzz/`.
#![no_main]

#[path = "../../tests/support/glob_reference.rs"]
mod reference;

use libfuzzer_sys::fuzz_target;
use reference::{Rule, Spec};

/// Reads a policy and a path from bytes: a header byte, then patterns and names
/// separated by 0xff.
fn decode(data: &[u8]) -> Option<(Spec, Vec<Vec<u8>>, bool)> {
    let (&head, rest) = data.split_first()?;
    let mut parts = rest.split(|&b| b == 0xff);
    let mut rules = Vec::new();
    let n_patterns = 1 + (head as usize & 3);
    for i in 0..n_patterns {
        let p = parts.next()?;
        let (&flags, toks) = p.split_first().unwrap_or((&0, &[]));
        let toks: Vec<usize> = toks.iter().map(|&b| b as usize).collect();
        if toks.is_empty() {
            return None;
        }
        let pat = reference::pattern(flags & 1 != 0, &toks, flags & 2 != 0);
        if i == 0 || flags & 4 != 0 {
            rules.push(Rule {
                action: (flags >> 3) as usize,
                patterns: vec![pat],
            });
        } else {
            rules.last_mut()?.patterns.push(pat);
        }
    }
    let names: Vec<Vec<usize>> = parts
        .filter(|n| !n.is_empty())
        .take(6)
        .map(|n| n.iter().map(|&b| b as usize).collect())
        .collect();
    if names.is_empty() {
        return None;
    }
    let spec = Spec {
        default: (head >> 2) as usize,
        rules,
    };
    Some((spec, reference::path(&names), head & 0x40 != 0))
}

fuzz_target!(|data: &[u8]| {
    if let Some((spec, segs, is_dir)) = decode(data) {
        if let Err(e) = reference::check(&spec, &segs, is_dir) {
            panic!("{e}");
        }
    }
});
