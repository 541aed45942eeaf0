//! Decision cost against policy size: 10, 1,000 and 10,000 rules, a 6-segment path.
//!
//! `cargo bench --bench policy` prints ns per decision (a whole path from scratch,
//! and one child from its parent's decision, which is what a lookup costs), the
//! compile time, and the ratio 10,000-rules / 10-rules.

use std::hint::black_box;
use std::time::{Duration, Instant};

use veilfs::{Decision, Policy};

/// A deterministic policy of `n` rules mixing every kind of pattern people write:
/// literal names, extensions, anchored paths, directory-only names, prefixes,
/// `**` paths, braces and classes.
fn policy_text(n: usize) -> String {
    let actions = ["deny", "read-only", "allow"];
    let mut s = String::from("default = \"allow\"\n");
    for i in 0..n {
        let p = match i % 8 {
            0 => format!("secret{i}.txt"),
            1 => format!("*.ext{i}"),
            2 => format!("/dir{i}/file{i}.rs"),
            3 => format!("cache{i}/"),
            4 => format!("tmp{i}*"),
            5 => format!("/vendor{i}/**/*.go"),
            6 => format!("*.{{a{i},b{i}}}"),
            _ => format!("log[0-9]{i}"),
        };
        s += &format!(
            "\n[[rules]]\naction = \"{}\"\npaths = [\"{p}\"]\n",
            actions[i % 3]
        );
    }
    s
}

const PATH: &[u8] = b"src/components/widgets/forms/inputs/text_field.rs";
const PARENT: &[u8] = b"src/components/widgets/forms/inputs";

fn per_op(mut f: impl FnMut()) -> f64 {
    // Calibrate to about 300 ms, then take the best of 5 runs.
    let mut n = 1_000u64;
    loop {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        if t.elapsed() > Duration::from_millis(60) {
            break;
        }
        n *= 2;
    }
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    println!("| rules | compile | decide 6-segment path | decide one child |");
    println!("|---:|---:|---:|---:|");
    let mut results = Vec::new();
    for n in [10usize, 1_000, 10_000] {
        let text = policy_text(n);
        let t = Instant::now();
        let policy = Policy::parse("bench.toml", &text).unwrap();
        let compile = t.elapsed();
        let parent = policy.decide(PARENT, true);
        let full = per_op(|| {
            black_box(policy.decide(black_box(PATH), false));
        });
        let child = per_op(|| {
            black_box(policy.decide_child(black_box(&parent), black_box(PATH), || false));
        });
        assert_eq!(policy.decide(PATH, false).action, veilfs::Action::Allow);
        let _ = Decision::root();
        println!(
            "| {n} | {:.1} ms | {full:.0} ns | {child:.0} ns |",
            compile.as_secs_f64() * 1e3
        );
        results.push((n, compile, full, child));
    }
    let (_, _, f10, c10) = results[0];
    let (_, c, f10k, c10k) = results[2];
    println!();
    println!(
        "ratio 10,000 / 10 rules: whole path {:.2}, one child {:.2}; compiling 10,000 rules: {:.0} ms",
        f10k / f10,
        c10k / c10,
        c.as_secs_f64() * 1e3
    );
}
