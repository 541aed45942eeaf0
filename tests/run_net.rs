//! `veilfs run --net`: what the wrapped command may reach on the network.
//!
//! Each test makes a network namespace of its own (`unshare --net`) whose
//! loopback stands in for the internet: a server on 127.0.0.1:8001 (allowed),
//! one on 127.0.0.1:8002 (not), and a UDP "DNS server" on 127.0.0.1:5353, each
//! noting every connection or datagram it gets in a log. `veilfs run` is started
//! in that namespace, and the command tries every way out. After the run, the
//! harness reaches each server once from outside the run (`probe`), proving that
//! they were there to be reached, so "the server saw nothing from the command" is
//! a finding, not a server that was down. No address outside the loopback range.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::daemon::Approver;
use common::require_fuse;
use common::run::{show, text};

/// The stand-in servers: TCP on the ports of argv[3] (each answers one HTTP
/// response naming its port), UDP on argv[4]; every connection and datagram is a
/// line in argv[1]; argv[2] is made once all listen.
const SERVERS: &str = r#"
import socket, sys, threading
log, ready = sys.argv[1], sys.argv[2]
lock = threading.Lock()
def note(line):
    with lock, open(log, "a") as f:
        f.write(line + "\n")
def loop(l, port):
    while True:
        c, _ = l.accept()
        try:
            c.settimeout(5)
            req = c.recv(65536).split(b"\r\n")[0].decode(errors="replace")
            note(f"tcp {port} {req}")
            body = f"port {port}\n".encode()
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        except OSError:
            pass
        c.close()
bind = sys.argv[5] if len(sys.argv) > 5 else "127.0.0.1"
for port in map(int, sys.argv[3].split(",")):
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((bind, port))
    l.listen(64)
    threading.Thread(target=loop, args=(l, port), daemon=True).start()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", int(sys.argv[4])))
open(ready, "w").close()
while True:
    d, _ = u.recvfrom(2048)
    note(f"udp {d.decode(errors='replace')}")
"#;

/// The harness, in the test's own network namespace: loopback up, the servers
/// started, the run (`"$@"`), then one probe of each server from outside the run,
/// waited for in the log; the servers stopped.
const HARNESS: &str = r#"
ip link set lo up || exit 90
if [ -e "$T/hosts" ]; then mount --bind "$T/hosts" /etc/hosts || exit 92; fi
bind=127.0.0.1
if [ -e "$T/own-address" ]; then
  # An address of this host's own besides loopback (a veth pair of the test's
  # namespace, leading nowhere else), where the servers answer too.
  ip link add v0 type veth peer name v1 && ip addr add 10.99.0.1/24 dev v0 \
    && ip link set v0 up && ip link set v1 up || exit 93
  bind=0.0.0.0
fi
python3 "$T/servers.py" "$T/log" "$T/ready" 8001,8002 5353 $bind & srv=$!
n=0
until [ -e "$T/ready" ]; do n=$((n+1)); [ $n -gt 400 ] && { kill $srv; exit 91; }; sleep 0.05; done
"$@"; rc=$?
curl -sS -m 5 -o /dev/null http://127.0.0.1:8001/probe
curl -sS -m 5 -o /dev/null http://127.0.0.1:8002/probe
python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"probe", ("127.0.0.1", 5353))'
n=0
until grep -q "^udp probe" "$T/log" 2>/dev/null; do n=$((n+1)); [ $n -gt 400 ] && break; sleep 0.05; done
kill $srv
exit $rc
"#;

