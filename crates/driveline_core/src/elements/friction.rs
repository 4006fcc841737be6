//! Friction laws: clutches, brakes, one-way clutches, bearing friction, lossy gears, limited-slip
//! packs and tyres, as rows with torque limits the solver locks or lets slide.

use super::*;

/// The friction characteristic of a Clutch, Brake or BearingFriction (MSL section 2).
#[derive(Debug, Clone, PartialEq)]
pub enum FrictionLaw {
    /// Clutch and Brake: `tau = cgeo fn_max u mu(|w|)`, free when `u <= 0`.
    Normal {
        /// mu over slip speed.
        mu: Table1D,
        /// Static / kinetic ratio.
        peak: f64,
        /// Geometry factor, m.
        cgeo: f64,
        /// Maximum normal force, N.
        fn_max: f64,
        /// Index of the normalised force signal.
        signal: usize,
    },
    /// OneWayClutch (MSL): a freewheel in parallel with a clutch. `w_rel >= 0` overruns; the
    /// element takes whatever torque prevents `w_rel < 0`, and releases forward above
    /// `max(peak, 1 + 1e-4) tau0` when engaged, or above the tiny `1e-4 mu(0) cgeo fn_max` when not.
    /// While overrunning it transmits `cgeo fn mu(w_rel)`.
    OneWay {
        /// mu over slip speed.
        mu: Table1D,
        /// Static / kinetic ratio.
        peak: f64,
        /// Geometry factor, m.
        cgeo: f64,
        /// Maximum normal force, N.
        fn_max: f64,
        /// Index of the normalised force signal.
        signal: usize,
    },
    /// LossyGear (MSL): the friction row is `w_a - w_s`; the loss torque is bounded by the
    /// four-quadrant law at standstill and follows it while rolling. Both depend on the gear's
    /// transmitted torque `tau_a`, so the solver treats this law specially (see [`LossTable`]).
    Lossy {
        /// Loss table.
        table: LossTable,
        /// Index of the gear's permanent kinematic row.
        gear_row: usize,
    },
    /// Longitudinal tyre (see [`crate::tyre`]): the row is the slip velocity `R w - v`, the
    /// "torque" the longitudinal force. Sticks up to the peak `D F_z`, slides on the falling
    /// Magic Formula branch beyond it. Free when the load `F_z <= 0` (wheel in the air).
    Tyre {
        /// Magic Formula coefficients.
        mf: MagicFormula,
        /// Slip ratio at the peak.
        kappa_peak: f64,
        /// Lower bound of the slip-ratio denominator, m/s.
        v_low: f64,
        /// Index of the normal-load signal `F_z`, N.
        load: usize,
        /// Node whose speed is the ground speed `v` under the wheel.
        ground: usize,
    },
    /// Clutch-pack limited-slip differential: the pack's torque limit is half the locking
    /// torque `L = preload + ramp |T_in|` (the largest difference between the two output
    /// torques), where `T_in = sum c_j lambda_j` is the differential's input torque from the
    /// constraint torques of permanent rows, and the ramp is `power` while `T_in` drives the
    /// carrier forward (`T_in >= 0`: the ramps' drive flanks bear), `coast` otherwise. Like the
    /// LossyGear the limit depends on the solution, so the solver resolves it with the coupled
    /// solve (see [`FrictionLaw::ramp_limit`]).
    Ramp {
        /// Preload torque, N m.
        preload: f64,
        /// Locking torque per input torque on power.
        power: f64,
        /// Locking torque per input torque on coast.
        coast: f64,
        /// `(row, c)` pairs: `T_in = sum c lambda_row`; unused entries have `c = 0`.
        input: [(usize, f64); 2],
    },
    /// BearingFriction: `tau = tau_pos(|w|)`, never free.
    Bearing {
        /// Friction torque over speed, N m.
        tau_pos: Table1D,
        /// Static / kinetic ratio.
        peak: f64,
    },
}

/// The four-quadrant loss law of a LossyGear (MSL section 4), rows
/// `[|w_a|, eta_mf1, eta_mf2, tau_bf1, tau_bf2]` interpolated linearly in `|w_a|`.
#[derive(Debug, Clone, PartialEq)]
pub struct LossTable {
    /// The rows.
    pub rows: Vec<[f64; 5]>,
    /// Gear ratio `phi_a / phi_b`.
    pub ratio: f64,
}

