//! The figures of `harness bench --scale`, one [`ScaleFigure`] each: its
//! name, unit, direction, the axis it is plotted against and the file its
//! plot goes to live here, so the table, the JSON and the plots all read
//! one definition.

/// What a curve's N counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub(crate) enum Axis {
    /// Live `sleep 600` children of the daemon.
    Processes,
    /// Idle connections that authenticated with one ping.
    Connections,
}

impl Axis {
    pub(crate) const ALL: [Axis; 2] = [Axis::Processes, Axis::Connections];

    /// The label of N in a table's first column and on a plot's x axis.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Axis::Processes => "live processes",
            Axis::Connections => "idle connections",
        }
    }
}

/// Every `--scale` figure, in the order the tables show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub(crate) enum ScaleFigure {
    /// One measured batch of pipelined `process.spawn`s with N live:
    /// spawns over the time to its last reply (the floor: the same count
    /// of fork/execs with three pipes from a process holding N children).
    SpawnRate,
    /// (daemon RSS with N live − RSS with one) / N, in a daemon that
    /// never streamed (the stream figure ramps a daemon of its own).
    RssPerProcess,
    /// p99 of 200 sequential pings on a fresh connection with N live.
    PingP99Processes,
    /// A fresh connection's `head -c <--stream-bytes> /dev/zero`, read
    /// live to its exit frame, with N idle processes beside it (a second
    /// daemon, ramped again).
    StreamBesideProcesses,
    /// (daemon RSS with N idle authenticated connections − RSS before
    /// them) / N.
    RssPerConnection,
    /// p99 of 200 sequential pings on one more connection with N idle.
    PingP99Connections,
}

impl ScaleFigure {
    pub(crate) const ALL: [ScaleFigure; 6] = [
        ScaleFigure::SpawnRate,
        ScaleFigure::RssPerProcess,
        ScaleFigure::PingP99Processes,
        ScaleFigure::StreamBesideProcesses,
        ScaleFigure::RssPerConnection,
        ScaleFigure::PingP99Connections,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            ScaleFigure::SpawnRate => "spawns/s",
            ScaleFigure::RssPerProcess => "daemon KiB per process",
            ScaleFigure::PingP99Processes => "ping p99 (µs) with N live",
            ScaleFigure::StreamBesideProcesses => "stream MiB/s beside N idle",
            ScaleFigure::RssPerConnection => "daemon KiB per connection",
            ScaleFigure::PingP99Connections => "ping p99 (µs) with N connected",
        }
    }

    pub(crate) fn unit(self) -> &'static str {
        match self {
            ScaleFigure::SpawnRate => "spawns/s",
            ScaleFigure::RssPerProcess | ScaleFigure::RssPerConnection => "KiB",
            ScaleFigure::PingP99Processes | ScaleFigure::PingP99Connections => "µs",
            ScaleFigure::StreamBesideProcesses => "MiB/s",
        }
    }

    pub(crate) fn higher_is_better(self) -> bool {
        matches!(self, ScaleFigure::SpawnRate | ScaleFigure::StreamBesideProcesses)
    }

    pub(crate) fn axis(self) -> Axis {
        match self {
            ScaleFigure::RssPerConnection | ScaleFigure::PingP99Connections => Axis::Connections,
            _ => Axis::Processes,
        }
    }

    /// The plot's file name in `--plots DIR`.
    pub(crate) fn file(self) -> &'static str {
        match self {
            ScaleFigure::SpawnRate => "spawn-rate.svg",
            ScaleFigure::RssPerProcess => "rss-per-process.svg",
            ScaleFigure::PingP99Processes => "ping-p99-processes.svg",
            ScaleFigure::StreamBesideProcesses => "stream-beside-processes.svg",
            ScaleFigure::RssPerConnection => "rss-per-connection.svg",
            ScaleFigure::PingP99Connections => "ping-p99-connections.svg",
        }
    }

    /// Decimals a table cell shows.
    pub(crate) fn decimals(self) -> usize {
        match self {
            ScaleFigure::RssPerProcess | ScaleFigure::RssPerConnection => 1,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_figure_has_its_own_plot_file_and_an_axis_in_all() {
        let mut files: Vec<&str> = ScaleFigure::ALL.iter().map(|f| f.file()).collect();
        files.sort_unstable();
        files.dedup();
        assert_eq!(files.len(), ScaleFigure::ALL.len());
        for f in ScaleFigure::ALL {
            assert!(Axis::ALL.contains(&f.axis()));
        }
    }
}
