//! The scaling laws (`docs/src/science/laws.md`): Chinchilla, Busbridge's supervised variant and
//! Busbridge's distillation law, each with its natural parameters, its prediction, and its
//! log-space (LSE) parametrisation θ with the analytic gradient of log L̂ that the fitter uses.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::grid::StartGrid;

/// One observation as the fitter sees it: logs of the inputs and of the measured loss, and a
/// weight (1, or a bootstrap multiplicity).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Point {
    /// ln N (model parameters; the student's for the distillation law).
    pub ln_n: f64,
    /// ln D (training tokens; the student's for the distillation law).
    pub ln_d: f64,
    /// ln L_T, the teacher's loss (distillation law only).
    pub ln_lt: f64,
    /// ln L̃_S, the supervised law at the student's N and D (distillation law only).
    pub ln_lsup: f64,
    /// ln of the measured loss.
    pub ln_loss: f64,
    /// Weight of this point in the objective.
    pub w: f64,
}

/// Which law.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LawKind {
    /// L = E + A/N^α + B/D^β.
    Chinchilla,
    /// L = E + (A/N^α + B/D^β)^γ.
    Busbridge,
    /// Busbridge et al. (2025), Eq. 8.
    Distill,
}

impl LawKind {
    /// The lower-case name used on the command line and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            LawKind::Chinchilla => "chinchilla",
            LawKind::Busbridge => "busbridge",
            LawKind::Distill => "distill",
        }
    }

    /// Natural parameter names, in the order of [`LawKind::natural`] vectors.
    pub fn param_names(self) -> &'static [&'static str] {
        match self {
            LawKind::Chinchilla => Chinchilla::NAMES,
            LawKind::Busbridge => Busbridge::NAMES,
            LawKind::Distill => DistillLaw::NAMES,
        }
    }

    /// Whether the law fits distillation data (N_S, D_S, L_T, L_S).
    pub fn is_distill(self) -> bool {
        self == LawKind::Distill
    }

    /// Number of fitted parameters.
    pub fn n_params(self) -> usize {
        self.param_names().len()
    }

    /// Natural parameters from a log-space θ.
    pub fn natural(self, theta: &[f64]) -> Vec<f64> {
        match self {
            LawKind::Chinchilla => Chinchilla::from_theta(theta).natural(),
            LawKind::Busbridge => Busbridge::from_theta(theta).natural(),
            LawKind::Distill => DistillLaw::from_theta(theta).natural(),
        }
    }

    /// log L̂ at `p` under θ.
    pub fn log_predict(self, theta: &[f64], p: &Point) -> f64 {
        let mut g = [0.0; MAX_THETA];
        match self {
            LawKind::Chinchilla => Chinchilla::log_pred_grad(theta, p, &mut g),
            LawKind::Busbridge => Busbridge::log_pred_grad(theta, p, &mut g),
            LawKind::Distill => DistillLaw::log_pred_grad(theta, p, &mut g),
        }
    }

    /// The default start grid (Chinchilla's for Chinchilla; see each law's `default_grid`).
    pub fn default_grid(self) -> StartGrid {
        match self {
            LawKind::Chinchilla => Chinchilla::default_grid(),
            LawKind::Busbridge => Busbridge::default_grid(),
            LawKind::Distill => DistillLaw::default_grid(),
        }
    }
}

impl fmt::Display for LawKind {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for LawKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "chinchilla" => Ok(LawKind::Chinchilla),
            "busbridge" => Ok(LawKind::Busbridge),
            "distill" => Ok(LawKind::Distill),
            other => Err(format!(
                "unknown law `{other}` (use chinchilla, busbridge or distill)"
            )),
        }
    }
}

/// The largest θ of any law (the distillation law's 9).
pub(crate) const MAX_THETA: usize = 9;

/// A law in its log-space parametrisation, as the fitter needs it.
pub trait Law: Copy + Send + Sync + 'static {
    /// Which law.
    const KIND: LawKind;
    /// Natural parameter names (output order).
    const NAMES: &'static [&'static str];
    /// Names of the θ coordinates (the grid axes), in θ order.
    const THETA_NAMES: &'static [&'static str];
    /// log L̂ at `p`; writes ∂ log L̂ / ∂θ into `grad[..θ.len()]`.
    fn log_pred_grad(theta: &[f64], p: &Point, grad: &mut [f64; MAX_THETA]) -> f64;
    /// The law from θ.
    fn from_theta(theta: &[f64]) -> Self;
    /// θ of this law.
    fn theta(&self) -> Vec<f64>;
    /// Natural parameters in [`Law::NAMES`] order.
    fn natural(&self) -> Vec<f64>;
    /// The default start grid.
    fn default_grid() -> StartGrid;
}

