//! The daemon-wide stop signal: triggered once (by `server.shutdown`,
//! SIGTERM or SIGINT), observed by the accept loop and every connection.

use tokio::sync::watch;

/// The sending side, owned by the daemon state.
#[derive(Debug)]
pub(crate) struct Shutdown {
    tx: watch::Sender<bool>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    pub(crate) fn new() -> Self {
        Shutdown {
            tx: watch::channel(false).0,
        }
    }

    /// Asks everything to stop. Idempotent.
    pub(crate) fn trigger(&self) {
        self.tx.send_replace(true);
    }

    pub(crate) fn subscribe(&self) -> ShutdownWatch {
        ShutdownWatch {
            rx: self.tx.subscribe(),
        }
    }
}

/// A receiver that can be awaited any number of times.
#[derive(Debug, Clone)]
pub(crate) struct ShutdownWatch {
    rx: watch::Receiver<bool>,
}

impl ShutdownWatch {
    /// Whether shutdown has been triggered.
    pub(crate) fn is_triggered(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once shutdown has been triggered (immediately if it was).
    /// Cancel-safe, so it can sit in a `select!` loop.
    pub(crate) async fn wait(&mut self) {
        // An error means the sender is gone, i.e. the daemon is ending.
        let _ = self.rx.wait_for(|stopped| *stopped).await;
    }
}
