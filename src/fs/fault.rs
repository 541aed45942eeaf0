//! Faults injected by tests, in test builds only (the `fault-injection` feature,
//! which the test suite turns on through its dev-dependency on this package): a
//! lookup of a chosen name panics inside its handler, for the tests of the panic
//! guard (`guard` in the module `reply`); and a [`MidRequest`] hook run inside a request, for
//! tests that land a policy reload at one point of it. Never in a build of the
//! binary.

use std::ffi::{OsStr, OsString};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use super::VeilFs;

/// Set while a fault is injected (see [`inject_lookup_panic`]).
static FAULT_ARMED: AtomicBool = AtomicBool::new(false);
static PANIC_ON_LOOKUP: parking_lot::Mutex<Option<OsString>> = parking_lot::Mutex::new(None);

/// Fault injection, for tests of the panic guard: while `name` is set, every lookup of that
/// name (in any directory, in every mount of this process) panics inside its
/// handler, holding the parent directory's node lock.
#[doc(hidden)]
pub fn inject_lookup_panic(name: Option<&OsStr>) {
    *PANIC_ON_LOOKUP.lock() = name.map(OsStr::to_os_string);
    FAULT_ARMED.store(name.is_some(), Ordering::SeqCst);
}

impl VeilFs {
    /// Panics here if a test injected a fault for a lookup of `name`.
    pub(super) fn injected_fault(&self, parent: u64, name: &OsStr) {
        if FAULT_ARMED.load(Ordering::Relaxed) && PANIC_ON_LOOKUP.lock().as_deref() == Some(name) {
            let dir = self.inodes.get(parent);
            let _held = dir.as_ref().map(|d| d.place.lock());
            panic!("injected fault: lookup of {name:?}");
        }
    }
}

/// A test hook run in the middle of a request, between the decision of a
/// directory and the decision of a name in it (where a concurrent reload can land),
/// so a test can make that interleaving happen deterministically.
#[derive(Default)]
pub struct MidRequest(OnceLock<Box<dyn Fn() + Send + Sync>>);

impl std::fmt::Debug for MidRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "MidRequest(set)"
        } else {
            "MidRequest"
        })
    }
}

impl MidRequest {
    pub(crate) fn run(&self) {
        if let Some(f) = self.0.get() {
            f();
        }
    }
}

impl VeilFs {
    /// Runs `f` inside each `lookup` and each new listing, after the directory's
    /// decision and before those of the names in it (for tests that land a reload
    /// there). Set once; later calls are ignored.
    #[doc(hidden)]
    pub fn set_mid_request_hook(&self, f: impl Fn() + Send + Sync + 'static) {
        let _ = self.mid_request.0.set(Box::new(f));
    }
}
