//! The daemon's per-boot identity: a random 32-hex `instanceId` and the
//! boot time `startedAt` in unix milliseconds.
//! `server.capabilities` reports both, the run-dir lock's owner record
//! carries them, and the orphan check compares them.

use std::time::{SystemTime, UNIX_EPOCH};

/// Identity of one daemon boot. Fixed for the life of the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Instance {
    /// 16 random bytes as 32 lowercase hex digits.
    pub id: String,
    /// Unix milliseconds at start.
    pub started_at: i64,
}

impl Instance {
    pub(crate) fn new() -> Instance {
        let started_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        Instance {
            id: hex(&random_bytes()),
            started_at,
        }
    }
}

impl Default for Instance {
    fn default() -> Self {
        Instance::new()
    }
}

/// 16 bytes from the kernel's CSPRNG. Falls back to time and pid mixed
/// through SHA-256 only if `getrandom` is unavailable: an id must still be
/// unique per boot even then, it is not a secret.
fn random_bytes() -> [u8; 16] {
    let mut buf = [0u8; 16];
    if crate::sys::os::fill_random(&mut buf).is_err() {
        use sha2::{Digest, Sha256};
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let digest = Sha256::new()
            .chain_update(now.as_nanos().to_le_bytes())
            .chain_update(std::process::id().to_le_bytes())
            .finalize();
        buf.copy_from_slice(&digest[..16]);
    }
    buf
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_is_32_lowercase_hex_and_differs_per_boot() {
        let a = Instance::new();
        let b = Instance::new();
        assert_eq!(a.id.len(), 32);
        assert!(a.id.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
        assert_ne!(a.id, b.id);
        assert!(a.started_at > 1_600_000_000_000);
    }
}
