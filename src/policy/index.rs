//! A glob index whose cost per lookup does not grow with the number of patterns,
//! and whose answers are globset's own.
//!
//! `globset::GlobSet` answers with one regex set for every pattern it cannot reduce to
//! a literal or an extension; with thousands of such patterns that set is slow to run
//! (measured: 10,000 rules cost 18 times what 10 do per decision). This index keeps
//! globset as the only judge of whether a glob matches, and uses literals only to
//! choose *which* globs to ask:
//!
//! * every glob is parsed once, by globset (`Glob::build`), and compiled when the
//!   policy loads into a one-glob `GlobSet`: the matcher that decides, with no
//!   scanner of our own and no compilation (nor globset's `expect`) on a request;
//! * the prefilter is derived from globset's own translation of the glob (its regex,
//!   read by `regex-syntax`, whose literal extractor guarantees that every match of a
//!   finite prefix or suffix set starts or ends with one of its literals): a glob
//!   whose whole language is a few literals is filed under them in a hash map; any
//!   other is filed under its prefix or its suffix literals (whichever is more
//!   selective), found in a subject by one Aho-Corasick pass;
//! * a glob with neither (`*`, `?`, `*x*`) is asked for every subject.
//!
//! A candidate the prefilter finds is always confirmed by the glob's own matcher, so
//! the prefilter can only make a lookup faster, never change its answer.

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, MatchKind};
use globset::{Candidate, Glob, GlobBuilder, GlobSet};
use regex_syntax::ParserBuilder;
use regex_syntax::hir::literal::{ExtractKind, Extractor, Seq};
use regex_syntax::hir::{Hir, HirKind};

/// A glob is filed under at most this many literals; past it, it is asked always.
const MAX_KEYS: usize = 64;

/// Builds a glob with the policy language's options (the README's settings).
pub fn build_glob(text: &str) -> Result<Glob, globset::Error> {
    GlobBuilder::new(text)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
}

/// Parses and compiles one glob into the matcher that decides for it. Every error
/// globset can give (syntax, or a translation too large to compile) comes out here,
/// when the policy loads.
pub fn compile(text: &str) -> Result<(Glob, GlobSet), globset::Error> {
    let glob = build_glob(text)?;
    let set = GlobSet::new([&glob])?;
    Ok((glob, set))
}

#[derive(Debug)]
struct Entry {
    id: usize,
    matcher: GlobSet,
}

/// Which subjects a glob can match, as far as literals tell.
#[derive(Debug, PartialEq, Eq)]
enum Keys {
    /// Every match is one of these whole subjects.
    Exact(Vec<Vec<u8>>),
    /// Every match contains one of these (as its prefix or its suffix).
    Contains(Vec<Vec<u8>>),
    /// Nothing useful: ask the glob for every subject.
    Always,
}

/// The literals that every match of `glob` is made of, starts with or ends with,
/// derived from globset's regex for it.
fn keys(glob: &Glob) -> Keys {
    // The syntax globset compiles its regex with (see globset's `new_regex`).
    let parsed = ParserBuilder::new()
        .utf8(false)
        .dot_matches_new_line(true)
        .build()
        .parse(glob.regex());
    let Ok(hir) = parsed else {
        return Keys::Always;
    };
    let usable = |seq: &Seq| {
        let lits = seq.literals()?;
        let min = seq.min_literal_len()?;
        (min > 0 && lits.len() <= MAX_KEYS).then_some((min, lits.len()))
    };
    let to_bytes = |seq: &Seq| -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = seq
            .literals()
            .unwrap_or_default()
            .iter()
            .map(|l| l.as_bytes().to_vec())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let prefix = Extractor::new().kind(ExtractKind::Prefix).extract(&hir);
    // The regex is anchored at both ends, so an exact set is the glob's whole language
    // (look-arounds count as empty; the matcher confirms anyway).
    if prefix.is_exact() && prefix.len().is_some_and(|n| n <= MAX_KEYS) {
        return Keys::Exact(to_bytes(&prefix));
    }
    let suffix = Extractor::new().kind(ExtractKind::Suffix).extract(&hir);
    // Longer shortest literal first, then fewer literals.
    let score = |s: &Seq| usable(s).map(|(min, n)| (min, std::cmp::Reverse(n)));
    let inner = inner_literal(&hir);
    let inner_score = inner.as_ref().map(|l| (l.len(), std::cmp::Reverse(1usize)));
    let (p, s) = (score(&prefix), score(&suffix));
    match (p, s, inner) {
        (None, None, None) => Keys::Always,
        (p, s, Some(lit)) if inner_score > p && inner_score > s => Keys::Contains(vec![lit]),
        (p, s, _) if p >= s => Keys::Contains(to_bytes(&prefix)),
        _ => Keys::Contains(to_bytes(&suffix)),
    }
}

