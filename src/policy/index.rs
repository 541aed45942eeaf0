//! A glob index whose cost per lookup does not grow with the number of patterns.
//!
//! `globset::GlobSet` answers with one regex set for every pattern it cannot reduce to
//! a literal or an extension; with thousands of such patterns that set is slow to
//! build and slow to run. This index keeps globset's matching semantics (each glob is
//! still a `globset::Glob`) but decides *which* globs to run by literals:
//!
//! * `{a,b}` alternatives are expanded (up to [`MAX_EXPANSIONS`]) into separate globs;
//! * a glob with no metacharacter is an exact key in a hash map;
//! * every other glob is filed under its longest literal run (`.pem` for `*.pem`,
//!   `vendor` for `/vendor/**/*.go`): one Aho-Corasick pass over the subject finds
//!   the runs it contains, and only the globs filed under those runs are tried;
//! * the few globs without any literal (`*`, `?`, `**`) are tried every time.
//!
//! Each glob's regex is compiled on first use, so loading a large policy is cheap.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};
use globset::{Candidate, Glob, GlobBuilder, GlobMatcher};

/// Brace expansion stops (and the glob is kept whole) past this many alternatives.
pub const MAX_EXPANSIONS: usize = 64;

/// Builds a glob with the policy language's options.
pub fn build_glob(text: &str) -> Result<Glob, globset::Error> {
    GlobBuilder::new(text)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
}

#[derive(Debug)]
struct Slow {
    glob: Glob,
    matcher: OnceLock<GlobMatcher>,
    id: usize,
}

impl Slow {
    fn is_match(&self, c: &Candidate) -> bool {
        self.matcher
            .get_or_init(|| self.glob.compile_matcher())
            .is_match_candidate(c)
    }
}

/// Globs added with a caller's id; [`GlobIndex::for_each_match`] reports the ids of
/// the globs that match a subject (an id may be reported more than once).
#[derive(Debug, Default)]
pub struct GlobIndex {
    exact: HashMap<Vec<u8>, Vec<usize>>,
    slow: Vec<Slow>,
    keys: Option<AhoCorasick>,
    /// For each Aho-Corasick pattern, the `slow` entries filed under it.
    keyed: Vec<Vec<usize>>,
    /// `slow` entries with no literal run: tried for every subject.
    always: Vec<usize>,
    len: usize,
}

/// Collects globs before the index is built.
#[derive(Default)]
pub struct GlobIndexBuilder {
    exact: HashMap<Vec<u8>, Vec<usize>>,
    slow: Vec<Slow>,
    key_of: Vec<Option<Vec<u8>>>,
    len: usize,
}

impl GlobIndexBuilder {
    /// Adds a glob (already validated with [`build_glob`]) under `id`.
    pub fn add(&mut self, text: &str, id: usize) -> Result<(), globset::Error> {
        self.len += 1;
        for alt in expand_braces(text).unwrap_or_else(|| vec![text.to_string()]) {
            let scan = scan(&alt);
            match scan.literal {
                Some(lit) => self.exact.entry(lit).or_default().push(id),
                None => {
                    self.slow.push(Slow {
                        glob: build_glob(&alt)?,
                        matcher: OnceLock::new(),
                        id,
                    });
                    self.key_of.push(scan.longest_run);
                }
            }
        }
        Ok(())
    }

    pub fn build(self) -> GlobIndex {
        let mut key_ids: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut keyed: Vec<Vec<usize>> = Vec::new();
        let mut always = Vec::new();
        for (i, key) in self.key_of.into_iter().enumerate() {
            match key {
                Some(k) => {
                    let next = keyed.len();
                    let k = *key_ids.entry(k).or_insert(next);
                    if k == keyed.len() {
                        keyed.push(Vec::new());
                    }
                    keyed[k].push(i);
                }
                None => always.push(i),
            }
        }
        let keys = if keyed.is_empty() {
            None
        } else {
            let mut by_id = vec![Vec::new(); keyed.len()];
            for (k, i) in key_ids {
                by_id[i] = k;
            }
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::Standard)
                    .build(&by_id)
                    .expect("literal keys build an automaton"),
            )
        };
        GlobIndex {
            exact: self.exact,
            slow: self.slow,
            keys,
            keyed,
            always,
            len: self.len,
        }
    }
}

impl GlobIndex {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Calls `f` with the id of every glob matching `subject`.
    pub fn for_each_match(&self, subject: &[u8], mut f: impl FnMut(usize)) {
        if let Some(ids) = self.exact.get(subject) {
            ids.iter().for_each(|&id| f(id));
        }
        if self.slow.is_empty() {
            return;
        }
        let c = Candidate::new(OsStr::from_bytes(subject));
        for &i in &self.always {
            if self.slow[i].is_match(&c) {
                f(self.slow[i].id);
            }
        }
        if let Some(keys) = &self.keys {
            for m in keys.find_overlapping_iter(subject) {
                for &i in &self.keyed[m.pattern().as_usize()] {
                    if self.slow[i].is_match(&c) {
                        f(self.slow[i].id);
                    }
                }
            }
        }
    }
}

struct Scan {
    /// The glob's bytes if it has no metacharacter (escapes resolved).
    literal: Option<Vec<u8>>,
    /// The longest run of bytes that every match must contain.
    longest_run: Option<Vec<u8>>,
}

