//! A file-system exerciser in the spirit of xfstests' fsx and fsstress, for
//! `scripts/conformance`: run it on a native directory and on a mount and compare.
//!
//! ```text
//! exercise DIR [--seed N] [--ops N] [--procs N]
//! ```
//!
//! Each of `--procs` processes (this program again) works in `DIR/pN` with its own
//! seed-derived random sequence of operations on a few files and directories:
//! writes at random offsets (some with `O_APPEND`), reads, truncations by path and
//! by descriptor, `copy_file_range`, `fallocate`, `fsync`, renames, unlinks, hard
//! links, reopening, listings. Every result is checked against an in-memory model
//! (contents, sizes, names); the first mismatch prints the last operations and
//! fails. All processes also race in one shared directory (create, write a
//! self-describing record, rename, link, unlink, list), where only the races'
//! own errnos (`ENOENT`, `EEXIST`) are allowed and every file read back must be
//! one whole record. The last line is a digest of the private trees, equal on every
//! filesystem for the same seed.
//!
//! Exit status 0 when every check held, 1 otherwise.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// splitmix64: small, deterministic, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const SLOTS: usize = 6;
const MAX_SIZE: u64 = 1 << 20;

/// One process's private tree: `slot` files `fN` and the model of each.
struct Private {
    dir: PathBuf,
    rng: Rng,
    model: Vec<Option<Vec<u8>>>,
    open: Vec<Option<File>>,
    log: Vec<String>,
}

fn fail(what: String) -> io::Error {
    io::Error::other(what)
}

impl Private {
    fn path(&self, slot: usize) -> PathBuf {
        self.dir.join(format!("f{slot}"))
    }

    fn note(&mut self, s: String) {
        if self.log.len() == 32 {
            self.log.remove(0);
        }
        self.log.push(s);
    }

