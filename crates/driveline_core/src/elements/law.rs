//! Smooth element laws: the generalised forces of springs, dampers, backlash, dogs, sources,
//! engines, converters and elastic clutches on their nodes, with their Jacobians.

use super::*;

/// Force-producing element laws (elements that only add inertia or constraints have none).
#[derive(Debug, Clone, PartialEq)]
// A plain tag (no niche in a map's vector): the force loop dispatches on one byte.
#[repr(u8)]
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
    /// Torque (or force) source whose signal reads the motion (a sensor's reading,
    /// [`crate::Signal::Measured`]): `+tau` on `flange`, `-tau` on `support`, `tau` the value
    /// of `expr` at the state.
    Feedback {
        /// Driven node.
        flange: usize,
        /// Reaction node.
        support: usize,
        /// The signal, compiled against the state.
        expr: Box<Expr>,
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
    /// A torque that is a function of the speed of `flange` relative to `support` alone:
    /// `+tau(w)` on `flange`, `-tau(w)` on `support` ([`SpeedCurve`]).
    SpeedTorque {
        /// Driven node.
        flange: usize,
        /// Reaction node.
        support: usize,
        /// The torque's law.
        curve: SpeedCurve,
    },
    /// Eddy current brake (MSL `EddyCurrentTorque`): `-tau` on `flange`, `+tau` on `support`,
    /// `tau = 2 T_n x / (1 + x^2)`, `x = w / (w_nominal (1 + alpha (T - t_ref)))`, with `w` the
    /// speed of `flange` relative to `support`, `T_n` and `T` signals. Dissipates `tau w`.
    Eddy {
        /// Braked node.
        flange: usize,
        /// Reaction node.
        support: usize,
        /// Index of the maximum-torque signal `T_n`, N m.
        tau_nominal: usize,
        /// Index of the temperature signal `T`, K.
        temperature: usize,
        /// Speed of the maximum torque at `t_ref`, rad/s.
        w_nominal: f64,
        /// Reference temperature, K.
        t_ref: f64,
        /// Temperature coefficient at `t_ref`, 1/K.
        alpha: f64,
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
    /// Unified elastic clutch (Hung Nguyen Quang, 1998): a shear spring `S` and damper `D` in series with a
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
    /// Dog clutch, dynamic model with backlash (after the Simscape Driveline Dog Clutch): while `engaged > 0.5`,
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
    /// MSL 4 ElastoBacklash (`capped`: the damping part never exceeds the spring part) and
    /// ElastoBacklash2 (not `capped`: the whole spring-damper torque while it pushes).
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
        /// The damping part is capped by the spring part (ElastoBacklash; ElastoBacklash2 not).
        capped: bool,
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
    /// The nodes `(a, b)` of a law that couples two bodies elastically and carries torque by
    /// their relative motion under the signals `sig` now: springs, dampers, backlash, an
    /// engaged dog, an elastic clutch with a limit. `None` for the others (sources, engines,
    /// converters, a disengaged dog).
    pub fn elastic_tie(&self, sig: &[f64]) -> Option<(usize, usize)> {
        match *self {
            Law::SpringDamper { a, b, .. } | Law::Backlash { a, b, .. } => Some((a, b)),
            Law::Dog { a, b, engaged, .. } => (sig[engaged] > 0.5).then_some((a, b)),
            Law::ElasticClutch { a, b, limit, .. } => (sig[limit] > 0.0).then_some((a, b)),
            _ => None,
        }
    }

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
            Law::Backlash { a, b, c, d, half, phi_rel0, capped } => {
                backlash_regime(c, d, half, phi[b] - phi[a] - phi_rel0, w[b] - w[a], capped)
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
            Law::Feedback { expr, .. } => expr.reads_angles(),
            Law::Source { .. }
            | Law::Quadratic { .. }
            | Law::SpeedTorque { .. }
            | Law::Eddy { .. }
            | Law::Engine { .. }
            | Law::Converter { .. }
            | Law::Coupling { .. } => false,
        }
    }

    /// The nodes, the largest stiffness (N m/rad) and the damping (N m s/rad) of a law that
    /// acts as a spring and a damper between two nodes: `(a, b, c, d)`, its contact or sticking
    /// regime for the piecewise laws (elasto-backlash, dog clutch, elastic clutch); `None` for
    /// the others. Read by [`Simulation::fastest_rate`](crate::Simulation::fastest_rate).
    pub fn linear_pair(&self) -> Option<(usize, usize, f64, f64)> {
        match *self {
            Law::SpringDamper { a, b, c, d, .. } | Law::Dog { a, b, c, d, .. } | Law::Backlash { a, b, c, d, .. } => {
                Some((a, b, c, d))
            }
            Law::ElasticClutch { a, b, s, d, .. } => Some((a, b, s, d)),
            _ => None,
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
            Law::Feedback { flange, support, ref expr } => feedback_force(flange, support, expr, phi, w, sig, f, jac),
            Law::Eddy { .. } => eddy_force(self, w, sig, f, jac),
            Law::SpeedTorque { flange, support, curve } => {
                let wr = w[flange] - w[support];
                let (tau, dtau) = curve.eval(wr);
                f[flange] += tau;
                f[support] -= tau;
                if let Some(j) = jac {
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
            Law::Backlash { a, b, c, d, half, phi_rel0, .. } => {
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

/// [`Law::Feedback`]'s force (out of line: the common laws' dispatch stays as it was).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn feedback_force(
    flange: usize,
    support: usize,
    expr: &Expr,
    phi: &[f64],
    w: &[f64],
    sig: &[f64],
    f: &mut [f64],
    jac: Option<&mut Jacobian<'_>>,
) -> LawOutput {
    let tau = expr.value(phi, w, sig);
    f[flange] += tau;
    f[support] -= tau;
    if let Some(j) = jac {
        let n = j.n;
        expr.gradient(phi, w, sig, 1.0, &mut |angle, r, d| {
            let m = if angle { &mut *j.dphi } else { &mut *j.dw };
            for &(node, c) in r.entries.iter().filter(|e| e.1 != 0.0) {
                Jacobian::add(m, n, flange, node, d * c);
                Jacobian::add(m, n, support, node, -d * c);
            }
        });
    }
    LawOutput { tau, power: tau * (w[flange] - w[support]), dissipation: 0.0 }
}

/// [`Law::Eddy`]'s force (out of line, as [`feedback_force`]).
#[inline(never)]
fn eddy_force(law: &Law, w: &[f64], sig: &[f64], f: &mut [f64], jac: Option<&mut Jacobian<'_>>) -> LawOutput {
    let Law::Eddy { flange, support, tau_nominal, temperature, w_nominal, t_ref, alpha } = *law else {
        unreachable!("an eddy current law")
    };
    let wr = w[flange] - w[support];
    // (A disc colder than 1/alpha below t_ref, which only a driving eddy current brake, tau_nominal
    // < 0, could make by drawing heat, keeps a speed scale of 1e-6 of nominal: finite and smooth.)
    let wn = w_nominal * (1.0 + alpha * (sig[temperature] - t_ref)).max(1e-6);
    let x = wr / wn;
    let q = 1.0 / (1.0 + x * x);
    let tau = 2.0 * sig[tau_nominal] * x * q;
    // d tau / d w = 2 T_n (1 - x^2) / (1 + x^2)^2 / wn.
    let dtau = 2.0 * sig[tau_nominal] * (1.0 - x * x) * q * q / wn;
    f[flange] -= tau;
    f[support] += tau;
    if let Some(j) = jac {
        j.add_pair(flange, support, support, flange, 0.0, -dtau);
    }
    LawOutput { tau, power: -tau * wr, dissipation: tau * wr }
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
/// pushes, and with `capped` the damping part never exceeds the spring part: ElastoBacklash;
/// without, ElastoBacklash2).
pub fn backlash_regime(c: f64, d: f64, half: f64, pd: f64, wr: f64, capped: bool) -> Regime {
    let x = backlash_overlap(pd, half);
    if x == 0.0 {
        return Regime::Open;
    }
    let (tc, td) = (c * x, d * wr);
    // Mirror the lower side onto the upper one: contact pushes when tc + td has the sign of x.
    let s = x.signum();
    if s * (tc + td) <= 0.0 {
        Regime::Released
    } else if !capped || s * td < s * tc {
        Regime::Damped
    } else {
        Regime::Capped
    }
}
