//! What the tests share besides [`crate::common`]: the source scanner of
//! the layer tests (`layer_scan.rs`, which `harness/tests/it/layers.rs`
//! includes too), and, not a module, `quick-login-shell`, the profile-free
//! login shell every daemon the tests start gets as its `SHELL`.

pub mod layer_scan;
