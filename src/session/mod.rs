//! A running session around a mount: the mount itself and the checks made before it
//! ([`mount`]), its control socket ([`control`]) and the approvers' side of it
//! ([`ask_socket`]), and its audit log ([`audit`]).

pub mod ask_socket;
pub mod audit;
pub mod control;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod mount;