/// Splits a glob into literal runs, skipping `*`, `?`, classes and alternatives.
fn scan(glob: &str) -> Scan {
    let b = glob.as_bytes();
    let mut meta = false;
    let mut runs: Vec<Vec<u8>> = vec![Vec::new()];
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if i + 1 < b.len() => {
                runs.last_mut().unwrap().push(b[i + 1]);
                i += 2;
                continue;
            }
            b'*' if b.get(i + 1) == Some(&b'*') => {
                // `**` may match nothing, and with it the `/` on either side.
                meta = true;
                if runs.last().is_some_and(|r| r.last() == Some(&b'/')) {
                    runs.last_mut().unwrap().pop();
                }
                runs.push(Vec::new());
                i += 2;
                if b.get(i) == Some(&b'/') {
                    i += 1;
                }
                continue;
            }
            b'*' | b'?' => {
                meta = true;
                runs.push(Vec::new());
            }
            b'[' => {
                meta = true;
                runs.push(Vec::new());
                i = skip_class(b, i);
                continue;
            }
            b'{' => {
                meta = true;
                runs.push(Vec::new());
                i = skip_group(b, i);
                continue;
            }
            c => runs.last_mut().unwrap().push(c),
        }
        i += 1;
    }
    if !meta {
        return Scan {
            literal: runs.pop(),
            longest_run: None,
        };
    }
    let longest = runs
        .into_iter()
        .max_by_key(|r| r.len())
        .filter(|r| !r.is_empty());
    Scan {
        literal: None,
        longest_run: longest,
    }
}

/// The index just past the class that starts at `b[start] == b'['`.
fn skip_class(b: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    if i < b.len() && (b[i] == b'!' || b[i] == b'^') {
        i += 1;
    }
    if i < b.len() && b[i] == b']' {
        i += 1;
    }
    while i < b.len() && b[i] != b']' {
        i += 1;
    }
    i + 1
}

/// The index just past the `{...}` group that starts at `b[start] == b'{'`.
fn skip_group(b: &[u8], start: usize) -> usize {
    let mut depth = 0;
    let mut i = start;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'[' => {
                i = skip_class(b, i);
                continue;
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// Expands the `{a,b}` groups of a glob into plain globs, or `None` when it has no
/// group, too many alternatives, an empty alternative or a `**` inside a group (kept
/// whole so globset's own reading of those applies).
pub fn expand_braces(glob: &str) -> Option<Vec<String>> {
    let b = glob.as_bytes();
    let mut i = 0;
    let open = loop {
        if i >= b.len() {
            return None;
        }
        match b[i] {
            b'\\' => i += 2,
            b'[' => i = skip_class(b, i),
            b'{' => break i,
            _ => i += 1,
        }
    };
    let close = skip_group(b, open);
    if close > b.len() || b.get(close - 1) != Some(&b'}') {
        return None;
    }
    // Split the group's body on its top-level commas.
    let body = &glob[open + 1..close - 1];
    let bb = body.as_bytes();
    let mut alts = Vec::new();
    let (mut depth, mut start, mut j) = (0, 0, 0);
    while j < bb.len() {
        match bb[j] {
            b'\\' => j += 1,
            b'[' => {
                j = skip_class(bb, j);
                continue;
            }
            b'{' => depth += 1,
            b'}' => depth -= 1,
            b',' if depth == 0 => {
                alts.push(&body[start..j]);
                start = j + 1;
            }
            _ => {}
        }
        j += 1;
    }
    alts.push(&body[start..]);
    if alts.iter().any(|a| a.is_empty() || a.contains("**")) {
        return None;
    }
    let (head, tail) = (&glob[..open], &glob[close..]);
    let mut out = Vec::new();
    for alt in alts {
        let joined = format!("{head}{alt}{tail}");
        match expand_braces(&joined) {
            Some(more) => out.extend(more),
            None => out.push(joined),
        }
        if out.len() > MAX_EXPANSIONS {
            return None;
        }
    }
    Some(out)
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

    #[test]
    fn expansion() {
        assert_eq!(expand_braces("*.{a,b}").unwrap(), ["*.a", "*.b"]);
        assert_eq!(
            expand_braces("{x,y}/{1,2}").unwrap(),
            ["x/1", "x/2", "y/1", "y/2"]
        );
        assert_eq!(expand_braces("{a,{b,c}}d").unwrap(), ["ad", "bd", "cd"]);
        assert_eq!(expand_braces("[{]x"), None);
        assert_eq!(expand_braces("{,a}"), None);
        assert_eq!(expand_braces("{**/a,b}"), None);
        assert_eq!(expand_braces(r"\{a,b}"), None);
    }

    #[test]
    fn scanning() {
        assert_eq!(scan("a\\*b").literal.unwrap(), b"a*b");
        assert_eq!(scan("*.pem").longest_run.unwrap(), b".pem");
        assert_eq!(scan("vendor/**/*.go").longest_run.unwrap(), b"vendor");
        assert_eq!(scan("a/**/bc").longest_run.unwrap(), b"bc");
        assert!(scan("**/**/*").longest_run.is_none());
        assert_eq!(scan("[abc]x").longest_run.unwrap(), b"x");
        assert!(scan("*").longest_run.is_none());
        assert_eq!(scan("**/b").longest_run.unwrap(), b"b");
        assert!(scan("**/b").literal.is_none());
    }

    #[test]
    fn matches_like_globset() {
        let mut b = GlobIndexBuilder::default();
        for (i, g) in ["*.pem", "id_*", "a/**/b", "*", "x{1,2}y", "lit"]
            .iter()
            .enumerate()
        {
            b.add(g, i).unwrap();
        }
        let ix = b.build();
        assert_eq!(ids(&ix, b"k.pem"), [0, 3]);
        assert_eq!(ids(&ix, b"id_rsa"), [1, 3]);
        assert_eq!(ids(&ix, b"a/x/y/b"), [2]);
        assert_eq!(ids(&ix, b"x2y"), [3, 4]);
        assert_eq!(ids(&ix, b"lit"), [3, 5]);
    }
}
