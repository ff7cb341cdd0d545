//! The JSON line canopy_bench prints (bench/harness/json_line.cpp), with
//! numbers written as printf's "%.6g" writes them.

pub struct ResultRecord {
    pub peer: &'static str,
    pub workload: &'static str,
    /// Median over the measured repetitions.
    pub value: f64,
    pub unit: &'static str,
    pub threads: usize,
    pub reps: u32,
    pub min: f64,
    pub max: f64,
    /// Median over repetitions of each repetition's p99 (wake_latency).
    pub p99: Option<f64>,
    /// Mean over repetitions (idle_cpu).
    pub other_threads: Option<f64>,
}

/// printf("%.6g"): six significant digits, trailing zeros dropped, the
/// exponent form below 1e-4 and from 1e6 on; null for NaN and infinities.
pub fn json_number(number: f64) -> String {
    if !number.is_finite() {
        return "null".to_string();
    }
    if number == 0.0 {
        return "0".to_string();
    }
    const SIGNIFICANT: i32 = 6;
    // Rounded to six digits first: the exponent printf chooses is that of
    // the rounded value (999999.5 prints as 1e+06).
    let scientific = format!("{:.*e}", (SIGNIFICANT - 1) as usize, number);
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} has an exponent");
    let exponent: i32 = exponent.parse().expect("{:e} exponent is an integer");
    if !(-4..SIGNIFICANT).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", trim_fraction(mantissa), sign, exponent.abs())
    } else {
        let decimals = (SIGNIFICANT - 1 - exponent) as usize;
        trim_fraction(&format!("{:.*}", decimals, number)).to_string()
    }
}

fn trim_fraction(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

/// The record as one line of JSON, without the trailing newline. Names and
/// units are fixed identifiers without quotes or backslashes.
pub fn to_json_line(record: &ResultRecord) -> String {
    let mut line = format!(
        "{{\"peer\":\"{}\",\"workload\":\"{}\",\"value\":{},\"unit\":\"{}\",\"threads\":{},\"reps\":{},\"min\":{},\"max\":{}",
        record.peer,
        record.workload,
        json_number(record.value),
        record.unit,
        record.threads,
        record.reps,
        json_number(record.min),
        json_number(record.max)
    );
    if let Some(p99) = record.p99 {
        line += &format!(",\"p99\":{}", json_number(p99));
    }
    if let Some(other_threads) = record.other_threads {
        line += &format!(",\"other_threads\":{}", json_number(other_threads));
    }
    line + "}"
}

#[cfg(test)]
mod tests {
    use super::json_number;

    #[test]
    fn numbers_print_as_printf_g6() {
        assert_eq!(json_number(594.3), "594.3");
        assert_eq!(json_number(8.123456789), "8.12346");
        assert_eq!(json_number(12.0), "12");
        assert_eq!(json_number(1234567.0), "1.23457e+06");
        assert_eq!(json_number(999999.5), "1e+06");
        assert_eq!(json_number(0.00012345), "0.00012345");
        assert_eq!(json_number(0.000012345), "1.2345e-05");
        assert_eq!(json_number(-2.5), "-2.5");
        assert_eq!(json_number(0.0), "0");
        assert_eq!(json_number(f64::NAN), "null");
    }
}
