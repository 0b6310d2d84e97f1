//! The verdict of a `process.stdin` request on a found process — the
//! resumable-stdin arithmetic (the `process.stdin.offset` feature) and
//! where "Process not running" falls in it — as one pure function.
//!
//! `applied` is the high-water mark: the count of stdin bytes accepted for
//! delivery so far. A request carries `len` decoded bytes and optionally the
//! `offset` the caller believes they start at. Both are unsigned 64-bit, as
//! in the reference since build 5db5e4a (a negative offset never gets here:
//! it fails to decode). Everything is computed in `i128`, so offsets and
//! `applied` anywhere in the `u64` range (`offset + len` past `u64::MAX`
//! included) can neither overflow nor wrap; the fuzz targets call
//! [`plan_stdin_write`] directly.

/// What to do with one `process.stdin` payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StdinPlan {
    /// Enqueue `data[skip..]` and move the high-water mark to
    /// `new_applied`. `skip` is 0 for an append, and the already-applied
    /// prefix length for a partial overlap.
    Write { skip: usize, new_applied: u64 },
    /// Every byte is already applied: write nothing, reply
    /// `"duplicate":true`, `applied` unchanged.
    Duplicate,
    /// `offset` is past `applied`: `-32003`, nothing enqueued.
    Gap,
    /// The child exited and the request is neither a gap nor a duplicate:
    /// `Process not running`.
    NotRunning,
}

/// Plans a stdin write of `len` bytes at `offset` against `applied`, for
/// a process that is `running` (its exit not yet observed) or not.
///
/// The offset verdict comes first, whatever the running state (reference
/// build 4534d86; seed 000 checked running before the offset):
/// 1. `offset > applied` → gap;
/// 2. `offset != applied` and `offset + len <= applied` → duplicate;
/// 3. the child exited → not running (so also an empty append);
/// 4. no offset, or `offset == applied` → append (empty data is an append
///    of nothing, never a duplicate);
/// 5. otherwise (`offset < applied < offset + len`) → write the fresh tail
///    `data[applied - offset..]`, `applied = offset + len`.
///
/// `new_applied` saturates at `u64::MAX` (unreachable in practice: it would take 16 EiB
/// of stdin).
pub(crate) fn plan_stdin_write(applied: u64, offset: Option<u64>, len: usize, running: bool) -> StdinPlan {
    match plan_offset(applied, offset, len) {
        StdinPlan::Write { .. } if !running => StdinPlan::NotRunning,
        plan => plan,
    }
}

/// Rules 1, 2, 4 and 5 of [`plan_stdin_write`]: the offset arithmetic alone.
fn plan_offset(applied: u64, offset: Option<u64>, len: usize) -> StdinPlan {
    let applied_w = i128::from(applied);
    let len_w = len as i128;
    let append = StdinPlan::Write {
        skip: 0,
        new_applied: saturate(applied_w + len_w),
    };
    let Some(offset) = offset else {
        return append;
    };
    let offset = i128::from(offset);
    if offset == applied_w {
        return append;
    }
    if offset > applied_w {
        return StdinPlan::Gap;
    }
    let end = offset + len_w;
    if end <= applied_w {
        return StdinPlan::Duplicate;
    }
    // offset < applied < end, so 0 < skip < len: it fits in usize.
    let skip = usize::try_from(applied_w - offset).unwrap_or(len);
    StdinPlan::Write {
        skip,
        new_applied: saturate(end),
    }
}