/// What every way out looks like from inside, one line each.
const BYPASSES: &str = r#"
c() { curl -sS -m 10 -o /dev/null -w '%{http_code}' "$@" 2>/dev/null || printf ' failed'; }
t() { curl -sS -m 10 -o /dev/null -w '%{http_connect}' --proxytunnel "$@" 2>/dev/null || printf ' failed'; }
echo "http-allowed: $(c --noproxy '' http://localhost:8001/a)"
echo "http-other-port: $(c --noproxy '' http://localhost:8002/b)"
echo "ip-literal: $(c --noproxy '' http://127.0.0.1:8001/c)"
echo "connect-allowed: $(t --noproxy '' http://localhost:8001/d)"
echo "connect-other: $(t --noproxy '' http://localhost:8002/e)"
echo "socks-allowed: $(c --noproxy '' --proxy socks5h://127.0.0.1:3128 http://localhost:8001/f)"
echo "socks-other: $(c --noproxy '' --proxy socks5h://127.0.0.1:3128 http://localhost:8002/g)"
echo "socks-ip: $(c --noproxy '' --proxy socks5://127.0.0.1:3128 http://127.0.0.1:8001/h)"
echo "noproxy: $(c --noproxy '*' http://127.0.0.1:8001/i)"
python3 - <<'EOF'
import socket
for port in (8001, 8002):
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect(("127.0.0.1", port))
        print(f"connect-{port}: connected")
    except OSError as e:
        print(f"connect-{port}: {type(e).__name__}")
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"from-inside", ("127.0.0.1", 5353))
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    print("raw: made")
except OSError as e:
    print(f"raw: {type(e).__name__}")
try:
    socket.getaddrinfo("veilfs-test.example", 80)
    print("dns: resolved")
except OSError as e:
    print("dns: failed")
EOF
"#;

struct Net {
    tmp: tempfile::TempDir,
}

