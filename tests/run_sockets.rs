//! No host socket by default: under `veilfs run` the command reaches no socket it
//! did not make, path or abstract, unless the person passes it by name
//! (`--allow-socket`). Each test first shows from outside that the service answers
//! (so that "not reached" means something), then attacks from inside a real `run`
//! with the system call itself, and checks on the host that nothing arrived and
//! nothing ran: as root, under `--user`, and without root (a user namespace).

mod common;

use common::run::{show, text};

use std::io::Write;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::require_fuse;

/// Connects to each argument (`@name`: abstract) and prints `ARG CONNECTED` or
/// `ARG ERRNO-NAME`.
const CLIENT: &str = r#"
import errno, socket, sys
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect("\0" + p[1:] if p.startswith("@") else p)
        print(p, "CONNECTED", flush=True)
    except OSError as e:
        print(p, errno.errorcode.get(e.errno, e.errno), flush=True)
"#;

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A service of the host on a Unix socket: counts the connections it accepts.
struct Service {
    name: String,
    accepted: Arc<AtomicUsize>,
}

impl Service {
    /// Listens at `path` (`@name`: an abstract name) until the test ends.
    fn new(name: &str) -> Service {
        let listener = match name.strip_prefix('@') {
            Some(abs) => UnixListener::bind_addr(&SocketAddr::from_abstract_name(abs).unwrap()),
            None => {
                let _ = std::fs::remove_file(name);
                UnixListener::bind(name)
            }
        }
        .unwrap_or_else(|e| panic!("binding {name}: {e}"));
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for c in listener.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                let _ = (&c).write_all(b"host\n");
            }
        });
        Service {
            name: name.to_string(),
            accepted,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Proves the service answers a client outside (and counts it).
    fn answers_outside(&self) {
        let before = self.accepted();
        let o = client(Command::new("python3"), &[self.name.as_str()]);
        assert!(text(&o.stdout).contains("CONNECTED"), "{}", show(&o));
        wait_for(|| self.accepted() > before, &self.name);
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if !self.name.starts_with('@') {
            let _ = std::fs::remove_file(&self.name);
        }
    }
}

/// Polls `done` for up to ten seconds.
fn wait_for(done: impl Fn() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{what}: timed out");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn client(mut c: Command, targets: &[&str]) -> Output {
    c.args(["-c", CLIENT]).args(targets).output().unwrap()
}

/// What the client printed for `target`.
fn outcome(o: &Output, target: &str) -> String {
    text(&o.stdout)
        .lines()
        .find_map(|l| {
            l.strip_prefix(target)?
                .strip_prefix(' ')
                .map(str::to_string)
        })
        .unwrap_or_else(|| panic!("no line for {target}: {}", show(o)))
}

/// A workspace in the temp directory, a directory of its own there (the shared
/// `/tmp` of the person), one elsewhere (the build's temp directory, outside every
/// private place), and a runtime directory; removed on drop.
struct Session {
    tmp: tempfile::TempDir,
    ws: PathBuf,
    shared: PathBuf,
    elsewhere: tempfile::TempDir,
}

impl Session {
    fn new() -> Session {
        require_fuse();
        let tmp = tempfile::Builder::new()
            .prefix("veilfs-sockets")
            .tempdir()
            .unwrap();
        let ws = tmp.path().join("ws");
        let shared = tmp.path().join("shared");
        for d in [&ws, &shared] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(ws.join(".env"), "SECRET=1\n").unwrap();
        let elsewhere = tempfile::Builder::new()
            .prefix("veilfs-sockets")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        Session {
            tmp,
            ws,
            shared,
            elsewhere,
        }
    }

    /// `veilfs run ARGS -- python3 CLIENT TARGETS` in the workspace.
    fn connect(&self, args: &[&str], targets: &[&str]) -> Output {
        let mut c = self.run(args);
        c.arg("python3");
        client(c, targets)
    }

    /// `veilfs run -q ARGS --` in the workspace, with a runtime directory of its own.
    fn run(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.args(["run", "-q"])
            .args(args)
            .arg("--")
            .current_dir(&self.ws)
            .env("VEILFS_RUNTIME_DIR", self.tmp.path().join("rt"));
        c
    }

