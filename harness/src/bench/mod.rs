//! `harness bench`: performance comparison of two daemons. In each round
//! both binaries run side by side, each in its own fresh daemon, and every
//! item is taken on one and then the other. Items fail soft: one that
//! cannot run (e.g. `process.*` not implemented) is reported as
//! `n/a: <reason>`.
//!
//! `setup.rs` holds the options and starts the daemons
//! ([`crate::dut::Daemon`]s), `figure.rs` names every figure
//! ([`Figure`]), `steps.rs` and `stream.rs` take them with what
//! `replies.rs` shares, `memory.rs` takes the memory items, `lean.rs` is
//! the client side that keeps the figures the daemon's, `zero.rs` checks
//! a stream to the byte and `table.rs` renders the result. `scale/`
//! is `--scale`: spawn rate, memory per process, ping p99 and a stream
//! against how many processes live, and memory and ping p99 against how
//! many connections are open.

mod error;
mod figure;
mod lean;
mod memory;
mod replies;
pub(crate) mod scale;
mod setup;
mod steps;
mod stream;
mod table;
mod zero;

use error::{Reading, Unmeasured};
use figure::{Figure, Figures, Measured};
pub(crate) use lean::Floors;
pub(crate) use setup::{BenchOptions, MemoryOptions};
use std::path::Path;
pub(crate) use table::table;

/// One bench line: medians over the rounds.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Item {
    pub name: String,
    pub unit: String,
    /// Whether larger is better (throughput) or smaller (latency, memory).
    pub higher_is_better: bool,
    pub reference: Reading,
    pub candidate: Reading,
    /// The rounds' candidate/reference ratios, paired across rounds of
    /// opposite order ([`paired_ratio`]): each is of two figures taken
    /// seconds apart, so it is steadier on a shared machine than the
    /// ratio of the two medians.
    pub ratio: Option<f64>,
    /// The figure of each round (`None` where it failed).
    pub reference_rounds: Vec<Option<f64>>,
    pub candidate_rounds: Vec<Option<f64>>,
    /// The bench client's CPU share while it measured this figure (1.0 =
    /// one core busy throughout), where it was taken (median).
    pub reference_client_cpu: Option<f64>,
    pub candidate_client_cpu: Option<f64>,
    /// Whether the figure is a stream rate, shown against the floors.
    pub against_floors: bool,
}

/// What `harness bench` measured: the items of both binaries (medians
/// over the rounds), the floors (each round's better of its two
/// measurements, before and after the two binaries, as both only get
/// slower under load; then the median over rounds) and the machine's load
/// average at the start and end of each round.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Bench {
    pub items: Vec<Item>,
    pub floors: Result<Floors, Unmeasured>,
    pub rounds: usize,
    pub load_average: Vec<(f64, f64)>,
}

/// The machine's 1-minute load average (NaN where it is not known).
fn load_average() -> f64 {
    crate::dut::procfs::load_average().unwrap_or(f64::NAN)
}

/// The median; of an even count, the mean of the two middle values.
fn median_of(v: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = v.into_iter().collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The candidate/reference ratio of an item over the rounds. Rounds
/// come in pairs of opposite order (reference first, then candidate
/// first), and a pair's ratio is the geometric mean of its two rounds'
/// ratios, which cancels a constant advantage of going first or second
/// (on this project's 2-vCPU machine going second was worth up to ±40%
/// on pipelined pings). The result is the median over complete pairs; a
/// round without a partner (an odd last one, or one whose partner failed)
/// counts only where there is no complete pair at all.
fn paired_ratio(rounds: &[Option<f64>]) -> Option<f64> {
    let pairs: Vec<f64> = rounds
        .chunks(2)
        .filter_map(|pair| match pair {
            [Some(a), Some(b)] => Some((a * b).sqrt()),
            _ => None,
        })
        .collect();
    if !pairs.is_empty() {
        return median_of(pairs);
    }
    // No complete pair (one round, or partners that failed): the single
    // rounds, order effect and all; the footer says so.
    median_of(rounds.iter().flatten().copied())
}

/// The figures of one binary in one round from what its steps took, or
/// its start-up error in every figure of the round.
fn figures(taken: Result<Figures, Unmeasured>) -> Figures {
    let not_measured = || Measured::plain(Err(Unmeasured::NotMeasured));
    match taken {
        Ok(mut taken) => {
            for f in Figure::ROUND {
                taken.entry(f).or_insert_with(not_measured);
            }
            taken
        }
        Err(e) => Figure::ROUND
            .into_iter()
            .map(|f| (f, Measured::plain(Err(e.clone()))))
            .collect(),
    }
}

/// One round: both daemons started, then each step run on one and at
/// once on the other, `first` (0 = reference) leading in every step.
/// Taking the two figures of an item seconds apart rather than a whole
/// binary's run apart keeps the machine's drift out of their ratio.
fn measure_round(bins: [&Path; 2], first: usize, o: &BenchOptions) -> [Figures; 2] {
    let order = [first, 1 - first];
    let lives = bins.map(|b| setup::start(b, &[]));
    let lives = lives.map(|l| l.map_err(Unmeasured::from));
    let mut taken: [Result<Figures, Unmeasured>; 2] = [0, 1].map(|i| match &lives[i] {
        Ok(_) => Ok(Figures::new()),
        Err(e) => Err(e.clone()),
    });
    for step in steps::STEPS {
        for i in order {
            if let (Ok(d), Ok(t)) = (&lives[i], &mut taken[i]) {
                t.extend(step(d, o));
            }
        }
    }
    drop(lives);
    taken.map(figures)
}

/// Each round's better floors of its two measurements, before and after
/// the binaries ran (both only get slower under load).
fn better_floors(before: Result<Floors, Unmeasured>, after: Result<Floors, Unmeasured>) -> Result<Floors, Unmeasured> {
    match (before, after) {
        (Ok(a), Ok(b)) => Ok(Floors {
            pipe: a.pipe.max(b.pipe),
            base64: a.base64.max(b.base64),
        }),
        (Ok(f), Err(_)) | (Err(_), Ok(f)) => Ok(f),
        (Err(e), Err(_)) => Err(e),
    }
}

/// The median floors over the rounds, or the first round's error.
fn median_floors(floors: Vec<Result<Floors, Unmeasured>>) -> Result<Floors, Unmeasured> {
    let ok_floors: Vec<Floors> = floors.iter().filter_map(|f| f.as_ref().ok().copied()).collect();
    match median_of(ok_floors.iter().map(|f| f.pipe)) {
        Some(pipe) => Ok(Floors {
            pipe,
            base64: median_of(ok_floors.iter().map(|f| f.base64)).unwrap_or(0.0),
        }),
        None => floors.into_iter().next().unwrap_or(Err(Unmeasured::NoRounds)),
    }
}

/// Runs the bench on both binaries, `o.rounds` times. In a round both
/// daemons run side by side and every item is taken on one and then the
/// other ([`measure_round`]); rounds alternate who goes first (the
/// reference in odd rounds, the candidate in even ones) and the ratio
/// pairs them ([`paired_ratio`]). The memory items run in the first round
/// only, each binary in a daemon of its own.
pub fn run(reference: &Path, candidate: &Path, o: &BenchOptions) -> Bench {
    let rounds = o.rounds.max(1);
    let (mut refs, mut cands, mut floors, mut load) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let load_start = load_average();
        eprintln!("bench: round {} of {rounds}, load {load_start:.2}: floors", round + 1);
        let before = lean::floors(o.stream_bytes);
        let first = round % 2;
        eprintln!(
            "bench: {} first, then {}",
            [reference, candidate][first].display(),
            [reference, candidate][1 - first].display()
        );
        let [mut r, mut c] = measure_round([reference, candidate], first, o);
        if let (0, Some(m)) = (round, o.memory.as_ref()) {
            eprintln!("bench: memory items");
            r.extend(memory::measure(reference, m));
            c.extend(memory::measure(candidate, m));
        }
        refs.push(r);
        cands.push(c);
        eprintln!("bench: floors again");
        floors.push(better_floors(before, lean::floors(o.stream_bytes)));
        load.push((load_start, load_average()));
    }
    let knobs = o.memory.clone().unwrap_or_default();
    // Every round yields the round figures; the first also the memory ones.
    let items = refs[0].keys().map(|&f| item(f, &knobs, &refs, &cands)).collect();
    Bench {
        items,
        floors: median_floors(floors),
        rounds,
        load_average: load,
    }
}