    fn handle(&mut self, slot: usize) -> io::Result<&File> {
        if self.open[slot].is_none() {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.path(slot))?;
            self.open[slot] = Some(f);
        }
        Ok(self.open[slot].as_ref().expect("just opened"))
    }

    fn data(&mut self, len: usize) -> Vec<u8> {
        let seed = self.rng.next();
        (0..len)
            .map(|i| (seed.wrapping_add(i as u64 * 31) >> 3) as u8)
            .collect()
    }

    fn check_file(&mut self, slot: usize) -> io::Result<()> {
        let want = self.model[slot].clone();
        match (want, std::fs::read(self.path(slot))) {
            (None, Err(e)) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            (Some(w), Ok(got)) if w == got => Ok(()),
            (Some(w), Ok(got)) => {
                let at = w.iter().zip(&got).position(|(a, b)| a != b);
                Err(fail(format!(
                    "f{slot}: contents differ from the model (model {} bytes, file {} bytes, first difference at {at:?})",
                    w.len(),
                    got.len()
                )))
            }
            (w, r) => Err(fail(format!(
                "f{slot}: model {:?}, file {:?}",
                w.map(|w| w.len()),
                r.map(|g| g.len())
            ))),
        }
    }

    fn step(&mut self) -> io::Result<()> {
        let slot = self.rng.below(SLOTS as u64) as usize;
        let op = self.rng.below(100);
        let Some(size) = self.model[slot].as_ref().map(|m| m.len() as u64) else {
            // Missing: create it (exclusively), sometimes through a link.
            let other = (0..SLOTS).find(|&s| s != slot && self.model[s].is_some());
            if op < 20
                && let Some(o) = other
            {
                self.note(format!("link f{o} f{slot}"));
                std::fs::hard_link(self.path(o), self.path(slot))?;
                // Two names, one inode: keep the model simple by copying after.
                let body = self.model[o].clone().expect("present");
                std::fs::remove_file(self.path(slot))?;
                std::fs::write(self.path(slot), &body)?;
                self.model[slot] = Some(body);
                return Ok(());
            }
            self.note(format!("create f{slot}"));
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(self.path(slot))?;
            self.model[slot] = Some(Vec::new());
            return Ok(());
        };
        match op {
            0..=29 => {
                let off = self.rng.below(MAX_SIZE.min(size + 65536));
                let len = 1 + self.rng.below(65536.min(MAX_SIZE - off)) as usize;
                let buf = self.data(len);
                self.note(format!("write f{slot} {off}+{len}"));
                self.handle(slot)?.write_all_at(&buf, off)?;
                let m = self.model[slot].as_mut().expect("present");
                if m.len() < off as usize + len {
                    m.resize(off as usize + len, 0);
                }
                m[off as usize..off as usize + len].copy_from_slice(&buf);
            }
            30..=34 => {
                let len = 1 + self.rng.below(8192) as usize;
                let buf = self.data(len);
                self.note(format!("append f{slot} {len}"));
                let mut f = OpenOptions::new().append(true).open(self.path(slot))?;
                f.write_all(&buf)?;
                self.model[slot]
                    .as_mut()
                    .expect("present")
                    .extend_from_slice(&buf);
            }
            35..=54 => {
                let off = self.rng.below(size + 100);
                let len = self.rng.below(70000) as usize;
                self.note(format!("read f{slot} {off}+{len}"));
                let mut buf = vec![0u8; len];
                let mut done = 0;
                while done < len {
                    let n = self
                        .handle(slot)?
                        .read_at(&mut buf[done..], off + done as u64)?;
                    if n == 0 {
                        break;
                    }
                    done += n;
                }
                let m = self.model[slot].as_ref().expect("present");
                let from = (off as usize).min(m.len());
                let to = (off as usize + len).min(m.len());
                if buf[..done] != m[from..to] {
                    return Err(fail(format!(
                        "read f{slot} {off}+{len}: got {done} bytes that differ from the model's {}",
                        to - from
                    )));
                }
            }
            55..=62 => {
                let to = self.rng.below(MAX_SIZE);
                let by_path = self.rng.below(2) == 0;
                self.note(format!("truncate f{slot} {to} by_path={by_path}"));
                if by_path {
                    OpenOptions::new()
                        .write(true)
                        .open(self.path(slot))?
                        .set_len(to)?;
                } else {
                    self.handle(slot)?.set_len(to)?;
                }
                self.model[slot]
                    .as_mut()
                    .expect("present")
                    .resize(to as usize, 0);
            }
            63..=67 => {
                let dst = self.rng.below(SLOTS as u64) as usize;
                if dst == slot || self.model[dst].is_none() || size == 0 {
                    return Ok(());
                }
                let off_in = self.rng.below(size);
                let off_out = self.rng.below(MAX_SIZE / 2);
                let len = 1 + self.rng.below(size - off_in);
                self.note(format!(
                    "copy_file_range f{slot} {off_in}+{len} -> f{dst} {off_out}"
                ));
                let (a, b) = (File::open(self.path(slot))?, self.handle(dst)?.try_clone()?);
                let mut done = 0;
                while done < len {
                    let n = veilfs::sys::copy_file_range(
                        a.as_fd(),
                        (off_in + done) as i64,
                        b.as_fd(),
                        (off_out + done) as i64,
                        (len - done) as usize,
                    )?;
                    if n == 0 {
                        break;
                    }
                    done += n as u64;
                }
                let src = self.model[slot].as_ref().expect("present")
                    [off_in as usize..(off_in + done) as usize]
                    .to_vec();
                let m = self.model[dst].as_mut().expect("present");
                let end = (off_out + done) as usize;
                if m.len() < end {
                    m.resize(end, 0);
                }
                m[off_out as usize..end].copy_from_slice(&src);
            }
            68..=70 => {
                let off = self.rng.below(MAX_SIZE / 2);
                let len = 1 + self.rng.below(65536);
                self.note(format!("fallocate f{slot} {off}+{len}"));
                veilfs::sys::fallocate(self.handle(slot)?.as_fd(), 0, off as i64, len as i64)?;
                let m = self.model[slot].as_mut().expect("present");
                let end = (off + len) as usize;
                if m.len() < end {
                    m.resize(end, 0);
                }
            }
            71..=73 => {
                self.note(format!("fsync f{slot}"));
                self.handle(slot)?.sync_all()?;
            }
            74..=79 => {
                let dst = self.rng.below(SLOTS as u64) as usize;
                if dst == slot {
                    return Ok(());
                }
                self.note(format!("rename f{slot} f{dst}"));
                std::fs::rename(self.path(slot), self.path(dst))?;
                self.model[dst] = self.model[slot].take();
                self.open[dst] = self.open[slot].take();
            }
            80..=83 => {
                self.note(format!("unlink f{slot}"));
                std::fs::remove_file(self.path(slot))?;
                self.model[slot] = None;
                self.open[slot] = None;
            }
            84..=89 => {
                self.note(format!("close f{slot}"));
                self.open[slot] = None;
            }
            90..=94 => {
                self.note(format!("stat f{slot}"));
                let len = std::fs::metadata(self.path(slot))?.len();
                if len != size {
                    return Err(fail(format!("stat f{slot}: size {len}, model {size}")));
                }
            }
            _ => {
                self.note("list".into());
                let mut names: Vec<String> = std::fs::read_dir(&self.dir)?
                    .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                    .collect::<io::Result<_>>()?;
                names.sort();
                let mut want: Vec<String> = (0..SLOTS)
                    .filter(|&s| self.model[s].is_some())
                    .map(|s| format!("f{s}"))
                    .collect();
                want.sort();
                if names != want {
                    return Err(fail(format!("listing {names:?}, model {want:?}")));
                }
                self.check_file(slot)?;
            }
        }
        Ok(())
    }
}

