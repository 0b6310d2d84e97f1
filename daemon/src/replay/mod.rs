//! The replay engine: every stream frame of every managed process, stored
//! once and replayed to any number of followers at their own pace.
//!
//! | module | owns |
//! | --- | --- |
//! | [`frame`] | the frame types and their wire lines |
//! | [`segments`] | segment files: record format, per-segment index, hinted reads |
//! | [`store`] | the replay directory, disk budget and eviction, RAM accounting |
//! | [`log`] | one process's log: hot tail, disk writer, RAM ring fallback |
//! | [`followers`] | who follows a log: wake-ups, cuts, the hand-over between connections |
//! | [`ready`] | one connection's ready list: which followed logs were woken since it looked |
//! | [`cursor`] | a follower's position and the batch fill (RAM or disk) |
//!
//! Imports run one way: `cursor → log → {followers, store, segments} → frame`; the
//! store reaches the logs only through its [`store::StoredLog`] trait.
//! Nothing here knows who follows a log (connections, tests, tools).

pub(crate) mod cursor;
pub(crate) mod followers;
pub(crate) mod frame;
pub(crate) mod log;
pub(crate) mod ready;
pub(crate) mod segments;
pub(crate) mod store;