/// Loss coefficients at one speed: `tauLoss = k tau_a + c` in the quadrant in force.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossQuadrants {
    /// `eta_mf1`, `eta_mf2`, `tau_bf1`, `tau_bf2`.
    pub eta1: f64,
    /// See `eta1`.
    pub eta2: f64,
    /// See `eta1`.
    pub bf1: f64,
    /// See `eta1`.
    pub bf2: f64,
}

impl LossQuadrants {
    /// Bearing friction share on side a: `(tau_bf1 - tau_bf2) / (eta1 - 1/eta2)`, or `tau_bf1/2`
    /// when both efficiencies are 1.
    pub fn bf_a(&self) -> f64 {
        if self.eta1 == 1.0 && self.eta2 == 1.0 {
            self.bf1 / 2.0
        } else {
            (self.bf1 - self.bf2) / (self.eta1 - 1.0 / self.eta2)
        }
    }
    /// `(k, c)` of quadrant 1..4 (Q1 a drives forward, Q2 b drives forward, Q3 a drives
    /// backward, Q4 b drives backward).
    pub fn coefficients(&self, q: u8) -> (f64, f64) {
        match q {
            1 => (1.0 - self.eta1, self.bf1),
            2 => (1.0 - 1.0 / self.eta2, self.bf2),
            3 => (1.0 - self.eta1, -self.bf1),
            _ => (1.0 - 1.0 / self.eta2, -self.bf2),
        }
    }
    /// Loss torque of quadrant `q` at transmitted torque `tau_a`.
    pub fn loss(&self, q: u8, tau_a: f64) -> f64 {
        let (k, c) = self.coefficients(q);
        k * tau_a + c
    }
    /// Quadrant while rolling in direction `dir` (+1 forward, -1 backward) at `tau_a`.
    pub fn quadrant(&self, dir: f64, tau_a: f64) -> u8 {
        if dir >= 0.0 {
            if tau_a - self.bf_a() >= 0.0 { 1 } else { 2 }
        } else if tau_a + self.bf_a() >= 0.0 {
            4
        } else {
            3
        }
    }
    /// Loss range `[tauLossMin_m, tauLossMax_p]` at standstill for transmitted torque `tau_a`.
    pub fn standstill_bounds(&self, tau_a: f64) -> (f64, f64) {
        let bfa = self.bf_a();
        let max_p = if tau_a - bfa > 0.0 { self.loss(1, tau_a) } else { self.loss(2, tau_a) };
        let min_m = if tau_a + bfa > 0.0 { self.loss(4, tau_a) } else { self.loss(3, tau_a) };
        (min_m, max_p)
    }
}

impl LossTable {
    /// Coefficients at speed `|w_a|`.
    pub fn at(&self, w_abs: f64) -> LossQuadrants {
        let r = &self.rows;
        let pick = |row: &[f64; 5]| LossQuadrants { eta1: row[1], eta2: row[2], bf1: row[3].abs(), bf2: row[4].abs() };
        if r.len() == 1 || w_abs <= r[0][0] {
            return pick(&r[0]);
        }
        for k in 1..r.len() {
            if w_abs <= r[k][0] {
                let s = (w_abs - r[k - 1][0]) / (r[k][0] - r[k - 1][0]);
                let mut row = [0.0; 5];
                for j in 0..5 {
                    row[j] = r[k - 1][j] + s * (r[k][j] - r[k - 1][j]);
                }
                return pick(&row);
            }
        }
        pick(&r[r.len() - 1])
    }
    /// True when every row is lossless (the gear is ideal; its mode stays Free).
    pub fn is_ideal(&self) -> bool {
        self.rows.iter().all(|r| r[1] == 1.0 && r[2] == 1.0 && r[3] == 0.0 && r[4] == 0.0)
    }
}

/// Torque limits of a friction element at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    /// No normal force: carries no torque.
    pub free: bool,
    /// Kinetic level at zero slip, N m (`tau0`).
    pub tau0: f64,
    /// Static (break-away) limit, N m (`peak tau0`).
    pub tau_max: f64,
    /// One-way element: the stuck torque is bounded only in the release direction
    /// (`tau <= tau_max`), any torque holding `w_rel >= 0` is available.
    pub one_way: bool,
}