/// log(e^x + e^y), stable, with the softmax weight of `x`.
#[inline]
fn lse2(x: f64, y: f64) -> (f64, f64) {
    if x >= y {
        let t = (y - x).exp();
        (x + t.ln_1p(), 1.0 / (1.0 + t))
    } else {
        let t = (x - y).exp();
        (y + t.ln_1p(), t / (1.0 + t))
    }
}

/// log(e^x + e^y + e^z), stable, with the softmax weights of `x`, `y` and `z`.
#[inline]
fn lse3(x: f64, y: f64, z: f64) -> (f64, [f64; 3]) {
    let m = x.max(y).max(z);
    let (ex, ey, ez) = ((x - m).exp(), (y - m).exp(), (z - m).exp());
    let s = ex + ey + ez;
    (m + s.ln(), [ex / s, ey / s, ez / s])
}

/// ln(1 + e^x), stable.
#[inline]
fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// 1 / (1 + e^−x), stable.
#[inline]
fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let t = x.exp();
        t / (1.0 + t)
    }
}

fn axis(start: f64, stop: f64, step: f64) -> Vec<f64> {
    let n = ((stop - start) / step).round() as usize;
    (0..=n).map(|i| start + step * i as f64).collect()
}

/// Chinchilla's start grid axes: a, b ∈ {0, 5, …, 25}; e ∈ {−1, −0.5, …, 1}; α, β ∈ {0, 0.5, …, 2}.
fn chinchilla_axes() -> Vec<Vec<f64>> {
    vec![
        axis(0.0, 25.0, 5.0),
        axis(0.0, 25.0, 5.0),
        axis(-1.0, 1.0, 0.5),
        axis(0.0, 2.0, 0.5),
        axis(0.0, 2.0, 0.5),
    ]
}

/// Chinchilla's law L = E + A/N^α + B/D^β; θ = (a, b, e, α, β) with A = e^a, B = e^b, E = e^e
/// and log L̂ = LSE(a − α ln N, b − β ln D, e).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[allow(non_snake_case)]
pub struct Chinchilla {
    /// Irreducible loss.
    pub E: f64,
    /// Model-size coefficient.
    pub A: f64,
    /// Data coefficient.
    pub B: f64,
    /// Model-size exponent.
    pub alpha: f64,
    /// Data exponent.
    pub beta: f64,
}

impl Chinchilla {
    /// L(N, D).
    pub fn predict(&self, n: f64, d: f64) -> f64 {
        self.E + self.A / n.powf(self.alpha) + self.B / d.powf(self.beta)
    }
}

impl Law for Chinchilla {
    const KIND: LawKind = LawKind::Chinchilla;
    const NAMES: &'static [&'static str] = &["E", "A", "B", "alpha", "beta"];
    const THETA_NAMES: &'static [&'static str] = &["a", "b", "e", "alpha", "beta"];

    #[inline]
    fn log_pred_grad(t: &[f64], p: &Point, g: &mut [f64; MAX_THETA]) -> f64 {
        let (v, w) = lse3(t[0] - t[3] * p.ln_n, t[1] - t[4] * p.ln_d, t[2]);
        g[0] = w[0];
        g[1] = w[1];
        g[2] = w[2];
        g[3] = -w[0] * p.ln_n;
        g[4] = -w[1] * p.ln_d;
        v
    }

    fn from_theta(t: &[f64]) -> Self {
        Chinchilla {
            A: t[0].exp(),
            B: t[1].exp(),
            E: t[2].exp(),
            alpha: t[3],
            beta: t[4],
        }
    }

    fn theta(&self) -> Vec<f64> {
        vec![self.A.ln(), self.B.ln(), self.E.ln(), self.alpha, self.beta]
    }

    fn natural(&self) -> Vec<f64> {
        vec![self.E, self.A, self.B, self.alpha, self.beta]
    }

    /// Chinchilla's grid (4,500 starts).
    fn default_grid() -> StartGrid {
        StartGrid::new(Self::THETA_NAMES, chinchilla_axes())
    }
}

