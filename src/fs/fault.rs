//! Faults injected by tests, in test builds only (the `fault-injection` feature,
//! which the test suite turns on through its dev-dependency on this package): a
//! lookup of a chosen name panics inside its handler, for the tests of the panic
//! guard (`guard` in the module `reply`). Never in a build of the binary.

use std::ffi::{OsStr, OsString};
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