impl Net {
    fn new() -> Net {
        require_fuse();
        let tmp = common::temp_tree("veilfs-net", &["ws", "rt"]);
        std::fs::write(tmp.path().join("servers.py"), SERVERS).unwrap();
        std::fs::write(tmp.path().join("ws/a.txt"), "hello\n").unwrap();
        Net { tmp }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// `veilfs run ARGS -- sh -c SCRIPT` in the workspace, inside the harness
    /// (as `user` through `setpriv` when given).
    fn command(&self, user: Option<&str>, args: &[&str], script: &str) -> Command {
        let mut c = Command::new("timeout");
        c.args([
            "120", "unshare", "--net", "--mount", "--", "sh", "-c", HARNESS, "sh",
        ]);
        if let Some(u) = user {
            c.args(["setpriv", "--reuid", u, "--regid", u, "--init-groups", "--"]);
        }
        c.arg(env!("CARGO_BIN_EXE_veilfs"))
            .arg("run")
            .args(args)
            .args(["--", "sh", "-c", script])
            .env("T", self.tmp.path())
            .env("VEILFS_RUNTIME_DIR", self.p("rt"))
            .current_dir(self.p("ws"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn run(&self, args: &[&str], script: &str) -> Output {
        self.command(None, args, script).output().unwrap()
    }

    /// The servers' log: one line per connection or datagram.
    fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.p("log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// How many lines of the log start with `prefix`.
    fn seen(&self, prefix: &str) -> usize {
        self.log().iter().filter(|l| l.starts_with(prefix)).count()
    }

    fn audit(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.p("audit.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// The line of `out` that starts with `key: `, without it.
fn said<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key:?} in:\n{out}"))
}

/// What every session under `--net allow=localhost:8001` shows, as root or not.
fn assert_only_the_allowed_destination(net: &Net, o: &Output) {
    let out = text(&o.stdout);
    let want = [
        ("http-allowed", "200"),
        ("http-other-port", "403"),
        ("ip-literal", "403"),
        ("connect-allowed", "200"),
        ("connect-other", "403 failed"),
        ("socks-allowed", "200"),
        ("socks-other", "000 failed"),
        ("socks-ip", "000 failed"),
        ("noproxy", "000 failed"),
        ("connect-8001", "ConnectionRefusedError"),
        ("connect-8002", "ConnectionRefusedError"),
        ("raw", "PermissionError"),
        ("dns", "failed"),
    ];
    for (key, value) in want {
        assert_eq!(said(&out, key), value, "{key}: {}", show(o));
    }
    // The allowed server got exactly the three proxied requests (and the probe);
    // the other one only the probe; the UDP server only the probe.
    let log = net.log();
    assert_eq!(net.seen("tcp 8001 GET /a"), 1, "{log:?}");
    assert_eq!(net.seen("tcp 8001 GET /d"), 1, "{log:?}");
    assert_eq!(net.seen("tcp 8001 GET /f"), 1, "{log:?}");
    assert_eq!(net.seen("tcp 8001"), 4, "{log:?}");
    assert_eq!(net.seen("tcp 8002"), 1, "{log:?}");
    assert_eq!(net.seen("tcp 8002 GET /probe"), 1, "{log:?}");
    assert_eq!(net.seen("udp"), 1, "{log:?}");
    assert_eq!(net.seen("udp probe"), 1, "{log:?}");
}

#[test]
fn an_allow_list_lets_through_what_it_names_and_nothing_else() {
    let net = Net::new();
    let audit = net.p("audit.log");
    let o = net.run(
        &[
            "--net",
            "allow=localhost:8001",
            "--audit",
            audit.to_str().unwrap(),
        ],
        BYPASSES,
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_only_the_allowed_destination(&net, &o);
    // Every refusal is in the audit log, with the process and the rule.
    let events = net.audit();
    let refused = |dest: &str| {
        events
            .iter()
            .filter(|e| e["net"] == dest && e["result"] == "refused")
            .count()
    };
    assert_eq!(refused("localhost:8002"), 3, "{events:?}");
    assert_eq!(refused("127.0.0.1:8001"), 2, "{events:?}");
    let e = events
        .iter()
        .find(|e| e["net"] == "localhost:8002")
        .unwrap();
    assert_eq!(e["comm"], "curl", "{e}");
    assert!(e["pid"].as_u64().is_some(), "{e}");
    assert_eq!(e["why"], "not in the network allow-list", "{e}");
    // And counted at the end.
    let err = text(&o.stderr);
    assert!(err.contains("refused 5 connections"), "{}", show(&o));
    assert!(
        err.contains("network only to localhost:8001"),
        "{}",
        show(&o)
    );
    // And the first refusal of each destination was noted while it ran, in the
    // notices file the start-up line names (kept: it holds notices).
    let notices: String = std::fs::read_dir(net.p("rt"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("notices-run-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert_eq!(
        notices,
        "veilfs: connect to localhost:8002 refused: not in the network allow-list\n\
         veilfs: connect to 127.0.0.1:8001 refused: not in the network allow-list\n",
        "{}",
        show(&o)
    );
}

#[test]
fn a_person_without_root_gets_the_same_allow_list() {
    let net = Net::new();
    let user = common::run::test_user();
    common::run::fuse_for_everyone();
    common::run::chown_r(user, net.tmp.path());
    let o = net
        .command(
            Some(user),
            &["-q", "--net", "allow=localhost:8001"],
            BYPASSES,
        )
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_only_the_allowed_destination(&net, &o);
}

#[test]
fn none_leaves_the_command_its_own_loopback_only() {
    let net = Net::new();
    let script = r#"
python3 - <<'EOF'
import socket, threading
l = socket.socket(); l.bind(("127.0.0.1", 9000)); l.listen(1)
threading.Thread(target=lambda: l.accept()[0].sendall(b"own"), daemon=True).start()
c = socket.create_connection(("127.0.0.1", 9000), timeout=5)
print("own-loopback:", c.recv(3).decode())
for port in (8001, 3128):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5)
        print(f"connect-{port}: connected")
    except OSError as e:
        print(f"connect-{port}: {type(e).__name__}")
EOF
env | grep -ci '^[a-z]*_proxy=' || true
"#;
    let o = net.run(&["--net", "none"], script);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(said(&out, "own-loopback"), "own", "{}", show(&o));
    assert_eq!(
        said(&out, "connect-8001"),
        "ConnectionRefusedError",
        "{}",
        show(&o)
    );
    assert_eq!(
        said(&out, "connect-3128"),
        "ConnectionRefusedError",
        "{}",
        show(&o)
    );
    assert!(out.ends_with("0\n"), "no proxy variables: {}", show(&o));
    assert_eq!(net.seen("tcp 8001"), 1, "only the probe: {:?}", net.log());
    assert!(text(&o.stderr).contains("no network"), "{}", show(&o));
}

#[test]
fn the_hosts_network_is_the_default_and_said() {
    let net = Net::new();
    let o = net.run(
        &[],
        "curl -sS -m 10 http://127.0.0.1:8001/direct; env | grep -ci '^http_proxy=' || true",
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(text(&o.stdout), "port 8001\n0\n", "{}", show(&o));
    assert!(text(&o.stderr).contains("host network"), "{}", show(&o));
    assert_eq!(net.seen("tcp 8001 GET /direct"), 1, "{:?}", net.log());
}

#[test]
fn the_policys_network_table_confines_without_a_flag() {
    let net = Net::new();
    std::fs::write(
        net.p("ws/.veilfs.toml"),
        "extends = \"default\"\n[network]\nallow = [\"localhost\"]\ndeny = [\"localhost:8002\"]\n",
    )
    .unwrap();
    let o = net.run(
        &[],
        "curl -sS -m 10 --noproxy '' http://localhost:8001/t; \
         curl -sS -m 10 --noproxy '' http://localhost:8002/t",
    );
    let out = text(&o.stdout);
    assert!(out.starts_with("port 8001\n"), "{}", show(&o));
    assert!(
        out.contains("veilfs: localhost:8002 is not in this session's network allow-list"),
        "{}",
        show(&o)
    );
    let err = text(&o.stderr);
    assert!(
        err.contains("network.deny \"localhost:8002\""),
        "{}",
        show(&o)
    );
    assert_eq!(net.seen("tcp 8002"), 1, "only the probe: {:?}", net.log());
}

#[test]
fn permissive_refuses_nothing_and_logs_what_it_would_have() {
    let net = Net::new();
    let audit = net.p("audit.log");
    let o = net.run(
        &[
            "--permissive",
            "--net",
            "allow=localhost:8001",
            "--audit",
            audit.to_str().unwrap(),
        ],
        "curl -sS -m 10 --noproxy '' http://localhost:8002/p",
    );
    assert_eq!(text(&o.stdout), "port 8002\n", "{}", show(&o));
    let events = net.audit();
    assert!(
        events
            .iter()
            .any(|e| e["net"] == "localhost:8002" && e["result"] == "would-refuse"),
        "{events:?}"
    );
    assert!(
        text(&o.stderr).contains("would have refused (permissive) 1 connection"),
        "{}",
        show(&o)
    );
}

#[test]
fn an_ask_destination_waits_for_the_person() {
    let net = Net::new();
    std::fs::write(
        net.p("ws/.veilfs.toml"),
        "extends = \"default\"\n[network]\nask = [\"localhost:8002\"]\n",
    )
    .unwrap();
    let script = "while [ ! -e go ]; do sleep 0.05; done; \
        curl -sS -m 60 --noproxy '' http://localhost:8002/first; \
        curl -sS -m 60 --noproxy '' -o /dev/null -w '%{http_code}\\n' http://localhost:8002/second";
    let child: Child = net
        .command(None, &["--quiet", "--ask-timeout", "600"], script)
        .spawn()
        .unwrap();
    let mut a = Approver::subscribe(&net.p("rt"));
    std::fs::write(net.p("ws/go"), "").unwrap();
    let q = a.question(Duration::from_secs(30));
    assert_eq!(
        (q["root"].as_str(), q["path"].as_str(), q["op"].as_str()),
        (Some("net"), Some("localhost:8002"), Some("connect")),
        "{q}"
    );
    assert_eq!(q["comm"], "curl", "{q}");
    a.answer(&q["id"], "allow-once", None);
    let q = a.question(Duration::from_secs(30));
    a.answer(&q["id"], "deny", Some("not twice"));
    let (code, out, err) = common::finish(child, Duration::from_secs(90));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "port 8002\n403\n", "{err}");
    assert_eq!(net.seen("tcp 8002 GET /first"), 1, "{:?}", net.log());
    assert_eq!(net.seen("tcp 8002 GET /second"), 0, "{:?}", net.log());
}

#[test]
fn a_bad_net_value_or_table_is_refused_before_anything_starts() {
    let net = Net::new();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "--net", "allow=127.0.0.1", "--", "true"])
        .current_dir(net.p("ws"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(text(&o.stderr).contains("needs a port"), "{}", show(&o));
    std::fs::write(net.p("ws/.veilfs.toml"), "[network]\nallow = [\"*\"]\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_veilfs"))
        .args(["run", "--", "true"])
        .current_dir(net.p("ws"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        text(&o.stderr).contains(".veilfs.toml:2:10: error: network.allow"),
        "{}",
        show(&o)
    );
}

#[test]
fn check_and_explain_read_the_network_table() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join(".veilfs.toml"),
        "extends = \"default\"\n[network]\nallow = [\"*.example.com\"]\n\
         ask = [\"192.0.2.1:22\"]\ndeny = [\"gist.example.com\"]\n",
    )
    .unwrap();
    let veilfs = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_veilfs"))
            .args(args)
            .current_dir(tmp.path())
            .output()
            .unwrap()
    };
    let o = veilfs(&["check"]);
    assert!(
        text(&o.stdout).contains("network: 1 allowed, 1 asked, 1 denied"),
        "{}",
        show(&o)
    );
    let o = veilfs(&[
        "explain",
        "--net",
        "api.example.com:443",
        "--net",
        "gist.example.com:443",
        "--net",
        "192.0.2.1:22",
        "--net",
        "example.com:443",
    ]);
    let out = text(&o.stdout);
    for line in [
        "api.example.com:443: allow  (network.allow \"*.example.com\" (",
        "gist.example.com:443: deny  (network.deny \"gist.example.com\" (",
        "192.0.2.1:22: ask  (network.ask \"192.0.2.1:22\" (",
        "example.com:443: deny  (not in the network allow-list)",
    ] {
        assert!(out.contains(line), "{line}: {}", show(&o));
    }
    let o = veilfs(&["explain", "--json", "--net", "[2001:db8::1]:443"]);
    let v: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert_eq!(
        (v["net"].as_str(), v["action"].as_str()),
        (Some("[2001:db8::1]:443"), Some("deny"))
    );
    let o = veilfs(&["explain", "--net", "no-port.example.com"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    std::fs::write(
        tmp.path().join(".veilfs.toml"),
        "[network]\ndeny = [\"a.test\", \"x y\"]\n",
    )
    .unwrap();
    let o = veilfs(&["check"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        text(&o.stderr).contains(".veilfs.toml:2:19: error: network.deny: \"x y\""),
        "{}",
        show(&o)
    );
}

/// A family no network namespace bounds (`AF_VSOCK`: a virtual machine's channel to
/// its host, both ways) cannot even be made by a command with a network namespace
/// of its own, so it can neither connect out nor listen for the host. Where the
/// machine has a vsock device, the same connection from outside the run is
/// answered by the host's side (reset, or connected), proving the way was there.
#[test]
fn a_socket_family_the_namespace_does_not_bound_is_refused() {
    const VSOCK: &str = r#"
import errno, socket
try:
    s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect((2, 1024))
    print("vsock: connected")
except OSError as e:
    print("vsock:", errno.errorcode.get(e.errno, e.errno))
try:
    l = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    l.bind((socket.VMADDR_CID_ANY, 5556))
    l.listen(1)
    print("listen: listening")
except OSError as e:
    print("listen:", errno.errorcode.get(e.errno, e.errno))
"#;
    let outside = Command::new("python3")
        .args(["-c", VSOCK])
        .output()
        .unwrap();
    let outside = text(&outside.stdout);
    let reachable =
        said(&outside, "vsock") == "connected" || said(&outside, "vsock") == "ECONNRESET";
    let net = Net::new();
    std::fs::write(net.p("ws/vsock.py"), VSOCK).unwrap();
    for mode in ["none", "allow=localhost:8001"] {
        let o = net.run(&["-q", "--net", mode], "python3 vsock.py");
        let inside = text(&o.stdout);
        if reachable {
            assert_eq!(
                said(&inside, "vsock"),
                "EAFNOSUPPORT",
                "outside: {outside}; {}",
                show(&o)
            );
            assert_eq!(said(&inside, "listen"), "EAFNOSUPPORT", "{}", show(&o));
        } else {
            // No vsock here: nothing to reach, inside or out.
            assert_ne!(said(&inside, "vsock"), "connected", "{}", show(&o));
            assert_ne!(said(&inside, "listen"), "listening", "{}", show(&o));
            eprintln!("no vsock device on this machine (outside: {outside:?}): checked less");
        }
    }
}

/// A name a glob allows that resolves to this host's own address (DNS rebinding:
/// whoever controls the DNS below the glob points a name at 127.0.0.1, or at an
/// address of one of the host's interfaces, second attacker pass) is refused;
/// the same address named exactly is reached. The test's own `/etc/hosts`, bound
/// in its mount namespace, stands in for that DNS.
#[test]
fn a_name_below_a_glob_never_leads_to_this_hosts_own_addresses() {
    let net = Net::new();
    std::fs::write(
        net.p("hosts"),
        "127.0.0.1 localhost a.rebind.test exact.rebind.test\n10.99.0.1 own.rebind.test\n",
    )
    .unwrap();
    std::fs::write(net.p("own-address"), "").unwrap();
    let audit = net.p("audit.log");
    let o = net.run(
        &[
            "--net",
            "allow=*.rebind.test,exact.rebind.test:8001",
            "--audit",
            audit.to_str().unwrap(),
        ],
        "c() { curl -sS -m 10 -o /dev/null -w '%{http_code}' --noproxy '' \"$@\" 2>/dev/null || printf ' failed'; }; \
         echo \"glob: $(c http://a.rebind.test:8001/glob)\"; \
         echo \"socks: $(c --proxy socks5h://127.0.0.1:3128 http://a.rebind.test:8001/glob-socks)\"; \
         echo \"exact: $(c http://exact.rebind.test:8001/exact)\"; \
         echo \"own: $(c http://own.rebind.test:8001/own)\"",
    );
    let out = text(&o.stdout);
    assert_eq!(said(&out, "glob"), "403", "{}", show(&o));
    assert_eq!(said(&out, "socks"), "000 failed", "{}", show(&o));
    assert_eq!(said(&out, "exact"), "200", "{}", show(&o));
    assert_eq!(said(&out, "own"), "403", "{}", show(&o));
    assert_eq!(net.seen("tcp 8001 GET /own"), 0, "{:?}", net.log());
    assert_eq!(net.seen("tcp 8001 GET /glob"), 0, "{:?}", net.log());
    assert_eq!(net.seen("tcp 8001 GET /exact"), 1, "{:?}", net.log());
    let events = net.audit();
    assert!(
        events.iter().any(|e| e["net"] == "a.rebind.test:8001"
            && e["result"] == "refused"
            && e["why"].as_str().unwrap().contains("this host's own")),
        "{events:?}"
    );
}

/// The person answers a destination's question in `veilfs prompt`, which shows it
/// as a connection; `p` allows it for the rest of the session (the second
/// connection asks nothing).
#[test]
fn veilfs_prompt_shows_a_destination_and_allows_it_for_the_session() {
    let net = Net::new();
    std::fs::write(
        net.p("ws/.veilfs.toml"),
        "extends = \"default\"\n[network]\nask = [\"localhost:8002\"]\n",
    )
    .unwrap();
    let mut prompt = {
        let mut c = Command::new(env!("CARGO_BIN_EXE_veilfs"));
        c.env("VEILFS_RUNTIME_DIR", net.p("rt"))
            .arg("prompt")
            .current_dir(net.p("ws"));
        common::daemon::Prompt::start(c)
    };
    prompt
        .err
        .expect("veilfs prompt: waiting for a session of ");
    let script = "while [ ! -e go ]; do sleep 0.05; done; \
        curl -sS -m 60 --noproxy '' http://localhost:8002/one; \
        curl -sS -m 60 --noproxy '' http://localhost:8002/two";
    let child = net
        .command(None, &["--quiet", "--ask-timeout", "600"], script)
        .spawn()
        .unwrap();
    prompt.out.expect("answering for veilfs run (pid ");
    std::fs::write(net.p("ws/go"), "").unwrap();
    let shown = prompt.out.expect("deny with a reason");
    assert!(
        shown.contains("wants to connect to localhost:8002")
            && shown.contains("because network.ask \"localhost:8002\"")
            && shown.contains("p allow localhost:8002 for the session"),
        "{shown}"
    );
    prompt.type_keys(b"p");
    let (code, out, err) = common::finish(child, Duration::from_secs(90));
    assert_eq!((code, out.as_str()), (0, "port 8002\nport 8002\n"), "{err}");
    assert_eq!(net.seen("tcp 8002 GET /one"), 1, "{:?}", net.log());
    assert_eq!(net.seen("tcp 8002 GET /two"), 1, "{:?}", net.log());
    prompt.out.expect("-- waiting for a session of ");
    assert_eq!(prompt.close(), 0);
}

/// A request that names no destination the proxy can read (an address in a form
/// the resolver reads, `CONNECT 127.1:8001`; a SOCKS5 name that is one) is refused
/// and, like any refusal, counted and in the audit log (attacker pass: such
/// probes left no trace).
#[test]
fn a_malformed_request_is_a_refusal_on_the_record() {
    let net = Net::new();
    let audit = net.p("audit.log");
    let script = r#"
python3 - <<'EOF'
import socket
c = socket.create_connection(("127.0.0.1", 3128), timeout=10)
c.sendall(b"CONNECT 127.1:8001 HTTP/1.1\r\n\r\n")
print("http:", c.recv(64).split(b"\r\n")[0].decode())
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"\x05\x01\x00")
assert s.recv(2) == b"\x05\x00"
s.sendall(b"\x05\x01\x00\x03\x05127.1\x1f\x41")
print("socks:", s.recv(2)[1])
h = socket.create_connection(("127.0.0.1", 3128), timeout=10)
h.sendall(b"CONNECT localhost:8002 HT")
h.shutdown(socket.SHUT_WR)
print("half:", h.recv(64).split(b"\r\n")[0].decode())
EOF
"#;
    let o = net.run(
        &[
            "--net",
            "allow=localhost:8001",
            "--audit",
            audit.to_str().unwrap(),
        ],
        script,
    );
    let out = text(&o.stdout);
    assert_eq!(
        said(&out, "http"),
        "HTTP/1.1 400 Bad Request",
        "{}",
        show(&o)
    );
    assert_eq!(said(&out, "socks"), "2", "{}", show(&o));
    let malformed: Vec<_> = net
        .audit()
        .into_iter()
        .filter(|e| e["net"] == "(a malformed request)" && e["result"] == "refused")
        .collect();
    assert_eq!(
        said(&out, "half"),
        "HTTP/1.1 400 Bad Request",
        "{}",
        show(&o)
    );
    assert_eq!(malformed.len(), 3, "{malformed:?}");
    assert_eq!(
        malformed
            .iter()
            .filter(|e| e["why"].as_str().unwrap().contains("127.1"))
            .count(),
        2,
        "{malformed:?}"
    );
    assert!(
        text(&o.stderr).contains("refused 3 connections"),
        "{}",
        show(&o)
    );
    assert_eq!(net.seen("tcp 8001"), 1, "only the probe: {:?}", net.log());
}