impl Capacity {
    /// How far a stuck element's torque `-lam_own` is past this limit, `(excess, limit)`
    /// (see [`FrictionLaw::hold_excess`]; a one-way element only releases forwards).
    #[inline]
    pub fn excess(&self, lam_own: f64) -> (f64, f64) {
        if self.one_way {
            (-lam_own - self.tau_max, self.tau_max)
        } else {
            (lam_own.abs() - self.tau_max, self.tau_max)
        }
    }
}

/// A friction law's [`FrictionLaw::capacity`] as a function of the signals alone, its tables
/// read once: [`CapacityForm::eval`] gives the same values bit for bit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CapacityForm {
    /// Clutch and Brake: `tau0 = (mu(0) cgeo) (fn_max u)`, free for `u <= 0` or NaN.
    Normal {
        /// Index of the normalised force signal.
        signal: usize,
        /// `mu(0) cgeo`, m.
        mu0_cgeo: f64,
        /// Maximum normal force, N.
        fn_max: f64,
        /// Static / kinetic ratio.
        peak: f64,
    },
    /// OneWayClutch: `tau0 = (mu(0) cgeo fn_max) u` while `u > 0`; see [`FrictionLaw::OneWay`].
    OneWay {
        /// Index of the normalised force signal.
        signal: usize,
        /// `mu(0) cgeo fn_max`, N m.
        tau_full: f64,
        /// `max(peak, 1 + eps0)`.
        peak: f64,
        /// The release limit without a normal force, `eps0 mu(0) cgeo fn_max`, N m.
        idle: f64,
    },
    /// Tyre: `tau0 = tau_max = D F_z`, free for `F_z <= 0` or NaN.
    Tyre {
        /// Index of the load signal.
        load: usize,
        /// The peak friction coefficient times the rolling radius, m.
        d: f64,
    },
    /// A capacity that reads no signal (BearingFriction; LossyGear and limited slip, whose
    /// solver-side limits are formed elsewhere).
    Constant(Capacity),
}

impl CapacityForm {
    /// The capacity at the signal values `sig`.
    #[inline(always)]
    pub fn eval(&self, sig: &[f64]) -> Capacity {
        match *self {
            CapacityForm::Normal { signal, mu0_cgeo, fn_max, peak } => {
                let u = sig[signal];
                let free = no_force(u);
                let fnn = if free { 0.0 } else { fn_max * u };
                let tau0 = mu0_cgeo * fnn;
                Capacity { free, tau0, tau_max: peak * tau0, one_way: false }
            }
            CapacityForm::OneWay { signal, tau_full, peak, idle } => {
                let u = sig[signal];
                let engaged = u > 0.0;
                let tau0 = if engaged { tau_full * u } else { 0.0 };
                let tau_max = if engaged { peak * tau0 } else { idle };
                Capacity { free: false, tau0, tau_max, one_way: true }
            }
            CapacityForm::Tyre { load, d } => {
                let fz = sig[load];
                let free = no_force(fz);
                let tau0 = if free { 0.0 } else { d * fz };
                Capacity { free, tau0, tau_max: tau0, one_way: false }
            }
            CapacityForm::Constant(cap) => cap,
        }
    }
}

/// MSL `OneWayClutch` constant `eps0`.
pub(super) const ONE_WAY_EPS: f64 = 1e-4;

impl FrictionLaw {
    /// Capacity given the signal values `sig`.
    #[inline]
    pub fn capacity(&self, sig: &[f64]) -> Capacity {
        self.capacity_form().eval(sig)
    }

