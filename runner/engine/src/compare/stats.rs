//! The statistics a comparison needs: a summary of repeated measurements
//! (median, spread, coefficient of variation) and Welch's t-test for the
//! difference of two sets of them.
//!
//! Why Welch's t-test and not Mann-Whitney U: benchmark suites repeat a
//! stage 3 to 5 times, and with 3 against 3 samples the smallest two-sided
//! p-value Mann-Whitney U can give is 0.1, so it could never call a
//! regression significant. Welch's test (as hyperfine uses) does not assume
//! equal variances and works with 2 or more samples per side. Reference
//! values in the tests come from SciPy (`stats_reference.py` beside the
//! tests' data).

use serde::Serialize;

/// Repeated measurements of one metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Sample standard deviation over the mean's magnitude; `None` with one
    /// sample or a zero mean.
    pub cv: Option<f64>,
}

impl Summary {
    /// `None` for no samples.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        let mean = mean(samples);
        let cv = (n > 1 && mean != 0.0).then(|| variance(samples).sqrt() / mean.abs());
        Some(Summary {
            n,
            median,
            mean,
            min: sorted[0],
            max: sorted[n - 1],
            cv,
        })
    }
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Sample variance (n - 1 in the denominator).
fn variance(x: &[f64]) -> f64 {
    let m = mean(x);
    x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() as f64 - 1.0)
}

/// The outcome of Welch's two-sided t-test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Welch {
    pub t: f64,
    pub df: f64,
    pub p: f64,
}

/// Welch's two-sided t-test of `a` against `b`; `None` unless both have at
/// least two samples. Two sets without any spread are either identical
/// (p = 1) or certainly different (p = 0).
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (va, vb) = (variance(a) / na, variance(b) / nb);
    let diff = mean(a) - mean(b);
    if va + vb == 0.0 {
        let p = if diff == 0.0 { 1.0 } else { 0.0 };
        let t = if diff == 0.0 {
            0.0
        } else {
            f64::INFINITY.copysign(diff)
        };
        return Some(Welch {
            t,
            df: na + nb - 2.0,
            p,
        });
    }
    let t = diff / (va + vb).sqrt();
    let df = (va + vb).powi(2) / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    // P(|T| > |t|) for Student's t with df degrees of freedom.
    let p = regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
    Some(Welch {
        t,
        df,
        p: p.clamp(0.0, 1.0),
    })
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms: ~15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1-x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        sum += c / (x + i as f64);
    }
    let t = x + G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// I_x(a, b), the regularized incomplete beta function, by its continued
/// fraction (modified Lentz), using the symmetry I_x(a,b) = 1 - I_{1-x}(b,a)
/// where the fraction converges slowly.
pub fn regularized_incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * beta_fraction(a, b, x) / a
    } else {
        1.0 - ln_front.exp() * beta_fraction(b, a, 1.0 - x) / b
    }
}

fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    const EPS: f64 = 1e-15;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        // Even step, then odd step of the fraction.
        let even = m * (b - m) * x / ((qam + m2) * (a + m2));
        h *= lentz_step(&mut c, &mut d, even);
        let odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        let del = lentz_step(&mut c, &mut d, odd);
        h *= del;
        if (del - 1.0).abs() < EPS {
            break;
        }
    }
    h
}

/// One step of the modified Lentz method with coefficient `aa`: updates
/// `c` and `d` (kept away from zero) and returns the factor for the result.
fn lentz_step(c: &mut f64, d: &mut f64, aa: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let nonzero = |v: f64| if v.abs() < TINY { TINY } else { v };
    *d = 1.0 / nonzero(1.0 + aa * *d);
    *c = nonzero(1.0 + aa / *c);
    *d * *c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    #[test]
    fn summaries() {
        let s = Summary::of(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!(
            (s.n, s.median, s.min, s.max, s.mean),
            (4, 2.5, 1.0, 10.0, 4.0)
        );
        // sd of [1,2,3,10] = 4.0824829; cv = sd / 4
        assert!(close(s.cv.unwrap(), 4.082_482_904_638_63 / 4.0, 1e-12));
        assert_eq!(Summary::of(&[5.0]).unwrap().cv, None);
        assert_eq!(Summary::of(&[]), None);
    }

    #[test]
    fn welch_needs_two_samples_a_side_and_handles_no_spread() {
        assert_eq!(welch(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(welch(&[2.0, 2.0], &[2.0, 2.0]).unwrap().p, 1.0);
        assert_eq!(welch(&[2.0, 2.0], &[3.0, 3.0]).unwrap().p, 0.0);
    }
}

/// Against SciPy's values for the same samples (see the module comment).
#[cfg(test)]
mod scipy_reference {
    use super::*;

    #[test]
    fn welch_and_the_incomplete_beta_match_scipy() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/compare/stats_reference.json"
        );
        let reference: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let floats = |v: &serde_json::Value| -> Vec<f64> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        };
        let cases = reference["welch"].as_array().unwrap();
        assert!(cases.len() >= 5);
        for case in cases {
            let (a, b) = (floats(&case["a"]), floats(&case["b"]));
            let w = welch(&a, &b).unwrap();
            let want = |k: &str| case[k].as_f64().unwrap();
            let rel = |x: f64, y: f64| (x - y).abs() / y.abs();
            assert!(
                rel(w.t, want("t")) < 1e-9,
                "t {a:?} {b:?}: {} vs {}",
                w.t,
                want("t")
            );
            assert!(rel(w.df, want("df")) < 1e-9, "df {a:?} {b:?}");
            assert!(
                rel(w.p, want("p")) < 1e-7,
                "p {a:?} {b:?}: {} vs {}",
                w.p,
                want("p")
            );
        }
        for case in reference["betainc"].as_array().unwrap() {
            let g = |k: &str| case[k].as_f64().unwrap();
            let ours = regularized_incomplete_beta(g("a"), g("b"), g("x"));
            assert!(
                (ours - g("value")).abs() < 1e-10 * g("value").max(1e-300) + 1e-15,
                "I_{}({}, {}): {ours} vs {}",
                g("x"),
                g("a"),
                g("b"),
                g("value")
            );
        }
    }
}
