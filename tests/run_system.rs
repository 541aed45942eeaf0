//! `veilfs run` as root: outside the workspace the system is read-only for the
//! command (`EROFS`), but for `/tmp`, `/var/tmp`, `/dev/shm`, the devices and the
//! `--writable` directories; `--system-writable` opts out. Every attempt is made with
//! the system call itself (a Python script inside the run reports the errno of each),
//! and the files outside are compared before and after.

mod common;

use common::run::{show, text};

use std::collections::BTreeMap;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::require_fuse;

/// Reports, one line each, `NAME ok` or `NAME ERRNO-NAME` for every attempt.
const PRELUDE: &str = r#"
import errno, os, socket, sys
def t(name, f):
    try:
        f()
        print(name, "ok", flush=True)
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno), flush=True)
def write(path, flags=os.O_WRONLY):
    os.close(os.open(path, flags, 0o644))
"#;

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A workspace under the temp directory, and a directory outside every writable
/// place (`/var/cache/veilfs-test-PID-N`), removed on drop.
struct Sys {
    tmp: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

impl Sys {
    fn new() -> Sys {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-sys")
            .tempdir()
            .unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("a.txt"), "hello\n").unwrap();
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let outside = PathBuf::from(format!("/var/cache/veilfs-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&outside);
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("f"), "original\n").unwrap();
        Sys { tmp, ws, outside }
    }

    /// `veilfs run ARGS -- python3 -c PRELUDE+SCRIPT` in the workspace.
    fn py(&self, args: &[&str], script: &str) -> Output {
        self.veilfs(args)
            .args([python(), "-c", &format!("{PRELUDE}{script}")])
            .output()
            .unwrap()
    }

    /// `veilfs run ARGS --` in the workspace, with a runtime directory of its own.
    fn veilfs(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.arg("run")
            .args(args)
            .arg("--")
            .current_dir(&self.ws)
            .env("VEILFS_RUNTIME_DIR", self.tmp.path().join("rt"));
        c
    }
}

impl Drop for Sys {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.outside);
    }
}

/// Paths a failing test may have created outside: removed on drop, so that one
/// failure does not leave files behind for the next run.
struct Strays(Vec<PathBuf>);

impl Strays {
    fn new<P: AsRef<Path>>(paths: &[P]) -> Strays {
        let s = Strays(paths.iter().map(|p| p.as_ref().to_path_buf()).collect());
        for p in &s.0 {
            assert!(!p.exists(), "{} exists before the test", p.display());
        }
        s
    }
}

impl Drop for Strays {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p).or_else(|_| std::fs::remove_dir_all(p));
        }
    }
}

