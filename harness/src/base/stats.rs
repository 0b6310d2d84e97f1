//! Order statistics of measured samples: the one definition of a
//! percentile every latency figure of `bench` and `stress` uses.

/// The `p` quantile (0.0 to 1.0) of `v` by the nearest rank on the
/// sorted samples (index `round((len − 1) × p)`): a sample that was
/// measured, never an interpolation. 0.0 for no samples.
pub(crate) fn percentile(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let at = ((v.len() as f64 - 1.0) * p.clamp(0.0, 1.0)).round();
    v.get(at.max(0.0) as usize).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn the_percentile_is_a_measured_sample_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 51.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 1.0), 100.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        // Of 200 samples the p99 is the 198th smallest: two slow ones
        // are past it, a third is not.
        let mut w = vec![1.0; 198];
        w.extend([50.0, 60.0]);
        assert_eq!(percentile(&w, 0.99), 1.0);
        w[0] = 40.0;
        assert_eq!(percentile(&w, 0.99), 40.0);
        assert_eq!(percentile(&[], 0.99), 0.0);
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
    }
}
