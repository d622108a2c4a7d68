//! The priors of `plan`'s design checks: T*(S) and a supervised law from the sweep's own
//! stored fits when it has them (`pdsweep fit`), else the published T* ≈ 2.5·S and no loss law.

use pdsweep::fit::stored_fits;
use pdsweep::plan::{LossPrior, Priors, TStarPrior};
use pdsweep::store::SweepDb;

/// The priors for a sweep whose database is `db` (if it exists yet).
pub fn priors(db: Option<&SweepDb>) -> Priors {
    let mut priors = Priors::default();
    let Some(fits) = db.and_then(|db| stored_fits(db).ok()) else {
        return priors;
    };
    let number = |v: &serde_json::Value, key: &str| v.get(key).and_then(|x| x.as_f64());
    for fit in &fits {
        match (fit.scope.as_str(), fit.law.as_str()) {
            ("tstar", _) => {
                let power = fit.params.get("power").and_then(|p| p.as_array());
                if let Some([c, k]) = power
                    .map(|p| p.iter().filter_map(|x| x.as_f64()).collect::<Vec<_>>())
                    .as_deref()
                    && c.is_finite()
                    && *c > 0.0
                {
                    priors.tstar = TStarPrior::Power {
                        c: *c,
                        k: *k,
                        source: format!("this sweep's fitted T* = {c:.3}·S^{k:.2}"),
                    };
                }
            }
            ("supervised", "chinchilla") => {
                let p = &fit.params;
                if let (Some(e), Some(a), Some(b), Some(alpha), Some(beta)) = (
                    number(p, "E"),
                    number(p, "A"),
                    number(p, "B"),
                    number(p, "alpha"),
                    number(p, "beta"),
                ) {
                    priors.loss = Some(LossPrior {
                        params: [e, a, b, alpha, beta],
                        source: "this sweep's fitted supervised law".into(),
                    });
                }
            }
            _ => {}
        }
    }
    priors
}
