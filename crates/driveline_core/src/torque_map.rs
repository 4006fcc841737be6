//! The engine torque map: crankshaft torque over throttle and engine speed.
//!
//! # The law
//! A map holds rows of torque (N m) at increasing throttle positions `theta_k` in `[0, 1]`,
//! each over the same increasing engine speeds `n_j` (rpm). The torque is bilinear in
//! `(theta, n)`:
//!
//! ```text
//! T(theta, n) = lerp_theta( lerp_n(row_k), lerp_n(row_k+1) )
//! ```
//!
//! The row at `theta = 0` is the closed-throttle (motoring) curve: it is negative and *is* the
//! engine's friction and pumping loss, so engine braking comes out of the map and nothing else.
//! The common two-row form (full load and closed throttle) is Project Chrono's simple map engine,
//! `T = (1 - theta) T_closed(n) + theta T_full(n)`.
//!
//! Below the lowest map speed the torque falls linearly to 0 at 0 rpm, and it is 0 for a shaft
//! turning backwards: an engine at rest neither drives nor pulls. A map whose lowest speed is
//! 0 rpm ramps its torque in linearly over the first [`ZERO_RPM_RAMP`] (10 rpm, or half the
//! first segment if that is shorter), so that the torque is continuous through standstill
//! too: a jump there (the race car's full-load row starts at 104.6 N m at 0 rpm) kept Newton
//! cycling around a stalled engine. Above the highest speed the last value is held (maps end
//! with their cut-off point).

use serde::{Deserialize, Serialize};

/// rad/s per rpm.
pub const RPM: f64 = std::f64::consts::PI / 30.0;

/// The speed over which a map whose lowest speed is 0 rpm ramps its torque in from zero at
/// standstill, rad/s (10 rpm).
pub const ZERO_RPM_RAMP: f64 = 10.0 * RPM;

/// A torque map over throttle and engine speed. Build it with [`TorqueMap::full_and_closed`] or
/// [`TorqueMap::table`]; files describe it with [`TorqueMapSpec`]. A map never changes once
/// built, and a clone shares its tables (the engine's law and the transmission controller's
/// copy of it).
#[derive(Debug, Clone, PartialEq)]
pub struct TorqueMap {
    throttle: std::sync::Arc<[f64]>,
    /// Speeds in rad/s.
    speed: std::sync::Arc<[f64]>,
    /// Row-major `throttle.len() x speed.len()`, N m.
    torque: std::sync::Arc<[f64]>,
    /// Slopes over speed, N m s/rad, laid out as `torque`: entry `j >= 1` of a row is its
    /// segment `j - 1 .. j`'s, entry 0 the line from the origin to the first point (formed
    /// once: a lookup multiplies where it would divide, the same quotient bit for bit).
    slope: std::sync::Arc<[f64]>,
    /// For a map whose lowest speed is 0 rpm, the speed below which its torque ramps in from
    /// zero at standstill, rad/s ([`ZERO_RPM_RAMP`]); 0 for the others.
    ramp: f64,
}

/// How a file writes a torque map (speeds in rpm, torques in N m).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum TorqueMapSpec {
    /// Full-load and closed-throttle curves over the same speeds, blended linearly in throttle.
    FullAndClosed {
        /// Engine speeds, rpm, strictly increasing, >= 0.
        rpm: Vec<f64>,
        /// Wide-open-throttle torque at each speed, N m.
        full: Vec<f64>,
        /// Closed-throttle (motoring) torque at each speed, N m, <= 0.
        closed: Vec<f64>,
    },
    /// A full table: one torque row per throttle position.
    Table {
        /// Throttle positions, strictly increasing, from 0 to 1.
        throttle: Vec<f64>,
        /// Engine speeds, rpm, strictly increasing, >= 0.
        rpm: Vec<f64>,
        /// `torque[k][j]` at `throttle[k]` and `rpm[j]`, N m.
        torque: Vec<Vec<f64>>,
    },
}

impl TorqueMapSpec {
    /// Checks and converts to a [`TorqueMap`]; the message says what is wrong and what is allowed.
    pub fn build(&self) -> Result<TorqueMap, String> {
        match self {
            TorqueMapSpec::FullAndClosed { rpm, full, closed } => {
                if full.len() != rpm.len() || closed.len() != rpm.len() {
                    return Err(format!(
                        "`full` has {} and `closed` {} values for {} speeds in `rpm`; give one torque per speed",
                        full.len(),
                        closed.len(),
                        rpm.len()
                    ));
                }
                if let Some(j) = closed.iter().position(|&t| t > 0.0) {
                    return Err(format!(
                        "`closed`[{j}] is {} N m; the closed-throttle torque is the engine's friction and must be <= 0",
                        closed[j]
                    ));
                }
                TorqueMap::table(vec![0.0, 1.0], rpm.clone(), vec![closed.clone(), full.clone()])
            }
            TorqueMapSpec::Table { throttle, rpm, torque } => {
                TorqueMap::table(throttle.clone(), rpm.clone(), torque.clone())
            }
        }
    }
}