/// Busbridge et al.'s supervised law L = E + (A/N^α + B/D^β)^γ; θ = (a, b, e, α, β, γ) and
/// log L̂ = LSE(e, γ · LSE(a − α ln N, b − β ln D)).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[allow(non_snake_case)]
pub struct Busbridge {
    /// Irreducible loss.
    pub E: f64,
    /// Model-size coefficient.
    pub A: f64,
    /// Data coefficient.
    pub B: f64,
    /// Model-size exponent.
    pub alpha: f64,
    /// Data exponent.
    pub beta: f64,
    /// Outer exponent.
    pub gamma: f64,
}

impl Busbridge {
    /// Busbridge et al. (2025), fitted on C4 (143M–12.6B): `docs/src/science/laws.md`.
    pub const PUBLISHED: Busbridge = Busbridge {
        E: 1.220,
        A: 3355.0,
        B: 18186.0,
        alpha: 0.408,
        beta: 0.431,
        gamma: 0.452,
    };

    /// L(N, D).
    pub fn predict(&self, n: f64, d: f64) -> f64 {
        self.E + (self.A / n.powf(self.alpha) + self.B / d.powf(self.beta)).powf(self.gamma)
    }
}

impl Law for Busbridge {
    const KIND: LawKind = LawKind::Busbridge;
    const NAMES: &'static [&'static str] = &["E", "A", "B", "alpha", "beta", "gamma"];
    const THETA_NAMES: &'static [&'static str] = &["a", "b", "e", "alpha", "beta", "gamma"];

    #[inline]
    fn log_pred_grad(t: &[f64], p: &Point, g: &mut [f64; MAX_THETA]) -> f64 {
        let (s, p1) = lse2(t[0] - t[3] * p.ln_n, t[1] - t[4] * p.ln_d);
        let p2 = 1.0 - p1;
        let (v, qe) = lse2(t[2], t[5] * s);
        let qt = 1.0 - qe;
        let k = qt * t[5];
        g[0] = k * p1;
        g[1] = k * p2;
        g[2] = qe;
        g[3] = -k * p1 * p.ln_n;
        g[4] = -k * p2 * p.ln_d;
        g[5] = qt * s;
        v
    }

    fn from_theta(t: &[f64]) -> Self {
        Busbridge {
            A: t[0].exp(),
            B: t[1].exp(),
            E: t[2].exp(),
            alpha: t[3],
            beta: t[4],
            gamma: t[5],
        }
    }

    fn theta(&self) -> Vec<f64> {
        vec![
            self.A.ln(),
            self.B.ln(),
            self.E.ln(),
            self.alpha,
            self.beta,
            self.gamma,
        ]
    }

    fn natural(&self) -> Vec<f64> {
        vec![self.E, self.A, self.B, self.alpha, self.beta, self.gamma]
    }

    /// Chinchilla's grid with γ ∈ {0.5, 1} (9,000 starts).
    fn default_grid() -> StartGrid {
        let mut axes = chinchilla_axes();
        axes.push(vec![0.5, 1.0]);
        StartGrid::new(Self::THETA_NAMES, axes)
    }
}

/// Busbridge et al.'s distillation law (Eq. 8):
/// L_S = L_T + L_T^(−c0) · (1 + (L_T / (L̃_S·d1))^(1/f1))^(−c1·f1) · (A′/N_S^α′ + B′/D_S^β′)^γ′.
/// θ = (a′, b′, α′, β′, γ′, c0, ln c1, ln f1, ln d1) and
/// log L̂_S = LSE(ln L_T, −c0 ln L_T − c1 f1 · softplus((ln L_T − ln L̃_S − ln d1)/f1)
/// + γ′ · LSE(a′ − α′ ln N_S, b′ − β′ ln D_S)).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[allow(non_snake_case)]
pub struct DistillLaw {
    /// A′.
    pub A: f64,
    /// B′.
    pub B: f64,
    /// α′.
    pub alpha: f64,
    /// β′.
    pub beta: f64,
    /// γ′.
    pub gamma: f64,
    /// Exponent of L_T.
    pub c0: f64,
    /// Strength of the capacity-gap transition.
    pub c1: f64,
    /// Width of the transition.
    pub f1: f64,
    /// Where the transition sits: L_T / L̃_S = d1.
    pub d1: f64,
}

