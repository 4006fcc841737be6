//! Element laws: each element's constitutive equation lives here, in one place.
//!
//! The solver sees three things only: generalised forces on node coordinates (this module's
//! [`Law::eval`]), rigid constraint rows ([`Row`]), and friction rows with torque limits
//! ([`FrictionLaw`]). Node indices below `n_dof` are free coordinates; the rest are grounds.

use crate::Table1D;
use crate::converter::ConverterMap;
use crate::torque_map::TorqueMap;
use crate::tyre::MagicFormula;

/// A sparse rigid constraint row `sum coef_k * w[node_k] = 0` (also holds for angles).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// `(node, coefficient)` pairs, the non-zero ones first; unused entries are `(0, 0.0)`
    /// at the end ([`Row::new`] orders them so: [`Row::dot`] stops at the first zero).
    pub entries: [(usize, f64); 3],
}

impl Row {
    /// Row from up to three entries; entries on the same node are merged.
    pub fn new(items: &[(usize, f64)]) -> Self {
        let mut entries = [(0usize, 0.0f64); 3];
        let mut k = 0;
        for &(n, c) in items {
            if let Some(e) = entries[..k].iter_mut().find(|e| e.0 == n) {
                e.1 += c;
            } else {
                entries[k] = (n, c);
                k += 1;
            }
        }
        // Entries that merged to zero go to the end.
        let mut out = [(0usize, 0.0f64); 3];
        for (slot, e) in out.iter_mut().zip(entries.iter().filter(|e| e.1 != 0.0)) {
            *slot = *e;
        }
        Self { entries: out }
    }

    /// `sum coef * x[node]` over the non-zero coefficients, summed in order from -0.0 (an
    /// unused entry adds +0.0, as a zero term would).
    #[inline]
    pub fn dot(&self, x: &[f64]) -> f64 {
        let mut s = -0.0;
        for &(n, c) in &self.entries {
            if c == 0.0 {
                return s + 0.0;
            }
            s += c * x[n];
        }
        s
    }

    /// [`Row::dot`] of three vectors at once, each summed as `dot` sums it.
    #[inline]
    pub fn dot3(&self, x: [&[f64]; 3]) -> [f64; 3] {
        let mut s = [-0.0; 3];
        for &(n, c) in &self.entries {
            if c == 0.0 {
                return s.map(|s| s + 0.0);
            }
            for (s, x) in s.iter_mut().zip(x) {
                *s += c * x[n];
            }
        }
        s
    }