impl TorqueMap {
    /// The two-row map of full-load and closed-throttle curves over `rpm`.
    pub fn full_and_closed(rpm: &[f64], full: &[f64], closed: &[f64]) -> Result<Self, String> {
        TorqueMapSpec::FullAndClosed { rpm: rpm.to_vec(), full: full.to_vec(), closed: closed.to_vec() }.build()
    }

    /// A map from throttle rows over engine speeds in rpm.
    pub fn table(throttle: Vec<f64>, rpm: Vec<f64>, rows: Vec<Vec<f64>>) -> Result<Self, String> {
        if throttle.len() < 2 {
            return Err("`throttle` needs at least two positions, 0 and 1".into());
        }
        if throttle[0] != 0.0 || throttle[throttle.len() - 1] != 1.0 {
            return Err(format!(
                "`throttle` must run from 0 to 1, not from {} to {}",
                throttle[0],
                throttle[throttle.len() - 1]
            ));
        }
        increasing("throttle", &throttle)?;
        if rpm.is_empty() {
            return Err("`rpm` is empty; give the speeds of the map".into());
        }
        increasing("rpm", &rpm)?;
        if rpm[0] < 0.0 {
            return Err(format!("`rpm` starts at {}; speeds must be >= 0 rpm", rpm[0]));
        }
        if rpm[rpm.len() - 1] > 1e5 {
            return Err(format!(
                "`rpm` ends at {}; speeds must be <= 1e5 rpm (the plausible range)",
                rpm[rpm.len() - 1]
            ));
        }
        if rows.len() != throttle.len() {
            return Err(format!(
                "{} torque rows for {} throttle positions; give one row each",
                rows.len(),
                throttle.len()
            ));
        }
        let mut torque = Vec::with_capacity(rows.len() * rpm.len());
        for (k, row) in rows.iter().enumerate() {
            if row.len() != rpm.len() {
                return Err(format!("torque row {k} has {} values for {} speeds", row.len(), rpm.len()));
            }
            if let Some(j) = row.iter().position(|t| !t.is_finite()) {
                return Err(format!("torque row {k} value {j} is {}; torques must be finite", row[j]));
            }
            if let Some(j) = row.iter().position(|t| t.abs() > 1e5) {
                return Err(format!(
                    "torque row {k} value {j} is {} N m; it must be within +-1e5 N m (the plausible range)",
                    row[j]
                ));
            }
            torque.extend_from_slice(row);
        }
        let speed: Vec<f64> = rpm.iter().map(|n| n * RPM).collect();
        let ns = speed.len();
        let mut slope = Vec::with_capacity(torque.len());
        for r in torque.chunks_exact(ns) {
            slope.push(if speed[0] > 0.0 { r[0] / speed[0] } else { 0.0 });
            for j in 1..ns {
                slope.push((r[j] - r[j - 1]) / (speed[j] - speed[j - 1]));
            }
        }
        let ramp = match speed[..] {
            [0.0] => ZERO_RPM_RAMP,
            [0.0, second, ..] => ZERO_RPM_RAMP.min(0.5 * second),
            _ => 0.0,
        };
        Ok(Self { throttle: throttle.into(), speed: speed.into(), torque: torque.into(), slope: slope.into(), ramp })
    }

    /// Lowest and highest map speed, rad/s.
    pub fn speed_range(&self) -> (f64, f64) {
        (self.speed[0], self.speed[self.speed.len() - 1])
    }

    /// Torque (N m) and its slope `dT/dw` (N m s/rad) at throttle `theta` (clamped to [0, 1]) and
    /// engine speed `w` (rad/s).
    #[inline]
    pub fn eval(&self, theta: f64, w: f64) -> (f64, f64) {
        if w <= 0.0 || theta.is_nan() {
            return (0.0, 0.0);
        }
        let theta = theta.clamp(0.0, 1.0);
        let nt = self.throttle.len();
        let mut k = 1;
        while k < nt - 1 && self.throttle[k] < theta {
            k += 1;
        }
        let s = (theta - self.throttle[k - 1]) / (self.throttle[k] - self.throttle[k - 1]);
        // Both throttle rows share the speed axis: one search serves both.
        let sp = &self.speed;
        let ns = sp.len();
        let (r0, r1) = self.torque[(k - 1) * ns..(k + 1) * ns].split_at(ns);
        let (m0, m1) = self.slope[(k - 1) * ns..(k + 1) * ns].split_at(ns);
        let ((t0, d0), (t1, d1)) = if w <= sp[0] {
            // Linear from (0, 0) to the first point.
            if sp[0] > 0.0 {
                ((r0[0] * w / sp[0], m0[0]), (r1[0] * w / sp[0], m1[0]))
            } else {
                ((r0[0], 0.0), (r1[0], 0.0))
            }
        } else if w >= sp[ns - 1] {
            ((r0[ns - 1], 0.0), (r1[ns - 1], 0.0))
        } else {
            // The first point at or above w (`1 <= j < ns`).
            let mut j = 1;
            while sp[j] < w {
                j += 1;
            }
            let dw = w - sp[j - 1];
            ((r0[j - 1] + m0[j] * dw, m0[j]), (r1[j - 1] + m1[j] * dw, m1[j]))
        };
        let (t, d) = (t0 + s * (t1 - t0), d0 + s * (d1 - d0));
        if w < self.ramp {
            // (A map from 0 rpm: the torque ramps in from zero at standstill.)
            let f = w / self.ramp;
            return (t * f, d * f + t / self.ramp);
        }
        (t, d)
    }

