//! Orchestration of `diff`, `check` and `record`: running probes in
//! parallel, repeats, timing medians and progress output.

use crate::base::sync::{into_inner, lock};
use crate::probe::Probe;
use crate::report::{ProbeResult, SideTiming};
use crate::runner::{self, RunConfig};
use crate::transcript::compare::{
    accepts_for, compare, derived_counts, pending_accepts, unstable_keys, CentralAccept, Status,
};
use crate::transcript::{derived_header, Transcript};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What the candidate is compared with.
#[derive(Debug, Clone)]
pub enum Reference {
    Binary(RunConfig),
    Transcripts(PathBuf),
}

/// Options of a diff/check run.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    pub reference: Reference,
    pub candidate: RunConfig,
    pub jobs: usize,
    pub repeat: usize,
    pub slower_than: f64,
    /// Minimum absolute slowdown (µs) before a probe is flagged slow.
    pub min_delta_us: u64,
    pub central: Vec<CentralAccept>,
    pub progress: bool,
}

fn median(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

fn side_timing(runs: &[Transcript]) -> SideTiming {
    let mut per: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in runs {
        for t in &r.timings {
            per.entry(t.label.clone()).or_default().push(t.micros);
        }
    }
    SideTiming {
        median_us: median(runs.iter().map(Transcript::total_micros).collect()),
        requests: per.into_iter().map(|(k, v)| (k, median(v))).collect(),
    }
}

/// Runs `f` over the probes on `jobs` threads, printing progress.
pub fn parallel<T: Send>(
    probes: &[Probe],
    jobs: usize,
    progress: bool,
    f: impl Fn(&Probe) -> T + Sync,
    label: impl Fn(&T) -> String + Sync,
) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<T>>> = Mutex::new((0..probes.len()).map(|_| None).collect());
    let total = probes.len();
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= total {
                    break;
                }
                let started = std::time::Instant::now();
                let r = f(&probes[i]);
                let n = done.fetch_add(1, Ordering::SeqCst) + 1;
                if progress {
                    let mut e = std::io::stderr().lock();
                    let _ = writeln!(
                        e,
                        "[{n:>3}/{total}] {:<44} {} ({:.1}s)",
                        probes[i].name,
                        label(&r),
                        started.elapsed().as_secs_f64()
                    );
                }
                lock(&out)[i] = Some(r);
            });
        }
    });
    into_inner(out)
        .into_iter()
        .map(|r| r.expect("every probe ran"))
        .collect()
}

/// Runs one probe on both sides and compares.
pub fn diff_probe(p: &Probe, o: &DiffOptions) -> ProbeResult {
    let mut res = ProbeResult::new(p.name.clone(), p.desc.clone());
    res.build = p.build.clone();
    let mut refs: Vec<Transcript> = Vec::new();
    let mut cands: Vec<Transcript> = Vec::new();
    for _ in 0..o.repeat.max(1) {
        match &o.reference {
            Reference::Binary(cfg) => match runner::run(p, cfg) {
                Ok(t) => refs.push(t),
                Err(e) => {
                    res.status = Status::Error;
                    res.error = Some(format!("reference: {e}"));
                    return res;
                }
            },
            Reference::Transcripts(dir) if refs.is_empty() => match Transcript::load(dir, &p.name) {
                Ok(Some(t)) => refs.push(t),
                Ok(None) => {
                    res.status = Status::Unrecorded;
                    return res;
                }
                Err(e) => {
                    res.status = Status::Error;
                    res.error = Some(e.to_string());
                    return res;
                }
            },
            Reference::Transcripts(_) => {}
        }
        match runner::run(p, &o.candidate) {
            Ok(t) => cands.push(t),
            Err(e) => {
                res.status = Status::Error;
                res.error = Some(format!("candidate: {e}"));
                return res;
            }
        }
    }
    for (side, runs) in [("reference", &refs), ("candidate", &cands)] {
        for r in runs.iter().skip(1) {
            for k in unstable_keys(&runs[0].entries, &r.entries) {
                let k = format!("{side}: {k}");
                if !res.unstable.contains(&k) {
                    res.unstable.push(k);
                }
            }
        }
    }
    let mut accepts = accepts_for(p, &o.central);
    // A reference-derived transcript's pending differences come after the
    // probe's and the central accepts, so a deliberate divergence keeps
    // its own reason.
    let header = match &o.reference {
        Reference::Transcripts(dir) => match derived_header(dir, &p.name) {
            Ok(h) => h,
            Err(e) => {
                res.status = Status::Error;
                res.error = Some(e.to_string());
                return res;
            }
        },
        Reference::Binary(_) => None,
    };
    if let Some(h) = &header {
        accepts.extend(pending_accepts(h));
    }
    let (status, diffs) = compare(&refs[0], &cands[0], &accepts);
    res.derived = header.map(|h| derived_counts(&refs[0].entries, &diffs, &h));
    res.status = status;
    res.diffs = diffs;
    if !res.unstable.is_empty() && !res.status.fails() {
        res.status = Status::Differs;
    }
    if matches!(o.reference, Reference::Binary(_)) {
        let (rt, ct) = (side_timing(&refs), side_timing(&cands));
        if rt.median_us > 0 {
            let ratio = ct.median_us as f64 / rt.median_us as f64;
            res.ratio = Some(ratio);
            res.slow = ratio > o.slower_than && ct.median_us.saturating_sub(rt.median_us) >= o.min_delta_us;
        }
        res.reference_timing = Some(rt);
        res.candidate_timing = Some(ct);
    } else {
        res.candidate_timing = Some(side_timing(&cands));
    }
    res.reference = refs.swap_remove(0).entries;
    res.candidate = cands.swap_remove(0).entries;
    res
}

/// Runs every probe through [`diff_probe`].
pub fn diff_all(probes: &[Probe], o: &DiffOptions) -> Vec<ProbeResult> {
    parallel(
        probes,
        o.jobs,
        o.progress,
        |p| diff_probe(p, o),
        |r| {
            let mut s = r.status.label().to_string();
            if r.slow {
                s.push_str(" SLOW");
            }
            s
        },
    )
}