/// One race step in the shared directory: each file holds one whole record
/// `proc seq` padded to a length derived from both, written with one `write`.
fn shared_step(dir: &Path, rng: &mut Rng, proc_: u64, seq: u64) -> io::Result<()> {
    let a = dir.join(format!("s{}", rng.below(8)));
    let b = dir.join(format!("s{}", rng.below(8)));
    // The errnos of the race itself: a name another process just took or removed.
    let allowed = |r: io::Result<()>| match r {
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::EEXIST)) => Ok(()),
        r => r,
    };
    let op = rng.below(6);
    let r = match op {
        0 | 1 => {
            let tmp = dir.join(format!("t{proc_}"));
            File::create(&tmp)
                .and_then(|mut f| f.write_all(&record(proc_, seq)))
                .and_then(|()| allowed(std::fs::rename(&tmp, &a)))
        }
        2 => allowed(std::fs::rename(&a, &b)),
        3 => allowed(std::fs::hard_link(&a, &b)),
        4 => allowed(std::fs::remove_file(&a)),
        _ => list_shared(dir),
    };
    r.map_err(|e| {
        let name = ["write", "write", "rename", "link", "unlink", "list"][op as usize];
        fail(format!(
            "shared {name} {} {}: {e}",
            a.display(),
            b.display()
        ))
    })
}

/// Reads back every record in the shared directory.
fn list_shared(dir: &Path) -> io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with('s') {
            continue;
        }
        let mut body = Vec::new();
        match File::open(e.path()) {
            Ok(mut f) => {
                f.read_to_end(&mut body)
                    .map_err(|e| fail(format!("read {name}: {e}")))?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(fail(format!("open {name}: {e}"))),
        }
        check_record(&body).map_err(|m| fail(format!("{name}: {m}")))?;
    }
    Ok(())
}

fn record(proc_: u64, seq: u64) -> Vec<u8> {
    let head = format!("{proc_} {seq}\n");
    let len = 16 + ((proc_ * 7919 + seq * 104_729) % 20000) as usize;
    let mut v = head.into_bytes();
    v.resize(len, b'.');
    v
}