fn saturate(v: i128) -> u64 {
    u64::try_from(v.max(0)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The model: the stream as a set of byte positions. Bytes
    /// `[offset, offset+len)` are sent; those at positions `>= applied` are
    /// new. It is only defined when the data is contiguous with what was
    /// applied (no hole), which is exactly the non-gap case.
    fn model(applied: u64, offset: Option<u64>, len: usize, running: bool) -> StdinPlan {
        let applied = applied as i128;
        let start = offset.map_or(applied, i128::from);
        if start > applied {
            return StdinPlan::Gap;
        }
        let end = start + len as i128;
        let fresh: Vec<i128> = (0..len as i128).map(|i| start + i).filter(|p| *p >= applied).collect();
        if fresh.is_empty() && start != applied {
            return StdinPlan::Duplicate;
        }
        if !running {
            return StdinPlan::NotRunning;
        }
        let skip = fresh.first().map_or(len as i128, |first| first - start) as usize;
        let new_applied = end.max(applied);
        StdinPlan::Write {
            skip,
            new_applied: u64::try_from(new_applied).unwrap_or(u64::MAX),
        }
    }

    #[test]
    fn documented_cases() {
        let w = |skip, new_applied| StdinPlan::Write { skip, new_applied };
        assert_eq!(plan_stdin_write(0, None, 5, true), w(0, 5));
        assert_eq!(plan_stdin_write(5, Some(5), 3, true), w(0, 8));
        assert_eq!(plan_stdin_write(5, Some(6), 3, true), StdinPlan::Gap);
        assert_eq!(plan_stdin_write(5, Some(0), 5, true), StdinPlan::Duplicate);
        assert_eq!(plan_stdin_write(5, Some(2), 3, true), StdinPlan::Duplicate);
        assert_eq!(plan_stdin_write(5, Some(3), 4, true), w(2, 7));
        // Empty data: append of nothing at the high-water mark, duplicate
        // below it, gap above it.
        assert_eq!(plan_stdin_write(5, None, 0, true), w(0, 5));
        assert_eq!(plan_stdin_write(5, Some(5), 0, true), w(0, 5));
        assert_eq!(plan_stdin_write(5, Some(4), 0, true), StdinPlan::Duplicate);
        assert_eq!(plan_stdin_write(5, Some(6), 0, true), StdinPlan::Gap);
        // Limits: no overflow anywhere.
        assert_eq!(plan_stdin_write(6, Some(u64::MAX), 6, true), StdinPlan::Gap);
        assert_eq!(plan_stdin_write(u64::MAX, Some(u64::MAX), 3, true), w(0, u64::MAX));
        assert_eq!(
            plan_stdin_write(u64::MAX, Some(u64::MAX - 1), 3, true),
            w(1, u64::MAX),
            "offset + len past u64::MAX: the tail is written, applied saturates"
        );
        assert_eq!(
            plan_stdin_write(u64::MAX, Some(i64::MAX as u64), 3, true),
            StdinPlan::Duplicate
        );
        assert_eq!(
            plan_stdin_write(u64::MAX, Some(i64::MAX as u64), usize::MAX, true),
            w(1 << 63, u64::MAX),
            "overlap computed wide, applied saturates"
        );
        assert_eq!(plan_stdin_write(u64::MAX, None, 1, true), w(0, u64::MAX));
        assert_eq!(plan_stdin_write(0, Some(u64::MAX), 0, true), StdinPlan::Gap);
        assert_eq!(
            plan_stdin_write(i64::MAX as u64, Some(i64::MAX as u64), usize::MAX, true),
            w(0, u64::MAX)
        );
    }

    #[test]
    fn an_exited_process_still_gets_the_offset_verdict() {
        let not_running = |applied, offset, len| plan_stdin_write(applied, offset, len, false);
        assert_eq!(not_running(5, Some(9), 1), StdinPlan::Gap, "a gap stays a gap");
        assert_eq!(
            not_running(5, Some(0), 5),
            StdinPlan::Duplicate,
            "a replay stays a no-op"
        );
        assert_eq!(not_running(5, Some(4), 0), StdinPlan::Duplicate);
        assert_eq!(not_running(5, None, 1), StdinPlan::NotRunning);
        assert_eq!(not_running(5, Some(5), 1), StdinPlan::NotRunning);
        assert_eq!(not_running(5, Some(3), 4), StdinPlan::NotRunning, "fresh tail");
        assert_eq!(not_running(5, None, 0), StdinPlan::NotRunning, "empty append");
        assert_eq!(not_running(5, Some(5), 0), StdinPlan::NotRunning);
    }

    fn offset_strategy() -> impl Strategy<Value = Option<u64>> {
        prop_oneof![
            Just(None),
            (0u64..64).prop_map(Some),
            any::<u64>().prop_map(Some),
            prop_oneof![
                Just(u64::MAX),
                Just(u64::MAX - 1),
                Just(i64::MAX as u64),
                Just(i64::MAX as u64 + 1)
            ]
            .prop_map(Some),
        ]
    }

    fn applied_strategy() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..64,
            any::<u64>(),
            Just(u64::MAX),
            Just(i64::MAX as u64),
            Just(i64::MAX as u64 + 1),
        ]
    }

    proptest! {
        #[test]
        fn matches_the_model_for_small_values(applied in 0u64..64, offset in proptest::option::of(0u64..128), len in 0usize..64, running in any::<bool>()) {
            prop_assert_eq!(plan_stdin_write(applied, offset, len, running), model(applied, offset, len, running));
        }

        /// The running state only ever turns a write into NotRunning: gap
        /// and duplicate verdicts are the same either way.
        #[test]
        fn running_only_refuses_writes(applied in applied_strategy(), offset in offset_strategy(), len in prop_oneof![0usize..70_000, Just(usize::MAX)]) {
            let live = plan_stdin_write(applied, offset, len, true);
            let exited = plan_stdin_write(applied, offset, len, false);
            match live {
                StdinPlan::Write { .. } => prop_assert_eq!(exited, StdinPlan::NotRunning),
                other => prop_assert_eq!(exited, other),
            }
            prop_assert_ne!(live, StdinPlan::NotRunning);
        }

        #[test]
        fn invariants_hold_everywhere(applied in applied_strategy(), offset in offset_strategy(), len in prop_oneof![0usize..70_000, Just(usize::MAX)]) {
            match plan_stdin_write(applied, offset, len, true) {
                StdinPlan::NotRunning => prop_assert!(false, "running"),
                StdinPlan::Gap => {
                    let o = offset.expect("a gap needs an offset");
                    prop_assert!(i128::from(o) > i128::from(applied));
                }
                StdinPlan::Duplicate => {
                    let o = i128::from(offset.expect("a duplicate needs an offset"));
                    prop_assert!(o < i128::from(applied));
                    prop_assert!(o + len as i128 <= i128::from(applied));
                }
                StdinPlan::Write { skip, new_applied } => {
                    prop_assert!(skip <= len);
                    prop_assert!(new_applied >= applied, "applied never moves back");
                    let fresh = (len - skip) as i128;
                    let want = (i128::from(applied) + fresh).min(u64::MAX as i128);
                    prop_assert_eq!(i128::from(new_applied), want, "applied grows by exactly the written bytes");
                    if let Some(o) = offset {
                        prop_assert!(i128::from(o) <= i128::from(applied));
                        prop_assert_eq!(i128::from(o) + skip as i128, i128::from(applied), "the tail starts at applied");
                    } else {
                        prop_assert_eq!(skip, 0);
                    }
                }
            }
        }

        /// Replaying a stream in arbitrary overlapping chunks with offsets
        /// reconstructs it exactly once (what a reconnecting client does).
        #[test]
        fn overlapping_resends_reconstruct_the_stream(chunks in proptest::collection::vec((0usize..40, 0usize..40), 1..30)) {
            let stream: Vec<u8> = (0..=255u8).cycle().take(400).collect();
            let mut applied = 0u64;
            let mut delivered: Vec<u8> = Vec::new();
            for (back, len) in chunks {
                let start = (applied as usize).saturating_sub(back);
                let end = (start + len).min(stream.len());
                let data = &stream[start..end];
                match plan_stdin_write(applied, Some(start as u64), data.len(), true) {
                    StdinPlan::Write { skip, new_applied } => {
                        delivered.extend_from_slice(&data[skip..]);
                        applied = new_applied;
                    }
                    StdinPlan::Duplicate => {}
                    StdinPlan::Gap | StdinPlan::NotRunning => prop_assert!(false, "never ahead, always running"),
                }
                prop_assert_eq!(delivered.len() as u64, applied);
                prop_assert_eq!(&delivered[..], &stream[..applied as usize]);
            }
        }
    }
}