impl DistillLaw {
    /// Busbridge et al. (2025), fitted on C4: `docs/src/science/laws.md`.
    pub const PUBLISHED: DistillLaw = DistillLaw {
        A: 2243.0,
        B: 24181.0,
        alpha: 0.321,
        beta: 0.637,
        gamma: 0.764,
        c0: 2.549,
        c1: 522.6,
        f1: 0.090,
        d1: 1.315,
    };

    /// The law from natural parameters in [`Law::NAMES`] order.
    pub fn from_natural(v: &[f64]) -> DistillLaw {
        DistillLaw {
            A: v[0],
            B: v[1],
            alpha: v[2],
            beta: v[3],
            gamma: v[4],
            c0: v[5],
            c1: v[6],
            f1: v[7],
            d1: v[8],
        }
    }

    /// L_S for a student of `n_s` parameters on `d_s` tokens, taught by a teacher of loss
    /// `teacher_loss`, where the supervised law gives `supervised_loss` (L̃_S) for the student.
    pub fn predict(&self, n_s: f64, d_s: f64, teacher_loss: f64, supervised_loss: f64) -> f64 {
        let p = Point {
            ln_n: n_s.ln(),
            ln_d: d_s.ln(),
            ln_lt: teacher_loss.ln(),
            ln_lsup: supervised_loss.ln(),
            ln_loss: 0.0,
            w: 1.0,
        };
        let mut g = [0.0; MAX_THETA];
        Self::log_pred_grad(&self.theta(), &p, &mut g).exp()
    }
}