    /// Adds `scale * row^T` to the force vector `f`.
    #[inline]
    pub fn add_scaled(&self, f: &mut [f64], scale: f64) {
        for &(n, c) in &self.entries {
            if c == 0.0 {
                return;
            }
            f[n] += c * scale;
        }
    }
}

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
    /// carrier forward (`T_in w_carrier >= 0`), `coast` otherwise. Like the LossyGear the limit
    /// depends on the solution, so the solver resolves it with the coupled solve (see
    /// [`FrictionLaw::ramp_limit`]).
    Ramp {
        /// Preload torque, N m.
        preload: f64,
        /// Locking torque per input torque on power.
        power: f64,
        /// Locking torque per input torque on coast.
        coast: f64,
        /// `(row, c)` pairs: `T_in = sum c lambda_row`; unused entries have `c = 0`.
        input: [(usize, f64); 2],
        /// Node whose speed tells power from coast.
        carrier: usize,
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
const ONE_WAY_EPS: f64 = 1e-4;

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

    /// A limited-slip pack's torque limit `(preload + ramp |T_in|) / 2` at input torque `t_in`
    /// and carrier speed `w_carrier`; `None` for other laws.
    #[inline]
    pub fn ramp_limit(&self, t_in: f64, w_carrier: f64) -> Option<f64> {
        match *self {
            FrictionLaw::Ramp { preload, power, coast, .. } => {
                let ramp = if t_in * w_carrier >= 0.0 { power } else { coast };
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
    /// element torque is `-lam_own`), `lam` the multipliers of the permanent rows, `w` the node
    /// speeds, `cap` the capacity at the same instant. LossyGear: `tauLoss = -lam_own` against
    /// its standstill range at the transmitted torque; limited slip: its ramp limit; a one-way
    /// element only releases forwards.
    #[inline]
    pub fn hold_excess(&self, cap: Capacity, lam_own: f64, lam: &[f64], w: &[f64]) -> (f64, f64) {
        match self {
            FrictionLaw::Lossy { .. } | FrictionLaw::Ramp { .. } => self.torque_dependent_excess(lam_own, lam, w),
            _ => cap.excess(lam_own),
        }
    }

    /// [`FrictionLaw::hold_excess`] of the laws whose limits read constraint torques.
    #[inline(never)]
    fn torque_dependent_excess(&self, lam_own: f64, lam: &[f64], w: &[f64]) -> (f64, f64) {
        match self {
            FrictionLaw::Lossy { table, gear_row } => {
                let tau_loss = -lam_own;
                let (lo, hi) = table.at(0.0).standstill_bounds(-lam_own - lam[*gear_row]);
                ((tau_loss - hi).max(lo - tau_loss), hi.abs().max(lo.abs()))
            }
            FrictionLaw::Ramp { carrier, .. } => {
                let limit = self.ramp_limit(self.ramp_input(lam), w[*carrier]).unwrap_or(0.0);
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
fn no_force(u: f64) -> bool {
    u.is_nan() || u <= 0.0
}

/// `k u mu` for a normalised normal force `u` ([`no_force`]: none), the sliding torque of a
/// clutch with `k = cgeo fn_max` at friction coefficient `mu` (its slope likewise, with the
/// slope of `mu`).
#[inline(always)]
fn scaled_kinetic(k: f64, mu: f64, u: f64) -> f64 {
    if no_force(u) { 0.0 } else { k * u * mu }
}

/// The sliding torque of a Clutch, Brake or OneWayClutch and its slope in `|w_rel|`:
/// `cgeo fn_max u mu(|w_rel|)`, none for `u <= 0` (or NaN).
#[inline(always)]
fn normal_kinetic(mu: &Table1D, cgeo: f64, fn_max: f64, u: f64, w_abs: f64) -> (f64, f64) {
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

/// Force-producing element laws (elements that only add inertia or constraints have none).
#[derive(Debug, Clone, PartialEq)]
pub enum Law {
    /// Torque (or force) source from a signal: `+tau` on `flange`, `-tau` on `support`.
    Source {
        /// Driven node.
        flange: usize,
        /// Reaction node (a ground when `use_support = false`).
        support: usize,
        /// Signal index.
        signal: usize,
    },
    /// Quadratic speed-dependent torque or force: `k (w/w_nominal)^2`, optionally `sign(w)`.
    Quadratic {
        /// Driven node.
        flange: usize,
        /// Reaction node.
        support: usize,
        /// Torque (force) at the nominal speed.
        nominal: f64,
        /// Nominal speed.
        w_nominal: f64,
        /// True: direction independent of the sign of w.
        same_direction: bool,
    },
    /// Engine (see [`crate::torque_map`]): `tau = T(theta, w_flange - w_support)` from the torque
    /// map at the throttle signal `theta`, `+tau` on `flange`, `-tau` on `support`.
    Engine {
        /// Crankshaft node.
        flange: usize,
        /// Block node (a ground when the block is fixed).
        support: usize,
        /// The map.
        map: TorqueMap,
        /// Index of the effective throttle signal (after idle control, cuts and reductions).
        throttle: usize,
    },
    /// Torque converter (see [`crate::converter`]): the oil torques on `pump` and `turbine` at
    /// their speeds relative to `support`, which takes the stator reaction. The reported
    /// torque is the turbine torque; the element dissipates `-(T_p w_p + T_t w_t)`.
    Converter {
        /// Pump (impeller) node.
        pump: usize,
        /// Turbine node.
        turbine: usize,
        /// Housing node (a ground when the housing is fixed).
        support: usize,
        /// The map.
        map: ConverterMap,
    },
    /// Prescribed coupling torque from a signal between two flanges: `+tau` on `a`, `-tau` on
    /// `b` (the release ramp of a kinematic clutch). Dissipates `tau w_rel`.
    Coupling {
        /// a-side node.
        a: usize,
        /// b-side node.
        b: usize,
        /// Signal index.
        signal: usize,
    },
    /// Linear spring-damper `tau = c (phi_rel - phi_rel0) + d w_rel` (spring: d = 0, damper: c = 0).
    SpringDamper {
        /// a-side node.
        a: usize,
        /// b-side node.
        b: usize,
        /// Stiffness, N m/rad.
        c: f64,
        /// Damping, N m s/rad.
        d: f64,
        /// Unstretched angle, rad.
        phi_rel0: f64,
    },
    /// Unified elastic clutch (seed 002): a shear spring `S` and damper `D` in series with a
    /// torque limiter `T_s(t)`. Sticking: `tau = S (phi_rel - anchor) + D w_rel` while
    /// `|tau| <= T_s`; sliding: `tau = +-T_s` until the relative speed reverses, when it sticks
    /// again with the anchor placed so that the torque is continuous. `xi = tau / T_s`.
    ElasticClutch {
        /// a-side node.
        a: usize,
        /// b-side node.
        b: usize,
        /// Shear stiffness, N m/rad.
        s: f64,
        /// Shear damping, N m s/rad.
        d: f64,
        /// Index of the torque-limit signal `T_s`, N m.
        limit: usize,
    },
    /// Dog clutch, dynamic model with backlash (seed 004): while `engaged > 0.5`,
    /// `tau = c x + d w_rel` with `x` the overlap of the relative angle (wrapped to the nearest
    /// gap centre, pitch `2 pi / teeth`) beyond the half backlash; 0 inside the free play and
    /// while disengaged.
    Dog {
        /// a-side node (hub).
        a: usize,
        /// b-side node (ring).
        b: usize,
        /// Ring-hub torsional stiffness, N m/rad.
        c: f64,
        /// Ring-hub damping, N m s/rad.
        d: f64,
        /// Half backlash, rad.
        half: f64,
        /// Tooth pitch, rad.
        pitch: f64,
        /// Relative angle of a gap centre, rad.
        offset: f64,
        /// Index of the engagement signal (> 0.5: the dogs are in).
        engaged: usize,
    },
    /// MSL 4 ElastoBacklash.
    Backlash {
        /// a-side node.
        a: usize,
        /// b-side node.
        b: usize,
        /// Stiffness, N m/rad.
        c: f64,
        /// Damping, N m s/rad.
        d: f64,
        /// Half gap `b/2`, rad.
        half: f64,
        /// Gap centre, rad.
        phi_rel0: f64,
    },
}

/// The piece of a piecewise law in force (ElastoBacklash contact, elastic clutch stick/slip).
/// It is fixed during a sub-step and changed only at located events, so every sub-step
/// integrates a smooth law (which keeps the accuracy and the energy ledger exact).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Regime {
    /// Laws without pieces; backlash inside the gap, `|phi_diff| <= b/2`: `tau = 0`.
    Open,
    /// Backlash beyond the gap but separating faster than the spring relaxes (the contact would
    /// pull): `tau = 0`; the stored spring energy is lost.
    Released,
    /// Backlash contact with the damping part below the spring part: `tau = tau_c + tau_d`.
    Damped,
    /// Backlash contact with the damping part capped by the spring part: `tau = 2 tau_c`.
    Capped,
    /// Elastic clutch sticking: `tau = S (phi_rel - anchor) + D w_rel`.
    Stick,
    /// Elastic clutch sliding forward at its limit: `tau = +T_s`.
    SlideForward,
    /// Elastic clutch sliding backward at its limit: `tau = -T_s`.
    SlideBackward,
}

/// Discrete state of a law: its regime and, for the elastic clutch, the spring anchor (the
/// relative angle at which the shear spring is unloaded; it moves only while sliding).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LawState {
    /// The piece in force.
    pub regime: Regime,
    /// Elastic clutch anchor angle, rad.
    pub anchor: f64,
}

impl Default for LawState {
    fn default() -> Self {
        Self { regime: Regime::Open, anchor: 0.0 }
    }
}

/// Output of one element evaluation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LawOutput {
    /// The element torque in MSL convention (`flange_b.tau` for two-flange elements, the source
    /// torque for sources), N m.
    pub tau: f64,
    /// Power delivered to the nodes, W (negative for a dissipating element).
    pub power: f64,
    /// Power turned into heat, W (>= 0): `-power - dE_potential/dt` for passive elements.
    pub dissipation: f64,
}

/// Optional Jacobian sink: dense `n x n` over the free coordinates.
pub struct Jacobian<'a> {
    /// Number of free coordinates.
    pub n: usize,
    /// `d f / d phi`.
    pub dphi: &'a mut [f64],
    /// `d f / d w`.
    pub dw: &'a mut [f64],
}

impl Jacobian<'_> {
    #[inline]
    fn add(m: &mut [f64], n: usize, i: usize, j: usize, v: f64) {
        if i < n && j < n {
            m[i * n + j] += v;
        }
    }
    /// Adds the Jacobian of `+g` on `i` and `-g` on `j` where `g = k_phi phi_rel + k_w w_rel`,
    /// `phi_rel = phi[b] - phi[a]`, `i`/`j` the receiving nodes.
    fn add_pair(&mut self, recv_pos: usize, recv_neg: usize, a: usize, b: usize, k_phi: f64, k_w: f64) {
        let n = self.n;
        for (r, s) in [(recv_pos, 1.0), (recv_neg, -1.0)] {
            if k_phi != 0.0 {
                Self::add(self.dphi, n, r, b, s * k_phi);
                Self::add(self.dphi, n, r, a, -s * k_phi);
            }
            if k_w != 0.0 {
                Self::add(self.dw, n, r, b, s * k_w);
                Self::add(self.dw, n, r, a, -s * k_w);
            }
        }
    }
}

impl Law {
    /// Elastic potential energy stored at the angles `phi`, J (springs, backlash contact, the
    /// shear spring of an elastic clutch: `T_s^2 / 2S` while sliding).
    pub fn potential(&self, phi: &[f64], state: LawState, sig: &[f64]) -> f64 {
        match *self {
            Law::ElasticClutch { a, b, s, limit, .. } => match state.regime {
                Regime::SlideForward | Regime::SlideBackward => {
                    let ts = sig[limit].max(0.0);
                    0.5 * ts * ts / s
                }
                _ => {
                    let x = phi[b] - phi[a] - state.anchor;
                    0.5 * s * x * x
                }
            },
            Law::SpringDamper { a, b, c, phi_rel0, .. } => {
                let pr = phi[b] - phi[a] - phi_rel0;
                0.5 * c * pr * pr
            }
            Law::Backlash { a, b, c, half, phi_rel0, .. } => {
                let x = backlash_overlap(phi[b] - phi[a] - phi_rel0, half);
                0.5 * c * x * x
            }
            Law::Dog { a, b, c, half, pitch, offset, engaged, .. } if sig[engaged] > 0.5 => {
                let x = backlash_overlap(wrap_pitch(phi[b] - phi[a] - offset, pitch), half);
                0.5 * c * x * x
            }
            _ => 0.0,
        }
    }

    /// True for the laws that switch regimes (backlash contact, dog teeth, an elastic clutch's
    /// stick and slide); [`Law::next_regime`] of every other law is [`Regime::Open`].
    #[inline]
    pub fn has_regimes(&self) -> bool {
        matches!(self, Law::Backlash { .. } | Law::Dog { .. } | Law::ElasticClutch { .. })
    }

    /// The regime the law should be in at this state, given the one it is in (hysteresis for
    /// the elastic clutch). Laws without pieces stay `Open`.
    pub fn next_regime(&self, state: LawState, phi: &[f64], w: &[f64], sig: &[f64]) -> Regime {
        match *self {
            Law::Backlash { a, b, c, d, half, phi_rel0 } => {
                backlash_regime(c, d, half, phi[b] - phi[a] - phi_rel0, w[b] - w[a])
            }
            Law::Dog { a, b, half, pitch, offset, engaged, .. } => {
                let x = backlash_overlap(wrap_pitch(phi[b] - phi[a] - offset, pitch), half);
                if sig[engaged] > 0.5 && x != 0.0 { Regime::Damped } else { Regime::Open }
            }
            Law::ElasticClutch { a, b, s, d, limit } => {
                let ts = sig[limit].max(0.0);
                let wr = w[b] - w[a];
                match state.regime {
                    Regime::SlideForward if wr >= 0.0 && ts > 0.0 => Regime::SlideForward,
                    Regime::SlideBackward if wr <= 0.0 && ts > 0.0 => Regime::SlideBackward,
                    Regime::SlideForward | Regime::SlideBackward if ts > 0.0 => Regime::Stick,
                    Regime::SlideForward | Regime::SlideBackward => {
                        // No limit torque: keep sliding in the direction of the motion.
                        if wr >= 0.0 { Regime::SlideForward } else { Regime::SlideBackward }
                    }
                    _ => {
                        let tau = s * (phi[b] - phi[a] - state.anchor) + d * wr;
                        if tau > ts {
                            Regime::SlideForward
                        } else if tau < -ts {
                            Regime::SlideBackward
                        } else {
                            Regime::Stick
                        }
                    }
                }
            }
            _ => Regime::Open,
        }
    }

    /// Switches to `regime`, keeping the torque continuous where the law allows it (an elastic
    /// clutch that sticks again places its anchor so that the spring carries the slide torque).
    pub fn enter(&self, state: &mut LawState, regime: Regime, phi: &[f64], w: &[f64], sig: &[f64]) {
        if let Law::ElasticClutch { a, b, s, d, limit } = *self
            && regime == Regime::Stick
            && state.regime != Regime::Stick
        {
            let ts = sig[limit].max(0.0);
            let tau = match state.regime {
                Regime::SlideForward => ts,
                Regime::SlideBackward => -ts,
                _ => 0.0,
            };
            state.anchor = phi[b] - phi[a] - (tau - d * (w[b] - w[a])) / s;
        }
        state.regime = regime;
    }

    /// The initial discrete state: backlash from the geometry, elastic clutches unloaded.
    pub fn initial_state(&self, phi: &[f64], w: &[f64], sig: &[f64]) -> LawState {
        match *self {
            Law::ElasticClutch { a, b, .. } => {
                let mut st = LawState { regime: Regime::Stick, anchor: phi[b] - phi[a] };
                st.regime = self.next_regime(st, phi, w, sig);
                st
            }
            _ => {
                let st = LawState::default();
                LawState { regime: self.next_regime(st, phi, w, sig), ..st }
            }
        }
    }

    /// True when the law's force reads the signals only, not the state (a torque source).
    pub fn is_state_free(&self) -> bool {
        self.state_free_nodes().is_some()
    }

    /// For a law whose force reads the signals only: the nodes it acts on and their
    /// coefficients, the force being `f[node] += coefficient * tau` with `tau` its torque
    /// ([`Law::state_free_torque`]). `None` for the laws that read the state.
    #[inline]
    pub fn state_free_nodes(&self) -> Option<[(usize, f64); 2]> {
        match *self {
            Law::Source { flange, support, .. } => Some([(flange, 1.0), (support, -1.0)]),
            _ => None,
        }
    }

    /// The torque ([`LawOutput::tau`]) of a law whose force reads the signals only, at signal
    /// values `sig`; NaN for the laws that read the state.
    #[inline]
    pub fn state_free_torque(&self, sig: &[f64]) -> f64 {
        self.state_free_signal().map_or(f64::NAN, |k| sig[k])
    }

    /// For a law whose force reads the signals only: the signal whose value is its torque
    /// ([`Law::state_free_torque`]). `None` for the laws that read the state.
    #[inline]
    pub fn state_free_signal(&self) -> Option<usize> {
        match *self {
            Law::Source { signal, .. } => Some(signal),
            _ => None,
        }
    }

    /// When signal `k` is this law's input: the change of its torque at speeds `w` when `k`
    /// steps from `from` to `to`, all else held, and the nodes it acts on (`+d` on the first,
    /// `-d` on the second). Torque sources: the step itself; engines: the torque map at the
    /// two throttles (exact at speeds `w`). `None` for every other law or signal. The solver's
    /// stage predictor uses this to follow input steps.
    pub fn signal_step(&self, k: usize, from: f64, to: f64, w: &[f64]) -> Option<(usize, usize, f64)> {
        match *self {
            Law::Source { flange, support, signal } if signal == k => Some((flange, support, to - from)),
            Law::Engine { flange, support, ref map, throttle } if throttle == k => {
                let wr = w[flange] - w[support];
                Some((flange, support, map.eval(to, wr).0 - map.eval(from, wr).0))
            }
            _ => None,
        }
    }

    /// The signal [`Law::signal_step`] answers for, if any.
    pub fn input_signal(&self) -> Option<usize> {
        match *self {
            Law::Source { signal, .. } => Some(signal),
            Law::Engine { throttle, .. } => Some(throttle),
            _ => None,
        }
    }

    /// True when the law's force reads angles (springs, elastic clutches, dog clutches,
    /// backlash); the others read speeds and signals only.
    pub fn reads_angles(&self) -> bool {
        // (Exhaustive: a new law must say.)
        match self {
            Law::SpringDamper { .. } | Law::ElasticClutch { .. } | Law::Dog { .. } | Law::Backlash { .. } => true,
            Law::Source { .. }
            | Law::Quadratic { .. }
            | Law::Engine { .. }
            | Law::Converter { .. }
            | Law::Coupling { .. } => false,
        }
    }

    /// True when the law's force is affine in (phi, w) in every regime and needs no Newton
    /// iteration.
    pub fn is_linear(&self) -> bool {
        matches!(
            self,
            Law::Source { .. }
                | Law::Coupling { .. }
                | Law::SpringDamper { .. }
                | Law::ElasticClutch { .. }
                | Law::Dog { .. }
        )
    }

    /// Adds this law's generalised forces to `f` and returns its torque, power and energy.
    /// `sig` holds the signal values at the evaluation time. With `jac`, the law's partial
    /// derivatives are added to it.
    #[inline]
    pub fn eval(
        &self,
        phi: &[f64],
        w: &[f64],
        sig: &[f64],
        state: LawState,
        f: &mut [f64],
        jac: Option<&mut Jacobian<'_>>,
    ) -> LawOutput {
        match jac {
            Some(j) => self.eval_in::<true>(phi, w, sig, state, f, Some(j)),
            None => self.force(phi, w, sig, state, f),
        }
    }

    /// [`Law::eval`] without a Jacobian: the law as a force evaluation runs it, its derivative
    /// code compiled out and the whole inlined where the solver sums the forces.
    #[inline(always)]
    pub fn force(&self, phi: &[f64], w: &[f64], sig: &[f64], state: LawState, f: &mut [f64]) -> LawOutput {
        self.eval_in::<false>(phi, w, sig, state, f, None)
    }

    /// [`Law::eval`], with the Jacobian code present (`JAC`) or compiled out.
    #[inline(always)]
    fn eval_in<const JAC: bool>(
        &self,
        phi: &[f64],
        w: &[f64],
        sig: &[f64],
        state: LawState,
        f: &mut [f64],
        jac: Option<&mut Jacobian<'_>>,
    ) -> LawOutput {
        let jac = if JAC { jac } else { None };
        let regime = state.regime;
        match *self {
            Law::Source { flange, support, .. } => {
                let tau = self.state_free_torque(sig);
                if let Some(nodes) = self.state_free_nodes() {
                    for (node, c) in nodes {
                        f[node] += c * tau;
                    }
                }
                LawOutput { tau, power: tau * (w[flange] - w[support]), dissipation: 0.0 }
            }
            Law::Engine { flange, support, ref map, throttle } => {
                let wr = w[flange] - w[support];
                let (tau, dtau) = map.eval(sig[throttle], wr);
                f[flange] += tau;
                f[support] -= tau;
                if let Some(j) = jac {
                    j.add_pair(flange, support, support, flange, 0.0, dtau);
                }
                LawOutput { tau, power: tau * wr, dissipation: 0.0 }
            }
            Law::Converter { pump, turbine, support, ref map } => {
                let (wp, wt) = (w[pump] - w[support], w[turbine] - w[support]);
                let c = if JAC { map.eval(wp, wt) } else { map.torques(wp, wt) };
                f[pump] += c.pump;
                f[turbine] += c.turbine;
                f[support] -= c.pump + c.turbine;
                if let Some(j) = jac {
                    // Columns: pump, turbine, and the support through -(d/dw_p + d/dw_t).
                    let n = j.n;
                    let reaction = [-c.dpump[0] - c.dturbine[0], -c.dpump[1] - c.dturbine[1]];
                    for (row, d) in [(pump, c.dpump), (turbine, c.dturbine), (support, reaction)] {
                        Jacobian::add(j.dw, n, row, pump, d[0]);
                        Jacobian::add(j.dw, n, row, turbine, d[1]);
                        Jacobian::add(j.dw, n, row, support, -d[0] - d[1]);
                    }
                }
                let power = c.pump * wp + c.turbine * wt;
                LawOutput { tau: c.turbine, power, dissipation: -power }
            }
            Law::Coupling { a, b, signal } => {
                let tau = sig[signal];
                let wr = w[b] - w[a];
                f[a] += tau;
                f[b] -= tau;
                LawOutput { tau, power: -tau * wr, dissipation: tau * wr }
            }
            Law::Quadratic { flange, support, nominal, w_nominal, same_direction } => {
                let wr = w[flange] - w[support];
                let x = wr / w_nominal;
                let (tau, dtau) = if same_direction {
                    (nominal * x * x, 2.0 * nominal * x / w_nominal)
                } else {
                    (nominal * x * x.abs(), 2.0 * nominal * x.abs() / w_nominal)
                };
                f[flange] += tau;
                f[support] -= tau;
                if let Some(j) = jac {
                    // g = tau(w_flange - w_support): received +g by flange, -g by support.
                    j.add_pair(flange, support, support, flange, 0.0, dtau);
                }
                LawOutput { tau, power: tau * wr, dissipation: 0.0 }
            }
            Law::SpringDamper { a, b, c, d, phi_rel0 } => {
                let pr = phi[b] - phi[a] - phi_rel0;
                let wr = w[b] - w[a];
                let tau = c * pr + d * wr;
                f[a] += tau;
                f[b] -= tau;
                if let Some(j) = jac {
                    j.add_pair(a, b, a, b, c, d);
                }
                LawOutput { tau, power: -tau * wr, dissipation: d * wr * wr }
            }
            Law::ElasticClutch { a, b, s, d, limit } => {
                let pr = phi[b] - phi[a];
                let wr = w[b] - w[a];
                let ts = sig[limit].max(0.0);
                let (tau, kp, kw) = match regime {
                    Regime::SlideForward => (ts, 0.0, 0.0),
                    Regime::SlideBackward => (-ts, 0.0, 0.0),
                    _ => (s * (pr - state.anchor) + d * wr, s, d),
                };
                f[a] += tau;
                f[b] -= tau;
                if let Some(j) = jac {
                    j.add_pair(a, b, a, b, kp, kw);
                }
                let stored_rate = match regime {
                    Regime::Stick => s * (pr - state.anchor) * wr,
                    _ => 0.0, // the stored energy T_s^2/(2S) changes only at events (limit steps)
                };
                LawOutput { tau, power: -tau * wr, dissipation: tau * wr - stored_rate }
            }
            Law::Dog { a, b, c, d, half, pitch, offset, .. } => {
                let wr = w[b] - w[a];
                let x = backlash_overlap(wrap_pitch(phi[b] - phi[a] - offset, pitch), half);
                let (tau, kp, kw) = if regime == Regime::Damped { (c * x + d * wr, c, d) } else { (0.0, 0.0, 0.0) };
                f[a] += tau;
                f[b] -= tau;
                if let Some(j) = jac {
                    j.add_pair(a, b, a, b, kp, kw);
                }
                // Contact outside the regime (an engagement inside the free play only) stores nothing.
                let stored_rate = if regime == Regime::Damped { c * x * wr } else { 0.0 };
                LawOutput { tau, power: -tau * wr, dissipation: tau * wr - stored_rate }
            }
            Law::Backlash { a, b, c, d, half, phi_rel0 } => {
                let pd = phi[b] - phi[a] - phi_rel0;
                let wr = w[b] - w[a];
                let x = backlash_overlap(pd, half);
                let (tau, kp, kw) = match regime {
                    Regime::Damped => (c * x + d * wr, c, d),
                    Regime::Capped => (2.0 * c * x, 2.0 * c, 0.0),
                    _ => (0.0, 0.0, 0.0),
                };
                f[a] += tau;
                f[b] -= tau;
                if let Some(j) = jac {
                    j.add_pair(a, b, a, b, kp, kw);
                }
                // Whatever is delivered and not stored is lost; that includes the stored energy
                // of a released contact (tau = 0 while the spring is still compressed).
                let stored_rate = c * x * wr;
                LawOutput { tau, power: -tau * wr, dissipation: tau * wr - stored_rate }
            }
        }
    }
}

/// Relative angle wrapped into `[-pitch/2, pitch/2)` around the nearest gap centre, rad.
#[inline]
pub fn wrap_pitch(x: f64, pitch: f64) -> f64 {
    x - pitch * (x / pitch).round()
}

/// Spring compression of an ElastoBacklash beyond the half gap, rad (0 inside the gap).
#[inline]
pub fn backlash_overlap(pd: f64, half: f64) -> f64 {
    if pd > half {
        pd - half
    } else if pd < -half {
        pd + half
    } else {
        0.0
    }
}

/// The regime an ElastoBacklash is in at `(phi_diff, w_rel)` (MSL 4 law: the contact only
/// pushes, and the damping part never exceeds the spring part).
pub fn backlash_regime(c: f64, d: f64, half: f64, pd: f64, wr: f64) -> Regime {
    let x = backlash_overlap(pd, half);
    if x == 0.0 {
        return Regime::Open;
    }
    let (tc, td) = (c * x, d * wr);
    // Mirror the lower side onto the upper one: contact pushes when tc + td has the sign of x.
    let s = x.signum();
    if s * (tc + td) <= 0.0 {
        Regime::Released
    } else if s * td < s * tc {
        Regime::Damped
    } else {
        Regime::Capped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(law: &Law, phi: [f64; 3], w: [f64; 3], sig: &[f64]) -> ([f64; 3], LawOutput) {
        let mut f = [0.0; 3];
        let out = law.eval(&phi, &w, sig, LawState::default(), &mut f, None);
        (f, out)
    }

    /// The stage predictor's claims: a clutch's and a tyre's kinetic torque is proportional
    /// to its signal (so scaling by the ratio of two values is exact, at any slip), and a
    /// law's `signal_step` is the difference of its forces at the two values.
    #[test]
    fn input_step_responses_are_exact() {
        let mu = crate::Table1D::new(vec![(0.0, 0.5), (10.0, 0.3)]).unwrap();
        let clutch = FrictionLaw::Normal { mu, peak: 1.1, cgeo: 0.1, fn_max: 2000.0, signal: 0 };
        let tyre = FrictionLaw::Tyre {
            mf: crate::MagicFormula::default(),
            kappa_peak: crate::MagicFormula::default().peak_slip(),
            v_low: 1.0,
            load: 0,
            ground: 1,
        };
        for law in [&clutch, &tyre] {
            assert_eq!(law.torque_signal(), Some(0));
            for slip in [0.0, 0.7, 3.0, 25.0] {
                let (a, b) = (0.37, 0.81);
                let w = [0.0, 12.0];
                let ta = law.kinetic(&[a], slip, &w).0;
                let tb = law.kinetic(&[b], slip, &w).0;
                // Proportional to rounding (a few ulps of the torque).
                assert!((ta * (b / a) - tb).abs() <= 1e-14 * tb.abs(), "{law:?} at {slip}: {ta} {tb}");
            }
        }
        let map = crate::TorqueMap::full_and_closed(
            &[1000.0, 3000.0, 6000.0],
            &[150.0, 200.0, 170.0],
            &[-10.0, -30.0, -60.0],
        )
        .unwrap();
        let engine = Law::Engine { flange: 0, support: 2, map, throttle: 0 };
        let w = [300.0, 0.0, 0.0];
        let (f0, _) = eval(&engine, [0.0; 3], w, &[0.2]);
        let (f1, _) = eval(&engine, [0.0; 3], w, &[0.9]);
        let (a, b, d) = engine.signal_step(0, 0.2, 0.9, &w).unwrap();
        assert_eq!((a, b), (0, 2));
        assert!((d - (f1[0] - f0[0])).abs() <= 1e-12 * f1[0].abs(), "{d} against {}", f1[0] - f0[0]);
        assert_eq!(engine.signal_step(1, 0.2, 0.9, &w), None, "not its input");
        let source = Law::Source { flange: 1, support: 2, signal: 3 };
        assert_eq!(source.signal_step(3, 5.0, 7.5, &w), Some((1, 2, 2.5)));
        assert_eq!(source.input_signal(), Some(3));
    }

    #[test]
    fn positive_source_torque_accelerates_the_flange_forwards() {
        let (f, out) = eval(&Law::Source { flange: 0, support: 2, signal: 0 }, [0.0; 3], [1.0, 0.0, 0.0], &[5.0]);
        assert_eq!(f, [5.0, 0.0, -5.0]);
        assert_eq!(out.power, 5.0);
    }

    #[test]
    fn stretched_spring_pulls_a_forward_and_b_back() {
        // phi_rel = phi_b - phi_a = 0.1 > 0: tau = 10 > 0, a receives +tau, b receives -tau.
        let law = Law::SpringDamper { a: 0, b: 1, c: 100.0, d: 0.0, phi_rel0: 0.0 };
        let (f, out) = eval(&law, [0.0, 0.1, 0.0], [0.0; 3], &[]);
        assert!((f[0] - 10.0).abs() < 1e-12 && (f[1] + 10.0).abs() < 1e-12);
        assert!((law.potential(&[0.0, 0.1, 0.0], LawState::default(), &[]) - 0.5).abs() < 1e-12);
        assert_eq!(out.tau, 10.0);
    }

    #[test]
    fn damper_dissipates() {
        let law = Law::SpringDamper { a: 0, b: 1, c: 0.0, d: 2.0, phi_rel0: 0.0 };
        let (_, out) = eval(&law, [0.0; 3], [1.0, -1.0, 0.0], &[]);
        assert!(out.power < 0.0);
        assert_eq!(out.power, -8.0);
    }

    #[test]
    fn quadratic_load_brakes_forward_motion() {
        let law = Law::Quadratic { flange: 0, support: 2, nominal: -20.0, w_nominal: 10.0, same_direction: true };
        let (f, _) = eval(&law, [0.0; 3], [10.0, 0.0, 0.0], &[]);
        assert_eq!(f[0], -20.0);
    }

    #[test]
    fn backlash_contact_only_pushes() {
        // Separating fast: spring part 20e3 * 0.01 = 200, damping part 50 * -10 = -500 -> released.
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, 0.11, -10.0), Regime::Released);
        // Approaching: spring part 200, damping part 50 -> tau = tc + td.
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, 0.11, 1.0), Regime::Damped);
        // Fast approach: damping part 5000 > spring part 200 -> capped at 2 tc.
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, 0.11, 100.0), Regime::Capped);
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, -0.11, -100.0), Regime::Capped);
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, -0.11, 10.0), Regime::Released);
        assert_eq!(backlash_regime(20e3, 50.0, 0.1, 0.05, 1.0), Regime::Open);
    }
}