    /// The capacity as a function of the signals ([`FrictionLaw::capacity`] is its value):
    /// the static limit `tau_max = peak tau0` over the kinetic level at zero slip `tau0`.
    #[inline(always)]
    pub fn capacity_form(&self) -> CapacityForm {
        match self {
            FrictionLaw::Normal { mu, peak, cgeo, fn_max, signal } => {
                CapacityForm::Normal { signal: *signal, mu0_cgeo: mu.eval(0.0) * cgeo, fn_max: *fn_max, peak: *peak }
            }
            FrictionLaw::OneWay { mu, peak, cgeo, fn_max, signal } => {
                let mu0 = mu.eval(0.0);
                CapacityForm::OneWay {
                    signal: *signal,
                    tau_full: mu0 * cgeo * fn_max,
                    peak: peak.max(1.0 + ONE_WAY_EPS),
                    idle: ONE_WAY_EPS * mu0 * cgeo * fn_max,
                }
            }
            FrictionLaw::Bearing { tau_pos, peak } => {
                let tau0 = tau_pos.eval(0.0);
                CapacityForm::Constant(Capacity { free: false, tau0, tau_max: peak * tau0, one_way: false })
            }
            FrictionLaw::Tyre { mf, load, .. } => CapacityForm::Tyre { load: *load, d: mf.d },
            // Bounds depend on tau_a; the solver uses `LossTable::standstill_bounds`.
            FrictionLaw::Lossy { .. } => {
                CapacityForm::Constant(Capacity { free: false, tau0: 0.0, tau_max: 0.0, one_way: false })
            }
            // The preload alone; the solver adds the ramp part (see `ramp_limit`).
            FrictionLaw::Ramp { preload, .. } => CapacityForm::Constant(Capacity {
                free: false,
                tau0: 0.5 * preload,
                tau_max: 0.5 * preload,
                one_way: false,
            }),
        }
    }

    /// Sliding torque magnitude and its derivative with respect to `|w_rel|`; `w` holds every
    /// node speed (the tyre reads its ground speed there).
    #[inline]
    pub fn kinetic(&self, sig: &[f64], w_abs: f64, w: &[f64]) -> (f64, f64) {
        self.kinetic_in::<true>(sig, w_abs, w)
    }

    /// The torque of [`FrictionLaw::kinetic`] alone, as a force evaluation needs it: the same
    /// value, bit for bit, without the work of the slope (a tyre's division and cosine).
    #[inline]
    pub fn kinetic_torque(&self, sig: &[f64], w_abs: f64, w: &[f64]) -> f64 {
        self.kinetic_in::<false>(sig, w_abs, w).0
    }

    /// [`FrictionLaw::kinetic`] with the slope formed (`SLOPE`) or left at zero.
    #[inline(always)]
    fn kinetic_in<const SLOPE: bool>(&self, sig: &[f64], w_abs: f64, w: &[f64]) -> (f64, f64) {
        match self {
            FrictionLaw::Normal { mu, cgeo, fn_max, signal, .. }
            | FrictionLaw::OneWay { mu, cgeo, fn_max, signal, .. } => {
                normal_kinetic(mu, *cgeo, *fn_max, sig[*signal], w_abs)
            }
            FrictionLaw::Bearing { tau_pos, .. } => tau_pos.eval_with_slope(w_abs),
            FrictionLaw::Tyre { mf, kappa_peak, v_low, load, ground } => {
                let fz = sig[*load];
                if no_force(fz) {
                    return (0.0, 0.0);
                }
                let den = w[*ground].abs().max(*v_low);
                let (f, df) = mf.eval_in::<SLOPE>(kappa_peak + w_abs / den);
                (fz * f, if SLOPE { fz * df / den } else { 0.0 })
            }
            // Applied by the solver's lossy-gear correction, not as a fixed kinetic torque.
            FrictionLaw::Lossy { .. } | FrictionLaw::Ramp { .. } => (0.0, 0.0),
        }
    }

    /// [`FrictionLaw::kinetic`]'s torque of a time-only law ([`FrictionLaw::is_time_only`]),
    /// which reads neither the slip speed nor the node speeds, as a form of the signals alone
    /// (its tables read once); `None` for other laws.
    pub fn time_only_kinetic(&self) -> Option<TimeOnlyKinetic> {
        match self {
            FrictionLaw::Normal { mu, cgeo, fn_max, signal, .. }
            | FrictionLaw::OneWay { mu, cgeo, fn_max, signal, .. }
                if mu.is_constant() =>
            {
                Some(TimeOnlyKinetic::Normal { signal: *signal, k: cgeo * fn_max, mu: mu.eval_with_slope(0.0).0 })
            }
            FrictionLaw::Bearing { tau_pos, .. } if tau_pos.is_constant() => {
                Some(TimeOnlyKinetic::Constant(tau_pos.eval_with_slope(0.0).0))
            }
            _ => None,
        }
    }