    /// Lets another user reach the services' sockets and run the client from the
    /// workspace (the doors stay open to them outside).
    fn open_to_everyone(&self, services: &[Service]) {
        use std::os::unix::fs::PermissionsExt;
        for svc in services.iter().filter(|v| !v.name.starts_with('@')) {
            std::fs::set_permissions(&svc.name, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        for d in [self.tmp.path(), self.elsewhere.path()] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(self.ws.join("client.py"), CLIENT).unwrap();
    }

    /// The four kinds of host socket: in the shared `/tmp`, in `/run`, elsewhere,
    /// and abstract; each answering outside.
    fn services(&self) -> Vec<Service> {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}-{n}", std::process::id());
        let all = vec![
            Service::new(&self.shared.join("tmux.sock").to_string_lossy()),
            Service::new(&format!("/run/veilfs-test-{id}.sock")),
            Service::new(&self.elsewhere.path().join("docker.sock").to_string_lossy()),
            Service::new(&format!("@veilfs-test-{id}")),
        ];
        for s in &all {
            s.answers_outside();
        }
        all
    }
}

fn names(services: &[Service]) -> Vec<&str> {
    services.iter().map(|s| s.name.as_str()).collect()
}

/// Every host socket is out of reach: hidden in the private `/tmp` and `/run`
/// (`ENOENT`), refused elsewhere and abstract ones (`ECONNREFUSED`, by the
/// supervisor of its connections); and no connection arrived.
fn assert_none_reached(o: &Output, services: &[Service], before: &[usize]) {
    let want = ["ENOENT", "ENOENT", "ECONNREFUSED", "ECONNREFUSED"];
    for ((s, want), before) in services.iter().zip(want).zip(before) {
        assert_eq!(outcome(o, &s.name), want, "{}: {}", s.name, show(o));
        assert_eq!(s.accepted(), *before, "{} was reached: {}", s.name, show(o));
    }
}

#[test]
fn the_command_reaches_no_host_socket() {
    let s = Session::new();
    let services = s.services();
    let before: Vec<usize> = services.iter().map(Service::accepted).collect();
    let o = s.connect(&[], &names(&services));
    assert!(o.status.success(), "{}", show(&o));
    assert_none_reached(&o, &services, &before);
}

/// A name the command binds that holds a newline and, after it, a forged line of
/// `/proc/net/unix` (its own socket's inode, bound to the host's abstract name)
/// does not make the host's socket the session's: with and without Landlock (the
/// supervisor connects outside Landlock's domain). Attacker pass on `--net`.
#[test]
fn a_forged_line_of_the_socket_table_reaches_no_host_socket() {
    let s = Session::new();
    let victim = Service::new(&format!(
        "@veilfs-forged-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    ));
    victim.answers_outside();
    let before = victim.accepted();
    let script = r#"
import errno, os, socket, sys
victim = sys.argv[1]
forger = socket.socket(socket.AF_UNIX)
ino = os.fstat(forger.fileno()).st_ino
forged = "\0x\n0000000000000000: 00000002 00000000 00010000 0001 01 %d @%s" % (ino, victim)
forger.bind(forged.encode()); forger.listen(1)
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(b"\0" + victim.encode())
    print("forged CONNECTED", s.recv(16))
except OSError as e:
    print("forged", errno.errorcode.get(e.errno, e.errno))
"#;
    for extra in [&[][..], &["--without-landlock"][..]] {
        let o = s
            .run(extra)
            .args(["python3", "-c", script, &victim.name[1..]])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        assert_eq!(outcome(&o, "forged"), "ECONNREFUSED", "{}", show(&o));
    }
    assert_eq!(victim.accepted(), before, "the host's socket was reached");
}

/// A connection made by a thread other than the process's first (Go, Java, a
/// thread pool) is decided as any other: the command's own sockets are reached,
/// the host's are not. (The supervisor asked for the thread's own pidfd, which
/// only a process's first thread has: every such connect failed with ENOENT.)
#[test]
fn a_thread_connects_as_its_process_does() {
    let s = Session::new();
    let host = Service::new(&format!(
        "@veilfs-thread-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    ));
    host.answers_outside();
    let before = host.accepted();
    let script = r#"
import errno, socket, sys, threading
def attempt(label, family, addr):
    def go():
        c = socket.socket(family)
        try:
            c.connect(addr); print(label, "CONNECTED", flush=True)
        except OSError as e:
            print(label, errno.errorcode.get(e.errno, e.errno), flush=True)
    t = threading.Thread(target=go); t.start(); t.join()
own = socket.socket(socket.AF_UNIX); own.bind(b"\0own-thread"); own.listen(4)
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen(4)
attempt("own-abstract", socket.AF_UNIX, b"\0own-thread")
attempt("own-tcp", socket.AF_INET, tcp.getsockname())
attempt("host", socket.AF_UNIX, b"\0" + sys.argv[1].encode())
"#;
    let o = s
        .run(&[])
        .args(["python3", "-c", script, &host.name[1..]])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(outcome(&o, "own-abstract"), "CONNECTED", "{}", show(&o));
    assert_eq!(outcome(&o, "own-tcp"), "CONNECTED", "{}", show(&o));
    assert_eq!(outcome(&o, "host"), "ECONNREFUSED", "{}", show(&o));
    assert_eq!(host.accepted(), before);
}

/// `--share-tmp` shares the files of `/tmp`, not the sockets there at start;
/// abstract names stay refused with `--without-landlock` too.
#[test]
fn shared_tmp_keeps_its_sockets_covered() {
    let s = Session::new();
    let services = s.services();
    let before: Vec<usize> = services.iter().map(Service::accepted).collect();
    let o = s.connect(&["--share-tmp"], &names(&services));
    assert_eq!(
        outcome(&o, &services[0].name),
        "ECONNREFUSED",
        "{}",
        show(&o)
    );
    assert_eq!(services[0].accepted(), before[0]);
    assert_eq!(
        outcome(&o, &services[3].name),
        "ECONNREFUSED",
        "{}",
        show(&o)
    );
    // Without Landlock the supervisor still refuses the host's abstract names.
    let o = s.connect(&["--without-landlock"], &[&services[3].name]);
    assert_eq!(
        outcome(&o, &services[3].name),
        "ECONNREFUSED",
        "{}",
        show(&o)
    );
    assert_eq!(services[3].accepted(), before[3]);
}

/// `--allow-socket PATH` passes one socket (or a directory of them) by name, and
/// only that one.
#[test]
fn allow_socket_passes_the_socket_named() {
    let s = Session::new();
    let services = s.services();
    for (i, allowed) in [0usize, 1, 2].into_iter().enumerate() {
        let before: Vec<usize> = services.iter().map(Service::accepted).collect();
        let o = s.connect(
            &["--allow-socket", &services[allowed].name],
            &names(&services),
        );
        assert_eq!(
            outcome(&o, &services[allowed].name),
            "CONNECTED",
            "{i}: {}",
            show(&o)
        );
        wait_for(
            || services[allowed].accepted() > before[allowed],
            &services[allowed].name,
        );
        for (j, other) in services.iter().enumerate().filter(|(j, _)| *j != allowed) {
            assert_ne!(outcome(&o, &other.name), "CONNECTED", "{j}: {}", show(&o));
        }
    }
    // A directory of sockets.
    let o = s.connect(
        &["--allow-socket", &s.shared.to_string_lossy()],
        &[&services[0].name],
    );
    assert_eq!(outcome(&o, &services[0].name), "CONNECTED", "{}", show(&o));
    // A path that does not exist is refused at start.
    let o = s.connect(&["--allow-socket", "/nonexistent/agent.sock"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
}

/// A socket bound in the workspace's directory outside is not reached through the
/// mount by its name there: the kernel finds the socket behind the veilfs node,
/// which is none.
#[test]
fn a_socket_in_the_workspace_bound_outside_is_not_reached() {
    let s = Session::new();
    let svc = Service::new(&s.ws.join("app.sock").to_string_lossy());
    svc.answers_outside();
    let before = svc.accepted();
    let o = s.connect(&["--without-landlock", "--share-tmp"], &["app.sock"]);
    assert_eq!(outcome(&o, "app.sock"), "ECONNREFUSED", "{}", show(&o));
    assert_eq!(svc.accepted(), before);
}

/// The reproducer of the issue: `veilfs run` started inside tmux, its server's
/// socket in the shared `/tmp`. Outside, `tmux run-shell` runs a command as the
/// person; from inside, neither through `$TMUX` nor through the socket's path.
#[test]
fn the_persons_tmux_runs_nothing_for_the_command() {
    let s = Session::new();
    let sock = s.shared.join("tmux-0").join("default");
    std::fs::create_dir(sock.parent().unwrap()).unwrap();
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .arg("-S")
            .arg(&sock)
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux is installed (scripts/test installs it)")
    };
    let o = tmux(&["new-session", "-d", "-s", "person", "sleep 600"]);
    assert!(o.status.success(), "{}", show(&o));
    struct Server<'a>(&'a dyn Fn(&[&str]) -> Output);
    impl Drop for Server<'_> {
        fn drop(&mut self) {
            (self.0)(&["kill-server"]);
        }
    }
    let _server = Server(&tmux);
    // Outside, the door is open: run-shell runs as the person.
    let proof = s.tmp.path().join("proof");
    let o = tmux(&["run-shell", &format!("touch {}", proof.display())]);
    assert!(o.status.success(), "{}", show(&o));
    wait_for(|| proof.exists(), "run-shell outside");

    let marker = s.tmp.path().join("ran-outside");
    let script = format!(
        "tmux run-shell 'touch {m}'; tmux -S {sock} run-shell 'touch {m}'; \
         tmux -S {sock} send-keys -t person 'touch {m}' Enter; echo TMUX=$TMUX; true",
        m = marker.display(),
        sock = sock.display()
    );
    let tmux_env = format!("{},1234,0", sock.display());
    let o = s
        .run(&[])
        .env("TMUX", &tmux_env)
        .args(["sh", "-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert!(text(&o.stdout).contains("TMUX=\n"), "{}", show(&o));
    // Whatever reached the server would have run by the time a second run-shell
    // from outside comes back: the server serves its clients in order.
    let proof2 = s.tmp.path().join("proof2");
    tmux(&["run-shell", &format!("touch {}", proof2.display())]);
    wait_for(|| proof2.exists(), "run-shell outside, after");
    assert!(
        !marker.exists(),
        "tmux ran the command's code outside: {}",
        show(&o)
    );
}

/// The command's `/tmp` is its own: what it writes there stays there, the person's
/// files there are not in view, while what the session was given there (the
/// workspace, a `--writable` directory, the policy file, the audit log, the
/// current directory) stays at its own path.
#[test]
fn the_private_tmp_keeps_what_the_session_was_given() {
    let s = Session::new();
    std::fs::write(s.shared.join("person.txt"), "mine\n").unwrap();
    let out = s.tmp.path().join("out");
    let cwd = s.tmp.path().join("cwd");
    std::fs::create_dir(&out).unwrap();
    std::fs::create_dir(&cwd).unwrap();
    let policy = s.tmp.path().join("policy.toml");
    std::fs::write(&policy, "default = \"allow\"\n").unwrap();
    let log = s.tmp.path().join("audit.jsonl");
    let script = format!(
        "ls {shared}/person.txt; echo inside > {tmp}/left; echo w > {out}/w; \
         cat {policy} >/dev/null && echo policy-ok; test -e {log} && echo log-ok; \
         pwd; touch /tmp/veilfs-sockets-stray-$$; touch planted 2>/dev/null && echo PLANTED; true",
        shared = s.shared.display(),
        tmp = s.tmp.path().display(),
        out = out.display(),
        policy = policy.display(),
        log = log.display(),
    );
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "-q", "--workspace"])
        .arg(&s.ws)
        .arg("--writable")
        .arg(&out)
        .arg("--policy")
        .arg(&policy)
        .arg("--audit")
        .arg(&log)
        .args(["--", "sh", "-c", &script])
        .current_dir(&cwd)
        .env("VEILFS_RUNTIME_DIR", s.tmp.path().join("rt"))
        .output()
        .unwrap();
    let out_text = text(&o.stdout);
    assert!(o.status.success(), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("person.txt") && text(&o.stderr).contains("No such file"),
        "{}",
        show(&o)
    );
    assert!(!s.tmp.path().join("left").exists(), "{}", show(&o));
    // The current directory outside the workspace is in view, read-only
    // (attacker pass 2: it was writable, and a repository there took a hook).
    assert!(!out_text.contains("PLANTED"), "{}", show(&o));
    assert!(!cwd.join("planted").exists());
    assert_eq!(std::fs::read_to_string(out.join("w")).unwrap(), "w\n");
    for want in ["policy-ok", "log-ok", &cwd.display().to_string()] {
        assert!(out_text.lines().any(|l| l == want), "{want}: {}", show(&o));
    }
    let strays: Vec<_> = std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("veilfs-sockets-stray-")
        })
        .collect();
    assert!(strays.is_empty(), "{strays:?}");
}

/// The variables that name sockets do not reach the command, unless
/// `--allow-socket` names the socket their value holds; the start-up line says
/// which were dropped and why.
#[test]
fn variables_that_name_sockets_are_dropped() {
    let s = Session::new();
    let bus = s.shared.join("bus");
    let _bus = Service::new(&bus.to_string_lossy());
    let vars = [
        ("TMUX", "/tmp/tmux-0/default,1,0".to_string()),
        ("DISPLAY", ":0".into()),
        ("WAYLAND_DISPLAY", "wayland-0".into()),
        (
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={}", bus.display()),
        ),
        (
            "VSCODE_IPC_HOOK_CLI",
            "/run/user/0/vscode-ipc-1.sock".into(),
        ),
        ("DOCKER_HOST", "unix:///run/docker.sock".into()),
        ("KITTY_LISTEN_ON", "unix:@kitty".into()),
        ("NVIM", "/run/user/0/nvim.1.0".into()),
        ("STY", "1.pts-0.host".into()),
    ];
    let env_of = |args: &[&str]| {
        let mut c = s.run(args);
        c.args(["sh", "-c", "env"]);
        for (k, v) in &vars {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let o = env_of(&[]);
    assert!(o.status.success(), "{}", show(&o));
    for (k, _) in &vars {
        let prefix = format!("{k}=");
        assert!(
            !text(&o.stdout).lines().any(|l| l.starts_with(&prefix)),
            "{k} reached the command: {}",
            show(&o)
        );
    }
    let o = env_of(&["--allow-socket", &bus.to_string_lossy()]);
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains(&format!(
            "DBUS_SESSION_BUS_ADDRESS=unix:path={}",
            bus.display()
        )),
        "{}",
        show(&o)
    );
    assert!(!stdout.contains("TMUX="), "{}", show(&o));

    // Said on the start-up line (names only).
    let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
    // In full (-v): why each was dropped.
    c.args(["run", "-v", "--", "true"])
        .current_dir(&s.ws)
        .env("VEILFS_RUNTIME_DIR", s.tmp.path().join("rt"))
        .env("TMUX", "/tmp/x,1,0");
    let o = c.output().unwrap();
    let err = text(&o.stderr);
    assert!(
        err.contains("name host socket") && err.contains("TMUX"),
        "{}",
        show(&o)
    );
    assert!(err.contains("no host socket"), "{}", show(&o));

    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["check", "--print-default-env"])
        .output()
        .unwrap();
    for name in [
        "\"TMUX\"",
        "\"DISPLAY\"",
        "\"DBUS_SESSION_BUS_ADDRESS\"",
        "\"VSCODE_IPC_HOOK*\"",
    ] {
        assert!(text(&o.stdout).contains(name), "{name}: {}", show(&o));
    }
}

/// SysV IPC of the host (shared memory an X server or a database keeps) is not in
/// view: the command has an IPC namespace of its own.
#[test]
fn the_hosts_sysv_ipc_is_not_in_view() {
    let s = Session::new();
    let o = Command::new("ipcmk").args(["-M", "4096"]).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let id: String = text(&o.stdout)
        .split_whitespace()
        .last()
        .unwrap()
        .to_string();
    struct Segment(String);
    impl Drop for Segment {
        fn drop(&mut self) {
            let _ = Command::new("ipcrm").args(["-m", &self.0]).status();
        }
    }
    let _seg = Segment(id.clone());
    let outside = Command::new("ipcs").arg("-m").output().unwrap();
    assert!(text(&outside.stdout).contains(&id), "{}", show(&outside));
    let o = s.run(&[]).args(["sh", "-c", "ipcs -m"]).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert!(
        !text(&o.stdout).split_whitespace().any(|w| w == id.as_str()),
        "{}",
        show(&o)
    );
}

/// Under `--user`, the same: the command as another user reaches no host socket.
#[test]
fn as_another_user_the_command_reaches_no_host_socket() {
    let s = Session::new();
    let user = common::run::test_user();
    let services = s.services();
    s.open_to_everyone(&services);
    let before: Vec<usize> = services.iter().map(Service::accepted).collect();
    let o = s
        .run(&["--user", user])
        .args(["python3", "client.py"])
        .args(names(&services))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert_none_reached(&o, &services, &before);
}

/// Without root (`run` in a user namespace), the same.
#[test]
fn without_root_the_command_reaches_no_host_socket() {
    let s = Session::new();
    common::run::fuse_for_everyone();
    let services = s.services();
    s.open_to_everyone(&services);
    let st = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&s.ws)
        .status()
        .unwrap();
    assert!(st.success());
    // Outside, as that user: the doors are open.
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
        ])
        .arg(s.ws.join("client.py"))
        .args(names(&services))
        .output()
        .unwrap();
    // Each connection counted (its service's thread may take it a moment later).
    for svc in &services {
        assert_eq!(outcome(&o, &svc.name), "CONNECTED", "{}", show(&o));
        wait_for(|| svc.accepted() >= 2, &svc.name);
    }
    let before: Vec<usize> = services.iter().map(Service::accepted).collect();
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_veilfs"))
        .args([
            "run",
            "-q",
            "--no-home",
            "--",
            "/usr/bin/python3",
            "client.py",
        ])
        .args(names(&services))
        .current_dir(&s.ws)
        .env("HOME", &s.ws)
        .env("VEILFS_RUNTIME_DIR", s.tmp.path().join("rt-nobody"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert_none_reached(&o, &services, &before);
}

/// Sockets below a path that must stay in view are covered all the same, and
/// what the command binds itself it reaches.
#[test]
fn the_commands_own_sockets_work() {
    let s = Session::new();
    let script = r#"
import socket, os, threading
for name in ["/tmp/own.sock", "\0own-abstract"]:
    srv = socket.socket(socket.AF_UNIX); srv.bind(name); srv.listen(1)
    c = socket.socket(socket.AF_UNIX); c.connect(name)
    a, _ = srv.accept(); c.sendall(b"x"); assert a.recv(1) == b"x"
    print("own", "ok", flush=True)
"#;
    let o = s.run(&[]).args(["python3", "-c", script]).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(text(&o.stdout).matches("own ok").count(), 2, "{}", show(&o));
}

/// Serves sockets that are reached by other names than the ones they were bound
/// to (and that `/proc/net/unix` lists): relative to a directory, through a link
/// in `/tmp`, renamed after binding, hard-linked, in a directory renamed since, a
/// name with a newline (its line in the table splits). Logs one line per
/// connection accepted.
const ELUSIVE: &str = r#"
import os, socket, sys, threading, time
base, log_path, link = sys.argv[1], sys.argv[2], sys.argv[3]
log = open(log_path, "a", buffering=1)
def listen(s, name):
    s.listen(64)
    def serve():
        while True:
            c, _ = s.accept(); log.write(name + "\n"); c.close()
    threading.Thread(target=serve, daemon=True).start()
def sock():
    return socket.socket(socket.AF_UNIX)
os.makedirs(base + "/rel"); os.chdir(base + "/rel")
s = sock(); s.bind("rel.sock"); listen(s, "relative"); os.chdir("/")
os.makedirs(base + "/real"); os.symlink(base + "/real", link)
s = sock(); s.bind(link + "/l.sock"); listen(s, "link")
s = sock(); s.bind(base + "/tmp.sock"); os.rename(base + "/tmp.sock", base + "/renamed.sock"); listen(s, "renamed")
s = sock(); s.bind(base + "/orig.sock"); os.link(base + "/orig.sock", base + "/hard.sock"); listen(s, "hard")
os.makedirs(base + "/d1"); s = sock(); s.bind(base + "/d1/x.sock"); os.rename(base + "/d1", base + "/d2"); listen(s, "dir")
s = sock(); s.bind(base + "/new\nline.sock"); listen(s, "newline")
print("ready", flush=True)
time.sleep(600)
"#;

/// A host service of [`ELUSIVE`], killed (by pid) on drop.
struct Elusive {
    child: std::process::Child,
    log: PathBuf,
    targets: Vec<String>,
    _link: PathBuf,
}

impl Elusive {
    fn start(s: &Session) -> Elusive {
        use std::io::BufRead;
        let base = s.elsewhere.path().join("svc");
        let log = s.elsewhere.path().join("accepted.log");
        let link = s.shared.join("lnk");
        let mut child = Command::new("python3")
            .args(["-c", ELUSIVE])
            .arg(&base)
            .arg(&log)
            .arg(&link)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n");
        let b = base.display();
        let targets = vec![
            format!("{b}/rel/rel.sock"),
            format!("{b}/real/l.sock"),
            format!("{b}/renamed.sock"),
            format!("{b}/hard.sock"),
            format!("{b}/d2/x.sock"),
        ];
        Elusive {
            child,
            log,
            targets,
            _link: link,
        }
    }

    fn accepted(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

impl Drop for Elusive {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The attacker's finding: a socket reached by another name than the one listed
/// was not covered (a host tmux bound relative to its directory ran code outside).
/// No name reaches a host socket now: the command's `connect()` is decided and
/// made by the session's supervisor, by the object the name leads to.
#[test]
fn no_other_name_reaches_a_host_socket() {
    let s = Session::new();
    let svc = Elusive::start(&s);
    let targets: Vec<&str> = svc.targets.iter().map(String::as_str).collect();
    // Outside, each answers.
    let o = client(Command::new("python3"), &targets);
    for t in &targets {
        assert_eq!(outcome(&o, t), "CONNECTED", "{t}: {}", show(&o));
    }
    wait_for(
        || svc.accepted() == targets.len(),
        "the connections outside",
    );
    let before = svc.accepted();
    for args in [&[][..], &["--share-tmp"][..], &["--without-landlock"][..]] {
        let o = s.connect(args, &targets);
        assert!(o.status.success(), "{}", show(&o));
        for t in &targets {
            assert_eq!(outcome(&o, t), "ECONNREFUSED", "{args:?} {t}: {}", show(&o));
        }
    }
    assert_eq!(
        svc.accepted(),
        before,
        "a host socket accepted a connection"
    );
}

/// The race: one thread of the command points a link in its own `/tmp` now at
/// its own socket (allowed), now at a host socket, while another connects
/// through the link, thousands of times. Every connection lands on its own
/// socket or is refused; the host's never accepts one.
#[test]
fn a_link_swapped_under_connect_never_reaches_the_host() {
    let s = Session::new();
    let svc = Elusive::start(&s);
    let host = svc.targets[2].clone();
    let script = format!(
        r#"
import os, socket, threading
own = "/tmp/own.sock"
srv = socket.socket(socket.AF_UNIX); srv.bind(own); srv.listen(4096)
def accept():
    while True:
        c, _ = srv.accept(); c.close()
threading.Thread(target=accept, daemon=True).start()
stop = False
def swap():
    i = 0
    while not stop:
        tmp = "/tmp/sw.%d" % (i % 2)
        try: os.unlink(tmp)
        except FileNotFoundError: pass
        os.symlink(own if i % 2 else {host:?}, tmp)
        os.rename(tmp, "/tmp/sw")
        i += 1
threading.Thread(target=swap, daemon=True).start()
ok = refused = 0
for _ in range(3000):
    c = socket.socket(socket.AF_UNIX)
    try:
        c.connect("/tmp/sw"); ok += 1
    except OSError:
        refused += 1
    c.close()
stop = True
print("own", ok, "refused", refused, flush=True)
"#
    );
    let o = s
        .run(&[])
        .args(["python3", "-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let out = text(&o.stdout);
    let ok: usize = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let refused: usize = out.split_whitespace().nth(3).unwrap().parse().unwrap();
    // Both sides of the race were hit.
    assert!(ok > 0 && refused > 0, "{}", show(&o));
    assert_eq!(svc.accepted(), 0, "the host socket accepted: {}", show(&o));
}

/// What the supervisor makes still behaves as the command's own call: a TCP
/// connection on loopback, a non-blocking connect, and as another user the
/// peer's credentials are that user's.
#[test]
fn connections_the_supervisor_makes_are_the_commands() {
    let s = Session::new();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let script = format!(
        r#"
import errno, os, socket, select
c = socket.create_connection(("127.0.0.1", {port})); print("tcp ok", flush=True)
srv = socket.socket(socket.AF_UNIX); srv.bind("/tmp/nb.sock"); srv.listen(1)
n = socket.socket(socket.AF_UNIX); n.setblocking(False)
try:
    n.connect("/tmp/nb.sock")
except BlockingIOError:
    pass
a, _ = srv.accept()
cred = a.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
import struct
print("peer uid", struct.unpack("3i", cred)[1], "own uid", os.getuid(), flush=True)
"#
    );
    std::fs::set_permissions(
        s.tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::write(s.ws.join("conn.py"), &script).unwrap();
    for args in [&[][..], &["--user", common::run::test_user()][..]] {
        let o = s.run(args).args(["python3", "conn.py"]).output().unwrap();
        let out = text(&o.stdout);
        assert!(out.contains("tcp ok"), "{args:?}: {}", show(&o));
        let uids: Vec<&str> = out
            .lines()
            .find(|l| l.starts_with("peer uid"))
            .unwrap_or_else(|| panic!("{}", show(&o)))
            .split_whitespace()
            .collect();
        assert_eq!(uids[2], uids[5], "{args:?}: {}", show(&o));
        assert!(tcp.accept().is_ok());
    }
}

/// Attacker pass 2: a mount namespace the command made (`unshare -Urm` as another
/// user, a host directory bound over an `--allow-socket` directory) led the
/// supervisor, which resolved names through the caller's current directory, to a
/// host socket. Names are resolved in the session's own view now.
#[test]
fn a_namespace_the_command_makes_does_not_move_an_allowed_directory() {
    let s = Session::new();
    let allowed = s.elsewhere.path().join("allowed");
    let hostdir = s.elsewhere.path().join("host");
    std::fs::create_dir(&allowed).unwrap();
    std::fs::create_dir(&hostdir).unwrap();
    let svc = Service::new(&hostdir.join("sock").to_string_lossy());
    svc.answers_outside();
    let before = svc.accepted();
    use std::os::unix::fs::PermissionsExt;
    for d in [s.elsewhere.path(), allowed.as_path(), hostdir.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    std::fs::set_permissions(hostdir.join("sock"), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(s.ws.join("client.py"), CLIENT).unwrap();
    let script = format!(
        "setpriv --reuid=65534 --regid=65534 --clear-groups unshare -Urm sh -c \
         'mount --rbind {h} {a} && cd {a} && /usr/bin/python3 {c} sock {a}/sock' || echo no-namespace",
        h = hostdir.display(),
        a = allowed.display(),
        c = s.ws.join("client.py").display(),
    );
    let o = s
        .run(&["--allow-socket", &allowed.to_string_lossy()])
        .args(["sh", "-c", &script])
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(!out.contains("CONNECTED"), "{}", show(&o));
    // The namespace was made and the bind done: the attack ran, and the name
    // led nowhere in the session's view.
    assert!(out.contains("sock ENOENT"), "{}", show(&o));
    assert_eq!(
        svc.accepted(),
        before,
        "the host socket accepted: {}",
        show(&o)
    );
}
