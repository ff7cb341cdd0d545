//! bench/harness/statistics.cpp: median, extremes, nearest-rank percentile.

pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

fn sorted_copy(values: &[f64]) -> Vec<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(|left, right| left.total_cmp(right));
    sorted
}

/// Median (mean of the two middle values for an even count), min and max.
/// Precondition: values is not empty.
pub fn summarize(values: &[f64]) -> Spread {
    let sorted = sorted_copy(values);
    let middle = sorted.len() / 2;
    let median = if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    };
    Spread {
        median,
        min: sorted[0],
        max: sorted[sorted.len() - 1],
    }
}

/// The smallest value with at least `fraction` of all values at or below it.
/// Precondition: values is not empty, 0 < fraction <= 1.
pub fn percentile(values: &[f64], fraction: f64) -> f64 {
    let sorted = sorted_copy(values);
    let rank = (fraction * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_even_count_is_mean_of_middle_pair() {
        let spread = summarize(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!((spread.median, spread.min, spread.max), (2.5, 1.0, 4.0));
    }

    #[test]
    fn nearest_rank_percentile() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 0.5), 50.0);
        assert_eq!(percentile(&values, 0.99), 99.0);
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
    }
}
