//! What each subcommand does, given parsed arguments. `main` only calls [`run`].

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::{Cli, Command};
use crate::config::{self, ConfigError};
use crate::policy::{DEFAULT_POLICY, Policy};

/// Runs one command line; the exit code is the command's.
pub fn run(cli: Cli) -> Result<ExitCode> {
    // Under `run`, the command's terminal is its own: only veilfs's errors.
    let run = matches!(cli.command, Command::Run { .. });
    init_logging(cli.verbose, run);
    match cli.command {
        Command::Mount {
            policy,
            allow_other,
            read_only,
            cache,
            src,
            mnt,
        } => {
            let mut opts = crate::mount::MountOptions {
                allow_other,
                read_only,
                ..Default::default()
            };
            cache.apply(&mut opts);
            mount(policy.as_deref(), &src, &mnt, &opts)
        }
        Command::Run {
            policy,
            workspace,
            quiet,
            dry_run,
            home_policy,
            no_home,
            cache,
            user,
            writable,
            system_writable,
            keep_env,
            drop_env,
            allow_socket,
            share_tmp,
            without_landlock,
            notices,
            command,
        } => {
            let mut mount = crate::mount::MountOptions::default();
            cache.apply(&mut mount);
            crate::run::run(crate::run::RunOptions {
                policy,
                workspace,
                quiet,
                verbose: cli.verbose > 0,
                dry_run,
                user,
                home_policy,
                no_home,
                writable,
                system_writable,
                keep_env,
                drop_env,
                allow_socket,
                share_tmp,
                without_landlock,
                notices,
                command,
                mount,
            })
        }
        Command::Init { workspace, force } => crate::init::init(workspace.as_deref(), force),
        Command::Doctor => Ok(crate::doctor::doctor()),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "veilfs", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => {
            for (name, page) in crate::cli::man_pages()? {
                let path = dir.join(&name);
                std::fs::write(&path, page)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Reload { mnt } => Ok(crate::control::reload_command(&mnt)),
        Command::Stats { mnt } => Ok(crate::control::stats_command(&mnt)),
        Command::Prompt { all, paths } => match crate::prompt::Scope::from_args(all, paths) {
            Ok(scope) => Ok(crate::prompt::prompt(&scope)),
            Err(e) => {
                eprintln!("veilfs prompt: {e}");
                Ok(ExitCode::from(2))
            }
        },
        Command::Check {
            policy,
            print_default,
            print_default_home,
            print_default_env,
        } => {
            if print_default_env {
                print!("{}", crate::run::env::default_section());
                return Ok(ExitCode::SUCCESS);
            }
            if print_default {
                std::io::stdout().write_all(DEFAULT_POLICY.as_bytes())?;
                return Ok(ExitCode::SUCCESS);
            }
            if print_default_home {
                std::io::stdout().write_all(crate::policy::HOME_DEFAULT_POLICY.as_bytes())?;
                return Ok(ExitCode::SUCCESS);
            }
            check(policy.as_deref())
        }
        Command::Explain {
            audit: Some(log),
            policy,
            workspace,
            json,
            ..
        } => explain_audit(&log, policy.as_deref(), workspace.as_deref(), json),
        Command::Explain {
            policy,
            workspace,
            json,
            paths,
            home_policy,
            no_home,
            all,
            ..
        } => explain(
            policy.as_deref(),
            workspace.as_deref(),
            json,
            if all { None } else { Some(&paths) },
            (!no_home).then_some(home_policy.as_deref()),
        ),
    }
}

/// Sends `log` records (veilfs's own and fuser's) to stderr: `RUST_LOG` if set, else
/// by `-v` count; by default veilfs's errors (a request handler that panicked) and
/// fuser's warnings (a kernel request it could not decode), and under `run` only
/// veilfs's errors.
fn init_logging(verbose: u8, run: bool) {
    let default = match verbose {
        0 if run => "veilfs=error",
        0 => "veilfs=error,fuser=warn",
        1 if run => "veilfs=info,fuser=warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let env = env_logger::Env::default().default_filter_or(default);
    let logger = env_logger::Builder::from_env(env).build();
    let max = logger.filter();
    // Already set (a second `run` in one process): keep the first.
    if log::set_boxed_logger(Box::new(Quiet(logger))).is_ok() {
        log::set_max_level(max);
    }
}

/// The logger, without the one warning that says nothing: fuser unmounts once
/// more when its session ends, and after `fusermount -u` or `umount` (the usual
/// way a mount ends) the mount is already gone (`EINVAL`).
struct Quiet(env_logger::Logger);

impl log::Log for Quiet {
    fn enabled(&self, m: &log::Metadata) -> bool {
        self.0.enabled(m)
    }

    fn log(&self, r: &log::Record) {
        let already_unmounted = || {
            r.target() == "fuser::session"
                && r.args()
                    .to_string()
                    .starts_with("Failed to umount filesystem: Invalid argument")
        };
        if self.0.matches(r) && !already_unmounted() {
            self.0.log(r);
        }
    }

    fn flush(&self) {
        self.0.flush();
    }
}

fn check(path: Option<&Path>) -> Result<ExitCode> {
    let mut loaded = match config::load_policy(path, Path::new(".")) {
        Ok(l) => l,
        Err(ConfigError::Invalid(e)) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(1));
        }
        Err(e) => {
            eprintln!("veilfs: {e}");
            return Ok(ExitCode::from(1));
        }
    };
    // The workspace is known when the policy is the one found in it: the current
    // directory's, or a `.veilfs.toml` named by its path.
    let workspace = match path {
        None => Some(Path::new(".").to_path_buf()),
        Some(p) if p.file_name() == Some(std::ffi::OsStr::new(config::WORKSPACE_POLICY)) => {
            std::path::absolute(p)
                .ok()
                .and_then(|a| a.parent().map(Path::to_path_buf))
        }
        Some(_) => None,
    };
    let mut import_warnings = Vec::new();
    match &workspace {
        Some(ws) => match crate::policy_imports::attach(&mut loaded.policy, ws) {
            Ok(w) => import_warnings = w,
            Err(e) => {
                eprintln!("veilfs: {e}");
                return Ok(ExitCode::from(1));
            }
        },
        None if !loaded.policy.import_names().is_empty() => eprintln!(
            "veilfs: note: the imported files ({}) are not checked: the workspace is \
             not known (run `veilfs check` in it, or name its {})",
            loaded.policy.import_names().join(", "),
            config::WORKSPACE_POLICY
        ),
        None => {}
    }
    // Against the workspace when it is known: which absolute path a pattern was
    // written as, what matches nothing there, a `dir/` naming a file.
    let real = workspace.as_ref().and_then(|w| w.canonicalize().ok());
    let lint = match &real {
        Some(ws) => {
            use std::os::unix::ffi::OsStrExt;
            loaded.policy.lint_in(ws.as_os_str().as_bytes())
        }
        None => loaded.policy.lint(),
    };
    let mut warnings: Vec<String> = lint.iter().map(|w| w.to_string()).collect();
    if let Some(ws) = &real {
        warnings.extend(crate::check_workspace::warnings(&loaded.policy, ws));
        warnings.extend(crate::check_workspace::tracked_warnings(&loaded.policy, ws));
    }
    warnings.extend(import_warnings);
    for w in &warnings {
        eprintln!("{w}");
    }
    let p = &loaded.policy;
    println!(
        "{}: ok: {} rules, {} patterns, default \"{}\"{}",
        loaded.source(),
        p.rule_count(),
        p.patterns().len(),
        p.default_action(),
        match warnings.len() {
            0 => String::new(),
            n => format!(", {n} warning{}", if n == 1 { "" } else { "s" }),
        }
    );
    Ok(ExitCode::SUCCESS)
}

fn explain(
    policy: Option<&Path>,
    given: Option<&Path>,
    json: bool,
    // `None`: every path of the workspace the policy holds (`--all`).
    paths: Option<&[std::path::PathBuf]>,
    // `Some(file)`: paths in the home directory are decided by the home policy.
    home: Option<Option<&Path>>,
) -> Result<ExitCode> {
    // With `--workspace`, relative paths are relative to it; else the workspace is
    // found as `run` finds it and relative paths are relative to where we are.
    let (workspace, base, found) = match given {
        Some(w) => (w.to_path_buf(), None, None),
        None => {
            let cwd = std::env::current_dir()?.canonicalize()?;
            let (ws, found, warnings) =
                config::find_workspace(&cwd, None).map_err(anyhow::Error::msg)?;
            for w in warnings {
                eprintln!("veilfs explain: {w}");
            }
            let base = cwd.strip_prefix(&ws).map(Path::to_path_buf).ok();
            (ws, base, Some(found))
        }
    };
    let workspace = workspace.as_path();
    let explaining = load_for_explain(policy, workspace, home)?;
    // Where the workspace lies in the home directory: the home policy holds there too.
    let inside = home_around(&explaining, workspace);
    let Explaining {
        loaded,
        home_loaded,
        home_dir,
        same,
    } = &explaining;
    let same = *same;
    let out = std::io::stdout();
    let mut out = out.lock();
    if !json {
        let esc = crate::printable::escape;
        writeln!(out, "# policy: {}", esc(&loaded.source()))?;
        if let Some(found) = found {
            writeln!(
                out,
                "# workspace: {} ({found})",
                esc(&workspace.display().to_string())
            )?;
        }
        if let (Some(h), Some(dir)) = (&home_loaded, &home_dir) {
            let how = if same {
                " (the workspace: stacked)"
            } else {
                ""
            };
            writeln!(
                out,
                "# home: {}{how}, policy: {}",
                esc(&dir.display().to_string()),
                esc(&config::home_source(h))
            )?;
        }
    }
    let Some(paths) = paths else {
        crate::explain_all::explain_all(&loaded.policy, workspace, json, &mut out)?;
        return Ok(ExitCode::SUCCESS);
    };
    // Denied paths the workspace's git repository tracks: readable through history.
    let mut tracked: Option<Vec<String>> = None;
    for arg in paths {
        let arg = match &base {
            Some(b) if arg.is_relative() => b.join(arg),
            _ => arg.clone(),
        };
        let line = match config::relative_path(&arg, workspace) {
            Ok(rel) => {
                if loaded.policy.decide(&rel.bytes, false).action == crate::policy::Action::Deny {
                    let t = tracked.get_or_insert_with(|| {
                        crate::check_workspace::tracked_denied(&loaded.policy, workspace)
                    });
                    let shown = crate::printable::printable(&rel.bytes);
                    if t.contains(&shown) {
                        eprintln!(
                            "veilfs explain: warning: {}",
                            crate::check_workspace::tracked_message(&shown)
                        );
                    }
                }
                // A workspace inside the home directory: the home policy holds
                // there too.
                let guarded = if same || inside.is_some() {
                    crate::run::config_dirs_under(workspace)
                } else {
                    Vec::new()
                };
                explain_one(
                    &loaded.policy,
                    workspace,
                    &rel,
                    json,
                    "",
                    &guarded,
                    same,
                    inside.as_ref().map(|(p, pre)| (*p, pre.as_slice())),
                )
            }
            Err(e) => {
                // Outside the workspace: in the home directory (as named, or with its
                // links resolved), the home policy decides.
                let in_home = match (&home_loaded, &home_dir) {
                    (Some(h), Some(dir)) if !same => [Some(dir.clone()), dir.canonicalize().ok()]
                        .into_iter()
                        .flatten()
                        .find_map(|d| {
                            let rel = config::relative_path(&arg, &d).ok()?;
                            Some((h, d, rel))
                        }),
                    _ => None,
                };
                match in_home {
                    Some((h, d, rel)) => {
                        let guarded = crate::run::config_dirs_under(&d);
                        explain_one(&h.policy, &d, &rel, json, "~/", &guarded, true, None)
                    }
                    None => return Err(anyhow::Error::msg(e)),
                }
            }
        }
        .with_context(|| format!("explaining {}", arg.display()))?;
        writeln!(out, "{}", crate::printable::escape(&line))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The policies `explain` decides by, as `veilfs run` would take them in
/// `workspace`: the workspace's, and (unless `home` is `None`) the home
/// directory's with its path; `same` when the workspace is the home directory
/// (its policy stacked on the home's).
struct Explaining {
    loaded: config::LoadedPolicy,
    home_loaded: Option<config::LoadedPolicy>,
    home_dir: Option<std::path::PathBuf>,
    same: bool,
}

fn load_for_explain(
    policy: Option<&Path>,
    workspace: &Path,
    home: Option<Option<&Path>>,
) -> Result<Explaining> {
    // As `veilfs run` sees it: the home directory of this user, with its policy; a
    // workspace that is the home directory takes its policy stacked on the home's.
    let home_dir = home
        .and_then(|_| crate::run::home_of(None))
        .and_then(|h| std::path::absolute(&h).ok());
    let mut home_loaded = match (home, &home_dir) {
        (Some(file), Some(_)) => Some(config::load_home_policy(file)?),
        _ => None,
    };
    let same = home_dir.as_ref().is_some_and(|h| {
        h.canonicalize().ok().as_deref() == workspace.canonicalize().ok().as_deref()
    });
    // As `veilfs run` decides them: the targets of links the home policy hides by
    // name are hidden too.
    use crate::run::home::{HOME_BUILTIN, WS_BUILTIN, with_aliases};
    let mut loaded = match (&mut home_loaded, same) {
        (Some(h), true) => {
            let raw = config::raw_of(h, HOME_BUILTIN)?;
            let mut l = config::load_policy_on(&raw, policy, workspace)?;
            with_aliases(workspace, &mut l, Some(&raw), WS_BUILTIN).map_err(anyhow::Error::msg)?;
            l
        }
        (Some(h), false) => {
            if let Some(dir) = &home_dir {
                with_aliases(dir, h, None, HOME_BUILTIN).map_err(anyhow::Error::msg)?;
                for w in crate::policy_imports::attach(&mut h.policy, dir)? {
                    eprintln!("veilfs explain: ~/{w}");
                }
            }
            config::load_policy(policy, workspace)?
        }
        _ => config::load_policy(policy, workspace)?,
    };
    for w in crate::policy_imports::attach(&mut loaded.policy, workspace)? {
        eprintln!("veilfs explain: {w}");
    }
    Ok(Explaining {
        loaded,
        home_loaded,
        home_dir,
        same,
    })
}

/// Where the workspace lies in the home directory (not the home directory itself),
/// with the home policy: the stricter decision wins there, as `veilfs run` decides.
fn home_around<'a>(e: &'a Explaining, workspace: &Path) -> Option<(&'a Policy, Vec<u8>)> {
    use std::os::unix::ffi::OsStrExt;
    let (Some(h), Some(dir)) = (&e.home_loaded, &e.home_dir) else {
        return None;
    };
    if e.same {
        return None;
    }
    let ws_real = workspace.canonicalize().ok()?;
    [Some(dir.clone()), dir.canonicalize().ok()]
        .into_iter()
        .flatten()
        .find_map(|d| {
            let pre = ws_real.strip_prefix(&d).ok()?;
            Some(pre.as_os_str().as_bytes().to_vec())
        })
        .filter(|p| !p.is_empty())
        .map(|p| (&h.policy, p))
}

#[allow(clippy::too_many_arguments)]
fn explain_one(
    policy: &Policy,
    workspace: &Path,
    rel: &config::RelPath,
    json: bool,
    // Shown before the path: `~/` for the home directory.
    prefix: &str,
    // Kept read-only by the mount whatever the policy says (veilfs's configuration).
    guarded: &[Vec<u8>],
    // A home directory: what git runs or obeys is read-only in every repository.
    git_everywhere: bool,
    // The policy of the home directory the workspace lies in, and where: the
    // stricter decision wins, as `veilfs run` decides.
    outer: Option<(&Policy, &[u8])>,
) -> Result<String> {
    // As the mount decides it.
    let is_dir =
        rel.trailing_slash || crate::explain_audit::decided_as_dir(policy, workspace, &rel.bytes);
    let mut decision = if rel.bytes.is_empty() {
        crate::Decision::root()
    } else {
        policy.decide(&rel.bytes, is_dir)
    };
    if let Some((outer, prefix)) = outer
        && !rel.bytes.is_empty()
    {
        let full = [prefix, b"/", &rel.bytes].concat();
        decision = decision.stricter(outer.decide(&full, is_dir));
    }
    let p = rel.bytes.as_slice();
    if guarded
        .iter()
        .any(|g| p == g.as_slice() || (p.starts_with(g) && p.get(g.len()) == Some(&b'/')))
    {
        decision = decision.guard_veilfs_config();
    } else if git_everywhere
        && crate::fs::git_guard::git_controls_anywhere(p, |dir| {
            use std::os::unix::ffi::OsStrExt;
            let dir = workspace.join(std::ffi::OsStr::from_bytes(dir));
            ["HEAD", "config"]
                .iter()
                .any(|n| dir.join(n).symlink_metadata().is_ok())
        })
    {
        // Home paths: every repository there is guarded (one the command makes
        // during a run is its own).
        decision = decision.guard_git_control();
    }
    let shown = format!(
        "{rel}{}",
        if is_dir && !rel.bytes.is_empty() {
            "/"
        } else {
            ""
        }
    );
    let re_included = if rel.bytes.is_empty() {
        Vec::new()
    } else {
        policy.re_included_by(&rel.bytes, is_dir)
    };
    Ok(if json {
        let mut v = decision.to_json(&rel.bytes);
        v["dir"] = is_dir.into();
        if !prefix.is_empty() {
            v["root"] = "home".into();
        }
        if !re_included.is_empty() {
            v["re_included_by"] = re_included
                .iter()
                .map(|p| {
                    serde_json::json!({
                        "rule": p.rule,
                        "pattern": p.text,
                        "location": p.location(),
                    })
                })
                .collect();
        }
        crate::printable::json(&v)
    } else {
        format!(
            "{:<9} {prefix}{}  ({}{})",
            decision.action.as_str(),
            if shown.is_empty() { "." } else { &shown },
            decision.why(),
            re_inclusion_note(&decision, &re_included)
        )
    })
}

/// What `explain` adds for the `!` lines that take a path out of their import
/// rules (see [`Policy::re_included_by`]): each takes it out of its own rule only,
/// and never out from beneath a directory that is hidden.
fn re_inclusion_note(
    decision: &crate::Decision,
    lines: &[std::sync::Arc<crate::policy::Pattern>],
) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for p in lines {
        let _ = write!(s, "; {:?} ({}) ", p.text, p.location());
        match &decision.reason {
            crate::Reason::Ancestor { path, .. } if decision.action == crate::Action::Deny => {
                let _ = write!(
                    s,
                    "cannot re-include it beneath `{}`, which is hidden (as in git)",
                    String::from_utf8_lossy(path)
                );
            }
            _ => {
                let _ = write!(s, "takes it out of rule {} only", p.rule);
            }
        }
    }
    s
}

/// `veilfs mount`: serve in the foreground until a signal or an outside unmount.
fn mount(
    policy: Option<&Path>,
    src: &Path,
    mnt: &Path,
    opts: &crate::mount::MountOptions,
) -> Result<ExitCode> {
    const SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
    let mut loaded = match config::load_policy(policy, src) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("veilfs: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    match crate::policy_imports::attach(&mut loaded.policy, src) {
        Ok(warnings) => warnings.iter().for_each(|w| eprintln!("veilfs: {w}")),
        Err(e) => {
            eprintln!("veilfs: {e}");
            return Ok(ExitCode::from(2));
        }
    }
    // Absolute paths on the start-up line: it is read later, in a log, from elsewhere.
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let source = match &loaded.path {
        Some(p) => absolute(p).display().to_string(),
        None => loaded.source(),
    };
    // Said on the start-up line: what the policy hides, read before mounting.
    let hiding = crate::explain_all::startup_note(&loaded.policy, src);
    if let Some(log) = &opts.audit
        && let Err(e) = crate::audit::check_outside(
            log,
            &src.canonicalize().unwrap_or_else(|_| src.to_path_buf()),
        )
    {
        eprintln!("veilfs: {e}");
        return Ok(ExitCode::from(2));
    }
    // Block the signals before any thread starts, so they reach `wait_signal` only.
    crate::sys::block_signals(&SIGNALS)?;
    let live = match crate::mount::session(src, mnt, loaded.policy, loaded.path.as_deref(), opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("veilfs: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut session = live.session;
    let reloader = live.reloader;
    let audit = live.audit;
    let broker = live.broker;
    let stats = crate::control::Stats::default().mount(mnt, session.request_counts());
    let control = crate::control::serve(mnt, reloader.clone(), broker.clone(), stats);
    if let Err(e) = &control {
        eprintln!("veilfs: no control socket (`veilfs reload` will not reach this mount): {e}");
    }
    let asks = opts.mode_note(reloader.policy_asks(), false, &absolute(mnt));
    // Paths from the command line and the tree: never a control character raw.
    let line = format!(
        "veilfs: mounted {} at {} with policy {source}{hiding}{asks}",
        absolute(src).display(),
        absolute(mnt).display()
    );
    eprintln!("{}", crate::printable::escape(&line));
    if let Some(note) = opts.transport.note(session.uring()) {
        eprintln!("veilfs: {note}");
    }
    let mut unmounter = session.unmount_callable();
    let (tx, rx) = std::sync::mpsc::channel::<Option<i32>>();
    let done = tx.clone();
    let server = std::thread::spawn(move || {
        let r = session.run();
        let _ = done.send(None);
        r
    });
    std::thread::spawn(move || {
        while let Ok(sig) = crate::sys::wait_signal(&SIGNALS) {
            if sig == libc::SIGHUP {
                crate::mount::report_reload(reloader.reload());
            } else {
                let _ = tx.send(Some(sig));
                return;
            }
        }
    });
    let ended = rx.recv();
    // Parked requests are refused: nothing waits on a person while unmounting.
    broker.close();
    if let Ok(Some(_signal)) = ended {
        unmounter
            .unmount()
            .with_context(|| format!("unmounting {}", mnt.display()))?;
    }
    drop(control);
    let served = server.join();
    if let Some(w) = audit {
        w.finish();
    }
    match served {
        Ok(Ok(())) => Ok(ExitCode::SUCCESS),
        Ok(Err(e)) => Err(anyhow::Error::new(e).context("serving the mount")),
        Err(_) => anyhow::bail!("the request loop panicked"),
    }
}

/// `veilfs explain --audit FILE`: refusals (and what a permissive run would have
/// refused) by rule and by path, with what the policy in force decides now.
fn explain_audit(
    log: &Path,
    policy: Option<&Path>,
    given: Option<&Path>,
    json: bool,
) -> Result<ExitCode> {
    let workspace = match given {
        Some(w) => w.to_path_buf(),
        None => {
            let cwd = std::env::current_dir()?.canonicalize()?;
            config::find_workspace(&cwd, None)
                .map_err(anyhow::Error::msg)?
                .0
        }
    };
    let e = load_for_explain(policy, &workspace, Some(None))?;
    let outer = home_around(&e, &workspace);
    let now = crate::explain_audit::Now {
        policy: &e.loaded.policy,
        workspace: &workspace,
        outer: outer.as_ref().map(|(p, pre)| (*p, pre.as_slice())),
        home: match (&e.home_loaded, &e.home_dir) {
            (Some(h), Some(dir)) if !e.same => Some((&h.policy, dir.as_path())),
            _ => None,
        },
    };
    let out = std::io::stdout();
    let mut out = out.lock();
    if !json {
        writeln!(
            out,
            "# policy: {}",
            crate::printable::escape(&e.loaded.source())
        )?;
    }
    crate::explain_audit::explain_audit(log, &now, json, &mut out)?;
    Ok(ExitCode::SUCCESS)
}