    /// Largest full-load torque over the map's speeds, N m.
    pub fn peak_full_load(&self) -> f64 {
        let top = (self.throttle.len() - 1) * self.speed.len();
        self.torque[top..].iter().copied().fold(f64::NEG_INFINITY, f64::max)
    }

    /// Torque at full throttle (the full-load curve), N m.
    pub fn full_load(&self, w: f64) -> f64 {
        self.eval(1.0, w).0
    }
}

fn increasing(name: &str, v: &[f64]) -> Result<(), String> {
    for (i, x) in v.iter().enumerate() {
        if !x.is_finite() {
            return Err(format!("`{name}`[{i}] is {x}; values must be finite"));
        }
        if i > 0 && *x <= v[i - 1] {
            return Err(format!("`{name}` must increase strictly; entry {i} is {x} after {}", v[i - 1]));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saturn() -> TorqueMap {
        // engines.md 1.2 (NREL ADVISOR FC_SI95), three points.
        TorqueMap::full_and_closed(&[1000.0, 2000.0, 3000.0], &[134.2, 158.3, 162.2], &[-17.0, -37.0, -61.0]).unwrap()
    }

    #[test]
    fn blends_linearly_in_throttle() {
        let m = saturn();
        let w = 2000.0 * RPM;
        assert_eq!(m.eval(1.0, w).0, 158.3);
        assert_eq!(m.eval(0.0, w).0, -37.0);
        assert!((m.eval(0.25, w).0 - (0.75 * -37.0 + 0.25 * 158.3)).abs() < 1e-12);
    }

    #[test]
    fn interpolates_in_speed_with_slope() {
        let m = saturn();
        let (t, d) = m.eval(1.0, 1500.0 * RPM);
        assert!((t - 146.25).abs() < 1e-9);
        assert!((d - (158.3 - 134.2) / (1000.0 * RPM)).abs() < 1e-12);
    }

    /// A map whose lowest speed is 0 rpm (the race car's) is continuous through standstill:
    /// its torque ramps in over the first 10 rpm, with the slope of that ramp, and is the map's
    /// own from there.
    #[test]
    fn a_map_from_zero_rpm_ramps_its_torque_in_at_standstill() {
        let m =
            TorqueMap::full_and_closed(&[0.0, 992.0, 1433.0], &[104.6, 269.0, 359.9], &[-1.0, -10.0, -10.0]).unwrap();
        for theta in [0.0, 0.5, 1.0] {
            // (The torque within 1e-9 rad/s of standstill is within 1e-7 N m of zero.)
            assert!(m.eval(theta, 1e-9).0.abs() < 1e-6, "{theta}");
            let (t, d) = m.eval(theta, 0.5 * ZERO_RPM_RAMP);
            let h = 1e-7;
            let fd = (m.eval(theta, 0.5 * ZERO_RPM_RAMP + h).0 - m.eval(theta, 0.5 * ZERO_RPM_RAMP - h).0) / (2.0 * h);
            // (A central difference of a quadratic is exact to rounding: 1e-6 of 100 N m s/rad.)
            assert!((d - fd).abs() < 1e-6 * d.abs().max(1.0), "{theta}: {d} vs {fd}");
            let full = |w: f64| {
                let f = w / (992.0 * RPM);
                let (c, u) = (-1.0 + (-10.0 + 1.0) * f, 104.6 + (269.0 - 104.6) * f);
                (1.0 - theta) * c + theta * u
            };
            assert!((t - 0.5 * full(0.5 * ZERO_RPM_RAMP)).abs() < 1e-9, "{theta}: {t}");
            let w = 2.0 * ZERO_RPM_RAMP;
            assert!((m.eval(theta, w).0 - full(w)).abs() < 1e-9, "{theta}");
        }
    }

    #[test]
    fn zero_at_rest_and_backwards_linear_below_the_map() {
        let m = saturn();
        assert_eq!(m.eval(1.0, 0.0).0, 0.0);
        assert_eq!(m.eval(0.0, -5.0).0, 0.0);
        assert!((m.eval(0.0, 500.0 * RPM).0 + 8.5).abs() < 1e-12);
    }

    #[test]
    fn rejects_positive_closed_throttle_and_ragged_rows() {
        assert!(TorqueMap::full_and_closed(&[1000.0], &[100.0], &[5.0]).unwrap_err().contains("<= 0"));
        assert!(TorqueMap::full_and_closed(&[1000.0, 2000.0], &[100.0], &[0.0, 0.0]).is_err());
        assert!(TorqueMap::table(vec![0.0, 0.5], vec![1000.0], vec![vec![0.0], vec![1.0]]).is_err());
    }
}
