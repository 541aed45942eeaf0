//! Dispatches a parsed command line to its subcommand (in [`crate::cmd`], and
//! [`crate::run`]) after setting up logging. `main` only calls [`run`].

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::{Cli, Command};
use crate::policy::DEFAULT_POLICY;

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
            dry_run,
        } => {
            let mut opts = crate::session::mount::MountOptions {
                allow_other,
                read_only,
                ..Default::default()
            };
            cache.apply(&mut opts);
            crate::cmd::mount::mount(crate::cmd::mount::MountArgs {
                policy: policy.as_deref(),
                src: &src,
                mnt: &mnt,
                opts: &opts,
                dry_run,
            })
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
            net,
            agent,
            without_landlock,
            notices,
            command,
        } => {
            let mut mount = crate::session::mount::MountOptions::default();
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
                net,
                agent,
                command,
                mount,
            })
        }
        Command::Init {
            workspace,
            force,
            from_audit,
        } => crate::cmd::init::init(workspace.as_deref(), force, from_audit.as_deref()),
        Command::Doctor => Ok(crate::cmd::doctor::doctor()),
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
        Command::Reload { mnt } => Ok(crate::session::control::reload_command(&mnt)),
        Command::Stats { mnt } => Ok(crate::session::control::stats_command(&mnt)),
        Command::Prompt { all, paths } => match crate::cmd::prompt::Scope::from_args(all, paths) {
            Ok(scope) => Ok(crate::cmd::prompt::prompt(&scope)),
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
            print_profile,
        } => {
            if let Some(name) = print_profile {
                let Some(p) = crate::policy::agents::profile(&name) else {
                    eprintln!("veilfs check: `none` names no profile");
                    return Ok(ExitCode::from(2));
                };
                std::io::stdout().write_all(p.text.as_bytes())?;
                return Ok(ExitCode::SUCCESS);
            }
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
            crate::cmd::check::check(policy.as_deref())
        }
        Command::Explain(args) => explain(args),
    }
}

/// `veilfs explain`: for an audit log, destinations, every path, or the paths
/// given.
fn explain(args: crate::cli::ExplainArgs) -> Result<ExitCode> {
    let crate::cli::ExplainArgs {
        policy,
        workspace,
        json,
        home_policy,
        no_home,
        audit,
        all,
        net,
        paths,
    } = args;
    if let Some(log) = audit {
        return crate::cmd::explain::explain_audit(
            &log,
            policy.as_deref(),
            workspace.as_deref(),
            json,
        );
    }
    if !net.is_empty() {
        return crate::cmd::explain::net::explain_net(
            &net,
            policy.as_deref(),
            workspace.as_deref(),
            json,
        );
    }
    crate::cmd::explain::explain(
        policy.as_deref(),
        workspace.as_deref(),
        json,
        if all { None } else { Some(&paths) },
        (!no_home).then_some(home_policy.as_deref()),
    )
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