/// A figure's value in each round that took it, with the client's share.
type Column = Vec<Option<(f64, Option<f64>)>>;

/// The bench line of figure `f` from the rounds of both binaries.
fn item(f: Figure, knobs: &MemoryOptions, refs: &[Figures], cands: &[Figures]) -> Item {
    let column = |runs: &[Figures]| -> Column {
        runs.iter()
            .filter_map(|r| r.get(&f))
            .map(|m| m.value.as_ref().ok().map(|v| (*v, m.client_cpu)))
            .collect()
    };
    let (rc, cc) = (column(refs), column(cands));
    // The median over the rounds, or why the first round has none.
    let value = |c: &Column, runs: &[Figures]| {
        median_of(c.iter().flatten().map(|x| x.0)).ok_or_else(|| match runs.first().and_then(|r| r.get(&f)) {
            Some(Measured { value: Err(e), .. }) => e.clone(),
            _ => Unmeasured::NoValue,
        })
    };
    let cpu = |c: &Column| median_of(c.iter().flatten().filter_map(|x| x.1));
    let per_round: Vec<Option<f64>> = rc
        .iter()
        .zip(&cc)
        .map(|(a, b)| match (a, b) {
            (Some(a), Some(b)) if a.0 > 0.0 => Some(b.0 / a.0),
            _ => None,
        })
        .collect();
    Item {
        against_floors: f.against_floors(),
        name: f.name(knobs),
        unit: f.unit().into(),
        higher_is_better: f.higher_is_better(),
        reference: value(&rc, refs),
        candidate: value(&cc, cands),
        ratio: paired_ratio(&per_round),
        reference_rounds: rc.iter().map(|x| x.map(|x| x.0)).collect(),
        candidate_rounds: cc.iter().map(|x| x.map(|x| x.0)).collect(),
        reference_client_cpu: cpu(&rc),
        candidate_client_cpu: cpu(&cc),
    }
}

#[cfg(test)]
mod tests {
    use super::paired_ratio;

    #[test]
    fn paired_ratios_cancel_the_advantage_of_going_second() {
        // The candidate is 10% slower, and whoever goes second gains 40%:
        // reference-first rounds show 0.9 x 1.4, candidate-first 0.9 / 1.4.
        let rounds = [Some(0.9 * 1.4), Some(0.9 / 1.4), Some(0.9 * 1.4), Some(0.9 / 1.4)];
        let r = paired_ratio(&rounds).unwrap();
        assert!((r - 0.9).abs() < 1e-9, "{r}");
        // Rounds without a partner count only where no pair is complete;
        // none at all is no ratio.
        assert_eq!(paired_ratio(&[Some(4.0), Some(1.0), Some(9.0)]), Some(2.0));
        assert_eq!(paired_ratio(&[Some(2.0), None, Some(1.0)]), Some(1.5));
        assert_eq!(paired_ratio(&[None, None]), None);
        assert_eq!(paired_ratio(&[]), None);
    }
}