/// The longest literal that every match of `hir` contains somewhere: a literal
/// piece of its top-level concatenation (`**/node_modules/**/…` is
/// `(?:/?|.*/)node_modules/(?:/?|.*/)…`, every match of which holds
/// `node_modules`). The Aho-Corasick pass finds it anywhere in a subject, so a
/// glob that neither starts nor ends with a literal is asked only for the
/// subjects that hold its middle one.
fn inner_literal(hir: &Hir) -> Option<Vec<u8>> {
    fn pieces<'a>(hir: &'a Hir, out: &mut Vec<&'a [u8]>) {
        match hir.kind() {
            HirKind::Literal(l) => out.push(&l.0),
            HirKind::Concat(subs) => subs.iter().for_each(|h| pieces(h, out)),
            HirKind::Capture(c) => pieces(&c.sub, out),
            _ => {}
        }
    }
    let mut out = Vec::new();
    pieces(hir, &mut out);
    out.into_iter()
        .filter(|l| !l.is_empty())
        .max_by_key(|l| l.len())
        .map(<[u8]>::to_vec)
}

/// Globs added with a caller's id; [`GlobIndex::for_each_match`] reports the ids of
/// the globs that match a subject (an id may be reported more than once).
#[derive(Debug, Default)]
pub struct GlobIndex {
    entries: Vec<Entry>,
    exact: HashMap<Vec<u8>, Vec<usize>>,
    keys: Option<AhoCorasick>,
    /// For each Aho-Corasick pattern, the entries filed under it.
    keyed: Vec<Vec<usize>>,
    /// Entries with no usable literal: asked for every subject.
    always: Vec<usize>,
}

/// Collects compiled globs before the index is built.
#[derive(Default)]
pub struct GlobIndexBuilder {
    entries: Vec<Entry>,
    exact: HashMap<Vec<u8>, Vec<usize>>,
    contains: HashMap<Vec<u8>, Vec<usize>>,
    always: Vec<usize>,
}

impl GlobIndexBuilder {
    /// Adds a glob compiled with [`compile`] under `id`.
    pub fn add(&mut self, glob: &Glob, matcher: GlobSet, id: usize) {
        let e = self.entries.len();
        self.entries.push(Entry { id, matcher });
        match keys(glob) {
            Keys::Exact(lits) => lits
                .into_iter()
                .for_each(|l| self.exact.entry(l).or_default().push(e)),
            Keys::Contains(lits) => lits
                .into_iter()
                .for_each(|l| self.contains.entry(l).or_default().push(e)),
            Keys::Always => self.always.push(e),
        }
    }

    pub fn build(self) -> GlobIndex {
        let (lits, keyed): (Vec<Vec<u8>>, Vec<Vec<usize>>) = self.contains.into_iter().unzip();
        // Literals of at most a few dozen bytes each: the automaton always builds; if
        // it somehow did not, asking every keyed glob is slower but answers the same.
        let keys = match AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&lits)
        {
            Ok(ac) if !lits.is_empty() => Some(ac),
            _ => None,
        };
        let mut always = self.always;
        if keys.is_none() {
            always.extend(keyed.iter().flatten().copied());
            always.sort_unstable();
            always.dedup();
        }
        GlobIndex {
            entries: self.entries,
            exact: self.exact,
            keys,
            keyed: if lits.is_empty() { Vec::new() } else { keyed },
            always,
        }
    }
}