fn python() -> &'static str {
    // Reachable by uid 65534 too (a pyenv shim under /root is not).
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// The `NAME RESULT` lines of a run, which must have succeeded.
#[track_caller]
fn results(o: &Output) -> BTreeMap<String, String> {
    assert_eq!(o.status.code(), Some(0), "{}", show(o));
    text(&o.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Every attempt in `names` answered `want`.
#[track_caller]
fn expect(o: &Output, names: &[&str], want: &str) {
    let r = results(o);
    for n in names {
        assert_eq!(
            r.get(*n).map(String::as_str),
            Some(want),
            "{n}: expected {want}\n{}",
            show(o)
        );
    }
}

#[test]
fn nothing_new_appears_outside() {
    let s = Sys::new();
    let pid = std::process::id();
    let names = [
        format!("/etc/veilfs-test-{pid}"),
        format!("/usr/local/veilfs-test-{pid}"),
        format!("/var/lib/veilfs-test-{pid}"),
        format!("/etc/cron.d/veilfs-test-{pid}"),
        s.outside.join("new").display().to_string(),
        format!("/dev/veilfs-test-{pid}"),
    ];
    let _strays = Strays::new(&names);
    let script = format!(
        r#"
n = {names:?}
t("create_etc", lambda: write(n[0], os.O_WRONLY | os.O_CREAT))
t("mkdir_usr_local", lambda: os.mkdir(n[1]))
t("create_var_lib", lambda: write(n[2], os.O_WRONLY | os.O_CREAT | os.O_EXCL))
t("create_cron", lambda: write(n[3], os.O_WRONLY | os.O_CREAT))
t("symlink_etc", lambda: os.symlink("/tmp", n[0]))
t("mkfifo_etc", lambda: os.mkfifo(n[0]))
t("mknod_etc", lambda: os.mknod(n[0], 0o600))
t("create_outside", lambda: write(n[4], os.O_WRONLY | os.O_CREAT))
t("create_dev", lambda: write(n[5], os.O_WRONLY | os.O_CREAT))
t("mkdir_dev", lambda: os.mkdir(n[5]))
t("symlink_dev", lambda: os.symlink("/tmp", n[5]))
"#
    );
    let o = s.py(&["-q"], &script);
    if Path::new("/etc/cron.d").is_dir() {
        expect(&o, &["create_cron"], "EROFS");
    }
    expect(
        &o,
        &[
            "create_etc",
            "mkdir_usr_local",
            "create_var_lib",
            "symlink_etc",
            "mkfifo_etc",
            "mknod_etc",
            "create_outside",
            "create_dev",
            "mkdir_dev",
            "symlink_dev",
        ],
        "EROFS",
    );
    for n in &names {
        assert!(!Path::new(n).exists(), "{n} was created outside");
    }
}

#[test]
fn an_existing_file_outside_cannot_be_changed() {
    let s = Sys::new();
    let f = s.outside.join("f");
    // A link to it from a writable place, and a directory of the file's own.
    let link = s.tmp.path().join("link");
    std::os::unix::fs::symlink(&f, &link).unwrap();
    std::fs::create_dir(s.outside.join("d")).unwrap();
    let pid = std::process::id();
    let (moved, linked) = (
        format!("/tmp/veilfs-sys-moved-{pid}"),
        format!("/tmp/veilfs-sys-linked-{pid}"),
    );
    let _strays = Strays::new(&[&moved, &linked]);
    let before = common::snapshot(&s.outside);
    let script = format!(
        r#"
f, link, d, o = {f:?}, {link:?}, {d:?}, {o:?}
for name, p in (("", f), ("link_", link)):
    t(name + "open_write", lambda: write(p))
    t(name + "open_append", lambda: write(p, os.O_WRONLY | os.O_APPEND))
    t(name + "open_trunc", lambda: write(p, os.O_RDONLY | os.O_TRUNC))
    t(name + "truncate", lambda: os.truncate(p, 0))
    t(name + "chmod", lambda: os.chmod(p, 0o777))
    t(name + "chown", lambda: os.chown(p, 65534, 65534))
    t(name + "utime", lambda: os.utime(p, (0, 0)))
    t(name + "setxattr", lambda: os.setxattr(p, "user.veilfs", b"x"))
t("rename", lambda: os.rename(f, o + "/g"))
t("rename_over", lambda: os.rename(o + "/d", f))
t("unlink", lambda: os.unlink(f))
t("rmdir", lambda: os.rmdir(d))
t("link", lambda: os.link(f, o + "/h"))
t("rename_to_tmp", lambda: os.rename(f, {moved:?}))
t("link_to_tmp", lambda: os.link(f, {linked:?}))
def rdwr_write():
    fd = os.open(f, os.O_RDWR)
    os.write(fd, b"x")
t("open_rdwr", rdwr_write)
"#,
        f = f.display().to_string(),
        link = link.display().to_string(),
        d = s.outside.join("d").display().to_string(),
        o = s.outside.display().to_string(),
    );
    // The link and the moves' targets lie in /tmp, shared here (private, they
    // would not be in view at all).
    let o = s.py(&["-q", "--share-tmp"], &script);
    let mut erofs = vec![
        "rename",
        "rename_over",
        "unlink",
        "rmdir",
        "link",
        "open_rdwr",
    ];
    let ops = [
        "open_write",
        "open_append",
        "open_trunc",
        "truncate",
        "chmod",
        "chown",
        "utime",
        "setxattr",
    ];
    let via_link: Vec<String> = ops.iter().map(|op| format!("link_{op}")).collect();
    erofs.extend(ops);
    erofs.extend(via_link.iter().map(String::as_str));
    expect(&o, &erofs, "EROFS");
    // Across mounts the kernel says so first; either way nothing moves.
    expect(&o, &["rename_to_tmp", "link_to_tmp"], "EXDEV");
    assert_eq!(common::snapshot(&s.outside), before, "{}", show(&o));
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "original\n");
}

#[test]
fn the_command_cannot_remount_the_system() {
    let s = Sys::new();
    let target = s.outside.join("after-remount");
    let t = target.display().to_string();
    let o = s
        .veilfs(&["-q"])
        .args([
            "sh",
            "-c",
            &format!(
                "mount -o remount,rw / && echo REMOUNTED; \
                 mount -o remount,bind,rw / && echo REMOUNTED; \
                 mount --bind /tmp {o} && echo BOUND; \
                 umount -l /tmp && echo UNMOUNTED; \
                 unshare --user --map-root-user --mount sh -c \
                   'mount -o remount,bind,rw / && echo REMOUNTED; \
                    umount -l /var/tmp && echo UNMOUNTED; \
                    echo x > {t} && echo WROTE'; \
                 echo x > {t} && echo WROTE; exit 0",
                o = s.outside.display(),
            ),
        ])
        .output()
        .unwrap();
    let out = text(&o.stdout);
    for word in ["REMOUNTED", "BOUND", "UNMOUNTED", "WROTE"] {
        assert!(!out.contains(word), "{word}\n{}", show(&o));
    }
    assert!(!target.exists(), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("Read-only file system"),
        "{}",
        show(&o)
    );
}

#[test]
fn scratch_places_devices_and_the_workspace_stay_writable() {
    let s = Sys::new();
    let pid = std::process::id();
    let scratch: Vec<PathBuf> = ["/tmp", "/var/tmp", "/dev/shm"]
        .iter()
        .filter(|d| Path::new(d).is_dir())
        .map(|d| PathBuf::from(format!("{d}/veilfs-sys-{pid}")))
        .collect();
    let script = format!(
        r#"
for i, p in enumerate({scratch:?}):
    def w(p=p):
        with open(p, "w") as f:
            f.write("from the run\n")
    t("scratch%d" % i, w)
def null():
    with open("/dev/null", "w") as f:
        f.write("x")
t("dev_null", null)
def tty():
    try:
        fd = os.open("/dev/tty", os.O_WRONLY)
    except OSError as e:
        if e.errno == errno.ENXIO:
            return
        raise
    os.close(fd)
t("dev_tty", tty)
def ws():
    with open("in-ws.txt", "w") as f:
        f.write("in the workspace\n")
t("workspace", ws)
"#,
        scratch = scratch
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>(),
    );
    // Private scratch places by default: written inside, never seen outside;
    // shared with --share-tmp.
    for (args, shared) in [(&["-q"][..], false), (&["-q", "--share-tmp"][..], true)] {
        let o = s.py(args, &script);
        let mut names: Vec<String> = (0..scratch.len()).map(|i| format!("scratch{i}")).collect();
        names.extend(["dev_null", "dev_tty", "workspace"].map(String::from));
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let outcome = std::panic::catch_unwind(|| expect(&o, &names, "ok"));
        let mut seen = Vec::new();
        for p in &scratch {
            seen.push((p.clone(), std::fs::read_to_string(p).ok()));
            let _ = std::fs::remove_file(p);
        }
        if let Err(e) = outcome {
            std::panic::resume_unwind(e);
        }
        for (p, body) in seen {
            let want = shared.then_some("from the run\n");
            assert_eq!(body.as_deref(), want, "{args:?}: {}", p.display());
        }
        assert_eq!(
            std::fs::read_to_string(s.ws.join("in-ws.txt")).unwrap(),
            "in the workspace\n"
        );
    }
}

#[test]
fn writable_adds_a_place() {
    let s = Sys::new();
    let w = s.outside.join("w");
    std::fs::create_dir(&w).unwrap();
    // Given through a link: the place is where it leads.
    let etc = format!("/etc/veilfs-test-w-{}", std::process::id());
    let _strays = Strays::new(&[&etc]);
    let alias = s.tmp.path().join("alias");
    std::os::unix::fs::symlink(&w, &alias).unwrap();
    let script = format!(
        r#"
t("in_place", lambda: write({inside:?}, os.O_WRONLY | os.O_CREAT))
t("beside_it", lambda: write({beside:?}, os.O_WRONLY | os.O_CREAT))
t("etc", lambda: write({etc:?}, os.O_WRONLY | os.O_CREAT))
"#,
        inside = w.join("new").display().to_string(),
        beside = s.outside.join("beside").display().to_string(),
    );
    let o = s.py(&["-q", "--writable", alias.to_str().unwrap()], &script);
    expect(&o, &["in_place"], "ok");
    expect(&o, &["beside_it", "etc"], "EROFS");
    assert!(w.join("new").exists(), "{}", show(&o));
    assert!(!s.outside.join("beside").exists());
    assert!(!Path::new(&etc).exists());

    // The start-up lines name it, with the scratch places in full (-v).
    let o = s
        .veilfs(&["--writable", w.to_str().unwrap()])
        .arg("true")
        .output()
        .unwrap();
    assert!(
        text(&o.stderr).contains(&format!("; system read-only but {};", w.display())),
        "{}",
        show(&o)
    );
    let o = s
        .veilfs(&["-v", "--writable", w.to_str().unwrap()])
        .arg("true")
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(
        err.contains("system read-only but /tmp") && err.contains(&w.display().to_string()),
        "{}",
        show(&o)
    );

    // Not a directory, or absent: refused before anything starts.
    for bad in [s.outside.join("f"), s.outside.join("absent")] {
        let marker = s.ws.join("ran");
        let o = s
            .veilfs(&["-q", "--writable", bad.to_str().unwrap()])
            .args(["touch", marker.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", show(&o));
        assert!(
            text(&o.stderr).contains(&format!("--writable {}", bad.display())),
            "{}",
            show(&o)
        );
        assert!(!marker.exists(), "the command ran: {}", show(&o));
    }
}

#[test]
fn system_writable_opts_out() {
    let s = Sys::new();
    let new = s.outside.join("new");
    let script = format!(
        "t('outside', lambda: write({:?}, os.O_WRONLY | os.O_CREAT))\n",
        new.display().to_string()
    );
    let o = s.py(&["-q", "--system-writable"], &script);
    expect(&o, &["outside"], "ok");
    assert!(new.exists(), "{}", show(&o));

    let o = s
        .veilfs(&["--system-writable"])
        .arg("true")
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(
        err.contains("; system writable: --system-writable;"),
        "{}",
        show(&o)
    );
    assert!(!err.contains("read-only"), "{}", show(&o));
    let o = s.veilfs(&[]).arg("true").output().unwrap();
    assert!(
        text(&o.stderr).contains("; system read-only;"),
        "{}",
        show(&o)
    );
}

/// The runtime directory (here in the temp directory) holds other sessions'
/// control sockets: not in the command's view in its private `/tmp`; with `/tmp`
/// shared, read-only, and its sockets covered (nothing connects).
#[test]
fn other_sessions_sockets_are_out_of_reach() {
    let s = Sys::new();
    let rt = s.tmp.path().join("rt");
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&rt)
        .unwrap();
    let other = rt.join("0000000000000000-mount.sock");
    let listener = UnixListener::bind(&other).unwrap();
    listener.set_nonblocking(true).unwrap();
    let script = format!(
        r#"
rt, other = {rt:?}, {other:?}
t("unlink", lambda: os.unlink(other))
t("rename", lambda: os.rename(other, rt + "/moved"))
t("create", lambda: write(rt + "/planted.sock", os.O_WRONLY | os.O_CREAT))
def bind():
    b = socket.socket(socket.AF_UNIX)
    b.bind(rt + "/bound.sock")
t("bind", bind)
t("chmod", lambda: os.chmod(rt, 0o777))
def connect():
    c = socket.socket(socket.AF_UNIX)
    c.connect(other)
    c.close()
t("connect", connect)
"#,
        rt = rt.display().to_string(),
        other = other.display().to_string(),
    );
    let changes = ["unlink", "rename", "create", "bind", "chmod"];
    for (args, change, connect) in [
        (&["-q"][..], "ENOENT", "ENOENT"),
        (&["-q", "--share-tmp"][..], "EROFS", "ECONNREFUSED"),
    ] {
        let o = s.py(args, &script);
        expect(&o, &changes, change);
        expect(&o, &["connect"], connect);
        assert!(other.exists());
        for n in ["moved", "planted.sock", "bound.sock"] {
            assert!(!rt.join(n).exists(), "{n}: {}", show(&o));
        }
    }
    // No connection came from inside (a connect() that succeeded would wait in
    // the backlog); one from outside does arrive.
    assert!(
        listener.accept().is_err(),
        "a connection from inside arrived"
    );
    let _c = std::os::unix::net::UnixStream::connect(&other).unwrap();
    assert!(
        listener.accept().is_ok(),
        "the connection from outside did not arrive"
    );
}

/// Without root, `run` works in a user namespace, where the command is root over
/// nothing of the system: there too the system is read-only (`EROFS` rather than
/// `EACCES`), and so is the runtime directory the user owns, while `/tmp` and the
/// workspace stay writable.
#[test]
fn a_non_root_user_gets_the_same_read_only_system() {
    let s = Sys::new();
    common::run::fuse_for_everyone();
    let rt = s.tmp.path().join("rt");
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&rt)
        .unwrap();
    let other = rt.join("0000000000000000-mount.sock");
    let _listener = UnixListener::bind(&other).unwrap();
    let st = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(s.tmp.path())
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::set_permissions(
        s.tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let scratch = format!("/tmp/veilfs-sys-nobody-{}", std::process::id());
    let _strays = Strays::new(&[scratch.as_str(), "/etc/veilfs-test-nobody"]);
    let script = format!(
        r#"
print("uid", os.getuid())
t("etc", lambda: write("/etc/veilfs-test-nobody", os.O_WRONLY | os.O_CREAT))
t("outside", lambda: write({outside:?}, os.O_WRONLY | os.O_CREAT))
t("unlink_socket", lambda: os.unlink({other:?}))
t("tmp", lambda: write({scratch:?}, os.O_WRONLY | os.O_CREAT))
t("workspace", lambda: write("by-nobody.txt", os.O_WRONLY | os.O_CREAT))
"#,
        outside = s.outside.join("new").display().to_string(),
        other = other.display().to_string(),
    );
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "-q", "--", python(), "-c"])
        .arg(format!("{PRELUDE}{script}"))
        .current_dir(&s.ws)
        .env("VEILFS_RUNTIME_DIR", &rt)
        .output()
        .unwrap();
    expect(&o, &["uid"], "0");
    expect(&o, &["tmp", "workspace"], "ok");
    expect(&o, &["etc", "outside"], "EROFS");
    // The runtime directory lies in the temp directory: out of view in the
    // command's private /tmp, where what it wrote stays.
    expect(&o, &["unlink_socket"], "ENOENT");
    assert!(other.exists(), "{}", show(&o));
    assert!(!Path::new(&scratch).exists(), "{}", show(&o));
    assert!(s.ws.join("by-nobody.txt").exists(), "{}", show(&o));
    assert!(!s.outside.join("new").exists(), "{}", show(&o));
}