fn check_record(body: &[u8]) -> Result<(), String> {
    let nl = body.iter().position(|&c| c == b'\n').ok_or("no header")?;
    let head = std::str::from_utf8(&body[..nl]).map_err(|_| "header not text")?;
    let mut it = head.split(' ').map(str::parse::<u64>);
    let (Some(Ok(p)), Some(Ok(s))) = (it.next(), it.next()) else {
        return Err(format!("bad header {head:?}"));
    };
    if body != record(p, s) {
        return Err(format!(
            "record {p} {s} torn or corrupt ({} bytes)",
            body.len()
        ));
    }
    Ok(())
}

/// A digest of a private tree: names, sizes and contents (FNV-1a).
fn digest(dir: &Path) -> io::Result<u64> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: &[u8]| {
        for &c in b {
            h = (h ^ u64::from(c)).wrapping_mul(0x100_0000_01b3);
        }
    };
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        files.insert(e.file_name(), std::fs::read(e.path())?);
    }
    for (name, body) in files {
        eat(name.as_encoded_bytes());
        eat(&(body.len() as u64).to_le_bytes());
        eat(&body);
    }
    Ok(h)
}

fn child(dir: &Path, proc_: u64, seed: u64, ops: u64) -> io::Result<u64> {
    let mine = dir.join(format!("p{proc_}"));
    std::fs::create_dir(&mine).map_err(|e| fail(format!("mkdir {}: {e}", mine.display())))?;
    let shared = dir.join("shared");
    let mut p = Private {
        dir: mine.clone(),
        rng: Rng(seed ^ proc_.wrapping_mul(0x2545_f491_4f6c_dd1d)),
        model: vec![None; SLOTS],
        open: (0..SLOTS).map(|_| None).collect(),
        log: Vec::new(),
    };
    // The shared race's own sequence, so the private one stays the same everywhere.
    let mut race = Rng(seed.rotate_left(17) ^ proc_);
    for i in 0..ops {
        let r = p.step().and_then(|()| {
            if i % 4 == 0 {
                shared_step(&shared, &mut race, proc_, i)
            } else {
                Ok(())
            }
        });
        if let Err(e) = r {
            return Err(fail(format!(
                "process {proc_}, operation {i}: {e}\nlast operations:\n  {}",
                p.log.join("\n  ")
            )));
        }
    }
    for s in 0..SLOTS {
        p.check_file(s)?;
    }
    drop(p);
    digest(&mine).map_err(|e| fail(format!("digest of {}: {e}", mine.display())))
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1).map(PathBuf::from) else {
        eprintln!("usage: exercise DIR [--seed N] [--ops N] [--procs N]");
        return ExitCode::from(2);
    };
    let (seed, ops, procs) = (
        arg(&args, "--seed", 1),
        arg(&args, "--ops", 10_000),
        arg(&args, "--procs", 4),
    );
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let proc_ = args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or(0);
        return match child(&dir, proc_, seed, ops) {
            Ok(d) => {
                println!("{d:016x}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("exercise: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Err(e) = std::fs::create_dir_all(dir.join("shared")) {
        eprintln!("exercise: {}: {e}", dir.display());
        return ExitCode::from(2);
    }
    let exe = std::env::current_exe().expect("own path");
    let children: Vec<_> = (0..procs)
        .map(|p| {
            Command::new(&exe)
                .arg(&dir)
                .args(["--seed", &seed.to_string(), "--ops", &ops.to_string()])
                .args(["--child", &p.to_string()])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("start a child")
        })
        .collect();
    let mut ok = true;
    let mut digests = Vec::new();
    for c in children {
        let o = c.wait_with_output().expect("wait for a child");
        ok &= o.status.success();
        digests.push(String::from_utf8_lossy(&o.stdout).trim().to_string());
    }
    println!(
        "exercise: seed {seed}, {procs} processes x {ops} operations: {}",
        if ok { "ok" } else { "FAILED" }
    );
    println!("digest {}", digests.join(" "));
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