    /// The signal the static capacity ([`FrictionLaw::capacity`]) and the kinetic torque
    /// ([`FrictionLaw::kinetic`]) read, if any: equal values of it (and, for the kinetic
    /// torque, equal speeds) give equal results. Both are proportional to it while it is
    /// positive (Clutch, Brake and OneWayClutch: the normalised normal force; Tyre: the load
    /// `F_z`), so a step of it from `u0 > 0` to `u1` scales the kinetic torque at a given slip by
    /// `u1 / u0` exactly; the solver's stage predictor uses this to follow input steps.
    pub fn torque_signal(&self) -> Option<usize> {
        match self {
            FrictionLaw::Normal { signal, .. } | FrictionLaw::OneWay { signal, .. } => Some(*signal),
            FrictionLaw::Tyre { load, .. } => Some(*load),
            FrictionLaw::Bearing { .. } | FrictionLaw::Lossy { .. } | FrictionLaw::Ramp { .. } => None,
        }
    }

    /// Index of the normal-force signal of an element that can be free (Clutch, Brake).
    pub fn free_signal(&self) -> Option<usize> {
        match self {
            FrictionLaw::Normal { signal, .. } => Some(*signal),
            FrictionLaw::Tyre { load, .. } => Some(*load),
            FrictionLaw::OneWay { .. }
            | FrictionLaw::Bearing { .. }
            | FrictionLaw::Lossy { .. }
            | FrictionLaw::Ramp { .. } => None,
        }
    }

    /// True when the sliding torque reads the signals only: neither the slip speed, nor a
    /// ground speed, nor the constraint torques.
    pub fn is_time_only(&self) -> bool {
        self.time_only_kinetic().is_some()
    }

    /// True when the sliding torque does not depend on the slip speed.
    pub fn is_speed_independent(&self) -> bool {
        match self {
            FrictionLaw::Normal { mu, .. } | FrictionLaw::OneWay { mu, .. } => mu.is_constant(),
            FrictionLaw::Bearing { tau_pos, .. } => tau_pos.is_constant(),
            FrictionLaw::Lossy { table, .. } => table.rows.len() == 1,
            FrictionLaw::Tyre { .. } => false,
            FrictionLaw::Ramp { .. } => true,
        }
    }

    /// A limited-slip pack's torque limit `(preload + ramp |T_in|) / 2` at input torque `t_in`;
    /// `None` for other laws. The flank is the torque's, not the motion's: a ramp differential
    /// reversing under power bears on its coast flanks, and the limit is continuous through
    /// standstill (a flank chosen by the sign of `T_in w_carrier` jumped by
    /// `(power - coast) |T_in| / 2` as a creeping car's carrier speed crossed zero, and Newton's
    /// iterates cycled across the jump).
    #[inline]
    pub fn ramp_limit(&self, t_in: f64) -> Option<f64> {
        match *self {
            FrictionLaw::Ramp { preload, power, coast, .. } => {
                let ramp = if t_in >= 0.0 { power } else { coast };
                Some(0.5 * (preload + ramp * t_in.abs()))
            }
            _ => None,
        }
    }

    /// A limited-slip pack's input torque from the constraint torques `lam` of the permanent rows.
    #[inline]
    pub fn ramp_input(&self, lam: &[f64]) -> f64 {
        match self {
            FrictionLaw::Ramp { input, .. } => {
                input.iter().map(|&(r, c)| if c != 0.0 { c * lam[r] } else { 0.0 }).sum()
            }
            _ => 0.0,
        }
    }

    /// How far a stuck element's constraint torque is past its static limit, `(excess, limit)`:
    /// `excess > 0` means it breaks away. `lam_own` is the element's own row multiplier (the
    /// element torque is `-lam_own`), `lam` the multipliers of the permanent rows, `cap` the
    /// capacity at the same instant. LossyGear: `tauLoss = -lam_own` against
    /// its standstill range at the transmitted torque; limited slip: its ramp limit; a one-way
    /// element only releases forwards.
    #[inline]
    pub fn hold_excess(&self, cap: Capacity, lam_own: f64, lam: &[f64]) -> (f64, f64) {
        match self {
            FrictionLaw::Lossy { .. } | FrictionLaw::Ramp { .. } => self.torque_dependent_excess(lam_own, lam),
            _ => cap.excess(lam_own),
        }
    }