impl Law for DistillLaw {
    const KIND: LawKind = LawKind::Distill;
    const NAMES: &'static [&'static str] =
        &["A", "B", "alpha", "beta", "gamma", "c0", "c1", "f1", "d1"];
    const THETA_NAMES: &'static [&'static str] = &[
        "a", "b", "alpha", "beta", "gamma", "c0", "ln_c1", "ln_f1", "ln_d1",
    ];

    #[inline]
    fn log_pred_grad(t: &[f64], p: &Point, g: &mut [f64; MAX_THETA]) -> f64 {
        let (s, p1) = lse2(t[0] - t[2] * p.ln_n, t[1] - t[3] * p.ln_d);
        let p2 = 1.0 - p1;
        let (c1, f1) = (t[6].exp(), t[7].exp());
        let u = p.ln_lt - p.ln_lsup - t[8];
        let z = u / f1;
        let h = c1 * f1 * softplus(z);
        let sig = sigmoid(z);
        let inner = -t[5] * p.ln_lt - h + t[4] * s;
        let (v, qt) = lse2(p.ln_lt, inner);
        let q = 1.0 - qt;
        let k = q * t[4];
        g[0] = k * p1;
        g[1] = k * p2;
        g[2] = -k * p1 * p.ln_n;
        g[3] = -k * p2 * p.ln_d;
        g[4] = q * s;
        g[5] = -q * p.ln_lt;
        g[6] = -q * h;
        g[7] = q * (-h + c1 * u * sig);
        g[8] = q * c1 * sig;
        v
    }

    fn from_theta(t: &[f64]) -> Self {
        DistillLaw {
            A: t[0].exp(),
            B: t[1].exp(),
            alpha: t[2],
            beta: t[3],
            gamma: t[4],
            c0: t[5],
            c1: t[6].exp(),
            f1: t[7].exp(),
            d1: t[8].exp(),
        }
    }

    fn theta(&self) -> Vec<f64> {
        vec![
            self.A.ln(),
            self.B.ln(),
            self.alpha,
            self.beta,
            self.gamma,
            self.c0,
            self.c1.ln(),
            self.f1.ln(),
            self.d1.ln(),
        ]
    }

    fn natural(&self) -> Vec<f64> {
        vec![
            self.A, self.B, self.alpha, self.beta, self.gamma, self.c0, self.c1, self.f1, self.d1,
        ]
    }

    /// A coarse grid (1,728 starts): a′, b′ ∈ {0, 5, 10}; α′, β′ ∈ {0.25, 0.75}; γ′ ∈ {0.5, 1};
    /// c0 ∈ {0, 2}; ln c1 ∈ {0, 3, 6}; ln f1 ∈ {−2.5, −1}; ln d1 ∈ {0, 0.3}.
    fn default_grid() -> StartGrid {
        StartGrid::new(
            Self::THETA_NAMES,
            vec![
                vec![0.0, 5.0, 10.0],
                vec![0.0, 5.0, 10.0],
                vec![0.25, 0.75],
                vec![0.25, 0.75],
                vec![0.5, 1.0],
                vec![0.0, 2.0],
                vec![0.0, 3.0, 6.0],
                vec![-2.5, -1.0],
                vec![0.0, 0.3],
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(n: f64, d: f64, lt: f64, lsup: f64) -> Point {
        Point {
            ln_n: n.ln(),
            ln_d: d.ln(),
            ln_lt: lt.ln(),
            ln_lsup: lsup.ln(),
            ln_loss: 0.0,
            w: 1.0,
        }
    }

    /// The analytic ∂ log L̂/∂θ of each law matches central finite differences.
    fn check_gradient<L: Law>(theta: &[f64], p: &Point) {
        let mut g = [0.0; MAX_THETA];
        L::log_pred_grad(theta, p, &mut g);
        for i in 0..theta.len() {
            let h = 1e-6 * theta[i].abs().max(1.0);
            let (mut up, mut down) = (theta.to_vec(), theta.to_vec());
            up[i] += h;
            down[i] -= h;
            let mut scratch = [0.0; MAX_THETA];
            let fd = (L::log_pred_grad(&up, p, &mut scratch)
                - L::log_pred_grad(&down, p, &mut scratch))
                / (2.0 * h);
            assert!(
                (fd - g[i]).abs() < 1e-6 * (1.0 + fd.abs()),
                "{:?} θ[{i}] ({}): analytic {} vs finite difference {fd}",
                L::KIND,
                L::THETA_NAMES[i],
                g[i]
            );
        }
    }

    #[test]
    fn gradients_match_finite_differences() {
        let p = point(3e8, 6e9, 2.4, 2.7);
        check_gradient::<Chinchilla>(&[6.0, 7.5, 0.6, 0.35, 0.37], &p);
        check_gradient::<Busbridge>(&Busbridge::PUBLISHED.theta(), &p);
        check_gradient::<Busbridge>(&[1.0, 2.0, -0.5, 0.1, 0.2, 1.3], &p);
        check_gradient::<DistillLaw>(&DistillLaw::PUBLISHED.theta(), &p);
        // Both sides of the transition, and a wide one.
        check_gradient::<DistillLaw>(&DistillLaw::PUBLISHED.theta(), &point(1e8, 2e9, 3.6, 2.7));
        check_gradient::<DistillLaw>(
            &[5.0, 6.0, 0.3, 0.5, 0.8, 1.0, 1.0, -0.5, 0.2],
            &point(1e8, 2e9, 3.0, 2.7),
        );
    }

    #[test]
    fn log_space_matches_natural_predictions() {
        let c = Chinchilla {
            E: 1.82,
            A: 482.0,
            B: 2085.4,
            alpha: 0.3478,
            beta: 0.3658,
        };
        let p = point(1e9, 2e10, 1.0, 1.0);
        let mut g = [0.0; MAX_THETA];
        let lhs = Chinchilla::log_pred_grad(&c.theta(), &p, &mut g).exp();
        assert!((lhs - c.predict(1e9, 2e10)).abs() < 1e-12);
        let b = Busbridge::PUBLISHED;
        let lhs = Busbridge::log_pred_grad(&b.theta(), &p, &mut g).exp();
        assert!((lhs - b.predict(1e9, 2e10)).abs() < 1e-12);
        // The distillation law written out directly (Eq. 8).
        let d = DistillLaw::PUBLISHED;
        let (n, dd, lt): (f64, f64, f64) = (5e8, 1e10, 2.5);
        let lsup = b.predict(n, dd);
        let direct = lt
            + lt.powf(-d.c0)
                * (1.0 + (lt / (lsup * d.d1)).powf(1.0 / d.f1)).powf(-d.c1 * d.f1)
                * (d.A / n.powf(d.alpha) + d.B / dd.powf(d.beta)).powf(d.gamma);
        assert!((d.predict(n, dd, lt, lsup) - direct).abs() < 1e-12 * direct);
    }
}
