//! The bench table: each item of both binaries with the client's CPU
//! share beside it, how the rounds were taken, then the floors and each
//! stream figure as a fraction of them.

use super::error::Reading;
use super::Bench;

/// The bench table, the client's CPU share beside each figure it was
/// taken for, then the floors and each stream figure as a fraction of
/// them.
pub fn table(bench: &Bench) -> String {
    let mut o = format!(
        "{:<44} {:>16} {:>16} {:>7}\n",
        "bench", "reference", "candidate", "ratio"
    );
    let cpu = |c: Option<f64>| c.map_or(String::new(), |c| format!(" [{:.0}%]", c * 100.0));
    for i in &bench.items {
        let f = |r: &Reading, c: Option<f64>| match r {
            Ok(v) => format!("{v:.1} {}{}", i.unit, cpu(c)),
            Err(e) => e.to_string().chars().take(60).collect(),
        };
        let ratio = i.ratio.map_or("-".into(), |r| format!("{r:.2}"));
        o.push_str(&format!(
            "{:<44} {:>16} {:>16} {:>7}\n",
            i.name,
            f(&i.reference, i.reference_client_cpu),
            f(&i.candidate, i.candidate_client_cpu),
            ratio
        ));
    }
    o.push_str(&format!(
        "{} round(s), both daemons side by side, each item taken on one then the other, who goes first alternated; figures are medians over the rounds, ratio the median over pairs of rounds of the geometric mean of their two ratios{}\n",
        bench.rounds,
        if bench.rounds < 2 {
            " (one round: no pair, so its ratio keeps the advantage of going second; the memory items are always of one round, each binary alone)"
        } else if bench.rounds % 2 == 1 {
            " (the odd last round is left out of the ratios; the memory items are of the first round, each binary alone)"
        } else {
            " (the memory items are of the first round, each binary alone)"
        }
    ));
    let loads: Vec<String> = bench
        .load_average
        .iter()
        .map(|(a, b)| format!("{a:.1}->{b:.1}"))
        .collect();
    o.push_str(&format!(
        "load average (1 min) at the start->end of each round: {}\n",
        loads.join(", ")
    ));
    o.push_str(
        "ratio = candidate / reference (for req/s and MiB/s higher is better; for µs, ms, s, KiB lower is better)\n",
    );
    o.push_str("[n%] = the bench client's own CPU share while it took that figure (100% = one core)\n");
    match &bench.floors {
        Ok(fl) => {
            o.push_str(&format!(
                "floors (same run): pipe -> Unix socket -> reader, no encoding: {:.1} MiB/s; base64 encode+decode of 32 KiB chunks, one thread: {:.1} MiB/s\n",
                fl.pipe, fl.base64
            ));
            for i in bench.items.iter().filter(|i| i.against_floors) {
                let frac = |r: &Reading| match r {
                    Ok(v) => format!("{:.2} of base64, {:.2} of pipe", v / fl.base64, v / fl.pipe),
                    Err(_) => "-".into(),
                };
                o.push_str(&format!(
                    "  {}: reference {}; candidate {}\n",
                    i.name,
                    frac(&i.reference),
                    frac(&i.candidate)
                ));
            }
        }
        Err(e) => o.push_str(&format!("floors: {e}\n")),
    }
    o
}
