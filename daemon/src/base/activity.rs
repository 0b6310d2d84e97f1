//! The daemon-wide "something changed" signal the idle exit waits on
//! (`serve::idle`): a connection opened or closed, a child registered or
//! dropped from the process table. A generation counter in a `watch`
//! channel: a poke is never lost between a check and the wait that
//! follows it, and waiting costs nothing while nothing happens.

use tokio::sync::watch;

/// The sending side; cheap to clone, poked from any thread.
#[derive(Debug, Clone)]
pub(crate) struct Activity {
    tx: std::sync::Arc<watch::Sender<u64>>,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            tx: std::sync::Arc::new(watch::channel(0).0),
        }
    }
}

impl Activity {
    /// Records that a client or a child came or went.
    pub(crate) fn poke(&self) {
        self.tx
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.tx.subscribe()
    }
}
