//! A destination an `ask` SPEC names is asked about as an `ask` path is: through
//! the session's broker, so `veilfs prompt` (or an editor on the control socket)
//! shows it (`connect`, the path being `host:port`, under the root `net`) and its
//! answers mean the same: allow once (this connection), allow this path or this
//! directory (this destination, for the rest of the session), or deny. Nobody
//! answering within the timeout, or nobody to ask, is a refusal.

use std::sync::Arc;
use std::sync::mpsc::sync_channel;

use crate::fs::ask::{Access, Approvals, Asker, Broker, NeedsApproval, Verdict};
use crate::policy::Decision;
use crate::policy::net::Dest;

/// The root network questions are asked under.
pub const ROOT: &str = "net";

/// Asks `broker`'s approvers.
pub fn through(broker: Arc<Broker>) -> super::proxy::AskNet {
    Box::new(move |dest, why, who| ask(&broker, dest, why, who))
}

fn ask(broker: &Arc<Broker>, dest: &Dest, why: &str, who: Option<(u32, String)>) -> bool {
    let path = dest.to_string().into_bytes();
    if broker.session_covers(ROOT, &path, Access::Read) {
        return true;
    }
    let approvals = Approvals {
        broker: broker.clone(),
        root: ROOT,
        mount: "network".into(),
        // A destination's rule lives in the `[network]` table, not in `[[rules]]`.
        policy_file: None,
    };
    let q = NeedsApproval {
        path,
        decision: Decision::network_ask(why),
        access: Access::Read,
        // Its own "directory": allowing the directory allows this destination.
        is_dir: true,
    };
    let asker = match who {
        Some((pid, _)) => {
            use std::os::unix::fs::MetadataExt;
            let ids =
                std::fs::metadata(format!("/proc/{pid}")).map_or((0, 0), |m| (m.uid(), m.gid()));
            Asker::of(pid, ids.0, ids.1)
        }
        None => Asker::of(0, 0, 0),
    };
    let (tx, rx) = sync_channel(1);
    broker.ask(
        &approvals,
        "connect",
        &q,
        &asker,
        Box::new(move |v| {
            let _ = tx.send(matches!(v, Verdict::Granted(_)));
        }),
    );
    // The broker answers every question by its timeout; the margin is for a
    // broker gone.
    rx.recv_timeout(broker.timeout() + std::time::Duration::from_secs(5))
        .unwrap_or(false)
}