impl GlobIndex {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Calls `f` with the id of every glob matching `subject` (globset's answer).
    pub fn for_each_match(&self, subject: &[u8], mut f: impl FnMut(usize)) {
        if self.entries.is_empty() {
            return;
        }
        let c = Candidate::from_bytes(subject);
        let mut ask = |e: usize| {
            let entry = &self.entries[e];
            if entry.matcher.is_match_candidate(&c) {
                f(entry.id);
            }
        };
        if let Some(es) = self.exact.get(subject) {
            es.iter().for_each(|&e| ask(e));
        }
        self.always.iter().for_each(|&e| ask(e));
        if let Some(keys) = &self.keys {
            for m in keys.find_overlapping_iter(subject) {
                self.keyed[m.pattern().as_usize()]
                    .iter()
                    .for_each(|&e| ask(e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(ix: &GlobIndex, s: &[u8]) -> Vec<usize> {
        let mut v = Vec::new();
        ix.for_each_match(s, |id| v.push(id));
        v.sort();
        v.dedup();
        v
    }

    fn keys_of(g: &str) -> Keys {
        keys(&build_glob(g).unwrap())
    }

    fn lits(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn literals_come_from_globsets_reading() {
        assert_eq!(keys_of(r"a\*b"), Keys::Exact(lits(&["a*b"])));
        assert_eq!(keys_of("x{1,2}y"), Keys::Exact(lits(&["x1y", "x2y"])));
        assert_eq!(keys_of("*.pem"), Keys::Contains(lits(&[".pem"])));
        assert_eq!(
            keys_of("vendor/**/*.go"),
            Keys::Contains(lits(&["vendor/"]))
        );
        // A POSIX class is one class, not a `]` literal (issue 13).
        assert_eq!(
            keys_of("*[[:digit:]].key"),
            Keys::Contains(lits(&[
                "0.key", "1.key", "2.key", "3.key", "4.key", "5.key", "6.key", "7.key", "8.key",
                "9.key"
            ]))
        );
        assert_eq!(keys_of("[[:upper:]]*.pem"), Keys::Contains(lits(&[".pem"])));
        // Neither a literal prefix nor suffix: filed under the literal in the middle.
        assert_eq!(
            keys_of("**/node_modules/**/{*.pem,*.key,id_*}"),
            Keys::Contains(lits(&["node_modules"]))
        );
        assert_eq!(keys_of("**/x/**"), Keys::Contains(lits(&["x/"])));
        assert_eq!(keys_of("*"), Keys::Always);
        assert_eq!(keys_of("**/**/*"), Keys::Always);
    }

    #[test]
    fn matches_like_globset() {
        let mut b = GlobIndexBuilder::default();
        let globs = [
            "*.pem",
            "id_*",
            "a/**/b",
            "*",
            "x{1,2}y",
            "lit",
            "*[[:digit:]].key",
            "[]]x",
            "**/node_modules/**/{*.pem,id_*}",
            "**/a?b/**",
        ];
        for (i, g) in globs.iter().enumerate() {
            let (glob, m) = compile(g).unwrap();
            b.add(&glob, m, i);
        }
        let ix = b.build();
        assert_eq!(ids(&ix, b"k.pem"), [0, 3]);
        assert_eq!(ids(&ix, b"id_rsa"), [1, 3]);
        assert_eq!(ids(&ix, b"a/x/y/b"), [2]);
        assert_eq!(ids(&ix, b"x2y"), [3, 4]);
        assert_eq!(ids(&ix, b"lit"), [3, 5]);
        assert_eq!(ids(&ix, b"5.key"), [3, 6]);
        assert_eq!(ids(&ix, b"]x"), [3, 7]);
        assert_eq!(ids(&ix, b"node_modules/x/id_rsa"), [8]);
        assert_eq!(ids(&ix, b"w/node_modules/k.pem"), [8]);
        assert_eq!(ids(&ix, b"node_modules/k.txt"), Vec::<usize>::new());
        assert_eq!(ids(&ix, b"q/node_modules"), Vec::<usize>::new());
        assert_eq!(ids(&ix, b"a/axb/c"), [9]);
    }
}
