//! The subcommands, one file each (`veilfs mount` a directory, planned then
//! executed as `veilfs run` is; `veilfs run` is [`crate::run`], large enough for a
//! directory of its own); [`crate::app`] only dispatches to them.

pub mod check;
pub mod doctor;
pub mod explain;
pub mod init;
pub mod mount;
pub mod prompt;