    /// [`FrictionLaw::hold_excess`] of the laws whose limits read constraint torques.
    #[inline(never)]
    fn torque_dependent_excess(&self, lam_own: f64, lam: &[f64]) -> (f64, f64) {
        match self {
            FrictionLaw::Lossy { table, gear_row } => {
                let tau_loss = -lam_own;
                let (lo, hi) = table.at(0.0).standstill_bounds(-lam_own - lam[*gear_row]);
                ((tau_loss - hi).max(lo - tau_loss), hi.abs().max(lo.abs()))
            }
            FrictionLaw::Ramp { .. } => {
                let limit = self.ramp_limit(self.ramp_input(lam)).unwrap_or(0.0);
                (lam_own.abs() - limit, limit)
            }
            _ => unreachable!("only LossyGear and limited-slip laws read constraint torques"),
        }
    }

    /// True for laws whose limits depend on constraint torques (LossyGear, limited slip).
    pub fn is_torque_dependent(&self) -> bool {
        matches!(self, FrictionLaw::Lossy { .. } | FrictionLaw::Ramp { .. })
    }
}

/// The kinetic torque of a time-only friction law ([`FrictionLaw::time_only_kinetic`]): the
/// same values as [`FrictionLaw::kinetic`] at any slip speed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimeOnlyKinetic {
    /// Clutch, Brake and OneWayClutch with a constant `mu`: `k u mu` for the normalised normal
    /// force `u = sig[signal] > 0` (`k = cgeo fn_max`, N m), none for `u <= 0` or NaN.
    Normal {
        /// Index of the normalised force signal.
        signal: usize,
        /// `cgeo fn_max`, N m.
        k: f64,
        /// The constant friction coefficient.
        mu: f64,
    },
    /// BearingFriction with a constant `tau_pos`, N m.
    Constant(f64),
}

impl TimeOnlyKinetic {
    /// The torque at the signal values `sig`, N m (as [`FrictionLaw::kinetic`] forms it, bit
    /// for bit).
    #[inline]
    pub fn eval(&self, sig: &[f64]) -> f64 {
        match *self {
            TimeOnlyKinetic::Normal { signal, k, mu } => scaled_kinetic(k, mu, sig[signal]),
            TimeOnlyKinetic::Constant(tau) => tau,
        }
    }

    /// [`TimeOnlyKinetic::eval`] at three samples (a sub-step's two stages and its end).
    #[inline]
    pub fn eval3(&self, sig: [&[f64]; 3]) -> [f64; 3] {
        match *self {
            TimeOnlyKinetic::Normal { signal, k, mu } => {
                let at = |sig: &[f64]| scaled_kinetic(k, mu, sig[signal]);
                [at(sig[0]), at(sig[1]), at(sig[2])]
            }
            TimeOnlyKinetic::Constant(tau) => [tau; 3],
        }
    }
}

/// True when a normal force (or a tyre load) `u` presses nothing: `u <= 0` or NaN. The
/// element is then free and carries no torque.
#[inline(always)]
pub(super) fn no_force(u: f64) -> bool {
    u.is_nan() || u <= 0.0
}

/// `k u mu` for a normalised normal force `u` ([`no_force`]: none), the sliding torque of a
/// clutch with `k = cgeo fn_max` at friction coefficient `mu` (its slope likewise, with the
/// slope of `mu`).
#[inline(always)]
pub(super) fn scaled_kinetic(k: f64, mu: f64, u: f64) -> f64 {
    if no_force(u) { 0.0 } else { k * u * mu }
}

/// The sliding torque of a Clutch, Brake or OneWayClutch and its slope in `|w_rel|`:
/// `cgeo fn_max u mu(|w_rel|)`, none for `u <= 0` (or NaN).
#[inline(always)]
pub(super) fn normal_kinetic(mu: &Table1D, cgeo: f64, fn_max: f64, u: f64, w_abs: f64) -> (f64, f64) {
    if no_force(u) {
        return (0.0, 0.0);
    }
    let (m, dm) = mu.eval_with_slope(w_abs);
    (scaled_kinetic(cgeo * fn_max, m, u), scaled_kinetic(cgeo * fn_max, dm, u))
}

/// Friction element as the solver sees it: a relative-speed row and a law.
#[derive(Debug, Clone, PartialEq)]
pub struct FrictionElement {
    /// Index of the element in the network's element list.
    pub element: usize,
    /// `w_relfric = row . w` (Clutch: w_b - w_a; Brake/Bearing: w_shaft - w_support).
    pub row: Row,
    /// The characteristic.
    pub law: FrictionLaw,
}