/// A workspace outside the scratch places stays writable, through veilfs: also when
/// a `--writable` directory holds it (its bind mount carries the FUSE mount along,
/// and the policy still answers there).
#[test]
fn the_workspace_stays_veilfs_wherever_it_lies() {
    let s = Sys::new();
    let ws = s.outside.join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join(".env"), "SECRET-sys\n").unwrap();
    let script = r#"
def w():
    with open("in-ws.txt", "a") as f:
        f.write("x\n")
t("workspace", w)
t("secret", lambda: open(".env").read())
t("beside", lambda: write("../beside", os.O_WRONLY | os.O_CREAT))
"#;
    for (args, beside) in [
        (vec!["-q"], "EROFS"),
        (vec!["-q", "--writable", ".."], "ok"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .arg("run")
            .args(&args)
            .args(["--", python(), "-c", &format!("{PRELUDE}{script}")])
            .current_dir(&ws)
            .env("VEILFS_RUNTIME_DIR", s.tmp.path().join("rt"))
            .output()
            .unwrap();
        expect(&o, &["workspace"], "ok");
        expect(&o, &["secret"], "EACCES");
        expect(&o, &["beside"], beside);
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("in-ws.txt")).unwrap(),
        "x\nx\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".env")).unwrap(),
        "SECRET-sys\n"
    );
    assert!(s.outside.join("beside").exists());
}
