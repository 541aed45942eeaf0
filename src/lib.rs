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
pub mod cli;
pub mod cmd;
pub mod escape;
pub mod fs;
pub mod policy;
pub mod run;
pub mod session;
pub mod sys;
pub mod workspace;

pub use policy::{Action, Decision, Policy, Reason};
pub use session::mount::{Mount, MountOptions};
