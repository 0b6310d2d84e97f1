//! The figures `harness bench` reports, one [`Figure`] each: its name,
//! unit and direction live here, so a step names what it measured instead
//! of a place in a list, and the table's order is the enum's.

use super::error::Reading;
use super::replies::Shared;
use super::setup::{MemoryOptions, RETENTION_MS};
use std::collections::BTreeMap;

/// Every bench figure, in the order the table shows them: the items of
/// each round, then the memory items (first round only, each binary in a
/// daemon of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Figure {
    PingRoundTrip,
    PipelinedOneConn,
    Pipelined64Conns,
    SpawnToExit,
    StreamLive,
    StreamReplay,
    BesideStalled,
    RssIdle,
    RssPeakStreaming,
    /// The high-water mark after the stream and its replay.
    HwmAfterStream,
    /// The daemon's own CPU per unit of work: a cost, steadier than a rate
    /// on a shared machine (it does not count the time the daemon waited
    /// for a core).
    CpuPingsOneConn,
    CpuPings64Conns,
    CpuPerGibLive,
    CpuPerGibReplay,
    RssBeforeExited,
    RssAfterDropped,
    RssDropDifference,
    HwmStdinToSleep,
    HwmStdinFlood,
}

impl Figure {
    /// The figures every round takes on both binaries.
    pub(crate) const ROUND: [Figure; 14] = [
        Figure::PingRoundTrip,
        Figure::PipelinedOneConn,
        Figure::Pipelined64Conns,
        Figure::SpawnToExit,
        Figure::StreamLive,
        Figure::StreamReplay,
        Figure::BesideStalled,
        Figure::RssIdle,
        Figure::RssPeakStreaming,
        Figure::HwmAfterStream,
        Figure::CpuPingsOneConn,
        Figure::CpuPings64Conns,
        Figure::CpuPerGibLive,
        Figure::CpuPerGibReplay,
    ];

    /// The table's name of the figure; the memory items name their knobs.
    pub(crate) fn name(self, m: &MemoryOptions) -> String {
        match self {
            Figure::PingRoundTrip => "ping round trip (median)".into(),
            Figure::PipelinedOneConn => "pipelined pings, 1 connection".into(),
            Figure::Pipelined64Conns => "pipelined pings, 64 connections".into(),
            Figure::SpawnToExit => "spawn `true` to exit frame (median)".into(),
            Figure::StreamLive => "stream throughput (head -c N /dev/zero)".into(),
            Figure::StreamReplay => "reattach replay of that stream (byte-exact)".into(),
            Figure::BesideStalled => "reader beside a stalled reader".into(),
            Figure::RssIdle => "daemon RSS idle".into(),
            Figure::RssPeakStreaming => "daemon RSS peak while streaming".into(),
            Figure::HwmAfterStream => "daemon VmHWM after stream + replay".into(),
            Figure::CpuPingsOneConn => "daemon CPU, 1000 pings, 1 connection".into(),
            Figure::CpuPings64Conns => "daemon CPU, 1000 pings, 64 connections".into(),
            Figure::CpuPerGibLive => "daemon CPU per GiB streamed".into(),
            Figure::CpuPerGibReplay => "daemon CPU per GiB replayed".into(),
            Figure::RssBeforeExited => format!("RSS before {} exited processes", m.exited),
            Figure::RssAfterDropped => format!("RSS after they are dropped ({RETENTION_MS} ms retention)"),
            Figure::RssDropDifference => "  difference".into(),
            Figure::HwmStdinToSleep => format!("VmHWM after {} MiB stdin to `sleep`", m.stdin_mib),
            Figure::HwmStdinFlood => format!("VmHWM, {} conns x {} MiB stdin", m.flood_conns, m.flood_mib),
        }
    }

    pub(crate) fn unit(self) -> &'static str {
        match self {
            Figure::PingRoundTrip => "µs",
            Figure::PipelinedOneConn | Figure::Pipelined64Conns => "req/s",
            Figure::SpawnToExit | Figure::CpuPingsOneConn | Figure::CpuPings64Conns => "ms",
            Figure::StreamLive | Figure::StreamReplay | Figure::BesideStalled => "MiB/s",
            Figure::CpuPerGibLive | Figure::CpuPerGibReplay => "s",
            Figure::RssIdle
            | Figure::RssPeakStreaming
            | Figure::HwmAfterStream
            | Figure::RssBeforeExited
            | Figure::RssAfterDropped
            | Figure::RssDropDifference
            | Figure::HwmStdinToSleep
            | Figure::HwmStdinFlood => "KiB",
        }
    }

    /// Whether larger is better (throughput) or smaller (latency, memory, CPU).
    pub(crate) fn higher_is_better(self) -> bool {
        matches!(self.unit(), "req/s" | "MiB/s")
    }

    /// Whether the figure is a stream rate, shown against the floors.
    pub(crate) fn against_floors(self) -> bool {
        matches!(self, Figure::StreamLive | Figure::StreamReplay | Figure::BesideStalled)
    }
}

/// One figure of one binary as a step took it: its value (or why there
/// is none) and the client's CPU share while it was taken.
#[derive(Debug, Clone)]
pub(crate) struct Measured {
    pub(crate) value: Reading,
    pub(crate) client_cpu: Option<f64>,
}

impl Measured {
    pub(crate) fn plain(value: Reading) -> Measured {
        Measured {
            value,
            client_cpu: None,
        }
    }

    /// A rate with the client's CPU share, or the reason it failed.
    pub(crate) fn with_share(r: Shared) -> Measured {
        match r {
            Ok((v, cpu)) => Measured {
                value: Ok(v),
                client_cpu: Some(cpu),
            },
            Err(e) => Measured::plain(Err(e)),
        }
    }
}

/// The figures one binary yielded in one round.
pub(crate) type Figures = BTreeMap<Figure, Measured>;

#[cfg(test)]
mod tests {
    use super::Figure;

    #[test]
    fn round_figures_are_the_first_in_table_order_and_named_once() {
        let mut sorted = Figure::ROUND;
        sorted.sort();
        assert_eq!(sorted, Figure::ROUND, "ROUND follows the enum's order");
        assert!(Figure::ROUND.iter().all(|f| *f < Figure::RssBeforeExited));
        let names: std::collections::BTreeSet<String> =
            Figure::ROUND.iter().map(|f| f.name(&Default::default())).collect();
        assert_eq!(names.len(), Figure::ROUND.len());
    }

    #[test]
    fn directions_follow_the_units() {
        assert!(Figure::StreamReplay.higher_is_better());
        assert!(Figure::Pipelined64Conns.higher_is_better());
        assert!(!Figure::PingRoundTrip.higher_is_better());
        assert!(!Figure::CpuPerGibLive.higher_is_better());
        assert!(!Figure::HwmStdinFlood.higher_is_better());
    }
}
