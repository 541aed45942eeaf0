//! veilfs: a FUSE filesystem that mirrors a workspace directory read-write and
//! enforces one path policy on every lookup, listing, open and change.
//!
//! The policy engine ([`policy`]) is pure and usable on its own:
//!
//! ```
//! use veilfs::{Action, Policy};
//!
//! let policy = Policy::parse("example.toml", r#"
//!     [[rules]]
//!     action = "deny"
//!     paths = ["secrets/", ".env"]
//! "#).unwrap();
//! assert_eq!(policy.decide(b"app/.env", false).action, Action::Deny);
//! assert_eq!(policy.decide(b"secrets/token.txt", false).action, Action::Deny);
//! assert_eq!(policy.decide(b"secrets-backup", false).action, Action::Allow);
//! ```

#![deny(unsafe_code)]

pub mod app;
pub mod ask_socket;
pub mod audit;
pub mod check_workspace;
pub mod cli;
pub mod config;
pub mod control;
pub mod doctor;
pub mod explain_all;
pub mod explain_audit;
pub mod fs;
pub mod git_index;
pub mod init;
pub mod mount;
pub mod policy;
pub mod policy_imports;
pub mod printable;
pub mod prompt;
pub mod run;
pub mod sys;

pub use mount::{Mount, MountOptions};
pub use policy::{Action, Decision, Policy, Reason};
